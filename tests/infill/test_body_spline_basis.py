"""The body in-fill's spline correction (``basis="spline"``): one C2 curve per run of gaps that shares its slope
at every single key, flat where the context is dense. The banded fast path is held to a slow dense least-squares
reference; on an animator's blocking it follows a smooth motion through the keys where the per-gap bumps stop."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from motioncore.families.body.model import gap_basis, smooth_residual
from motioncore.families.body.model_spline import dense_reference, fit_rows, segments
from motioncore.families.body.train_batch import sample_task

pytestmark = pytest.mark.timeout(300)


def _every(T: int, n: int) -> np.ndarray:
    m = np.zeros(T, bool)
    m[::n] = True
    m[-1] = True
    return m


def _masks() -> list[np.ndarray]:
    out = [_every(81, n) for n in (8, 10, 12, 16, 20)]                  # blocking
    lafan = np.zeros(65, bool)
    lafan[:10] = lafan[-1] = True                                      # LaFAN1: 10 context frames, a target key
    out.append(lafan)
    opened = np.zeros(50, bool)
    opened[7] = opened[19] = opened[20] = opened[33] = True            # free ends, single keys, a held pair
    out.append(opened)
    rng = np.random.default_rng(3)
    for _ in range(6):                                                 # training patterns, element by element
        known, _ = sample_task(rng, 6, 60, blocking=0.5)
        out.extend(known.T[[0, -1]])
    return out


def test_the_banded_fit_matches_a_dense_least_squares_reference():
    rng = np.random.default_rng(0)
    for m in _masks():
        if not m.any():
            continue
        x = rng.normal(size=(2, len(m), 3))
        fast = fit_rows(x, np.stack([m, m]))
        for i in range(2):
            np.testing.assert_allclose(fast[i], dense_reference(x[i], m), atol=1e-6)
        assert np.all(fast[:, m] == 0.0)   # nothing on keyed frames


def test_segments_split_at_dense_keys_and_run_through_single_ones():
    m = np.zeros(40, bool)
    m[:3] = True       # dense context: anchors, the curve starts flat after them
    m[10] = True       # a single key: inside the segment
    m[20:22] = True    # a held pose: anchors again
    m[30] = True       # a single key, then free to the window's end
    assert segments(m) == [(3, 20, True, True), (22, 40, True, False)]
    assert segments(_every(21, 10)) == [(1, 20, True, True)]   # the window's first and last keys are anchors


def test_the_gradient_is_the_adjoint_of_the_fit():
    known = np.zeros((3, 31, 2), bool)
    known[:, ::10] = True
    known[1, 4:7, 0] = True
    known[2, :, 1] = False   # an element with no key passes through
    res = torch.randn(3, 31, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda r: smooth_residual(r, torch.as_tensor(known), "spline"), (res,))


def test_on_blocking_the_spline_follows_the_motion_through_the_keys_where_per_gap_bumps_stop():
    """A smooth correction that a blocked shot needs (the truth minus Blender's curve is not zero-slope at the
    keys): the spline reproduces it with its slope at every key; the per-gap basis kinks there."""
    T, every = 81, 10
    known = _every(T, every)
    t = np.arange(T, dtype=np.float64)
    want = np.sin(2 * np.pi * t / 20.0)[:, None] * np.sin(np.pi * t / 80.0)[:, None]   # zero at every key
    res = np.zeros((1, T, 9))   # one joint's 6D and the root: the wanted correction on the joint's first value
    res[0, :, :1] = want
    kn = torch.as_tensor(np.repeat(known[None, :, None], 2, -1))
    spline = smooth_residual(torch.as_tensor(res), kn, "spline").numpy()[0, :, :1]
    sine = smooth_residual(torch.as_tensor(res), kn, "sine").numpy()[0, :, :1]
    err_spline = np.abs(spline - want)[~known].max()
    err_sine = np.abs(sine - want)[~known].max()
    assert err_spline < 0.1 * err_sine, (err_spline, err_sine)
    jerk = lambda y: np.abs(np.diff(y[:, 0], 3)).mean()   # noqa: E731
    assert jerk(spline) < 0.5 * jerk(sine)


def test_dense_context_keeps_flat_ends():
    lafan = np.zeros(65, bool)
    lafan[:10] = lafan[-1] = True
    x = np.ones((1, 65, 1))
    y = fit_rows(x, lafan[None])[0, :, 0]
    # next to each anchor the curve rises as the square of the distance (zero slope), as gap_basis's bumps do
    assert abs(y[10]) < 0.25 * abs(y[12]) and abs(y[63]) < 0.25 * abs(y[61])
    bump = gap_basis(54, True)[:, 0]
    assert abs(bump[0]) < 0.25 * abs(bump[2])   # the same shape at the ends as the per-gap basis
