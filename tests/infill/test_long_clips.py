"""Long clips cost what their gaps cost: the F-curve solves only the runs of keys around the evaluated segments
(checked against the whole curve, bit for bit), the smoothing works one block per gap (checked against the
whole-window projection it replaced), and a 20,000-frame 120 fps request's memory stays bounded."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core import fcurve
from motioncore.families.body.model import gap_basis, smooth_residual

pytestmark = pytest.mark.timeout(600)


def _onehot_per_run(flag: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The (C, K, K) one-hot grouping the linear one replaced."""
    onehot = run[..., None] == np.arange(run.shape[-1])
    return np.take_along_axis((onehot & flag[..., None]).any(axis=1), run, axis=1)


def test_run_grouping_matches_the_one_hot_reference():
    rng = np.random.default_rng(0)
    for _ in range(20):
        C, K = int(rng.integers(1, 6)), int(rng.integers(2, 80))
        locked = rng.random((C, K)) < 0.3
        locked[:, 0] = True
        run = np.cumsum(locked, axis=-1) - 1
        flag = rng.random((C, K)) < 0.2
        np.testing.assert_array_equal(fcurve._per_run(flag, run), _onehot_per_run(flag, run))


@pytest.mark.parametrize("shape", ["walk", "monotone", "noisy"])
def test_a_long_curve_with_gaps_is_the_whole_curve_exactly(shape):
    """Dense keys with a few gaps (a capture being cleaned): the restricted solve gives the whole curve's values."""
    rng = np.random.default_rng({"walk": 1, "monotone": 2, "noisy": 3}[shape])
    T = 3000
    frames = np.arange(T, dtype=np.float64)
    keep = np.ones(T, bool)
    for s in rng.integers(50, T - 150, 6):
        keep[s:s + int(rng.integers(2, 120))] = False
    x = frames[keep]
    if shape == "walk":
        y = np.cumsum(rng.normal(size=(4, x.size)), axis=1)
    elif shape == "monotone":   # a root walking forward: one run of keys spans the clip
        y = np.cumsum(np.abs(rng.normal(size=(4, x.size))) + 0.1, axis=1)
    else:
        y = np.sin(x[None] / np.array([[7.0], [19.0], [40.0], [300.0]])) + 1e-3 * rng.normal(size=(4, x.size))
    f = frames[(frames >= x[0]) & (frames <= x[-1])]
    for smoothing in fcurve.SMOOTHING:
        fast = fcurve.fcurve_evaluate(x, y, f, smoothing)
        whole = fcurve._evaluate(x, y, f, smoothing)   # every key's handles solved, every frame evaluated
        np.testing.assert_array_equal(fast, whole)


def _whole_window_smooth(res: np.ndarray, known: np.ndarray) -> np.ndarray:
    """The (T, T) projection per element and key pattern that the per-gap blocks replaced."""
    B, T, _ = res.shape
    R = known.shape[-1] - 1
    out = np.zeros_like(res)
    for b in range(B):
        for e in range(R + 1):
            k = known[b, :, e]
            P = np.eye(T) if not k.any() else np.zeros((T, T))
            d = np.diff(np.r_[0, (~k).astype(np.int8), 0])
            for s, t in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
                if not k.any():
                    break
                phi = gap_basis(t - s, closed=s > 0 and t < T)
                if s == 0 and t < T:
                    phi = phi[::-1]
                P[s:t, s:t] = phi @ np.linalg.pinv(phi)
            cols = slice(e * 6, e * 6 + 6) if e < R else slice(R * 6, R * 6 + 3)
            out[b, :, cols] = P @ res[b, :, cols]
    return out


def test_per_gap_smoothing_matches_the_whole_window_projection_on_training_patterns():
    from motioncore.families.body.train_batch import sample_task

    rng = np.random.default_rng(4)
    R = 7
    for _ in range(12):
        known, _ = sample_task(rng, R, 60)   # (T, R + 1): dense, sparse, staggered, root-path patterns
        T = known.shape[0]
        kb = np.stack([known, np.roll(known, 3, axis=0), known])
        kb[2, :, 2] = False   # an element with no key at all: passed through
        res = rng.normal(size=(3, T, R * 6 + 3))
        fast = smooth_residual(torch.as_tensor(res), torch.as_tensor(kb)).numpy()
        np.testing.assert_allclose(fast, _whole_window_smooth(res, kb), atol=1e-9)


def test_per_gap_smoothing_keeps_gradients_for_training():
    known = np.ones((2, 16, 2), bool)
    known[:, 4:12] = False
    known[1, ::3, 0] = True
    res = torch.randn(2, 16, 9, dtype=torch.float64, requires_grad=True)
    out = smooth_residual(res, torch.as_tensor(known))
    (out ** 2).sum().backward()
    assert res.grad is not None and torch.isfinite(res.grad).all() and res.grad.abs().sum() > 0
    assert torch.autograd.gradcheck(lambda r: smooth_residual(r, torch.as_tensor(known)), (res,))


@needs_data
def test_a_20000_frame_120fps_request_stays_within_bounded_memory(one_thread):
    """Real CMU 120 fps captures (subject 07, a test subject) tiled to 20,000 frames with 12 gaps of 60 frames,
    filled as `batch infill` fills them (on the model's skeleton and back). The whole-clip Bezier once asked
    40 GB for a (124, T, T) mask; the fill's peak traced allocation now stays within 30x the clip's own rotations
    (about 19 MB here). Memory, not time."""
    import tracemalloc

    from motioncore.batch.infill import fill_motion
    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton
    from motioncore.data import load
    from motioncore.models.registry import load_model
    from motioncore.retarget import auto_map, clip_poses

    T = 20000
    takes = [c.motion for c in load("cmu05-09", split="test", progress=False) if c.name.startswith("07_")]
    q = np.concatenate([m.rotations for m in takes])
    p = np.concatenate([m.positions for m in takes])
    reps = -(-T // len(q))
    clip = Motion(takes[0].skeleton, np.tile(q, (reps, 1, 1))[:T], np.tile(p, (reps, 1, 1))[:T], 120.0, "long")
    model, meta = load_model("infill-body")
    todo = np.zeros(T, bool)
    for s in np.linspace(300, T - 400, 12).astype(int):
        todo[s:s + 60] = True
    jm = auto_map(clip.skeleton, Skeleton.from_dict(meta["skeleton"]), source_poses=clip_poses(clip))
    tracemalloc.start()
    try:
        out = fill_motion(clip, model, meta, todo, jm)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * clip.rotations.nbytes, f"peak {peak / 2**20:.0f} MB for a {clip.rotations.nbytes / 2**20:.0f} MB clip"
    assert np.array_equal(out.rotations[~todo], clip.rotations[~todo])   # keys exact
    moved = np.abs(out.rotations[todo] - clip.rotations[todo]).max(axis=(1, 2))
    assert np.isfinite(out.rotations).all() and (moved > 0).mean() > 0.9   # every gap was filled
