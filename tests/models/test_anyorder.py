"""The any-order transformer: mask causal in the sampling order, no absolute frame position, KV-cache
parity, heads with exact likelihoods, temperature, projection to valid rotations."""
from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest
import torch

from motioncore.core.rotations import matrix_to_rot6d, quat_normalize, rot6d_to_matrix
from motioncore.errors import ShapeError
from motioncore.families.anyorder.model import AnyOrderConfig, AnyOrderTransformer, KVCache
from motioncore.families.anyorder.model_elements import (
    elements_to_motion,
    group_channels,
    motion_config,
    motion_to_elements,
    ungroup_channels,
)
from motioncore.families.anyorder.model_heads import entropy, mog_entropy, mog_nll, nll, sample_values
from motioncore.families.anyorder.model_sampling import teacher_forced

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0)


pytestmark = pytest.mark.usefixtures("one_thread")


def _cat(**kw) -> AnyOrderTransformer:
    torch.manual_seed(0)
    return AnyOrderTransformer(AnyOrderConfig(num_channels=3, head="categorical", num_classes=5, **{**TINY, **kw})).eval()


def _mog(**kw) -> AnyOrderTransformer:
    torch.manual_seed(0)
    return AnyOrderTransformer(motion_config(2, num_mixtures=3, **{**TINY, **kw})).eval()


def _values(model: AnyOrderTransformer, B: int, T: int, gen: torch.Generator) -> torch.Tensor:
    cfg = model.cfg
    if cfg.head == "categorical":
        return torch.randint(0, cfg.num_classes, (B, T, cfg.grid_channels), generator=gen)
    return torch.randn(B, T, cfg.grid_channels, cfg.element_dim, generator=gen, dtype=next(model.parameters()).dtype)


def _tokens(model, values, order):
    """own/target/value inputs of a teacher-forced order (start token first), as sampling builds them."""
    from motioncore.families.anyorder.model_sampling import _tokens as build

    B, T, C = values.shape[:3]
    src = torch.cat([order.new_full((B, 1), -1), order[:, :-1]], 1)
    return build(values.flatten(1, 2), src, order, C)


@pytest.mark.parametrize("bad", [
    dict(head="gauss"), dict(d_model=30, n_heads=4), dict(d_model=12, n_heads=4), dict(dropout=1.0),
    dict(head="categorical", num_classes=1), dict(num_channels=2, channel_kinds=("rot6d",)),
    dict(num_channels=1, channel_kinds=("quat",)), dict(head="categorical", num_classes=3, group_frames=True),
    dict(n_layers=0), dict(num_mixtures=0),
])
def test_config_rejects_bad_fields(bad):
    with pytest.raises(ValueError):
        AnyOrderConfig(**bad)


def test_config_round_trips_through_json():
    cfg = motion_config(4, group_frames=True, **TINY)
    again = AnyOrderConfig(**json.loads(json.dumps(asdict(cfg))))
    assert again == cfg and again.channel_kinds == ("rot6d",) * 4 + ("vec3",)
    assert cfg.element_dim == 4 * 6 + 3 and cfg.grid_channels == 1


@pytest.mark.parametrize("make", [_cat, _mog])
def test_mask_is_causal_in_sampling_order_not_time(make):
    model = make().double()
    gen = torch.Generator().manual_seed(1)
    T, C = 5, model.cfg.grid_channels
    values = _values(model, 1, T, gen)
    order = torch.randperm(T * C, generator=gen)[None]  # (1, N)
    base = teacher_forced(model, values, order)
    j = 6  # token j predicts order[j]; element order[j] is first seen by token j + 1
    t, c = divmod(int(order[0, j]), C)
    changed = values.clone()
    changed[0, t, c] = (changed[0, t, c] + 1) % model.cfg.num_classes if model.cfg.head == "categorical" else 3.0
    out = teacher_forced(model, changed, order)
    assert torch.equal(out[:, :j + 1], base[:, :j + 1])  # earlier in the order: untouched, whatever their frame
    assert (out[:, j + 1:] - base[:, j + 1:]).abs().amax(-1).min() > 1e-9  # every later prediction moves


@pytest.mark.parametrize("make", [_cat, _mog])
def test_shifting_every_frame_changes_nothing(make):
    model = make(max_frames=16).double()  # shifted frames leave the rotary table: computed on the fly
    gen = torch.Generator().manual_seed(2)
    values = _values(model, 2, 6, gen)
    order = torch.stack([torch.randperm(6 * model.cfg.grid_channels, generator=gen) for _ in range(2)])
    v, own, tgt = _tokens(model, values, order)
    base = model(v, own, tgt)
    shift = torch.tensor([37, 0])
    for s in (shift, 4 * shift):
        out = model(v, torch.where(own[..., 1:] >= 0, own + s, own), tgt + s)
        torch.testing.assert_close(out, base, rtol=0, atol=1e-9)
    moved = model(v, own, tgt + torch.tensor([1, 0]))  # moving only the targets is a real change
    assert (moved - base).abs().max() > 1e-6


