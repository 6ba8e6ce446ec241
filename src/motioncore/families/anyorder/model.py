"""Any-order generative transformer (sigma-GPT / Clarke's "triples"): a decoder-only transformer over
*elements* that can be sampled in any order.

An element is one value at a 2-D position (frame t, channel c): one joint's 6D rotation at one frame,
the root translation at one frame, or one pixel (row = frame, column = channel). Each input token
carries an element's value, its own position and the position of the element to predict next; the
attention mask is causal in the *sampling order*, not in time. A learned start token (no value)
carries the position of the first element to predict.

Positions: rotary embeddings on the frame index only, rotating each token's query by its TARGET frame
and its key by its OWN frame, so every attention score depends on (target frame - key frame) alone;
channels (a fixed set per skeleton) use learned embeddings for the own and the target channel. There
is no absolute frame embedding, so the model runs on clips of any length and is invariant to shifting
every frame index by a constant. See docs/anyorder.md.

The functions on the model's output (likelihood, entropy, sampling, projection) are in ``anyorder_heads``,
the keys' interpolation prior in ``anyorder_prior``, the element codec (motion <-> elements, grouped
frames, the key frame) in ``anyorder_elements``.

Legend: B batch, L tokens, N cached tokens, M candidates, T frames, C channels, H heads, Dh head
features, D features, E element value width, K mixture components or classes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from motioncore.errors import ShapeError
from motioncore.families.anyorder.model_prior import PRIOR_FEATURES, key_envelope

__all__ = ["KIND_DIMS", "HEADS", "AnyOrderConfig", "AnyOrderTransformer", "KVCache"]

KIND_DIMS = {"rot6d": 6, "vec3": 3}  # value width of each channel kind (mog head)
HEADS = ("mog", "categorical")


@dataclass(frozen=True)
class AnyOrderConfig:
    num_channels: int = 1  # C: channels per frame (joints + root for motion, columns for digits)
    channel_kinds: tuple[str, ...] = ()  # mog: per-channel kind in KIND_DIMS; () = all "rot6d"
    head: str = "mog"  # "mog" (continuous values) | "categorical" (class indices)
    num_classes: int = 0  # categorical: number of value classes (17 for 8x8 digits)
    num_mixtures: int = 8  # mog: Gaussian components per element
    group_frames: bool = False  # mog: one element per frame holding every channel (faster, no partial frames)
    prior: bool = False  # mog: every token also carries the keys' interpolation at its target (``key_prior``);
    #                      the mixture means are offsets from it (a residual on in-betweening's baseline)
    offset_scale: float = 0.1  # prior: mean = prior + offset_scale * raw output
    key_envelope: bool = False  # prior: the offset is scaled by sin(pi * position in gap), so it vanishes at
    #                             the keys (short gaps cannot stray far from the interpolation); 1 outside gaps
    relative: bool = False  # motion: values are seen relative to a keyed reference frame (``to_key_frame``):
    #                         rotations R_ref^T R_t, the root x_t - x_ref; callers convert in and out
    cond_dim: int = 0  # per-frame conditioning features (e.g. a hand's object in the wrist frame): the
    #                    ``frame_cond`` (B, T, cond_dim) input, known at every frame and never sampled, is
    #                    embedded (one linear layer for the token's own frame, one for its target frame)
    #                    and added to every token; absent (None) = a zero vector
    d_model: int = 128  # D: token width
    n_layers: int = 4  # transformer blocks
    n_heads: int = 4  # attention heads; d_model / n_heads must be even (rotary pairs)
    d_ff: int = 512  # feed-forward hidden width
    dropout: float = 0.1  # on the embeddings and every residual branch (not on attention weights: cost)
    max_frames: int = 256  # rotary table size; a hint for speed only, longer clips still work
    rope_base: float = 10000.0  # rotary base: frequencies base ** (-2i / Dh)

    def __post_init__(self) -> None:
        kinds = tuple(self.channel_kinds)  # JSON gives lists; keep the field hashable
        object.__setattr__(self, "channel_kinds", kinds)
        if self.head not in HEADS:
            raise ValueError(f"head: must be one of {HEADS}, got {self.head!r}")
        for name in ("num_channels", "d_model", "n_layers", "n_heads", "d_ff", "max_frames"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model / n_heads must be an even integer, got {self.d_model} / {self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {self.dropout}")
        if not self.offset_scale > 0.0:
            raise ValueError(f"offset_scale: must be > 0, got {self.offset_scale}")
        if not self.rope_base > 1.0:
            raise ValueError(f"rope_base: must be > 1, got {self.rope_base}")
        if self.head == "categorical":
            if self.num_classes < 2:
                raise ValueError(f"num_classes: the categorical head needs >= 2, got {self.num_classes}")
            if kinds or self.group_frames or self.prior:
                raise ValueError("channel_kinds, group_frames and prior apply to the mog head only")
        if self.relative and (self.head != "mog" or not self.kinds or self.kinds[-1] != "vec3"
                              or set(self.kinds[:-1]) != {"rot6d"}):
            raise ValueError("relative: needs a motion layout (rot6d joints, then a vec3 root)")
        if self.key_envelope and not self.prior:
            raise ValueError("key_envelope: needs prior=True (it shapes the offset from the keys' interpolation)")
        elif self.num_mixtures < 1:
            raise ValueError(f"num_mixtures: must be >= 1, got {self.num_mixtures}")
        if self.cond_dim < 0:
            raise ValueError(f"cond_dim: must be >= 0, got {self.cond_dim}")
        if kinds and len(kinds) != self.num_channels:
            raise ValueError(f"channel_kinds: expected {self.num_channels} entries, got {len(kinds)}")
        bad = [k for k in kinds if k not in KIND_DIMS]
        if bad:
            raise ValueError(f"channel_kinds: unknown {bad}; known {sorted(KIND_DIMS)}")

    @property
    def kinds(self) -> tuple[str, ...]:
        """Per-channel kinds with the default expanded (() for the categorical head)."""
        if self.head == "categorical":
            return ()
        return self.channel_kinds or ("rot6d",) * self.num_channels

    @property
    def grid_channels(self) -> int:
        """Channels of the element grid: 1 when frames are grouped, else ``num_channels``."""
        return 1 if self.group_frames else self.num_channels

    @property
    def channel_width(self) -> int:
        """Width of the per-channel padded layout (the widest kind); 1 for categorical."""
        return max(KIND_DIMS[k] for k in self.kinds) if self.head == "mog" else 1

    @property
    def element_dim(self) -> int:
        """E: width of one element's value (sum of the widths when frames are grouped)."""
        if self.head == "categorical":
            return 1
        return sum(KIND_DIMS[k] for k in self.kinds) if self.group_frames else self.channel_width

    @property
    def head_width(self) -> int:
        """P: raw head outputs per token: K logits, or K * (1 + 2E) for the mixture."""
        if self.head == "categorical":
            return self.num_classes
        return self.num_mixtures * (1 + 2 * self.element_dim)

    def layout(self) -> tuple[Tensor, list[tuple[int, Tensor]]]:
        """``dim_mask`` (C_grid, E) bool: which value dims each grid channel uses; and the 6D rotation
        slices as ``[(offset, channels (C_grid,) bool)]`` to Gram-Schmidt after sampling."""
        widths = [KIND_DIMS[k] for k in self.kinds]
        E, Cg = self.element_dim, self.grid_channels
        mask = torch.zeros(Cg, E, dtype=torch.bool)
        rots: dict[int, Tensor] = {}
        offset = 0
        for c, (kind, w) in enumerate(zip(self.kinds, widths, strict=True)):
            row, start = (0, offset) if self.group_frames else (c, 0)
            mask[row, start:start + w] = True
            if kind == "rot6d":
                rots.setdefault(start, torch.zeros(Cg, dtype=torch.bool))[row] = True
            offset += w
        if self.head == "categorical":
            mask = torch.ones(Cg, 1, dtype=torch.bool)
        return mask, sorted(rots.items())


