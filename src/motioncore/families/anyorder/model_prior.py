"""The keys' interpolation prior of the any-order transformer (``AnyOrderConfig(prior=True)``): every
token carries, for the element it predicts, each channel's linear interpolation between its nearest keys
and where the element sits in its gap; ``key_envelope`` shapes the head's offset from it.

Legend: T frames, C channels, E element value width.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["PRIOR_FEATURES", "GAP_SCALE", "key_prior", "key_envelope"]

PRIOR_FEATURES = 3  # key_prior's extra features per element: has-key flag, position in the gap, gap length
GAP_SCALE = 30.0  # key_prior's gap length feature is frames / GAP_SCALE


def key_envelope(flags: Tensor) -> Tensor:
    """The offset's scale at each element from ``key_prior``'s last 3 features (..., 3): sin(pi * w) for
    an element inside a gap (w its position between the keys), so the offset is 0 at a key and largest in
    the gap's middle; 1 outside any gap (before the first key, after the last, no key). -> (...)."""
    w, span = flags[..., 1], flags[..., 2]
    return torch.where(span > 0, torch.sin(math.pi * w), torch.ones_like(w))


def key_prior(values: Tensor, known: Tensor) -> Tensor:
    """In-betweening's baseline and where each element sits between its keys: (..., T, C, E) values and
    (..., T, C) known mask -> (..., T, C, E + 3).

    [:E] each channel linearly interpolated along time between its nearest known frames (6D rotations
    too: the head's offset and ``project`` handle the rest), held before the first and after the last
    key; 0 where the channel has no key. [E] 1 where the channel has any key. [E + 1] the position in
    the gap, (t - previous key) / (next key - previous key), 0 outside a gap. [E + 2] the gap's length
    in frames / GAP_SCALE (0 outside a gap). Known elements get their own value, 0 and 0."""
    T = values.shape[-3]
    known = known.to(torch.bool)
    t = torch.arange(T, device=values.device).view(T, 1).expand(known.shape[-2:])  # (T, C)
    prev = torch.where(known, t, -1).cummax(-2).values  # last key at or before t; -1: none
    nxt = torch.where(known, t, T).flip(-2).cummin(-2).values.flip(-2)  # first key at or after t; T: none
    has = known.any(-2, keepdim=True).expand_as(known)
    lo = torch.where(prev >= 0, prev, nxt).clamp(0, T - 1)
    hi = torch.where(nxt < T, nxt, prev).clamp(0, T - 1)
    span = (hi - lo).to(values.dtype)
    w = torch.where(span > 0, (t - lo).to(values.dtype) / span.clamp(min=1), 0.0)
    idx = lambda i: i.unsqueeze(-1).expand_as(values)  # noqa: E731
    a, b = values.gather(-3, idx(lo)), values.gather(-3, idx(hi))
    out = torch.where(has.unsqueeze(-1), a + w.unsqueeze(-1) * (b - a), 0.0)
    flags = torch.stack([has.to(values.dtype), w * has, span / GAP_SCALE * has], -1)
    return torch.cat([out, flags], -1)