def test_runs_on_clip_lengths_never_seen_and_past_max_frames():
    model = _mog(max_frames=8)
    gen = torch.Generator().manual_seed(3)
    for T in (1, 3, 40):
        values = _values(model, 2, T, gen)
        order = torch.randperm(T * 3, generator=gen)
        out = teacher_forced(model, values, order)
        assert out.shape == (2, T * 3, model.cfg.head_width) and torch.isfinite(out).all()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("make", [_cat, _mog])
def test_kv_cache_matches_full_recomputation(make, dtype, tol):
    model = make().to(dtype)
    gen = torch.Generator().manual_seed(4)
    T, C = 6, model.cfg.grid_channels
    values = _values(model, 2, T, gen)
    order = torch.stack([torch.randperm(T * C, generator=gen) for _ in range(2)])
    v, own, tgt = _tokens(model, values, order)
    full = model(v, own, tgt)
    cache, parts, start = KVCache(), [], 0
    for n in (1, 4, 2, T * C - 7):  # appends of uneven sizes
        sl = slice(start, start + n)
        parts.append(model(v[:, sl], own[:, sl], tgt[:, sl], cache=cache))
        start += n
    assert len(cache) == T * C
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=0, atol=tol)
    # scoring many candidate targets of the last token side by side == recomputing each sequence in full
    cache = KVCache()
    model(v[:, :9], own[:, :9], tgt[:, :9], cache=cache)
    cands = tgt[:, 9:14]  # (B, 5, 2)
    side = model(v[:, 9:10].expand_as(v[:, 9:14]), own[:, 9:10].expand(-1, 5, -1), cands, cache=cache, independent=True)
    assert len(cache) == 9
    for m in range(5):
        t2 = torch.cat([tgt[:, :9], cands[:, m:m + 1]], 1)
        ref = model(v[:, :10], own[:, :10], t2)[:, -1]
        torch.testing.assert_close(side[:, m], ref, rtol=0, atol=tol)


def test_categorical_nll_and_entropy_are_exact():
    cfg = AnyOrderConfig(num_channels=1, head="categorical", num_classes=4)
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], dtype=torch.float64)
    logits = p.log() + 3.0  # any offset
    x = torch.tensor([3, 1])
    ch = torch.zeros(2, dtype=torch.long)
    torch.testing.assert_close(nll(cfg, logits, x, ch), -p[[0, 1], [3, 1]].log(), rtol=0, atol=1e-12)
    torch.testing.assert_close(entropy(cfg, logits, ch), -(p * p.log()).sum(-1), rtol=0, atol=1e-12)


def test_single_component_mixture_is_the_gaussian_nll_over_used_dims():
    cfg = motion_config(1, num_mixtures=1)  # channel 0 rot6d (6 dims), channel 1 vec3 (3 dims)
    gen = torch.Generator().manual_seed(5)
    mean, std = torch.randn(2, 6, generator=gen, dtype=torch.float64), torch.rand(2, 6, generator=gen, dtype=torch.float64) + 0.1
    x = torch.randn(2, 6, generator=gen, dtype=torch.float64)
    ch = torch.tensor([0, 1])
    logp = torch.distributions.Normal(mean, std).log_prob(x)
    want = -torch.stack([logp[0].sum(), logp[1, :3].sum()])
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    got = mog_nll(torch.zeros(2, 1, dtype=torch.float64), mean[:, None], std[:, None], x, mask)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    h = torch.distributions.Normal(mean, std).entropy()
    torch.testing.assert_close(mog_entropy(torch.zeros(2, 1, dtype=torch.float64), std[:, None], mask),
                               torch.stack([h[0].sum(), h[1, :3].sum()]), rtol=0, atol=1e-12)
    # the head's raw output goes through the same formula: a model-shaped params vector
    raw = torch.cat([torch.zeros(2, 1), mean, torch.log(torch.expm1(std - 1e-4))], -1)  # softplus^-1
    torch.testing.assert_close(nll(cfg, raw, x, ch), want, rtol=0, atol=1e-9)


def test_mixture_entropy_is_an_upper_bound():
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(3, generator=gen, dtype=torch.float64)
    mean = torch.randn(3, 2, generator=gen, dtype=torch.float64) * 0.5
    std = torch.rand(3, 2, generator=gen, dtype=torch.float64) + 0.3
    mix = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(logits=logits),
                                                torch.distributions.Independent(torch.distributions.Normal(mean, std), 1))
    torch.manual_seed(0)
    mc = -mix.log_prob(mix.sample((200_000,))).mean()  # Monte Carlo entropy, std error ~ 3e-3
    bound = mog_entropy(logits, std, torch.ones(2, dtype=torch.bool))
    assert mc < bound + 0.01
    assert bound - mc < math.log(3)  # never looser than H(pi) <= log K