class KVCache:
    """Keys and values of every token appended so far, one ``(k, v)`` pair of (B, H, N, Dh) per layer.
    Filled by ``AnyOrderTransformer.forward(..., cache=c)``; ``independent=True`` calls only read it."""

    def __init__(self) -> None:
        self.layers: list[tuple[Tensor, Tensor]] = []

    def __len__(self) -> int:
        return 0 if not self.layers else int(self.layers[0][0].shape[2])


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary rotation of pairs (x[i], x[i + Dh/2]); x (B, H, L, Dh), cos/sin (B, 1, L, Dh/2)."""
    a, b = x.chunk(2, -1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class _Attention(nn.Module):
    def __init__(self, cfg: AnyOrderConfig):
        super().__init__()
        self.h = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, rq: tuple[Tensor, Tensor], rk: tuple[Tensor, Tensor],
                past: tuple[Tensor, Tensor] | None, independent: bool) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x (B, L, D) -> (B, L, D) and this call's keys/values, cache included, each (B, H, N + L, Dh)."""
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)  # 3 x (B, H, L, Dh)
        q, k = _rotate(q, *rq), _rotate(k, *rk)
        if independent:
            y = _independent_attention(q, k, v, past)
        else:
            if past is not None:
                k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)  # (B, H, N + L, Dh)
            N = k.shape[2] - L
            mask = torch.ones(L, N + L, dtype=torch.bool, device=x.device).tril(N)  # query i sees keys <= N + i
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, L, D)  # heads back together: (B, L, D)
        return self.drop(self.proj(y)), (k, v)


