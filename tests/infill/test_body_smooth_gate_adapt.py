"""The body in-fill an animator keeps: the correction is smooth by construction (checked against a slow
per-gap least-squares reference), the gate is fitted on pseudo-gaps cut from the clip's own keys and never
touches a real gap, and Learn This Action learns only from keyed frames and is judged on held-out ones."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core.gaps import runs
from motioncore.errors import MotioncoreError
from motioncore.families.body.gate import GRID, bucket, pseudo_windows
from motioncore.families.body.model import gap_basis, smooth_residual

pytestmark = pytest.mark.timeout(300)


def _slow_smooth(res: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Per window, element and run of unkeyed frames: least squares onto ``gap_basis``, one at a time."""
    B, T, C = res.shape
    R = known.shape[-1] - 1
    out = np.zeros_like(res)
    for b in range(B):
        for e in range(R + 1):
            cols = range(e * 6, e * 6 + 6) if e < R else range(R * 6, R * 6 + 3)
            k = known[b, :, e]
            for s, t in runs(~k):
                phi = gap_basis(t - s, closed=s > 0 and t < T)
                if s == 0 and t < T:
                    phi = phi[::-1]
                for c in cols:
                    coef, *_ = np.linalg.lstsq(phi, res[b, s:t, c], rcond=None)
                    out[b, s:t, c] = phi @ coef
            if not k.any():
                out[b, :, list(cols)] = res[b, :, list(cols)]
    return out


def test_smooth_residual_matches_a_per_gap_least_squares_reference():
    rng = np.random.default_rng(0)
    B, T, R = 5, 48, 4
    known = np.ones((B, T, R + 1), bool)
    known[0, 10:25] = False                      # one gap
    known[1, 5:8] = False                        # a short one ...
    known[1, 30:, 2] = False                     # ... and one joint open to the end
    known[2, :12, :] = False                     # before the first key
    known[3, ::7] = False                        # many 1-frame holes
    known[4, 10:40, 0] = False                   # staggered per element
    known[4, 20:45, R] = False
    res = rng.normal(size=(B, T, R * 6 + 3))
    fast = smooth_residual(torch.as_tensor(res), torch.as_tensor(known)).numpy()
    np.testing.assert_allclose(fast, _slow_smooth(res, known), atol=1e-9)
    assert np.all(fast[..., : R * 6][np.repeat(known[..., :R], 6, -1)] == 0.0)   # nothing on keyed frames
    assert np.all(fast[..., R * 6:][np.repeat(known[..., R:], 3, -1)] == 0.0)


def test_the_smooth_correction_meets_the_keys_flat_and_cannot_jitter():
    n = 30
    phi = gap_basis(n, closed=True)
    assert phi.shape == (n, 4)   # one curve per 8 frames
    # zero value and zero slope at the keys: the first frame's value is second order in 1 / (n + 1)
    assert np.abs(phi[0]).max() < 0.25 * (np.pi / (n + 1)) ** 2 * 64 and np.abs(phi[-1]).max() < 0.2
    rng = np.random.default_rng(1)
    known = np.ones((1, 50, 2), bool)
    known[0, 10:40] = False
    noise = rng.normal(size=(1, 50, 9))
    sm = smooth_residual(torch.as_tensor(noise), torch.as_tensor(known)).numpy()
    jerk = lambda x: np.abs(np.diff(x[0, 7:43], n=3, axis=0)).mean()  # noqa: E731
    raw = np.where(known[..., :1], 0.0, noise)   # the unsmoothed correction, zero on the keys as assembled
    assert jerk(sm) < 0.1 * jerk(raw)   # white noise in, a smooth curve out


def test_pseudo_windows_lie_wholly_in_keyed_frames_and_spread_out():
    full = np.ones(600, bool)
    for s in (100, 250, 400):
        full[s:s + 30] = False
    wins = pseudo_windows(full, 30)
    assert 4 <= len(wins) <= 24
    for a, s, e, b in wins:
        assert (a, b) == (s - 10, e + 10) and full[a:b].all()
    starts = [w[0] for w in wins]
    assert all(b - a >= 50 for a, b in zip(starts, starts[1:], strict=False))
    assert pseudo_windows(np.ones(40, bool), 30) == []   # no room for 10 keys, 30 frames, 10 keys
    assert bucket(5) == 4 and bucket(15) == 12 and bucket(30) == 24 and list(GRID)[0] == 0.0


@pytest.fixture(scope="module")
def walk():
    from motioncore.data import load

    clip = max(load("bandai", "test", fps=30, progress=False)[:60], key=lambda c: len(c.motion.rotations)).motion
    return clip