def test_temperature_zero_gives_the_mode():
    cat = AnyOrderConfig(num_channels=1, head="categorical", num_classes=4)
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9]])
    ch = torch.zeros(1, dtype=torch.long)
    for u in (0.0, 0.5, 0.999):
        assert sample_values(cat, logits, ch, 0.0, torch.tensor([u])).item() == 1
    cold = [sample_values(cat, logits, ch, 1e-3, torch.tensor([u])).item() for u in (0.01, 0.5, 0.99)]
    assert cold == [1, 1, 1]
    cfg = motion_config(1, num_mixtures=2)
    mean = torch.tensor([[[1.0, 0, 0, 0, 1, 0], [0, 2.0, 0, 0, 0, 1]]])  # (1, K, 6)
    raw = torch.cat([torch.tensor([[-1.0, 3.0]]), torch.cat([mean, torch.zeros(1, 2, 6)], -1).flatten(1)], -1)
    x = sample_values(cfg, raw, ch, 0.0, torch.tensor([0.0]), torch.randn(1, 6))
    torch.testing.assert_close(x, torch.tensor([[0.0, 1, 0, 0, 0, 1]]))  # component 1's mean, Gram-Schmidt


def test_sampled_values_are_valid_rotations_and_padding_is_zero():
    cfg = motion_config(1, num_mixtures=2)
    gen = torch.Generator().manual_seed(7)
    raw = torch.randn(50, cfg.head_width, generator=gen)
    ch = torch.arange(50) % 2
    x = sample_values(cfg, raw, ch, 1.0, torch.rand(50, generator=gen), torch.randn(50, 6, generator=gen))
    rot = x[ch == 0]
    torch.testing.assert_close(matrix_to_rot6d(rot6d_to_matrix(rot)), rot, rtol=0, atol=1e-5)
    assert (x[ch == 1, 3:] == 0).all() and (x[ch == 1, :3] != 0).all()


def test_gradients_are_finite():
    for model in (_cat(dropout=0.1), _mog(dropout=0.1)):
        model.train()
        gen = torch.Generator().manual_seed(8)
        values = _values(model, 3, 4, gen)
        order = torch.randperm(4 * model.cfg.grid_channels, generator=gen)
        params = teacher_forced(model, values, order)
        C = model.cfg.grid_channels
        target = values.flatten(1, 2)[:, order]
        nll(model.cfg, params, target, (order % C).expand(3, -1)).mean().backward()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
        assert sum(float(g.abs().sum()) for g in grads) > 0


def test_grouped_frames_layout_and_model():
    cfg = motion_config(2, group_frames=True, num_mixtures=2, **TINY)
    x = torch.randn(3, 5, 3, 6)
    x[..., 2, 3:] = 0  # the root's padding
    g = group_channels(cfg, x)
    assert g.shape == (3, 5, 1, 15)
    torch.testing.assert_close(ungroup_channels(cfg, g), x)
    model = AnyOrderTransformer(cfg).eval()
    out = teacher_forced(model, g, torch.randperm(5))
    assert out.shape == (3, 5, cfg.head_width)
    s = sample_values(cfg, out, torch.zeros(3, 5, dtype=torch.long), 1.0, torch.rand(3, 5), torch.randn(3, 5, 15))
    for off in (0, 6):  # both joints' slices are valid rotations
        torch.testing.assert_close(matrix_to_rot6d(rot6d_to_matrix(s[..., off:off + 6])), s[..., off:off + 6],
                                   rtol=0, atol=1e-5)


def test_motion_elements_round_trip():
    gen = torch.Generator().manual_seed(9)
    q = quat_normalize(torch.randn(2, 4, 3, 4, generator=gen, dtype=torch.float64))
    root = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64)
    x = motion_to_elements(q, root)
    assert x.shape == (2, 4, 4, 6)
    q2, root2 = elements_to_motion(x)
    torch.testing.assert_close(q2 * torch.sign((q2 * q).sum(-1, keepdim=True)), q, rtol=0, atol=1e-10)
    torch.testing.assert_close(root2, root)


def test_bad_inputs_name_the_field():
    model = _cat()
    own = torch.zeros(1, 2, 2, dtype=torch.long)
    with pytest.raises(ShapeError, match="values"):
        model(torch.zeros(1, 3, dtype=torch.long), own, own)
    with pytest.raises(ShapeError, match="channels"):
        model(torch.zeros(1, 2, dtype=torch.long), own, own + torch.tensor([0, 3]))
    with pytest.raises(ShapeError, match="class"):
        model(torch.full((1, 2), 5), own, own)
