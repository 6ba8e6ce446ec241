"""`motioncore batch infill` on any biped at the clip's own rate: real CMU files in the MotionBuilder-friendly
naming (Hips/LeftUpLeg..., ASF units, 120 fps), exactly as distributed, filled through the model's skeleton
and back. Each output has the input's skeleton, frame rate and frame count; every frame outside the gaps is
the input's own line, byte for byte; the gaps are compared with the deleted truth and with the Bezier of the
keys; the dog is refused before any work."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import needs_data

pytestmark = pytest.mark.usefixtures("one_thread")

GAPS = {"07_01": [[150, 210]], "05_01": [[200, 260]], "09_01": [[40, 100]]}   # 0.5 s each at 120 fps
ASF_CM = 5.644


@needs_data
def test_batch_infill_fills_120fps_cmu_files_on_their_own_skeleton(mocap_data, tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.core import feet as F
    from motioncore.data.cache import unpack
    from motioncore.eval.keyed import bezier_quat_keys
    from motioncore.io.bvh import read_bvh

    raw = unpack(mocap_data / "cmu_05-09" / "cmu_bvh_hahne_subjects_05-09.tar.xz", progress=False) / "cmu_bvh_hahne"
    src = tmp_path / "src"
    src.mkdir()
    for name in GAPS:
        shutil.copy(raw / f"{name}.bvh", src / f"{name}.bvh")
    (tmp_path / "gaps.json").write_text(json.dumps(GAPS))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "model joints it lacks: joint_Root" in err and "LThumb" in err   # what the model does not cover
    rep = json.loads((out / "report.json").read_text())
    model_cm = bezier_cm = 0.0
    for r in rep["files"]:
        name = r["file"].split("/")[-1][:-4]
        (s, e), = GAPS[name]
        assert r["status"] == "ok" and r["fps"] == 120.0 and r["gaps"] == [[s, e]] and r["unmapped"] == ["joint_Root"]
        a, b = read_bvh(src / f"{name}.bvh"), read_bvh(out / f"{name}.bvh")
        assert a.skeleton.names == b.skeleton.names and b.fps == a.fps and b.num_frames == a.num_frames
        text_a, text_b = (src / f"{name}.bvh").read_text(), (out / f"{name}.bvh").read_text()
        head = text_a.index("Frame Time")
        assert text_b[:head] == text_a[:head]   # hierarchy, frame count
        la, lb = text_a.splitlines(), text_b.splitlines()
        first = next(i for i, line in enumerate(la) if line.startswith("Frame Time")) + 1
        assert len(la) == len(lb)
        changed = [i - first for i, (x, y) in enumerate(zip(la, lb, strict=True)) if x != y]
        assert changed == list(range(s, e))   # only the gap's lines, every one of them
        known = np.ones(a.num_frames, bool)
        known[s:e] = False
        bq, bp = bezier_quat_keys(a.skeleton, a.rotations[None], a.positions[None], known[None])
        truth = a.global_transforms()[1][s:e]
        sk8 = r["skate"]   # the feet on the gap and its keys, on the input's ground, in cm/s (batch.skate)
        assert sk8["cm_per_unit"] == pytest.approx(ASF_CM, rel=1e-3)   # CMU's ASF unit, known (not from the legs)
        feet = [a.skeleton.index(n) for n in ("LeftFoot", "LeftToeBase", "RightFoot", "RightToeBase")]
        g = F.ground(a.global_transforms()[1], feet)
        span = F.fill_span(known)
        for key, clip in (("input", a), ("filled", b)):
            want = F.skate(clip.global_transforms()[1], 120.0, feet, g, span, unit=sk8["cm_per_unit"])
            assert sk8[key] == pytest.approx(want, abs=0.01) if np.isfinite(want) else sk8[key] is None, name
        if sk8["input"]:   # some foot near the ground in the gap
            assert sk8["filled_over_input"] == pytest.approx(sk8["filled"] / sk8["input"], abs=2e-3)
        assert sk8["keyed"] > 0
        model_cm += ASF_CM * float(np.linalg.norm(b.global_transforms()[1][s:e] - truth, axis=-1).mean())
        bezier_cm += ASF_CM * float(np.linalg.norm(a.skeleton.forward_kinematics(bq[0], bp[0])[1][s:e] - truth,
                                                   axis=-1).mean())
    print(f"3 CMU files, 0.5 s gaps at 120 fps: model {model_cm / 3:.2f} cm, Bezier {bezier_cm / 3:.2f} cm")
    assert model_cm < bezier_cm   # measured 5.60 vs 6.54 cm mean joint error


@needs_data
def test_batch_infill_refuses_the_dog_before_any_work(tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "dog.bvh", load("dog", progress=False)[0].motion.slice(0, 120))
    assert main(["batch", "infill", str(src), "--out", str(tmp_path / "out"), "--frozen", "3", "--quiet"]) == 2
    assert "another shape" in capsys.readouterr().err
    assert not (tmp_path / "out" / "dog.bvh").exists()
