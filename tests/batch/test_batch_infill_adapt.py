"""`motioncore batch infill --adapt SECONDS`: each clip's own keys teach a copy of the model first, and the
report says what the gate and the adaptation did per file (never a scaling in silence)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data
from helpers.cli import main

pytestmark = [pytest.mark.timeout(300), needs_data, pytest.mark.usefixtures("one_thread")]


def test_batch_infill_adapts_on_each_clips_keys_and_reports_the_gate(tmp_path, capsys):
    from motioncore.data import load
    from motioncore.io.bvh import read_bvh, write_bvh

    clip = max(load("bandai", "test", fps=30, progress=False)[:40], key=lambda c: len(c.motion.rotations)).motion
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", clip)
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[120, 135], [250, 265]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"),
                 "--adapt", "2", "--quiet"]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["adapt"] == 2.0
    [r] = rep["files"]
    assert r["adapt"]["steps"] >= 1 and set(r["adapt"]["before_cm"]) == {"15"}
    (g,) = r["gate"]
    assert g["length"] == 15 and g["method"] == "pseudo-gaps" and 0.0 <= r["mean_weight"] <= 1.0
    got = read_bvh(out / "walk.bvh")
    keep = np.ones(clip.num_frames, bool)
    keep[120:135] = keep[250:265] = False
    np.testing.assert_allclose(got.rotations[keep], read_bvh(src / "walk.bvh").rotations[keep], atol=0)
    assert main(["batch", "infill", str(src), "--out", str(tmp_path / "o2"), "--gaps", str(tmp_path / "gaps.json"),
                 "--adapt", "-1", "--quiet"]) == 2
    assert "--adapt" in capsys.readouterr().err


def test_learn_this_action_says_what_it_did_and_keeps_the_shipped_model_when_the_budget_is_too_short(tmp_path, capsys):
    """A budget in steps; below MIN_STEPS the shipped model is kept and the console and report.json say why, with
    the steps, seconds, held-out gaps and the held-out error before and after."""
    from motioncore.data import load
    from motioncore.families.body.adapt import MIN_STEPS
    from motioncore.io.bvh import write_bvh

    clip = max(load("bandai", "test", fps=30, progress=False)[:40], key=lambda c: len(c.motion.rotations)).motion
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", clip)
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[120, 135]]}))
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"),
                 "--adapt-steps", "3", "--quiet"]) == 0
    [r] = json.loads((out / "report.json").read_text())["files"]
    ad = r["adapt"]
    assert ad["steps"] == 3 and ad["used"] is False and ad["held"] >= 1 and ad["min_steps"] == MIN_STEPS
    assert "too short" in ad["why"] and set(ad["before_cm"]) == set(ad["after_cm"]) == {"15"}
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "Learn This Action" in ln)
    assert "3 steps in" in line and f"{ad['held']} held-out gaps" in line and "shipped model kept" in line
    assert f"{ad['before_cm']['15']:.2f} -> {ad['after_cm']['15']:.2f} cm" in line
