"""The keys' interpolation prior (``cfg.prior``): the baseline itself, the residual head, and that the
cached loop, parity and the sampling invariants still hold with it."""
from __future__ import annotations

import pytest
import torch

from motioncore.errors import ShapeError
from motioncore.families.anyorder.loss import make_loss_fn, motion_conditions
from motioncore.families.anyorder.model import AnyOrderTransformer
from motioncore.families.anyorder.model_elements import group_channels, motion_config
from motioncore.families.anyorder.model_prior import key_prior
from motioncore.families.anyorder.model_sampling import grid_prior, log_likelihood, sample, teacher_forced

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0, num_mixtures=3)


def _model(dtype=torch.float64, **kw) -> AnyOrderTransformer:
    torch.manual_seed(0)
    return AnyOrderTransformer(motion_config(2, prior=True, **{**TINY, **kw})).to(dtype).eval()


def _grid(B: int, T: int, model: AnyOrderTransformer, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, model.cfg.grid_channels, model.cfg.element_dim, generator=g, dtype=torch.float64)
    if not model.cfg.group_frames:
        x[..., -1, 3:] = 0.0  # the root's padding
    return x


def test_key_prior_interpolates_holds_and_flags():
    T = 7
    v = torch.arange(T, dtype=torch.float64).view(1, T, 1, 1).expand(1, T, 3, 2).clone() * 10
    known = torch.zeros(1, T, 3, dtype=torch.bool)
    known[0, [1, 5], 0] = True  # channel 0: keys at frames 1 and 5
    known[0, 3, 1] = True  # channel 1: one key; channel 2: none
    p = key_prior(v, known)
    assert p.shape == (1, T, 3, 5)
    torch.testing.assert_close(p[0, :, 0, 0], torch.tensor([10., 10., 20., 30., 40., 50., 50.], dtype=torch.float64))
    torch.testing.assert_close(p[0, :, 1, 0], torch.full((T,), 30.0, dtype=torch.float64))
    assert p[0, :, 2].abs().sum() == 0  # no key: no prior, flags 0
    assert p[0, :, :2, 2].eq(1).all() and p[0, :, 2, 2].eq(0).all()
    torch.testing.assert_close(p[0, :, 0, 3], torch.tensor([0, 0, .25, .5, .75, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(p[0, :, 0, 4], torch.tensor([0, 0, 4, 4, 4, 0, 0], dtype=torch.float64) / 30)


def test_a_zero_residual_head_returns_the_prior_as_every_mean():
    model = _model()
    torch.nn.init.zeros_(model.head.weight)
    torch.nn.init.zeros_(model.head.bias)
    x = _grid(1, 6, model)
    known = torch.zeros(1, 6, 3, dtype=torch.bool)
    known[0, [0, 5]] = True
    prior = grid_prior(model, x, known)
    order = torch.arange(18)
    params = teacher_forced(model, x, order, prior)
    K, E = 3, 6
    means = params[0, :, K:].unflatten(-1, (K, 2 * E))[..., :E]  # (L, K, E)
    want = prior[0, :, :E].unsqueeze(1).expand_as(means)
    torch.testing.assert_close(means, want)


@pytest.mark.parametrize("group", [False, True])
def test_cached_loop_equals_teacher_forcing_with_the_prior(group):
    model = _model(group_frames=group)
    x = _grid(2, 5, model, seed=1)
    Cg = model.cfg.grid_channels
    known = torch.zeros(5, Cg, dtype=torch.bool)
    known[0] = True
    known[4] = True
    if not group:
        known[2, 0] = True  # a partial key
    got = log_likelihood(model, x, "sequential", known_mask=known)  # cached loop, (B, F)
    order = torch.cat([known.flatten().nonzero().squeeze(1), (~known).flatten().nonzero().squeeze(1)])
    full = log_likelihood(model, x, order, prior=grid_prior(model, x, known[None]))[:, int(known.sum()):]
    torch.testing.assert_close(got, full, rtol=0, atol=1e-10)


def test_sampling_keeps_keys_fills_the_rest_and_is_seeded():
    model = _model(torch.float32)
    x = _grid(1, 8, model, seed=2)[0].float()
    known = torch.zeros(8, 3, dtype=torch.bool)
    known[:2] = True
    known[7] = True
    known[4, 2] = True
    a = sample(model, x, known, order="random", n_samples=3, seed=5)
    b = sample(model, x, known, order="random", n_samples=1, seed=7)
    torch.testing.assert_close(a[2], b[0], rtol=0, atol=1e-5)  # batched float32 matmuls: last-ulp differences
    assert torch.equal(a[:, known], x[known].expand(3, -1, -1))
    assert not torch.equal(a[0, ~known], a[1, ~known])


def test_the_prior_is_required_and_shape_checked():
    model = _model()
    x = _grid(1, 4, model)
    with pytest.raises(ValueError, match="prior"):
        log_likelihood(model, x, torch.arange(12))
    with pytest.raises(ShapeError, match="prior"):
        teacher_forced(model, x, torch.arange(12), torch.zeros(1, 12, 5, dtype=torch.float64))


def test_the_loss_trains_a_prior_model():
    model = _model(torch.float32).train()
    x = _grid(4, 12, model, seed=3).float()
    loss_fn = make_loss_fn("motion", seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    def val() -> float:  # eval mode: the loss's fixed evaluation conditions
        model.eval()
        with torch.no_grad():
            out = float(loss_fn(model, {"values": x}))
        model.train()
        return out

    first = val()
    for _ in range(30):
        opt.zero_grad()
        loss = loss_fn(model, {"values": x})
        loss.backward()
        opt.step()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert val() < first - 0.5


def test_tracked_channels_are_keyed_periodically_in_half_the_rows():
    g = torch.Generator().manual_seed(0)
    B, T, C = 200, 40, 5
    cond = motion_conditions(B, T, C, g, track=(1, 4)).view(B, T, C)
    only = cond[:, :, [1, 4]].all(-1) & ~cond[:, :, [0, 2, 3]].any(-1)  # (B, T) wrist and root keyed, nothing else
    tracked = only.sum(1) >= 2
    assert 60 < int(tracked.sum()) < 140  # about half the rows
    plain = motion_conditions(B, T, C, torch.Generator().manual_seed(0)).view(B, T, C)
    assert not torch.equal(plain, cond)


def test_grouped_prior_model_groups_like_the_layout():
    model = _model(group_frames=True)
    x = torch.randn(1, 4, 3, 6, dtype=torch.float64)
    x[..., -1, 3:] = 0
    g = group_channels(model.cfg, x)
    assert g.shape == (1, 4, 1, 15)


def test_an_untrained_prior_model_returns_the_interpolation_at_temperature_zero():
    model = _model(torch.float32)
    x = _grid(1, 9, model, seed=4)[0].float()
    known = torch.zeros(9, 3, dtype=torch.bool)
    known[:2] = True
    known[8] = True
    out = sample(model, x, known, order="bisection", temperature=0.0)[0]
    from motioncore.families.anyorder.model_heads import project

    want = project(model.cfg, key_prior(x[None], known[None])[0, ..., :6], torch.arange(3).expand(9, 3))
    torch.testing.assert_close(out[2:8], want[2:8], rtol=0, atol=1e-6)