@needs_data
def test_the_gate_sends_a_harmful_correction_to_blenders_curve(walk):
    from motioncore.families.body.fill import BodyLayout
    from motioncore.families.body.model import InfillBody, InfillBodyConfig
    from motioncore.infill import fill_clip

    sk = walk.skeleton
    torch.manual_seed(0)
    bad = InfillBody(InfillBodyConfig(BodyLayout.of(sk).num_model_joints, d_model=32, n_layers=1, n_heads=2,
                                      d_ff=64))
    with torch.no_grad():
        bad.out.bias.normal_(0.0, 0.3)   # bends every joint: far worse than Bezier
    meta = {"skeleton": sk.to_dict(), "fps": 30.0, "root_joint": 1, "kind": "infill-body"}
    T = len(walk.rotations)
    known = np.ones(T, bool)
    known[120:135] = known[250:265] = False
    q, r = walk.rotations, walk.positions[:, 1]
    gated = fill_clip(bad, meta, q, r, known)
    (fit,) = gated.gate.summary()
    assert fit["method"] == "pseudo-gaps" and fit["pseudo"] >= 4 and fit["rot"] == 0.0
    assert fit["error"]["gated"][0] <= fit["error"]["bezier"][0] + 1e-9 < fit["error"]["model"][0]
    raw = fill_clip(bad, meta, q, r, known, gate=False)
    err = lambda f: np.abs(f.rotations[0] - q).sum()  # noqa: E731
    assert err(gated) < 0.2 * err(raw)
    np.testing.assert_array_equal(gated.rotations[0][known], q[known])   # keys bit-exact
    # with the rotations' weight 0 the rotations are the base's (Blender's Bezier of the keys) exactly
    np.testing.assert_allclose(np.abs(np.sum(gated.rotations[0] * gated.base_rotations[0], -1)), 1.0, atol=1e-5)


@needs_data
def test_learn_this_action_learns_only_from_keyed_frames_and_is_judged_on_held_out_ones(walk):
    from motioncore.families.body.adapt import adapt_infill, keys_hash
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-body")
    T = len(walk.rotations)
    known = np.ones(T, bool)
    known[150:165] = False
    q, r = walk.rotations, walk.positions[:, 1]
    seen = []
    ad = adapt_infill(model, meta, q, r, known, seconds=2.0, progress=lambda f, m: seen.append(f))
    assert ad.steps >= 1 and seen and 0.0 <= seen[-1] <= 1.0
    assert set(ad.before) == {"15"} and np.isfinite(ad.before["15"]) and np.isfinite(ad.after["15"])
    assert ad.used == (ad.after["15"] < ad.before["15"])
    assert ad.model is not model or not ad.used   # a copy: the shipped weights are untouched
    assert next(model.parameters()).requires_grad is False or not model.training
    # the cache key: the keys' values and mask, not what lies in the gap
    q2 = q.copy()
    q2[155] = q2[10]
    assert keys_hash(q2, r, known) == ad.key
    q2[10] = q2[11]
    assert keys_hash(q2, r, known) != ad.key
    few = np.zeros(T, bool)
    few[:30] = few[-5:] = True
    with pytest.raises(MotioncoreError, match="no keyed stretch"):
        adapt_infill(model, meta, q, r, few, seconds=1.0)


def test_eval_clips_gaps_and_a_bezier_fill_score_one():
    from motioncore.eval.clips import cut_gaps

    k = cut_gaps(1200, 12, 30)
    gaps = runs(~k)
    assert len(gaps) == 12 and all(e - s == 30 for s, e in gaps)
    assert all(b[0] - a[1] >= 60 for a, b in zip(gaps, gaps[1:], strict=False))
    assert len(runs(~cut_gaps(1000, 12, 30))) == 11   # 60 frames apart: 11 fit
    assert k[:10].all() and k[-10:].all()
    assert len(runs(~cut_gaps(100, 12, 30))) == 1 and cut_gaps(40, 12, 30).all()


@needs_data
def test_eval_clips_scores_against_the_truth_and_bezier(walk):
    from motioncore.eval.clips import _bezier, evaluate_clips

    def changes_keys(sk, q, p, known):
        q = q.copy()
        q[0] = q[1]
        return q, p

    res = evaluate_clips([walk], {"same": _bezier}, n_gaps=3, lengths=(15,))
    (row,) = res["clips"]
    assert row["same"]["cm_ratio"] == pytest.approx(1.0) and row["bezier"]["cm"] > 0
    assert res["summary"]["15"]["same"]["jerk"] == pytest.approx(res["summary"]["15"]["bezier"]["jerk"])
    with pytest.raises(MotioncoreError, match="changed keyed frames"):
        evaluate_clips([walk], {"bad": changes_keys}, n_gaps=3, lengths=(15,))
