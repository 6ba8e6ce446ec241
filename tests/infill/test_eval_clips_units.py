"""`eval clips` measures in cm whatever a clip's unit: CMU's MotionBuilder-friendly files are in ASF units (x 2.54 /
0.45 cm, known), CMU's ASF-named files and LAFAN1 in cm, a rig in metres x 100; each clip is scaled to cm before
anything is measured, so its figures and the pooled summary are those of the same clips given in cm."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

pytestmark = [pytest.mark.timeout(300)]
HAHNE = "cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz"
LAFAN = "lafan1_sample/lafan1_sample.tar.xz"


def _at30(path, frames=None):
    from motioncore.core.kinematics import resample
    from motioncore.io.bvh import read_bvh

    m = resample(read_bvh(path), 30.0)
    return m if frames is None else m.slice(0, frames)


def test_each_clip_unit_from_its_naming_and_legs(raw, raw_file):
    from motioncore.data.registry import ASF_UNIT_CM
    from motioncore.eval.clips import clip_unit, in_cm

    asf = _at30(next(raw(HAHNE).rglob("07_01.bvh")))
    k, how = clip_unit(asf)
    assert k == ASF_UNIT_CM and "ASF" in how   # known exactly, not estimated from this actor's legs
    assert clip_unit(_at30(raw_file("cmu", "**/01_01.bvh"))) == (1.0, "cm")
    lafan = _at30(next(raw(LAFAN).rglob("*.bvh")), 300)
    assert clip_unit(lafan) == (1.0, "cm")
    metres = in_cm(lafan, 0.01)   # the same clip as a rig in metres
    assert clip_unit(metres)[0] == 100.0
    back = in_cm(metres, 100.0)
    np.testing.assert_allclose(back.global_transforms()[1], lafan.global_transforms()[1], atol=1e-9)


def test_figures_and_summary_are_the_cm_copys(raw):
    """CMU 07_01 as distributed (ASF units) beside the LAFAN1 walk (cm), Blender's Bezier of 12 gaps of 15 frames:
    with their units every figure, and the pooled skate, equal those of the CMU clip converted to cm by hand; read
    as they are (the old behaviour), its errors come out 5.6x too small and its feet are judged in the wrong unit."""
    from motioncore.data.registry import ASF_UNIT_CM
    from motioncore.eval.clips import clip_unit, evaluate_clips, in_cm

    asf = _at30(next(raw(HAHNE).rglob("07_01.bvh")))
    lafan = _at30(next(raw(LAFAN).rglob("*.bvh")), 600)
    by_hand = in_cm(asf, ASF_UNIT_CM)
    got = evaluate_clips([asf, lafan], {}, 12, (15,), units=[clip_unit(asf), clip_unit(lafan)])
    want = evaluate_clips([by_hand, lafan], {}, 12, (15,))
    raw_units = evaluate_clips([asf, lafan], {}, 12, (15,))
    for g, w in zip(got["clips"], want["clips"], strict=True):
        for key in ("cm", "deg", "jerk", "skate"):
            assert g["bezier"][key] == pytest.approx(w["bezier"][key], rel=1e-9), key
        assert g["capture"]["skate"] == pytest.approx(w["capture"]["skate"], rel=1e-9)
    assert got["clips"][0]["cm_per_unit"] == pytest.approx(ASF_UNIT_CM) and got["clips"][1]["cm_per_unit"] == 1.0
    g_s, w_s = got["summary"]["15"]["bezier"], want["summary"]["15"]["bezier"]
    for key in ("skate", "skate_truth", "skate_over_truth", "skating_ratio"):
        assert g_s[key] == pytest.approx(w_s[key], rel=1e-9), key
    assert raw_units["clips"][0]["bezier"]["cm"] == pytest.approx(got["clips"][0]["bezier"]["cm"] / ASF_UNIT_CM)
    assert set(got["units"]) == {"cm", clip_unit(asf)[1]}


def test_eval_clips_command_names_each_clips_unit(raw, tmp_path, capsys):
    import json

    from helpers.cli import main

    src = tmp_path / "clips"
    src.mkdir()
    shutil.copy(next(raw(HAHNE).rglob("07_01.bvh")), src / "07_01.bvh")
    out = tmp_path / "clips.json"
    assert main(["eval", "clips", "--data", str(src / "*.bvh"), "--lengths", "15", "--gaps", "2", "--quiet",
                 "--threads", "1", "--json", str(out), "--out", str(tmp_path)]) == 0
    assert "units: every figure in cm (1 clip(s) in CMU's ASF units" in capsys.readouterr().out
    [row] = json.loads(out.read_text())["clips"]
    assert "ASF" in row["unit"] and row["cm_per_unit"] == pytest.approx(2.54 / 0.45)
