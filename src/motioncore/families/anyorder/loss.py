"""The any-order transformer's training loss (``make_loss_fn`` for ``train.loop.fit``): each row in its own random
order with a random conditioning set first (``conditioned_order``: a random subset, ``subset_conditions``, or the
keys of motion-like gaps, ``motion_conditions``), scored by ``model_sampling.log_likelihood``.

Legend: B batch, T frames, C grid channels, N = T * C elements.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from motioncore.families.anyorder.model_sampling import grid_prior, key_frame_in, log_likelihood

__all__ = ["conditioned_order", "subset_conditions", "motion_conditions", "make_loss_fn"]


def conditioned_order(cond: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """A random permutation per row with the conditioning elements first (themselves in random order).
    cond (B, N) bool -> order (B, N) flat indices, n_cond (B,)."""
    key = torch.rand(cond.shape, generator=generator) + (~cond).to(torch.float32) * 2.0  # conditions sort first
    return key.argsort(1), cond.sum(1)


def subset_conditions(B: int, N: int, generator: torch.Generator, max_frac: float = 0.5) -> Tensor:
    """(B, N) bool: a uniformly random subset per row, of a size uniform in [0, floor(max_frac * N)]."""
    n = torch.randint(0, int(max_frac * N) + 1, (B,), generator=generator)
    rank = torch.rand(B, N, generator=generator).argsort(1).argsort(1)  # a random rank for every element
    return rank < n[:, None]


def motion_conditions(B: int, T: int, C: int, generator: torch.Generator, gap: tuple[int, int] = (5, 45),
                      max_context: int = 10, partial_frames: int = 4, joint_frac: float = 0.3,
                      track: Sequence[int] = (), track_every: tuple[int, int] = (1, 10)) -> Tensor:
    """(B, T * C) bool animator-like constraints per row: the first 1..max_context frames, then keyframes
    separated by gaps of gap[0]..gap[1] frames (every channel known), plus 0..partial_frames random
    frames where a random subset of channels (about ``joint_frac``) is known. With ``track`` channels
    (e.g. a hand's wrist and root), half the rows also know those channels every track_every[0]..[1]
    frames (the wrist keyed, the fingers to fill). At least one element stays unknown."""
    def r(lo: int, hi: int) -> int:  # uniform integer in [lo, hi]
        return int(torch.randint(lo, hi + 1, (), generator=generator))

    out = torch.zeros(B, T, C, dtype=torch.bool)
    for b in range(B):
        t = r(1, max_context)
        out[b, :t] = True
        t += r(*gap)
        while t < T:
            out[b, t] = True
            t += r(*gap) + 1
        for _ in range(r(0, partial_frames)):
            out[b, r(0, T - 1)] |= torch.rand(C, generator=generator) < joint_frac
        if track and r(0, 1):
            out[b, r(0, track_every[1] - 1)::r(*track_every), list(track)] = True
        if out[b].all():
            out[b, T - 1, r(0, C - 1)] = False
    return out.flatten(1)


def make_loss_fn(condition: str = "subset", seed: int = 0, max_cond_frac: float = 0.5,
                 gap: tuple[int, int] = (5, 45), track: Sequence[int] = (), cond_drop: float = 0.3
                 ) -> Callable[[torch.nn.Module, dict[str, Tensor]], Tensor]:
    """A ``loss_fn(model, batch)`` for ``train.loop.fit``: mean NLL (nats) over the predicted
    (non-condition) elements of ``batch["values"]`` (B, T, C[, E]), each row in its own random order
    with a random conditioning set first. condition: "subset" (a random subset of elements, up to
    ``max_cond_frac``), "motion" (``motion_conditions``) or "none". Training draws from a generator seeded
    ``seed``; evaluation (model.eval()) reuses ``seed + 1`` every call so validation losses are comparable.
    A ``batch["cond"]`` (B, T, D) is passed as the per-frame conditions (``cfg.cond_dim`` models), zeroed
    (absent) in a random ``cond_drop`` of the rows, so one model serves requests with and without them."""
    if condition not in ("subset", "motion", "none"):
        raise ValueError(f"condition: must be subset, motion or none, got {condition!r}")
    gen = torch.Generator().manual_seed(seed)

    def loss_fn(model: torch.nn.Module, batch: dict[str, Tensor]) -> Tensor:
        values = batch["values"]
        B, T, C = values.shape[:3]
        g = gen if model.training else torch.Generator().manual_seed(seed + 1)
        if condition == "motion":
            cond = motion_conditions(B, T, C, g, gap, track=track)
        elif condition == "subset":
            cond = subset_conditions(B, T * C, g, max_cond_frac)
        else:
            cond = torch.zeros(B, T * C, dtype=torch.bool)
        order, n_cond = conditioned_order(cond, g)
        order, n_cond = order.to(values.device), n_cond.to(values.device)
        values, _ = key_frame_in(model, values, cond.view(B, T, C).to(values.device))
        prior = grid_prior(model, values, cond.view(B, T, C).to(values.device))
        fc = batch.get("cond")
        if fc is not None:
            drop = (torch.rand(B, generator=g) < cond_drop).to(fc.device)
            fc = fc.masked_fill(drop[:, None, None], 0.0)
        logp = log_likelihood(model, values, order, prior=prior, frame_cond=fc)  # (B, N) in order
        scored = torch.arange(T * C, device=values.device)[None] >= n_cond[:, None]
        return -logp[scored].mean()

    return loss_fn
