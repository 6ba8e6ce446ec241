"""The body in-fill at the clip's own rate (120 fps): the correction's weight 0 gives the clip-rate Bezier of the
window's keys, and the correction reaches the clip's frames as one smooth curve per gap that vanishes at the
clip's keys (no pop at the gap's ends, no kink at every model frame). On a real CMU 120 fps capture (subject 07,
never trained on) moved onto the model's skeleton."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("one_thread")]

GAPS = ((100, 160), (330, 372))   # 60 and 42 frames at 120 fps


@pytest.fixture(scope="module")
def walk120():
    from motioncore.core.skeleton import Skeleton
    from motioncore.data import load
    from motioncore.models.registry import load_model
    from motioncore.retarget import auto_map, clip_poses, retarget

    model, meta = load_model("infill-body")
    m = next(c.motion for c in load("cmu05-09", split="test", progress=False) if c.name == "07_05")
    msk = Skeleton.from_dict(meta["skeleton"])
    conv = np.asarray(meta["convention"]["mean_local_rotations"], np.float64)
    r = retarget(m, msk, auto_map(m.skeleton, msk, source_poses=clip_poses(m)), convention=conv)
    known = np.ones(r.num_frames, bool)
    for s, e in GAPS:
        known[s:e] = False
    return model, meta, r, known


@needs_data
def test_weight_zero_is_the_clip_rate_bezier_of_the_windows_keys(walk120):
    from motioncore.core.gaps import context_frames
    from motioncore.core.rotations import quat_angle
    from motioncore.eval.keyed import bezier_quat_keys
    from motioncore.infill import fill_clip_at

    model, meta, m, known = walk120
    rj = int(meta["root_joint"])
    f = fill_clip_at(model, meta, m.rotations, m.positions[:, rj], known, 120.0, residual=0.0)
    ctx = context_frames(120.0)
    for s, e in GAPS:   # the reference: Blender's Bezier (quaternion channels) through the window's keys
        a, b = s - ctx, e + ctx
        bq, bp = bezier_quat_keys(m.skeleton, m.rotations[None, a:b], m.positions[None, a:b], known[None, a:b])
        deg = np.degrees(quat_angle(f.rotations[0, s:e], bq[0, s - a:e - a]))
        assert deg.max() <= 1e-6
        np.testing.assert_allclose(f.root[0, s:e], bp[0, s - a:e - a, rj], atol=1e-9)
    np.testing.assert_array_equal(f.rotations[0][known], m.rotations[known])   # keys bit-identical


@needs_data
def test_the_correction_is_one_smooth_curve_per_gap_at_the_clips_frames(walk120):
    from motioncore.core.rotations import quat_angle
    from motioncore.infill import fill_clip_at

    model, meta, m, known = walk120
    rj = int(meta["root_joint"])
    # the network's correction alone (planting, a layer on top of it, blends the feet in and out on its own)
    f = fill_clip_at(model, meta, m.rotations, m.positions[:, rj], known, 120.0, gate=False, plant_feet=False)
    corr_root = f.root[0] - f.base_root[0]                                                 # (T, 3) cm
    corr_rot = np.degrees(quat_angle(f.rotations[0], f.base_rotations[0]))                # (T, J) deg
    assert corr_root[~known].std() > 1e-3 and corr_rot[~known].max() > 0.1   # the network did correct
    for s, e in GAPS:
        c = np.concatenate([np.zeros((1, 3)), corr_root[s:e], np.zeros((1, 3))])   # the keys around: zero
        big = np.abs(c).max()
        assert np.abs(c[1]).max() <= 0.02 * big and np.abs(c[-2]).max() <= 0.02 * big   # flat into the keys
        # a sum of at most 8 gap curves of the gap's own length: its third difference is tiny beside it; a
        # correction resampled from 30 fps bends at every 4th frame (third differences of its slope changes)
        assert np.abs(np.diff(c, n=3, axis=0)).max() <= 0.01 * big
        r = corr_rot[s - 1:e + 1]
        assert r[0].max() < 1e-9 and r[-1].max() < 1e-9   # keys: the base itself
        assert r[1].max() <= 0.02 * r.max() and r[-2].max() <= 0.02 * r.max()


def test_blocking_counts_only_single_keys_on_model_frames():
    from motioncore.infill import blocked_on_model_frames

    T, J = 200, 3
    keys = np.zeros((T, J + 1), bool)
    keys[::40] = True
    keys[-1] = True
    assert blocked_on_model_frames(keys, ~keys, 120.0, 30.0)
    keys[::10] = True   # a key every 10 at 120 fps: most fall between the model's frames
    assert not blocked_on_model_frames(keys, ~keys, 120.0, 30.0)
    dense = np.ones((T, J + 1), bool)
    dense[50:90] = False   # one gap between fully keyed stretches: not blocking
    assert not blocked_on_model_frames(dense, ~dense, 120.0, 30.0)
    assert not blocked_on_model_frames(keys, ~keys, 50.0, 30.0)   # not a whole multiple of the model's rate


@needs_data
def test_blocking_at_120_fps_keeps_the_keys_and_has_no_kink_at_the_model_frames(walk120):
    """Keys every 40 frames at 120 fps (every 10 at the model's 30): filled at the model's rate, its change brought
    back by a cubic spline; slerping between model frames instead would bend the motion at every 4th frame."""
    from motioncore.core.rotations import quat_angle
    from motioncore.infill import fill_clip_at

    model, meta, r, _ = walk120
    J, rj = r.skeleton.num_joints, int(meta["root_joint"])
    T = 401
    known = np.zeros((T, J + 1), bool)
    known[::40] = True
    out = fill_clip_at(model, meta, r.rotations[:T], r.positions[:T, rj], known, 120.0, plant_feet=False)
    fq, fr = out.rotations[0], out.root[0]
    k = known[:, 0]
    assert np.array_equal(fq[k], r.rotations[:T][k]) and np.array_equal(fr[k], r.positions[:T, rj][k])
    bend = quat_angle(fq[1:], fq[:-1])   # (T-1, J) one-frame turns
    acc = np.abs(np.diff(bend, axis=0)).mean(axis=1)   # their change: a kink is a jump here
    at_model = acc[np.arange(len(acc)) % 4 == 3]   # the change across each model frame
    between = acc[np.arange(len(acc)) % 4 != 3]
    assert at_model.mean() < 1.5 * between.mean(), (at_model.mean(), between.mean())
