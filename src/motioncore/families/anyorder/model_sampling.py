"""Orders, sampling and teacher-forced scoring for the any-order transformer (``motioncore.families.anyorder.model``;
its training loss: ``families.anyorder.loss``).

Elements live on a (T, C) grid and are addressed by a flat, time-major index ``n = t * C + c``.
Orders: ``random``, ``sequential`` (frame by frame, channels in order), ``bisection`` (the middle frame
of every unfilled gap first, level by level) and ``entropy`` (dynamic: at each step every remaining
element is scored against the cache in one batched pass and the lowest-entropy ones are committed).
``k`` elements are committed per step (parallel decoding: sampled independently from one context).

Reproducibility: sample ``i`` of a call with ``seed`` draws everything random (its order, its values)
from its own ``torch.Generator`` seeded ``seed + i``, so a sample does not depend on how many others
share its batch: ``sample(..., n_samples=4, seed=s)[i]`` equals ``sample(..., n_samples=1, seed=s + i)[0]``
up to floating-point differences of batched matrix products (bit-identical in practice on the CPU).

Legend: B batch (samples or sequences), T frames, C grid channels, N = T * C elements, F elements to
fill, L tokens, M candidates, P head outputs, E value width.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from motioncore.errors import ShapeError
from motioncore.families.anyorder.model import AnyOrderTransformer, KVCache
from motioncore.families.anyorder.model_elements import from_key_frame, reference_frames, to_key_frame
from motioncore.families.anyorder.model_heads import entropy, nll, sample_values
from motioncore.families.anyorder.model_prior import key_prior

__all__ = [
    "ORDERS", "positions", "bisection_frames", "static_order", "teacher_forced", "log_likelihood", "sample",
    "grid_prior", "key_frame_in",
]

ORDERS = ("random", "sequential", "bisection", "entropy")
CANDIDATE_TOKENS = 1 << 16  # most candidate tokens (B * M) scored in one forward pass


# ----------------------------------------------------------------------------- orders
def positions(index: Tensor, C: int) -> Tensor:
    """Flat element indices (...) -> (frame, channel) pairs (..., 2)."""
    return torch.stack([index // C, index % C], -1)


def bisection_frames(frames: Sequence[int], T: int) -> list[int]:
    """Coarse-to-fine order of ``frames`` (those with something to fill) in a clip of T frames.

    A gap is a run of consecutive frames to fill, bounded by frames not to fill or the clip's ends.
    The middle frame of every gap comes first, then the middles of the halves it leaves, level by level
    over all gaps at once (breadth first)."""
    todo, gaps, lo = set(frames), deque(), -1
    for t in range(T + 1):
        if t == T or t not in todo:
            if t - lo > 1:
                gaps.append((lo, t))  # open interval (lo, t)
            lo = t
    out: list[int] = []
    while gaps:
        lo, hi = gaps.popleft()
        mid = (lo + hi) // 2
        out.append(mid)
        gaps.extend(g for g in ((lo, mid), (mid, hi)) if g[1] - g[0] > 1)
    return out


def static_order(name: str, fill_mask: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Flat indices (F,) of the True elements of ``fill_mask`` (T, C) in order ``name`` (not ``entropy``)."""
    T, C = fill_mask.shape
    fill = fill_mask.flatten().nonzero().squeeze(1)  # (F,) ascending: time-major
    if name == "sequential":
        return fill
    if name == "random":
        return fill[torch.randperm(fill.numel(), generator=generator)]
    if name == "bisection":
        frames = bisection_frames(sorted(set((fill // C).tolist())), T)
        rank = torch.empty(T, dtype=torch.long)
        rank[torch.tensor(frames, dtype=torch.long)] = torch.arange(len(frames))
        return fill[torch.argsort(rank[fill // C] * C + fill % C)]  # by frame rank, then channel
    raise ValueError(f"order: must be one of {ORDERS[:3]} here, got {name!r}")


# ----------------------------------------------------------------------------- tokens
def _gather(flat: Tensor, idx: Tensor) -> Tensor:
    """Values of elements ``idx`` (B, L) from ``flat`` (B, N[, E]) -> (B, L[, E])."""
    if flat.dim() == 2:
        return flat.gather(1, idx)
    return flat.gather(1, idx.unsqueeze(-1).expand(-1, -1, flat.shape[-1]))


def _tokens(flat: Tensor, src: Tensor, dst: Tensor, C: int) -> tuple[Tensor, Tensor, Tensor]:
    """Model inputs for tokens carrying element ``src`` (B, L) (-1: the start token) and predicting
    element ``dst`` (B, L): values (B, L[, E]), own (B, L, 2), target (B, L, 2)."""
    start = src < 0
    s = src.clamp(min=0)
    own = positions(s, C)
    own[..., 1] = own[..., 1].masked_fill(start, -1)
    return _gather(flat, s), own, positions(dst, C)


def _run(model, flat: Tensor, src: Tensor, dst: Tensor, C: int, prior: Tensor | None,
         frame_cond: Tensor | None = None, **kw) -> Tensor:
    """``model`` on the tokens ``src -> dst``; ``prior`` (B, N, E + 3) flat ``key_prior`` (or None), read
    at each token's target; ``frame_cond`` (B, T, D) per-frame conditions (``cfg.cond_dim`` models)."""
    if frame_cond is not None:
        kw["frame_cond"] = frame_cond
    return model(*_tokens(flat, src, dst, C), prior=None if prior is None else _gather(prior, dst), **kw)


def grid_prior(model, values: Tensor, known: Tensor) -> Tensor | None:
    """``key_prior`` of ``values`` (B, T, C, E) under ``known`` (B or 1, T, C), flattened to (B, N, E + 3);
    None unless the model takes a prior (``cfg.prior``)."""
    if not getattr(model.cfg, "prior", False):
        return None
    known = torch.as_tensor(known, dtype=torch.bool, device=values.device).expand(values.shape[:3])
    return key_prior(values, known).flatten(1, 2)


def key_frame_in(model, grid: Tensor, known: Tensor) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    """For ``cfg.relative`` models: ``grid`` (B, T, C, E) seen from each row's reference frame
    (``reference_frames`` of ``known`` (B or 1, T, C)) and the function that maps a relative grid back.
    Other models: the grid itself and the identity."""
    cfg = model.cfg
    if not getattr(cfg, "relative", False):
        return grid, lambda g: g
    known = torch.as_tensor(known, dtype=torch.bool, device=grid.device).expand(grid.shape[:3])
    ref = reference_frames(known)  # (B,)
    ref_values = grid.gather(1, ref.clamp(min=0).view(-1, 1, 1, 1).expand(-1, 1, *grid.shape[2:])).clone()
    return to_key_frame(cfg, grid, ref), lambda g: from_key_frame(cfg, g, ref_values, ref)


def teacher_forced(model: AnyOrderTransformer, values: Tensor, order: Tensor, prior: Tensor | None = None,
                   frame_cond: Tensor | None = None) -> Tensor:
    """Head parameters (B, L, P): token i predicts element ``order[:, i]`` given ``order[:, :i]``.
    values: (B, T, C) long or (B, T, C, E) grid; order: (B, L) or (L,) distinct flat indices;
    prior: (B, N, E + 3) from ``grid_prior`` (models with ``cfg.prior`` only); frame_cond: (B, T, D)."""
    B, T, C = values.shape[:3]
    order = order.to(values.device).expand(B, -1)
    src = torch.cat([order.new_full((B, 1), -1), order[:, :-1]], 1)  # start, then each element feeds the next
    return _run(model, values.flatten(1, 2), src, order, C, prior, frame_cond)  # values flattened to (B, N[, E])


# ----------------------------------------------------------------------------- the decoding loop
def _prefill(model, flat: Tensor, cond: Tensor, C: int, cache: KVCache, prior: Tensor | None,
             frame_cond: Tensor | None = None) -> Tensor:
    """Append the condition tokens (start -> c1 -> ... -> cm) to the cache; returns the pending
    element (B,) whose own token is not yet in the cache (-1: the start token)."""
    B = flat.shape[0]
    if cond.numel() == 0:
        return torch.full((B,), -1, dtype=torch.long, device=flat.device)
    dst = cond.expand(B, -1)
    src = torch.cat([dst.new_full((B, 1), -1), dst[:, :-1]], 1)
    _run(model, flat, src, dst, C, prior, frame_cond, cache=cache)
    return dst[:, -1]


def _query(model, flat: Tensor, pending: Tensor, cand: Tensor, C: int, cache: KVCache,
           prior: Tensor | None, frame_cond: Tensor | None = None) -> Tensor:
    """Head parameters (B, M, P) for the pending token aimed at each candidate target (B, M), scored
    side by side against the cache (the cache is not changed)."""
    B, M = cand.shape
    step = max(1, CANDIDATE_TOKENS // B)
    outs = [_run(model, flat, pending[:, None].expand(B, c.shape[1]), c, C, prior, frame_cond, cache=cache,
                 independent=True)
            for c in cand.split(step, 1)]
    return torch.cat(outs, 1)


Commit = Callable[[Tensor, Tensor], None]  # (params (B, k, P), elements (B, k)) -> None


def _decode(model, flat: Tensor, cond: Tensor, fill: Tensor, dynamic: bool, k: int, commit: Commit,
            prior: Tensor | None = None, frame_cond: Tensor | None = None) -> Tensor:
    """Shared any-order loop. flat (B, N[, E]) holds the values (``commit`` writes sampled ones);
    cond (m,) conditions in token order; fill (B, F) the elements to fill, in order unless ``dynamic``
    (lowest entropy first); prior (B, N, E + 3) the conditions' ``grid_prior`` (``cfg.prior`` models).
    Returns the commit order (B, F)."""
    cfg, (B, F) = model.cfg, fill.shape
    C = cfg.grid_channels
    cache = KVCache()
    pending = _prefill(model, flat, cond, C, cache, prior, frame_cond)
    remaining = torch.zeros(flat.shape[:2], dtype=torch.bool, device=flat.device).scatter_(1, fill, True)
    done: list[Tensor] = []
    step = 0
    while step < F:
        kk = min(k, F - step)
        cand = remaining.nonzero()[:, 1].view(B, -1) if dynamic else fill[:, step:step + kk]  # (B, M)
        fused = not dynamic and kk == 1  # one known target: its token is appended and queried in one pass
        if fused:
            params = _run(model, flat, pending[:, None], cand, C, prior, frame_cond, cache=cache)
        else:
            params = _query(model, flat, pending, cand, C, cache, prior, frame_cond)  # (B, M, P)
        if dynamic:
            pick = entropy(cfg, params, cand % C).argsort(dim=-1, stable=True)[:, :kk]  # (B, kk) lowest first
            cand = cand.gather(1, pick)
            params = params.gather(1, pick.unsqueeze(-1).expand(-1, -1, params.shape[-1]))
        commit(params, cand)
        remaining.scatter_(1, cand, False)
        step += kk
        if step < F and not fused:  # the pending token now aims at cand[:, 0]; the new elements chain after it
            src = torch.cat([pending[:, None], cand[:, :-1]], 1)
            _run(model, flat, src, cand, C, prior, frame_cond, cache=cache)
        pending = cand[:, -1]
        done.append(cand)
    return torch.cat(done, 1) if done else fill


def _generators(seed: int, n: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed + i) for i in range(n)]


def _fill_orders(order: str, fill_mask: Tensor, gens: list[torch.Generator]) -> Tensor:
    """(B, F) fill order per sample (the ascending fill set for ``entropy``)."""
    name = "sequential" if order == "entropy" else order
    return torch.stack([static_order(name, fill_mask, g) for g in gens])


def _check_grid(model, values: Tensor, mask: Tensor, name: str) -> None:
    cfg = model.cfg
    T, C = mask.shape
    want = (T, C) if cfg.head == "categorical" else (T, C, cfg.element_dim)
    if C != cfg.grid_channels or tuple(values.shape[-len(want):]) != want:
        raise ShapeError(f"{name}: expected (..., {', '.join(map(str, want))}) with C = {cfg.grid_channels}, "
                         f"got {tuple(values.shape)} and mask {tuple(mask.shape)}")


# ----------------------------------------------------------------------------- public entry points
def sample(model: AnyOrderTransformer, known_values: Tensor, known_mask: Tensor, positions_to_fill: Tensor | None = None,
           order: str = "random", temperature: float = 1.0, n_samples: int = 1, seed: int = 0, k: int = 1,
           return_order: bool = False, frame_cond: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """``n_samples`` completions of one partially known grid, in one batch.

    known_values: (T, C) long (categorical) or (T, C, E) float; read only where ``known_mask`` (T, C)
        is True. Conditions enter first, in time-major order.
    positions_to_fill: (T, C) bool, disjoint from known_mask; default every unknown element. Elements
        neither known nor filled keep ``known_values``.
    order: one of ORDERS; k: elements committed per step; temperature >= 0 (0: the mode).
    frame_cond: (T, D) or (n_samples, T, D) per-frame conditions for ``cfg.cond_dim`` models (None: none).
    Returns (n_samples, T, C[, E]); with ``return_order`` also the commit order (n_samples, F) of flat
    indices. Sample i uses a generator seeded ``seed + i`` (see the module docstring).
    """
    known_mask = torch.as_tensor(known_mask, dtype=torch.bool)
    fill_mask = ~known_mask if positions_to_fill is None else torch.as_tensor(positions_to_fill, dtype=torch.bool)
    _check_grid(model, known_values, known_mask, "known_values")
    if fill_mask.shape != known_mask.shape or (fill_mask & known_mask).any():
        raise ShapeError(f"positions_to_fill: must be a {tuple(known_mask.shape)} mask disjoint from known_mask")
    _check_options(order, temperature, n_samples, k)
    param = next(model.parameters())
    T, C = known_mask.shape
    flat = known_values.to(param.device).flatten(0, 1)  # (N[, E])
    flat = flat.long() if model.cfg.head == "categorical" else flat.to(param.dtype)
    flat = flat.unsqueeze(0).repeat_interleave(n_samples, 0)  # (B, N[, E]) one row per sample
    if getattr(model.cfg, "relative", False):
        rel, back = key_frame_in(model, flat.view(n_samples, T, C, -1), known_mask[None].to(param.device))
        flat = rel.flatten(1, 2).contiguous()
    else:
        back = None
    gens = _generators(seed, n_samples)
    fill = _fill_orders(order, fill_mask, gens).to(param.device)  # (B, F)
    cond = known_mask.flatten().nonzero().squeeze(1).to(param.device)
    prior = grid_prior(model, flat.view(n_samples, T, C, *flat.shape[2:]), known_mask[None].to(param.device))

    fc = None
    if frame_cond is not None and getattr(model.cfg, "cond_dim", 0):
        fc = torch.as_tensor(frame_cond).to(param.device, param.dtype)
        fc = (fc if fc.dim() == 3 else fc[None]).expand(n_samples, T, -1)

    def commit(params: Tensor, elems: Tensor) -> None:
        uniform, normal = _noise(gens, elems.shape[1], model.cfg, param)
        flat.scatter_(1, _expand_like(elems, flat), sample_values(model.cfg, params, elems % C, temperature, uniform, normal))

    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            done = _decode(model, flat, cond, fill, order == "entropy", k, commit, prior, fc)
    finally:
        model.train(was)
    out = flat.view(n_samples, T, C, *flat.shape[2:])
    if back is not None:
        out = back(out)
    return (out, done) if return_order else out


def _check_options(order: str, temperature: float, n: int, k: int) -> None:
    if order not in ORDERS:
        raise ValueError(f"order: must be one of {ORDERS}, got {order!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature: must be >= 0, got {temperature}")
    if n < 1 or k < 1:
        raise ValueError(f"n_samples and k: must be >= 1, got {n} and {k}")


def _expand_like(idx: Tensor, flat: Tensor) -> Tensor:
    return idx if flat.dim() == 2 else idx.unsqueeze(-1).expand(-1, -1, flat.shape[-1])


def _noise(gens: list[torch.Generator], k: int, cfg, like: Tensor) -> tuple[Tensor, Tensor | None]:
    """Per-sample noise from each sample's own generator: uniform (B, k), normal (B, k, E) or None."""
    u = torch.stack([torch.rand(k, generator=g, dtype=torch.float64) for g in gens]).to(like.device, like.dtype)
    if cfg.head == "categorical":
        return u, None
    z = torch.stack([torch.randn(k, cfg.element_dim, generator=g, dtype=torch.float64) for g in gens])
    return u, z.to(like.device, like.dtype)


def log_likelihood(model: AnyOrderTransformer, values: Tensor, order: Tensor | str, known_mask: Tensor | None = None,
                   k: int = 1, seed: int = 0, prior: Tensor | None = None,
                   frame_cond: Tensor | None = None) -> Tensor:
    """Teacher-forced log-likelihood (nats) of each element of ``values`` (B, T, C[, E]).

    order a tensor (B, L) or (L,) of distinct flat indices: one pass; returns (B, L), entry i being
        log p(element order[i] | order[:i]) (slice off a conditioning prefix yourself).
    order a name in ORDERS: the elements of ``known_mask`` (T, C) (default none) condition first and
        every other element is scored in that order with the cached loop (``entropy`` chooses by the
        model's entropy given the true values so far; ``random`` draws row i's order from seed + i);
        returns (B, F) in commit order. ``k`` > 1 scores parallel decoding's factorisation.
    prior: for ``cfg.prior`` models with a tensor order, ``grid_prior`` of the conditions (required);
        with an order name it is computed from ``known_mask``.
    frame_cond: (B, T, D) per-frame conditions (``cfg.cond_dim`` models).
    Runs under the caller's grad mode.
    """
    if isinstance(order, Tensor):
        if getattr(model.cfg, "prior", False) and prior is None:
            raise ValueError("log_likelihood: this model takes a prior; pass grid_prior(model, values, known)")
        params = teacher_forced(model, values, order, prior, frame_cond)
        B, T, C = values.shape[:3]
        target = _gather(values.flatten(1, 2), order.to(values.device).expand(B, -1))
        return -nll(model.cfg, params, target, order.to(values.device).expand(B, -1) % C)
    B, T, C = values.shape[:3]
    known = torch.zeros(T, C, dtype=torch.bool) if known_mask is None else torch.as_tensor(known_mask, dtype=torch.bool)
    _check_grid(model, values, known, "values")
    _check_options(order, 1.0, 1, k)
    flat = values.flatten(1, 2)  # (B, N[, E])
    fill = _fill_orders(order, ~known, _generators(seed, B)).to(values.device)
    cond = known.flatten().nonzero().squeeze(1).to(values.device)
    out: list[Tensor] = []

    def commit(params: Tensor, elems: Tensor) -> None:
        out.append(-nll(model.cfg, params, _gather(flat, elems), elems % C))

    _decode(model, flat, cond, fill, order == "entropy", k, commit, grid_prior(model, values, known[None]), frame_cond)
    return torch.cat(out, 1)
