"""The key-frame representation (``cfg.relative``) and the keys' envelope (``cfg.key_envelope``) of the
any-order motion model, and the mirrored training windows: each against a slow, obvious reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from motioncore.core.rotations import quat_conj, quat_mul, quat_normalize, quat_to_rot6d
from motioncore.families.anyorder.loss import make_loss_fn
from motioncore.families.anyorder.model import AnyOrderTransformer
from motioncore.families.anyorder.model_elements import (
    from_key_frame,
    group_channels,
    motion_config,
    motion_to_elements,
    reference_frames,
    to_key_frame,
)
from motioncore.families.anyorder.model_heads import split_mog
from motioncore.families.anyorder.model_prior import key_envelope, key_prior
from motioncore.families.anyorder.model_sampling import key_frame_in, sample

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0, num_mixtures=3)


def _motion(B: int, T: int, J: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = quat_normalize(torch.randn(B, T, J, 4, generator=g, dtype=torch.float64))
    return q, torch.randn(B, T, 3, generator=g, dtype=torch.float64)


def test_reference_frame_is_the_last_of_the_first_keyed_run():
    known = torch.zeros(3, 8, 2, dtype=torch.bool)
    known[0, :4] = True  # frames 0-3 keyed: reference 3
    known[1, 2:5] = True  # first keyed run 2-4: reference 4
    known[1, 6] = True
    known[2, 1, 0] = True  # no fully keyed frame: -1 (the model sees absolute values)
    assert reference_frames(known).tolist() == [3, 4, -1]


@pytest.mark.parametrize("grouped", [False, True])
def test_key_frame_matches_quaternion_reference_and_round_trips(grouped):
    cfg = motion_config(3, group_frames=grouped, prior=True, relative=True, **TINY)
    q, r = _motion(2, 6, 3)
    x = motion_to_elements(q, r)
    grid = group_channels(cfg, x) if grouped else x
    ref = torch.tensor([2, -1])
    rel = to_key_frame(cfg, grid, ref)
    # slow reference: per joint q_ref^-1 q_t as 6D, root r_t - r_ref; row 1 unchanged
    want_q = quat_to_rot6d(quat_mul(quat_conj(q[0, 2:3]).expand_as(q[0]), q[0]))
    want = torch.cat([want_q, torch.nn.functional.pad(r[0] - r[0, 2], (0, 3)).unsqueeze(-2)], -2)
    if grouped:
        want = group_channels(cfg, want[None])[0]
    assert torch.allclose(rel[0], want, atol=1e-12)
    assert torch.equal(rel[1], grid[1])
    back = from_key_frame(cfg, rel, grid.gather(1, ref.clamp(min=0).view(-1, 1, 1, 1).expand(-1, 1, *grid.shape[2:])),
                          ref)
    assert torch.allclose(back, grid, atol=1e-12)


def test_relative_sampling_returns_the_keys_and_is_not_the_absolute_model():
    torch.manual_seed(0)
    cfg = motion_config(2, group_frames=True, prior=True, relative=True, **TINY)
    model = AnyOrderTransformer(cfg).double().eval()
    with torch.no_grad():  # a non-zero residual head, so the two readings of the grid differ
        model.head.bias.normal_(0.0, 0.5)
    q, r = _motion(1, 10, 2, seed=1)
    grid = group_channels(cfg, motion_to_elements(q, r))[0]
    known = torch.zeros(10, 1, dtype=torch.bool)
    known[:3] = known[9] = True
    out = sample(model, grid, known, order="bisection", temperature=0.0)[0]
    assert torch.allclose(out[known], grid[known], atol=1e-12)
    absolute = AnyOrderTransformer(motion_config(2, group_frames=True, prior=True, **TINY)).double().eval()
    absolute.load_state_dict(model.state_dict())
    other = sample(absolute, grid, known, order="bisection", temperature=0.0)[0]
    assert (out[~known[:, 0]] - other[~known[:, 0]]).abs().max() > 1e-3


def test_relative_loss_sees_the_key_frame_view():
    """The training loss of a relative model equals the absolute model's loss on the key-frame view
    of the same windows (the conditions are drawn from the same seed)."""
    torch.manual_seed(0)
    rel = AnyOrderTransformer(motion_config(2, group_frames=True, prior=True, relative=True, **TINY)).double().eval()
    ab = AnyOrderTransformer(motion_config(2, group_frames=True, prior=True, **TINY)).double().eval()
    ab.load_state_dict(rel.state_dict())
    q, r = _motion(4, 20, 2, seed=2)
    grid = group_channels(rel.cfg, motion_to_elements(q, r))
    from motioncore.families.anyorder.loss import motion_conditions

    cond = motion_conditions(4, 20, 1, torch.Generator().manual_seed(1)).view(4, 20, 1)
    view, _ = key_frame_in(rel, grid, cond)
    assert torch.allclose(make_loss_fn("motion", seed=0)(rel, {"values": grid}),
                          make_loss_fn("motion", seed=0)(ab, {"values": view}), atol=1e-9)


def test_key_envelope_values():
    flags = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.5, 1.0], [1.0, 0.25, 1.0], [0.0, 0.0, 0.0]])
    assert torch.allclose(key_envelope(flags), torch.tensor([1.0, 1.0, math.sin(math.pi / 4), 1.0]))


def test_envelope_scales_the_residual_against_a_plain_prior_model():
    """Same weights with and without the envelope: means differ from the prior by exactly sin(pi w)."""
    torch.manual_seed(0)
    env = AnyOrderTransformer(motion_config(1, prior=True, key_envelope=True, **TINY)).double().eval()
    with torch.no_grad():
        env.head.bias.normal_(0.0, 0.5)
    plain = AnyOrderTransformer(motion_config(1, prior=True, **TINY)).double().eval()
    plain.load_state_dict(env.state_dict())
    T, C = 7, 2
    vals = torch.randn(1, T, C, 6, dtype=torch.float64)
    vals[..., -1, 3:] = 0.0
    known = torch.zeros(1, T, C, dtype=torch.bool)
    known[0, [0, 6]] = True
    prior = key_prior(vals, known).flatten(1, 2)  # (1, N, E + 3)
    N = T * C
    target = torch.stack([torch.arange(N) // C, torch.arange(N) % C], -1)[None]
    own = target.clone()
    own[0, 0, 1] = -1  # a start token, then every element feeds the next
    args = (vals.flatten(1, 2), own, target)
    K = env.cfg.num_mixtures
    _, m_env, _ = split_mog(env(*args, prior=prior), K)
    _, m_plain, _ = split_mog(plain(*args, prior=prior), K)
    base = (prior[..., :6] * prior[..., 6:7]).unsqueeze(-2)
    scale = key_envelope(prior[..., 6:])[..., None, None]
    assert torch.allclose(m_env - base, scale * (m_plain - base), atol=1e-10)
    assert scale[0, C:2 * C].max() < 1.0  # frame 1 of a 6-frame gap: sin(pi / 6)


def test_config_rejects_relative_without_motion_layout():
    with pytest.raises(ValueError, match="relative"):
        from motioncore.families.anyorder.model import AnyOrderConfig

        AnyOrderConfig(num_channels=4, relative=True)
    with pytest.raises(ValueError, match="key_envelope"):
        motion_config(2, key_envelope=True)


@pytest.mark.data
def test_mirrored_windows_double_the_training_set():
    from motioncore.families.anyorder.train import AnyOrderRecipe, build_windows

    plain = build_windows(AnyOrderRecipe(max_clips=3, window=30, offset=15), progress=False)
    mirrored = build_windows(AnyOrderRecipe(max_clips=3, window=30, offset=15, mirror=True), progress=False)
    assert len(mirrored[1]) == 2 * len(plain[1]) and np.array_equal(mirrored[2], plain[2])
    w, tr = mirrored[0], mirrored[1]
    n = len(plain[1])
    # the added windows are the mirror images, not copies
    assert not np.allclose(w.rotations[tr[n:]], w.rotations[tr[:n]], atol=1e-3)
