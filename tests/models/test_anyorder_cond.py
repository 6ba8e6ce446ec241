"""Per-frame conditions (``cfg.cond_dim``, the hand's object in the wrist frame): known at every frame,
never sampled; the cached loop, parallel decoding and the seeded sampler keep their parity with them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from motioncore.core.rotations import quat_apply, quat_mul, quat_normalize
from motioncore.data.hand_object import COND_DIM, cond_stats, normalise_cond, object_features
from motioncore.families.anyorder.loss import make_loss_fn
from motioncore.families.anyorder.model import AnyOrderTransformer
from motioncore.families.anyorder.model_elements import motion_config
from motioncore.families.anyorder.model_sampling import grid_prior, log_likelihood, sample

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0, num_mixtures=3, prior=True, offset_scale=1.0)
D = 5


def _model(dtype=torch.float64, cond_dim=D) -> AnyOrderTransformer:
    torch.manual_seed(0)
    return AnyOrderTransformer(motion_config(2, cond_dim=cond_dim, **TINY)).to(dtype).eval()


def _data(B: int, T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, 3, 6, generator=g, dtype=torch.float64)
    x[..., -1, 3:] = 0.0
    return x, torch.randn(B, T, D, generator=g, dtype=torch.float64)


def _known(T: int) -> torch.Tensor:
    k = torch.zeros(T, 3, dtype=torch.bool)
    k[0] = True
    k[T - 1] = True
    k[:, 2] = True  # the root every frame (a wrist track)
    return k


@pytest.mark.parametrize("k", [1, 2])
def test_cached_loop_equals_teacher_forcing_with_frame_conditions(k):
    model = _model()
    x, c = _data(2, 6, seed=1)
    known = _known(6)
    got = log_likelihood(model, x, "sequential", known_mask=known, frame_cond=c, k=k)
    if k == 1:
        order = torch.cat([known.flatten().nonzero().squeeze(1), (~known).flatten().nonzero().squeeze(1)])
        full = log_likelihood(model, x, order, prior=grid_prior(model, x, known[None]), frame_cond=c)
        torch.testing.assert_close(got, full[:, int(known.sum()):], rtol=0, atol=1e-10)
    without = log_likelihood(model, x, "sequential", known_mask=known, k=k)
    assert not torch.allclose(got, without)  # the conditions reach the predictions


def test_no_condition_equals_the_zero_vector():
    model = _model()
    x, c = _data(1, 5, seed=2)
    known = _known(5)
    a = log_likelihood(model, x, "bisection", known_mask=known)
    b = log_likelihood(model, x, "bisection", known_mask=known, frame_cond=torch.zeros_like(c))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_sampling_with_conditions_keeps_keys_and_is_seeded():
    model = _model(torch.float32)
    x, c = _data(1, 8, seed=3)
    x, c = x[0].float(), c[0].float()
    known = _known(8)
    a = sample(model, x, known, order="bisection", n_samples=3, seed=5, frame_cond=c, k=2)
    b = sample(model, x, known, order="bisection", n_samples=1, seed=7, frame_cond=c, k=2)
    torch.testing.assert_close(a[2], b[0], rtol=0, atol=1e-5)
    assert torch.equal(a[:, known], x[known].expand(3, -1, -1))
    torch.nn.init.normal_(model.head.weight, std=0.1)  # the prior's head starts at zero offsets: give it some
    m0 = sample(model, x, known, order="bisection", temperature=0.0, frame_cond=c)
    m1 = sample(model, x, known, order="bisection", temperature=0.0, frame_cond=c * 0)
    assert not torch.allclose(m0, m1)


def test_frame_conditions_are_shape_checked_and_ignored_by_plain_models():
    model = _model()
    x, c = _data(1, 4)
    with pytest.raises(Exception, match="frame_cond"):
        log_likelihood(model, x, "sequential", known_mask=_known(4), frame_cond=c[..., :2])
    plain = _model(cond_dim=0)
    a = sample(plain, x[0], _known(4), order="sequential", temperature=0.0)
    b = sample(plain, x[0], _known(4), order="sequential", temperature=0.0, frame_cond=c[0])
    assert torch.equal(a, b)


def test_the_loss_trains_with_dropped_conditions():
    model = _model(torch.float32).train()
    x, c = _data(4, 6)
    loss = make_loss_fn("motion", seed=0, track=(1, 2), cond_drop=0.5)(model, {"values": x.float(), "cond": c.float()})
    loss.backward()
    assert torch.isfinite(loss) and model.cond_own.weight.grad.abs().sum() > 0


def test_object_features_are_invariant_to_a_rigid_move_of_the_world():
    rng = np.random.default_rng(0)
    T = 9
    wq, oq = quat_normalize(rng.normal(size=(T, 4))), quat_normalize(rng.normal(size=(T, 4)))
    wp, op = rng.normal(size=(T, 3)), rng.normal(size=(T, 3))
    f = object_features(wq, wp, oq, op)
    assert f.shape == (T, COND_DIM) and (f[:, -1] == 1).all()
    g = quat_normalize(rng.normal(size=4))
    s = rng.normal(size=3)
    f2 = object_features(quat_mul(g, wq), quat_apply(g, wp) + s, quat_mul(g, oq), quat_apply(g, op) + s)
    np.testing.assert_allclose(f, f2, atol=1e-12)
    n = normalise_cond(f, cond_stats(f[None]))
    np.testing.assert_allclose(n[:, 6:13].mean(0), 0, atol=1e-5)


def test_fill_clip_takes_an_optional_object_track():
    from motioncore.infill import fill_clip, fill_clip_at
    from motioncore.models.registry import load_model

    _, meta = load_model("anyorder-hands")  # a hand skeleton and its root normalisation
    J = len(meta["skeleton"]["names"])
    torch.manual_seed(0)
    model = AnyOrderTransformer(motion_config(J, cond_dim=COND_DIM, **TINY)).eval()
    torch.nn.init.normal_(model.head.weight, std=0.05)
    meta = {**meta, "cond": {"norm": {"mean": [0.0] * 7, "std": [1.0] * 7}}}
    rng = np.random.default_rng(1)
    T = 16
    q = quat_normalize(rng.normal(size=(T, J, 4)) * 0.1 + np.array([1.0, 0, 0, 0]))
    root = rng.normal(size=(T, 3)) * 0.1
    known = np.zeros((T, J + 1), bool)
    known[:5] = True
    known[:, 0] = known[:, J] = True  # the wrist track
    obj = (quat_normalize(rng.normal(size=(T, 4))), rng.normal(size=(T, 3)))
    a = fill_clip(model, meta, q, root, known)
    b = fill_clip(model, meta, q, root, known, object_track=obj)
    c = fill_clip_at(model, meta, q, root, known, fps=30.0, object_track=obj)
    assert np.array_equal(b.rotations[0][known[:, :J]], q[known[:, :J]])
    assert not np.allclose(a.rotations, b.rotations)  # the object reaches the fingers
    np.testing.assert_allclose(b.rotations, c.rotations, atol=1e-6)
    with pytest.raises(Exception, match="object_track"):
        fill_clip(model, meta, q, root, known, object_track=(obj[0][:3], obj[1]))
