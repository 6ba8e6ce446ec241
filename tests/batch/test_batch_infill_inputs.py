"""`motioncore batch infill` on inputs unlike its model: clips on another skeleton are refused before any
work; clips at another rate are resampled to the model's and the report says so."""
from __future__ import annotations

import pytest
from helpers.cli import body_clip, main, quat_angle_deg

pytestmark = pytest.mark.usefixtures("one_thread")


def test_batch_infill_refuses_clips_on_another_skeleton_before_any_work(tmp_path, capsys):
    import json

    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", body_clip())
    write_bvh(src / "renamed.bvh", body_clip(["bone_00", *body_clip().skeleton.names[1:]]))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--frozen", "3", "--quiet"]) == 2
    [e] = json.loads((out / "report.json").read_text())["errors"]
    assert e["stage"] == "map" and e["file"].endswith("renamed.bvh")
    assert "unmapped: joint_Root;" in e["error"] and e["error"] in capsys.readouterr().err
    assert (out / "walk.bvh").is_file() and not (out / "renamed.bvh").exists()


def test_batch_infill_resamples_other_rates_and_says_so(tmp_path, capsys):
    """A 60 fps clip with a gap given in its own frames: filled at the model's 30 fps, the keys kept."""
    import json

    import numpy as np

    from motioncore.core.kinematics import resample
    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh

    c = body_clip(frames=81)
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", Motion(c.skeleton, c.rotations, c.positions, 60.0, "walk"))
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[30, 50]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"), "--quiet"]) == 0
    assert "1 clip(s) at 60 fps resampled to the model's rate first" in capsys.readouterr().err
    got, want = read_bvh(out / "walk.bvh"), resample(read_bvh(src / "walk.bvh"), 30.0)
    assert got.fps == 30 and got.num_frames == 41
    [r] = json.loads((out / "report.json").read_text())["files"]
    assert r["gaps"] == [[15, 25]] and r["resampled_from"] == 60
    keys = np.r_[0:15, 25:41]
    assert quat_angle_deg(got.rotations[keys], want.rotations[keys]).max() < 1e-3
