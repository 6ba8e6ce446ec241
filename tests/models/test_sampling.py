"""Sampling orders, parallel decoding, seeding, teacher-forced likelihoods and the training loss."""
from __future__ import annotations

import itertools

import pytest
import torch

from motioncore.core.rotations import matrix_to_rot6d, rot6d_to_matrix
from motioncore.errors import ShapeError
from motioncore.families.anyorder.loss import conditioned_order, make_loss_fn, motion_conditions, subset_conditions
from motioncore.families.anyorder.model import AnyOrderConfig, AnyOrderTransformer
from motioncore.families.anyorder.model_elements import motion_config
from motioncore.families.anyorder.model_heads import entropy
from motioncore.families.anyorder.model_sampling import (
    ORDERS,
    bisection_frames,
    log_likelihood,
    sample,
    static_order,
    teacher_forced,
)
from motioncore.train.loop import TrainConfig, fit

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0)


pytestmark = pytest.mark.usefixtures("one_thread")


def _cat(C: int = 3, K: int = 5) -> AnyOrderTransformer:
    torch.manual_seed(0)
    return AnyOrderTransformer(AnyOrderConfig(num_channels=C, head="categorical", num_classes=K, **TINY)).eval()


def _grid(T: int = 6, C: int = 3, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(0, 5, (T, C), generator=gen)
    known = torch.rand(T, C, generator=gen) < 0.3
    return values, known


@pytest.mark.parametrize("order,k", list(itertools.product(ORDERS, (1, 2, 5))))
def test_every_element_filled_once_and_conditions_kept(order, k):
    model = _cat()
    values, known = _grid()
    fill = ~known
    fill[2, 1] = False  # neither known nor to fill: must stay as given
    fill[0, :] = False
    out, done = sample(model, values, known, fill, order=order, n_samples=3, seed=4, k=k, return_order=True)
    assert out.shape == (3, 6, 3) and out.dtype == torch.long
    want = fill.flatten().nonzero().squeeze(1)
    for row in done:
        assert torch.equal(row.sort().values, want)  # a permutation of the fill set: each exactly once
    untouched = ~fill
    assert torch.equal(out[:, untouched], values[untouched].expand(3, -1))  # conditions never overwritten


def test_continuous_samples_keep_conditions_and_are_rotations():
    torch.manual_seed(0)
    model = AnyOrderTransformer(motion_config(2, num_mixtures=2, **TINY)).eval()  # channels: 2 joints + root
    T = 7
    known = torch.zeros(T, 3, dtype=torch.bool)
    known[[0, 6]] = True  # two keyframes
    known[3, 0] = True  # one joint at one frame
    values = torch.randn(T, 3, 6)
    for order, k in (("entropy", 2), ("bisection", 1)):
        out = sample(model, values, known, order=order, n_samples=2, seed=1, k=k, temperature=0.7)
        assert out.shape == (2, T, 3, 6)
        assert torch.equal(out[:, known], values[known].expand(2, -1, -1))
        rot = out[:, ~known][..., :6][(~known).nonzero()[:, 1].expand(2, -1) < 2]
        torch.testing.assert_close(matrix_to_rot6d(rot6d_to_matrix(rot)), rot, rtol=0, atol=1e-5)
        root = out[:, ~known & (torch.arange(3) == 2)]
        assert (root[..., 3:] == 0).all()


@pytest.mark.parametrize("order", ["random", "entropy", "bisection"])
def test_seeded_and_independent_of_batching(order):
    model = _cat()
    values, known = _grid(seed=1)
    a = sample(model, values, known, order=order, n_samples=4, seed=10)
    assert torch.equal(a, sample(model, values, known, order=order, n_samples=4, seed=10))
    for i in range(4):
        assert torch.equal(a[i], sample(model, values, known, order=order, n_samples=1, seed=10 + i)[0])
    b = sample(model, values, known, order=order, n_samples=4, seed=11)
    assert torch.equal(a[1:], b[:3]) and not torch.equal(a[0], b[0])  # sample i is seed + i, nothing else


def test_temperature_zero_is_greedy_and_seed_free():
    model = _cat()
    values, known = _grid(seed=2)
    a = sample(model, values, known, order="sequential", temperature=0.0, n_samples=2, seed=0)
    b = sample(model, values, known, order="sequential", temperature=0.0, n_samples=1, seed=99)
    assert torch.equal(a[0], a[1]) and torch.equal(a[0], b[0])
    first = (~known).flatten().nonzero()[0]  # sequential: the first unknown element, given the conditions
    cond = known.flatten().nonzero().squeeze(1)
    params = teacher_forced(model, b, torch.cat([cond, first]))
    assert b.flatten(1)[0, first] == params[0, -1].argmax()


def test_static_orders():
    fill = torch.ones(4, 2, dtype=torch.bool)
    fill[1, 0] = False
    assert static_order("sequential", fill).tolist() == [0, 1, 3, 4, 5, 6, 7]
    assert static_order("bisection", fill).tolist() == [3, 0, 1, 4, 5, 6, 7]  # one gap (-1, 4): frame 1, then 0, 2, 3
    r = static_order("random", fill, torch.Generator().manual_seed(0))
    assert sorted(r.tolist()) == [0, 1, 3, 4, 5, 6, 7]
    with pytest.raises(ValueError):
        static_order("entropy", fill)


def test_bisection_frames_middle_of_each_gap_first():
    assert bisection_frames(range(8), 8) == [3, 1, 5, 0, 2, 4, 6, 7]
    # keys at 0, 4 and 10: gaps (1..3) and (5..9) are split level by level
    assert bisection_frames([1, 2, 3, 5, 6, 7, 8, 9], 11) == [2, 7, 1, 3, 5, 8, 6, 9]
    assert bisection_frames([], 5) == []


def test_entropy_order_commits_the_lowest_entropy_elements():
    model = _cat()
    values, _ = _grid(seed=3)
    known = torch.zeros(6, 3, dtype=torch.bool)
    known[0] = True
    cond = torch.tensor([0, 1, 2])
    cands = torch.arange(3, 18)
    ent = torch.stack([entropy(model.cfg, teacher_forced(model, values[None], torch.cat([cond, c[None]]))[0, -1],
                               c % 3) for c in cands])
    _, done = sample(model, values, known, order="entropy", k=4, seed=0, return_order=True)
    assert set(done[0, :4].tolist()) == set(cands[ent.argsort()[:4]].tolist())


def test_likelihood_is_normalised_for_every_order():
    """Summed over every possible grid, p(grid) is 1 for a fixed order, the dynamic entropy order (it
    depends on the values revealed so far only) and parallel decoding."""
    model = _cat(C=2, K=3)
    grids = torch.tensor(list(itertools.product(range(3), repeat=4))).view(81, 2, 2)  # every 2x2 grid
    with torch.no_grad():
        tensor_order = torch.tensor([2, 0, 3, 1])
        totals = [log_likelihood(model, grids, tensor_order).sum(1).exp().sum()]
        for order, k in (("sequential", 1), ("entropy", 1), ("entropy", 2), ("sequential", 3), ("bisection", 1)):
            totals.append(log_likelihood(model, grids, order, k=k).sum(1).exp().sum())
    torch.testing.assert_close(torch.stack(totals), torch.ones(len(totals)), rtol=0, atol=1e-5)


@pytest.mark.parametrize("order", ["sequential", "random", "bisection"])
def test_cached_loop_matches_one_teacher_forced_pass(order):
    torch.manual_seed(0)
    model = AnyOrderTransformer(motion_config(2, num_mixtures=2, **TINY)).double().eval()
    gen = torch.Generator().manual_seed(5)
    values = torch.randn(3, 5, 3, 6, generator=gen, dtype=torch.float64)
    known = torch.zeros(5, 3, dtype=torch.bool)
    known[1, 1] = known[4] = True
    cond = known.flatten().nonzero().squeeze(1)
    looped = log_likelihood(model, values, order, known_mask=known, seed=7)
    for i in range(3):
        fill = static_order(order, ~known, torch.Generator().manual_seed(7 + i))
        one = log_likelihood(model, values[i:i + 1], torch.cat([cond, fill]))[0, len(cond):]
        torch.testing.assert_close(looped[i], one, rtol=0, atol=1e-10)


def test_conditioning_helpers():
    gen = torch.Generator().manual_seed(0)
    cond = subset_conditions(50, 64, gen, max_frac=0.25)
    assert (cond.sum(1) <= 16).all() and cond.sum(1).max() > 8
    order, n = conditioned_order(cond, gen)
    for b in range(50):
        assert cond[b, order[b, :n[b]]].all() and not cond[b, order[b, n[b]:]].any()
        assert sorted(order[b].tolist()) == list(range(64))
    m = motion_conditions(20, 120, 4, gen).view(20, 120, 4)
    for b in range(20):
        full = m[b].all(1).nonzero().squeeze(1).tolist()
        ctx = next(i for i, f in enumerate(full) if f != i)
        assert 1 <= ctx <= 10
        gaps = [b2 - a - 1 for a, b2 in zip(full[ctx - 1:], full[ctx:], strict=False)]
        partial = m[b].any(1) & ~m[b].all(1)
        assert all(5 <= g <= 45 for g in gaps) or partial.any()  # a partial frame may split a gap's count
        assert not m[b].all()


def test_sample_rejects_bad_arguments():
    model = _cat()
    values, known = _grid()
    with pytest.raises(ShapeError):
        sample(model, values, known, positions_to_fill=known | ~known)
    with pytest.raises(ShapeError):
        sample(model, values[:, :2], known[:, :2])
    with pytest.raises(ValueError):
        sample(model, values, known, order="raster")
    with pytest.raises(ValueError):
        sample(model, values, known, temperature=-1.0)
    with pytest.raises(ValueError):
        sample(model, values, known, k=0)


def test_training_on_a_toy_distribution_lowers_the_loss(tmp_path):
    """Every grid is one repeated class: after the first element, the rest is certain."""
    data = torch.randint(0, 4, (256, 1, 1), generator=torch.Generator().manual_seed(0)).expand(256, 3, 2).clone()
    torch.manual_seed(0)
    model = AnyOrderTransformer(AnyOrderConfig(num_channels=2, head="categorical", num_classes=4, **TINY))
    loss_fn = make_loss_fn("subset", seed=0, max_cond_frac=0.5)
    model.eval()
    with torch.no_grad():
        before = float(loss_fn(model, {"values": data}))
    hist = fit(model, loss_fn, {"values": data[:192]}, {"values": data[192:]},
               TrainConfig(epochs=6, batch_size=32, lr=3e-3, restart_epochs=6, threads=1), tmp_path, progress=False)
    with torch.no_grad():
        after = float(loss_fn(model, {"values": data}))
    assert before > 1.2 and after < 0.5 * before, (before, after)
    assert hist[-1]["val_loss"] < hist[0]["val_loss"]
    out = sample(model, data[0], torch.zeros(3, 2, dtype=torch.bool), order="random", n_samples=8, temperature=0.0)
    assert (out == out[:, :1, :1]).all()  # greedy samples are constant grids
    # trained on 3 frames only: the rule carries over to 9 frames (no absolute position to overfit)
    long = torch.randint(0, 4, (64, 1, 1), generator=torch.Generator().manual_seed(1)).expand(64, 9, 2).clone()
    with torch.no_grad():
        after_long = float(loss_fn(model, {"values": long}))
    assert after_long < 0.5 * before, (before, after_long)
    known = torch.zeros(9, 2, dtype=torch.bool)
    known[4, 1] = True
    out = sample(model, long[0], known, order="bisection", n_samples=4, temperature=0.0)
    assert (out == long[0, 0, 0]).all()
