"""In-fill at the scene's frame rate (`infill.fill`): the clip goes to the checkpoint's rate and
back, so a gap filled at 24, 30, 60 or 120 fps is the same motion in seconds (issue 12, item 11)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.kinematics import resample
from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_angle
from motioncore.infill import fill_clip, fill_clip_at
from motioncore.infill.rate import resample_frames

pytestmark = pytest.mark.usefixtures("one_thread")


def test_resample_frames_hits_clip_frames_and_ends_on_the_last():
    i0, i1, w = resample_frames(121, 120.0, 30.0)   # every 4th frame, exactly
    assert i0.tolist() == list(range(0, 121, 4)) and not w.any()
    i0, i1, w = resample_frames(25, 24.0, 30.0)     # 1 s: 31 frames, the last on frame 24
    assert i0.size == 31 and i0[-1] == 24 and w[-1] == 0.0 and np.allclose(i0[1] + w[1], 0.8)


@needs_data
def test_same_motion_in_seconds_at_24_30_60_120_fps(bandai_walk):
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model

    model, meta = load_model("anyorder-body")
    m = read_bvh(bandai_walk)
    m = Motion(m.skeleton, m.rotations[:61], m.positions[:61], m.fps)   # 2 s at 30 fps
    rj = int(meta["root_joint"])
    out = {}
    for fps in (24.0, 30.0, 60.0, 120.0):
        c = m if fps == 30.0 else resample(m, fps)
        t = np.arange(c.rotations.shape[0]) / fps
        known = ~((t > 0.6 + 1e-9) & (t < 1.4 - 1e-9))                    # a 0.8 s gap
        f = fill_clip_at(model, meta, c.rotations, c.positions[:, rj], known, fps)
        if fps == 30.0:
            ref = fill_clip(model, meta, c.rotations, c.positions[:, rj], known)
            assert np.array_equal(f.rotations, ref.rotations) and np.array_equal(f.root, ref.root)
        assert np.array_equal(f.rotations[0][known], c.rotations[known])   # keys bit-identical
        common = np.round(np.arange(0.6, 1.4 + 1e-9, 1 / 6) * fps).astype(int)   # every 1/6 s in the gap
        out[fps] = (f.rotations[0][common], f.root[0][common])
        if fps == 120.0:   # the old behaviour: scene frames taken for model frames (a 3.2 s gap at 30 fps)
            g = fill_clip(model, meta, c.rotations, c.positions[:, rj], known)
            naive = np.degrees(quat_angle(g.rotations[0][common], out[30.0][0])).mean()
    for fps in (24.0, 60.0, 120.0):
        deg = np.degrees(quat_angle(out[fps][0], out[30.0][0])).mean()
        cm = np.linalg.norm(out[fps][1] - out[30.0][1], axis=-1).mean()
        print(f"{fps:g} fps: {deg:.2f} deg, {cm:.2f} cm from the 30 fps fill")
        assert deg < 3.0 and cm < 3.0, (fps, deg, cm)   # the gap's ends fall between model frames
    print(f"120 fps read as model frames: {naive:.2f} deg")
    assert naive > 2 * np.degrees(quat_angle(out[120.0][0], out[30.0][0])).mean()


@needs_data
def test_a_gap_longer_than_one_pass_keeps_blenders_curve_at_24_fps(bandai_walk):
    """120 frames at 24 fps are 150 at the model's 30: longer than the network takes in one pass. The gap keeps
    Blender's curve (its base), the gate says why, and nothing raises (it did: '171 frames in one pass')."""
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-body")
    m = read_bvh(bandai_walk)
    rj, J = int(meta["root_joint"]), m.skeleton.num_joints
    reps = int(np.ceil(400 / m.num_frames))   # long enough for a 120-frame gap with keys around it
    q = np.concatenate([m.rotations] * reps)[:400]
    r = np.concatenate([m.positions[:, rj]] * reps)[:400]
    known = np.ones((400, J + 1), bool)
    known[140:260] = False
    out = fill_clip_at(model, meta, q, r, known, 24.0)
    np.testing.assert_array_equal(out.rotations[0][known[:, :J]], q[known[:, :J]])
    np.testing.assert_allclose(out.rotations[0], out.base_rotations[0], atol=1e-12)   # the base itself
    (fit,) = out.gate.summary()
    assert fit["method"] == "too-long" and fit["rot"] == 0.0 and fit["root"] == 0.0
