"""`motioncore bvh resample`: round trips, folders mirrored, slerp between frames, bad inputs."""
from __future__ import annotations

import pytest
from helpers.cli import body_clip, main, quat_angle_deg, tiny_motion

pytestmark = pytest.mark.usefixtures("one_thread")


def test_bvh_resample_round_trip_and_folders(tmp_path, capsys):
    """30 -> 120 -> 30 fps gives the clip back (each 30 fps frame is a 120 fps frame); a folder is mirrored,
    .BVH included."""
    import numpy as np

    from motioncore.io.bvh import read_bvh, write_bvh

    clip = body_clip(frames=31)
    (tmp_path / "in" / "day2").mkdir(parents=True)
    write_bvh(tmp_path / "in" / "walk.bvh", clip)
    write_bvh(tmp_path / "in" / "day2" / "run.BVH", clip)
    assert main(["bvh", "resample", str(tmp_path / "in"), str(tmp_path / "hi"), "--fps", "120"]) == 0
    hi = read_bvh(tmp_path / "hi" / "day2" / "run.bvh")
    assert hi.fps == 120 and hi.num_frames == 121
    assert main(["bvh", "resample", str(tmp_path / "hi" / "walk.bvh"), str(tmp_path / "back.bvh"), "--fps", "30"]) == 0
    back, orig = read_bvh(tmp_path / "back.bvh"), read_bvh(tmp_path / "in" / "walk.bvh")
    assert back.fps == 30 and back.num_frames == orig.num_frames
    assert quat_angle_deg(back.rotations, orig.rotations).max() < 1e-3
    assert np.abs(back.positions - orig.positions).max() < 1e-4
    assert "121 frames at 120 fps -> 31 at 30" in capsys.readouterr().out


def test_bvh_resample_is_quaternion_correct(tmp_path):
    """A joint turning 160 deg about a tilted axis between two frames: the frame halfway is the 80 deg
    rotation about that axis (slerp), where interpolating BVH Euler angles is not."""
    import numpy as np

    from motioncore.core.rotations import axis_angle_to_quat
    from motioncore.io.bvh import read_bvh, write_bvh

    m = tiny_motion(frames=2, fps=10.0)
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    m.rotations[:, 1] = axis_angle_to_quat(np.stack([0 * axis, np.radians(160) * axis]))
    write_bvh(tmp_path / "a.bvh", m)
    assert main(["bvh", "resample", str(tmp_path / "a.bvh"), str(tmp_path / "b.bvh"), "--fps", "20"]) == 0
    mid = read_bvh(tmp_path / "b.bvh").rotations[1, 1]
    assert quat_angle_deg(mid, axis_angle_to_quat(np.radians(80) * axis)) < 1e-3


def test_bvh_resample_bad_inputs(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("x")
    assert main(["bvh", "resample", str(tmp_path / "a.txt"), str(tmp_path / "b.bvh"), "--fps", "30"]) == 2
    assert capsys.readouterr().err.strip().endswith("expected a .bvh file, got '.txt'")