def _independent_attention(q: Tensor, k: Tensor, v: Tensor, past: tuple[Tensor, Tensor] | None) -> Tensor:
    """Each of the L queries sees the cached keys and its own key only (candidates scored side by side).
    q, k, v (B, H, L, Dh) -> (B, H, L, Dh); O(L * N) instead of O(L * (N + L))."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    own = (q * k).sum(-1, keepdim=True) * scale  # (B, H, L, 1)
    scores = own if past is None else torch.cat([q @ past[0].transpose(-1, -2) * scale, own], -1)  # (B, H, L, N+1)
    w = scores.softmax(-1)
    y = w[..., -1:] * v
    return y if past is None else y + w[..., :-1] @ past[1]


class _Block(nn.Module):
    def __init__(self, cfg: AnyOrderConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model),
                                 nn.Dropout(cfg.dropout))

    def forward(self, x, rq, rk, past, independent):
        a, kv = self.attn(self.ln1(x), rq, rk, past, independent)
        x = x + a
        return x + self.mlp(self.ln2(x)), kv


class AnyOrderTransformer(nn.Module):
    """Decoder over (value, own position, target position) tokens; returns raw head parameters.

    Use ``nll``, ``entropy`` and ``sample_values`` (``motioncore.families.anyorder.model_heads``) on the output;
    orders, losses and sampling loops live in ``motioncore.families.anyorder.model_sampling``.
    """

    def __init__(self, cfg: AnyOrderConfig):
        super().__init__()
        self.cfg = cfg
        d, Cg = cfg.d_model, cfg.grid_channels
        self.value_in = nn.Embedding(cfg.num_classes, d) if cfg.head == "categorical" else nn.Linear(cfg.element_dim, d)
        self.start = nn.Parameter(torch.randn(d) * 0.02)  # the start token's "value"
        self.own_channel = nn.Embedding(Cg + 1, d)  # row Cg: the start token (no own position)
        self.target_channel = nn.Embedding(Cg, d)
        self.prior_in = nn.Linear(cfg.element_dim + PRIOR_FEATURES, d) if cfg.prior else None  # key_prior
        self.cond_own = nn.Linear(cfg.cond_dim, d) if cfg.cond_dim else None  # frame_cond at the token's own frame
        self.cond_target = nn.Linear(cfg.cond_dim, d) if cfg.cond_dim else None  # ... and at its target frame
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg.head_width)
        dh = d // cfg.n_heads
        self._inv_freq = cfg.rope_base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)  # (Dh/2,) float64
        self._tables: dict[torch.device, tuple[Tensor, Tensor]] = {}  # float64 cos/sin (max_frames, Dh/2)
        self.apply(_init_weights)
        if cfg.prior:  # start as the interpolation itself: every component's mean offset is zero
            K, E = cfg.num_mixtures, cfg.element_dim
            rows = (K + torch.arange(K)[:, None] * 2 * E + torch.arange(E)).flatten()
            with torch.no_grad():
                self.head.weight[rows] = 0.0
                self.head.bias[rows] = 0.0

    def _rope(self, frames: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos, sin (B, 1, L, Dh/2) in ``dtype`` for frame indices (B, L); table lookup or computed (same values)."""
        dev = frames.device
        if dev not in self._tables:
            ang = torch.arange(self.cfg.max_frames, dtype=torch.float64)[:, None] * self._inv_freq  # (T, Dh/2)
            self._tables[dev] = (ang.cos().to(dev), ang.sin().to(dev))
        cos_t, sin_t = self._tables[dev]
        if frames.numel() == 0 or (int(frames.min()) >= 0 and int(frames.max()) < self.cfg.max_frames):
            cos, sin = cos_t[frames], sin_t[frames]
        else:
            ang = frames.to(torch.float64)[..., None] * self._inv_freq.to(dev)  # (B, L, Dh/2)
            cos, sin = ang.cos(), ang.sin()
        return cos.unsqueeze(1).to(dtype), sin.unsqueeze(1).to(dtype)

    def _embed(self, values: Tensor, own: Tensor, target: Tensor, start: Tensor) -> Tensor:
        """Token embeddings (B, L, D): value (or the start vector) + own channel + target channel."""
        Cg = self.cfg.grid_channels
        if self.cfg.head == "categorical":
            v = self.value_in(torch.where(start, 0, values))  # (B, L, D); start tokens' values are ignored
        else:
            v = self.value_in(values.masked_fill(start[..., None], 0.0))
        v = torch.where(start[..., None], self.start.to(v.dtype), v)
        own_c = torch.where(start, Cg, own[..., 1])
        return self.drop(v + self.own_channel(own_c) + self.target_channel(target[..., 1]))

    def forward(self, values: Tensor, own: Tensor, target: Tensor, cache: KVCache | None = None,
                independent: bool = False, prior: Tensor | None = None, frame_cond: Tensor | None = None) -> Tensor:
        """Raw head parameters (B, L, P) for L new tokens.

        values: (B, L, E) float (mog) or (B, L) long class indices (categorical).
        own, target: (B, L, 2) long (frame, channel); an own channel < 0 marks a start token, whose value
            and own frame are ignored (its key is rotated by its target frame).
        cache: keys/values of earlier tokens; new tokens are appended to it unless ``independent``.
        independent: every new token sees the cache and itself only (score many candidate targets of one
            token at once); the cache is left unchanged.
        prior: (B, L, E + 3), required when ``cfg.prior``: ``key_prior`` at each token's TARGET element
            (the keys' interpolation, a has-key flag, the position in the gap and the gap's length). It
            is embedded, and the mixture means come out as prior + offset_scale * offset where the flag is 1.
        frame_cond: (B, T, cond_dim) per-frame conditions (``cfg.cond_dim`` models; ignored otherwise),
            read at each token's own frame (not for start tokens) and at its target frame; frames outside
            [0, T) and None read a zero vector (no condition).
        """
        self._check(values, own, target)
        start = own[..., 1] < 0  # (B, L)
        x = self._embed(values, own, target, start)
        if self.prior_in is not None:
            if prior is None or prior.shape != (*own.shape[:2], self.cfg.element_dim + PRIOR_FEATURES):
                raise ShapeError(f"prior: this model needs (B, L, {self.cfg.element_dim + PRIOR_FEATURES}), got "
                                 f"{None if prior is None else tuple(prior.shape)}")
            x = x + self.prior_in(prior.to(x.dtype))
        if self.cond_own is not None:
            x = x + self._cond(frame_cond, own[..., 0], target[..., 0], start, x.dtype)
        rq = self._rope(target[..., 0], x.dtype)  # queries rotate by the frame they predict
        rk = self._rope(torch.where(start, target[..., 0], own[..., 0]), x.dtype)  # keys by their own frame
        past = cache.layers if cache is not None and cache.layers else [None] * len(self.blocks)
        new = []
        for blk, kv in zip(self.blocks, past, strict=True):
            x, kv_new = blk(x, rq, rk, kv, independent)
            new.append(kv_new)
        if cache is not None and not independent:
            cache.layers = new
        out = self.head(self.ln_f(x))
        if self.prior_in is None:
            return out
        K, E = self.cfg.num_mixtures, self.cfg.element_dim
        rest = out[..., K:].unflatten(-1, (K, 2 * E))  # (B, L, K, 2E): means, raw stds
        base = (prior[..., :E] * prior[..., E:E + 1]).to(out.dtype).unsqueeze(-2)  # (B, L, 1, E)
        offset = self.cfg.offset_scale * rest[..., :E]
        if self.cfg.key_envelope:
            offset = offset * key_envelope(prior[..., E:]).to(out.dtype)[..., None, None]
        mean = base + offset
        return torch.cat([out[..., :K], torch.cat([mean, rest[..., E:]], -1).flatten(-2)], -1)

    def _cond(self, frame_cond: Tensor | None, own_t: Tensor, target_t: Tensor, start: Tensor,
              dtype: torch.dtype) -> Tensor:
        """Embedded per-frame conditions (B, L, D) at each token's own frame (zero input for start tokens)
        and its target frame; zero input where there is no condition."""
        if frame_cond is None:
            return (self.cond_own.bias + self.cond_target.bias).to(dtype)
        B, T, Dc = frame_cond.shape
        if B != own_t.shape[0] or Dc != self.cfg.cond_dim:
            raise ShapeError(f"frame_cond: expected ({own_t.shape[0]}, T, {self.cfg.cond_dim}), got {tuple(frame_cond.shape)}")
        fc = F.pad(frame_cond.to(dtype), (0, 0, 0, 1))  # row T: the zero vector (outside the clip / start)

        def at(t: Tensor) -> Tensor:
            t = torch.where((t >= 0) & (t < T), t, T)
            return fc.gather(1, t.unsqueeze(-1).expand(-1, -1, Dc))

        return self.cond_own(at(torch.where(start, -1, own_t))) + self.cond_target(at(target_t))

    def _check(self, values: Tensor, own: Tensor, target: Tensor) -> None:
        B, L = own.shape[:2]
        if own.shape != (B, L, 2) or target.shape != (B, L, 2):
            raise ShapeError(f"own, target: expected (B, L, 2), got {tuple(own.shape)} and {tuple(target.shape)}")
        want = (B, L) if self.cfg.head == "categorical" else (B, L, self.cfg.element_dim)
        if tuple(values.shape) != want:
            raise ShapeError(f"values: expected {want}, got {tuple(values.shape)}")
        Cg = self.cfg.grid_channels
        if target.numel() and (int(target[..., 1].min()) < 0 or int(own[..., 1].max()) >= Cg
                               or int(target[..., 1].max()) >= Cg):
            raise ShapeError(f"channels: must be in [0, {Cg}) (own may be < 0 for start tokens)")
        if self.cfg.head == "categorical" and values.numel():
            v = values[own[..., 1] >= 0]
            if v.numel() and (int(v.min()) < 0 or int(v.max()) >= self.cfg.num_classes):
                raise ShapeError(f"values: class indices must be in [0, {self.cfg.num_classes})")


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear | nn.Embedding):
        nn.init.normal_(m.weight, std=0.02)
    if isinstance(m, nn.Linear) and m.bias is not None:
        nn.init.zeros_(m.bias)
