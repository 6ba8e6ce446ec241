"""The style model's continuity costs (`motioncore.families.style.train_smooth`, `families.style.train_heldout.Smoothness`): the
differentiable turn equals `eval.controllers.rotation_steps` on a real clip's own rows, a flip costs and a
data-speed turn does not, mixed codes reach between and beyond the batch's codes, and the training loss
draws its randomness from the batch alone (so a resumed run repeats the uninterrupted one)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.families.style.train_heldout import StyleConfig
from motioncore.families.style.train_smooth import (
    TurnMeter,
    axes_matrices,
    batch_seed,
    mixed_codes,
    previous_rows,
)
from motioncore.features.normaliser import Normaliser


@pytest.fixture(scope="module")
def walk_rows():
    """A real Bandai walk (train split) and its PFNN rows."""
    from motioncore.data import load
    from motioncore.families.pfnn.features import GAITS, pfnn_dataset, pfnn_layout

    clip = next(c for c in load("bandai", "train", progress=False)
                if c.labels.get("style") == "happy" and c.labels.get("content") == "walk")
    rows = pfnn_dataset([clip])
    layout = pfnn_layout(clip.motion.skeleton, GAITS, clip.motion.fps)
    return clip, rows, layout


@needs_data
def test_the_turn_meter_is_rotation_steps_of_the_clip_on_its_own_rows(walk_rows):
    from motioncore.core.kinematics import rotation_steps

    clip, rows, layout = walk_rows
    Y = rows["Y"].astype(np.float64)
    norm = Normaliser(Y.mean(0), Y.std(0) + 0.1)  # any z-scoring: the meter undoes it
    meter = TurnMeter(layout, norm, clip.motion.skeleton.parents)
    y = torch.as_tensor(norm.transform(Y), dtype=torch.float32)
    frames = rows["frame"]
    assert (np.diff(frames) == 1).all()  # one clip: consecutive rows are consecutive frames
    got = np.degrees(meter.turns(y[:-1], y[1:]).double().numpy())  # (N - 1, J')
    truth = rotation_steps(clip.motion.rotations)[frames[1:] - 1][:, meter.child.numpy()]  # frame i-1 -> i
    assert truth.max() > 5.0  # a real walk: the limbs do turn
    # Bandai's static joint_Root stands for the root frame in the rows (families.pfnn.features), so the hips' turn
    # relative to it is the hips' turn in the root frame: within 0.2 degrees of the BVH's
    hips = list(meter.child.numpy()).index(1)
    assert clip.motion.skeleton.parents[1] == 0
    np.testing.assert_allclose(got[:, hips], truth[:, hips], atol=0.2)
    rest = np.delete(np.arange(got.shape[1]), hips)
    np.testing.assert_allclose(got[:, rest], truth[:, rest], atol=0.1)  # float32 axes; acos clamped at 0.08 deg


def test_axes_matrices_are_rotations_with_the_given_forward_axis():
    g = torch.Generator().manual_seed(0)
    axes = torch.randn(50, 6, generator=g)
    R = axes_matrices(axes)
    np.testing.assert_allclose((R.transpose(-1, -2) @ R).numpy(), np.broadcast_to(np.eye(3), (50, 3, 3)), atol=1e-5)
    np.testing.assert_allclose(torch.linalg.det(R).numpy(), 1.0, atol=1e-5)
    fwd = axes[:, :3] / axes[:, :3].norm(dim=1, keepdim=True)
    np.testing.assert_allclose(R[:, :, 2].numpy(), fwd.numpy(), atol=1e-6)


def _two_joint_meter():
    """A 2-joint chain whose output is just the joint axes (identity normaliser)."""
    from motioncore.features.layout import Block, Layout

    layout = Layout("pfnn", ("a", "b"), (), 30.0, (), (Block("joint_axes", 0, 12, "", "", ""),))
    return TurnMeter(layout, Normaliser(np.zeros(12), np.ones(12)), np.array([-1, 0]))


def _pose(angle_deg: float) -> torch.Tensor:
    """Outputs (1, 12): joint a at rest, joint b turned by ``angle_deg`` about y."""
    t = np.radians(angle_deg)
    fwd_b, up = [np.sin(t), 0.0, np.cos(t)], [0.0, 1.0, 0.0]
    return torch.tensor([[0.0, 0.0, 1.0, *up, *fwd_b, *up]], dtype=torch.float32)


def test_a_flip_costs_and_a_turn_within_the_limit_does_not():
    meter = _two_joint_meter()
    limit = torch.tensor([np.radians(20.0)])
    assert np.degrees(float(meter.turns(_pose(0), _pose(15)))) == pytest.approx(15.0, abs=1e-3)
    assert float(meter.excess(_pose(0), _pose(15), limit)) == 0.0
    flip = _pose(170).requires_grad_(True)
    cost = meter.excess(_pose(0), flip, limit)
    assert float(cost.detach()) == pytest.approx(np.radians(150.0) ** 2, rel=1e-3)
    cost.backward()
    assert flip.grad is not None and float(flip.grad.abs().sum()) > 0  # it pushes the flip back


def test_mixed_codes_span_between_and_beyond_the_batch_codes_without_gradient():
    z = torch.tensor([[0.0, 0.0], [1.0, 1.0]] * 200, requires_grad=True)
    out = mixed_codes(z, mix=0.5, noise=0.0, gen=torch.Generator().manual_seed(1))
    assert not out.requires_grad
    assert float(out.min()) < -0.2 and float(out.max()) > 1.2  # beyond the two codes on both sides
    assert float(out.min()) >= -0.5 - 1e-6 and float(out.max()) <= 1.5 + 1e-6
    again = mixed_codes(z, mix=0.5, noise=0.0, gen=torch.Generator().manual_seed(1))
    assert torch.equal(out, again)


def test_previous_rows_stay_inside_each_clip():
    starts = torch.tensor([0, 10, 25])
    row, clip = torch.tensor([0, 1, 10, 11, 24, 25, 30]), torch.tensor([0, 0, 1, 1, 1, 2, 2])
    keep, prev = previous_rows(row, starts, clip)
    assert keep.tolist() == [False, True, False, True, True, False, True]
    assert prev.tolist() == [0, 10, 23, 29]


def test_batch_seed_depends_on_the_rows_only():
    a, b = torch.tensor([5, 9, 200]), torch.tensor([5, 9, 201])
    assert batch_seed(a, 0) == batch_seed(a.clone(), 0) != batch_seed(b, 0)
    assert batch_seed(a, 0) != batch_seed(a, 1)


@pytest.mark.parametrize("field,value", [("turn_weight", -1.0), ("vel_weight", -0.1), ("turn_mix", -0.5),
                                         ("turn_margin", 0.0), ("turn_rows", 0)])
def test_bad_continuity_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        StyleConfig(**{field: value})


def test_dropped_adapters_add_nothing_and_never_move():
    from motioncore.families.pfnn.model import PFNNConfig
    from motioncore.families.style.model import LearnetPFNN
    from motioncore.families.style.model_layers import StyleEncoderConfig
    from motioncore.families.style.train_heldout import drop_adapters

    torch.manual_seed(0)
    m = LearnetPFNN(PFNNConfig(12, 9, hidden_dim=16, dropout=0.0, style_rank=3, style_dim=4), StyleEncoderConfig(12, 4, 8))
    for ad in m.pfnn.net.adapter_list():  # trained adapters: f no longer zero
        torch.nn.init.normal_(ad.f[-1].weight)
    x, ph, z = torch.randn(32, 12), torch.rand(32), torch.randn(32, 4)
    last = m.pfnn.net.adapter_list()[2]
    assert float(last(torch.randn(32, 16), z).detach().abs().max()) > 0
    drop_adapters(m, {0, 1})
    assert float(last(torch.randn(32, 16), z).detach().abs().max()) == 0.0
    frozen = {k: v.clone() for k, v in last.state_dict().items()}
    before0 = m.pfnn.net.adapter_list()[0].m1.clone()
    opt = torch.optim.AdamW([p for p in m.parameters()], lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        m(x, ph, z).pow(2).mean().backward()
        opt.step()
    assert all(torch.equal(frozen[k], v) for k, v in last.state_dict().items())
    assert not torch.equal(before0, m.pfnn.net.adapter_list()[0].m1)  # the kept adapters still learn
    with pytest.raises(Exception, match="adapter_layers"):
        drop_adapters(m, {5})
