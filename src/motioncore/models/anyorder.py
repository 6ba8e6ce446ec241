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

Legend: B batch, L tokens, N cached tokens, M candidates, T frames, C channels, H heads, Dh head
features, D features, E element value width, K mixture components or classes.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.rotations import matrix_to_rot6d, quat_to_rot6d, rot6d_to_matrix, rot6d_to_quat
from ..errors import ShapeError

__all__ = [
    "KIND_DIMS", "HEADS", "AnyOrderConfig", "AnyOrderTransformer", "KVCache", "nll", "entropy",
    "mog_nll", "mog_entropy", "split_mog", "sample_values", "project", "group_channels",
    "ungroup_channels", "key_prior", "key_envelope", "reference_frames", "to_key_frame",
    "from_key_frame", "motion_config", "motion_to_elements", "elements_to_motion",
]

KIND_DIMS = {"rot6d": 6, "vec3": 3}  # value width of each channel kind (mog head)
HEADS = ("mog", "categorical")
MIN_STD = 1e-4  # floor on every mixture standard deviation (keeps the NLL bounded)
PRIOR_FEATURES = 3  # key_prior's extra features per element: has-key flag, position in the gap, gap length
GAP_SCALE = 30.0  # key_prior's gap length feature is frames / GAP_SCALE


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

    Use ``nll``, ``entropy`` and ``sample_values`` (module functions) on the output; orders, losses and
    sampling loops live in ``motioncore.models.sampling``.
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


# ----------------------------------------------------------------------------- heads (functions on the output)
@functools.lru_cache(maxsize=32)
def _layout(cfg: AnyOrderConfig) -> tuple[Tensor, list[tuple[int, Tensor]]]:
    return cfg.layout()


def _dim_mask(cfg: AnyOrderConfig, channel: Tensor) -> Tensor:
    """(..., E) bool: the value dims used by each element's grid channel (...,)."""
    return _layout(cfg)[0].to(channel.device)[channel]


def split_mog(params: Tensor, num_mixtures: int) -> tuple[Tensor, Tensor, Tensor]:
    """Raw mixture outputs (..., K(1 + 2E)) -> logits (..., K), mean (..., K, E), std (..., K, E).
    std = softplus(raw) + MIN_STD."""
    K = num_mixtures
    E = (params.shape[-1] // K - 1) // 2
    rest = params[..., K:].unflatten(-1, (K, 2 * E))  # (..., K, 2E): means then raw stds per component
    return params[..., :K], rest[..., :E], F.softplus(rest[..., E:]) + MIN_STD


def mog_nll(logits: Tensor, mean: Tensor, std: Tensor, x: Tensor, dim_mask: Tensor) -> Tensor:
    """Negative log-density (nats) of x (..., E) under a diagonal Gaussian mixture, over the dims where
    ``dim_mask`` (..., E) is True. logits (..., K), mean/std (..., K, E) -> (...)."""
    z = (x.unsqueeze(-2) - mean) / std  # (..., K, E)
    lp = -0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)
    lp = torch.where(dim_mask.unsqueeze(-2), lp, 0.0).sum(-1)  # (..., K) per-component log-density
    return -torch.logsumexp(logits.log_softmax(-1) + lp, -1)


def mog_entropy(logits: Tensor, std: Tensor, dim_mask: Tensor) -> Tensor:
    """Upper bound (nats) on a diagonal mixture's differential entropy: H(pi) + sum_k pi_k H(N_k).
    Exact for one component; tight when the components barely overlap. (...) from logits (..., K)."""
    logp = logits.log_softmax(-1)
    h_comp = torch.where(dim_mask.unsqueeze(-2), std.log() + 0.5 * math.log(2 * math.pi * math.e), 0.0).sum(-1)
    return (logp.exp() * (h_comp - logp)).sum(-1)


def nll(cfg: AnyOrderConfig, params: Tensor, value: Tensor, channel: Tensor) -> Tensor:
    """Negative log-likelihood (nats) per element: params (..., P), value (...) long or (..., E),
    channel (...) grid channel of each predicted element -> (...)."""
    if cfg.head == "categorical":
        return -params.log_softmax(-1).gather(-1, value.unsqueeze(-1)).squeeze(-1)
    logits, mean, std = split_mog(params, cfg.num_mixtures)
    return mog_nll(logits, mean, std, value, _dim_mask(cfg, channel))


def entropy(cfg: AnyOrderConfig, params: Tensor, channel: Tensor) -> Tensor:
    """Entropy (nats) per predicted element (...): exact for categorical, the ``mog_entropy`` upper
    bound for the mixture (differential, so it grows with the channel's width)."""
    if cfg.head == "categorical":
        logp = params.log_softmax(-1)
        return -(logp.exp() * logp).sum(-1)
    logits, _, std = split_mog(params, cfg.num_mixtures)
    return mog_entropy(logits, std, _dim_mask(cfg, channel))


def _pick(logits: Tensor, temperature: float, uniform: Tensor) -> Tensor:
    """Index (...) drawn from softmax(logits / temperature) by inverse CDF; argmax at temperature 0."""
    if temperature == 0:
        return logits.argmax(-1)
    cdf = (logits / temperature).softmax(-1).cumsum(-1)  # (..., K)
    return (cdf < uniform.unsqueeze(-1)).sum(-1).clamp(max=logits.shape[-1] - 1)


def sample_values(cfg: AnyOrderConfig, params: Tensor, channel: Tensor, temperature: float,
                  uniform: Tensor, normal: Tensor | None = None) -> Tensor:
    """Sample one value per element from params (..., P) with noise drawn by the caller: uniform (...)
    in [0, 1) and, for the mixture, normal (..., E). Temperature scales logits by 1/t and the std by
    sqrt(t); t = 0 gives the mode (categorical) or the mean of the most likely component (mixture).
    Returns (...) long or (..., E), with 6D rotations projected onto valid rotations (``project``)."""
    if cfg.head == "categorical":
        return _pick(params, temperature, uniform)
    logits, mean, std = split_mog(params, cfg.num_mixtures)
    k = _pick(logits, temperature, uniform)[..., None, None].expand(*mean.shape[:-2], 1, mean.shape[-1])
    mu, sd = mean.gather(-2, k).squeeze(-2), std.gather(-2, k).squeeze(-2)  # (..., E) chosen component
    x = mu if temperature == 0 else mu + sd * math.sqrt(temperature) * normal
    return project(cfg, x, channel)


def project(cfg: AnyOrderConfig, values: Tensor, channel: Tensor) -> Tensor:
    """Zero the unused (padded) dims and map every 6D rotation slice to the nearest valid 6D rotation
    by Gram-Schmidt. values (..., E), channel (...) -> (..., E)."""
    if cfg.head == "categorical":
        return values
    mask, rots = _layout(cfg)
    out = values * mask.to(values.device)[channel]
    if not rots:
        return out
    idx = torch.tensor([off + i for off, _ in rots for i in range(6)], device=values.device)  # (6S,)
    d = out[..., idx].unflatten(-1, (len(rots), 6))  # (..., S, 6) every rotation slice at once
    sel = torch.stack([chans.to(values.device)[channel] for _, chans in rots], -1).unsqueeze(-1)  # (..., S, 1)
    gs = torch.where(sel, matrix_to_rot6d(rot6d_to_matrix(d)), d)
    out = out.clone()
    out[..., idx] = gs.flatten(-2)
    return out


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


# ----------------------------------------------------------------------------- the key frame
def reference_frames(known: Tensor) -> Tensor:
    """Per row, the reference frame of ``to_key_frame``: the last fully known frame of the first run of
    fully known frames (the last context frame before the first gap); -1 where no frame is fully known.
    known (B, T, C) bool -> (B,) long."""
    full = known.all(-1)  # (B, T)
    T = full.shape[1]
    t = torch.arange(T, device=known.device).expand_as(full)
    first = torch.where(full, t, T).min(1).values  # (B,) first fully known frame (T: none)
    after = torch.where(~full & (t > first[:, None]), t, T).min(1).values  # first frame after it not fully known
    return torch.where(first < T, after - 1, -1)


def _motion_view(cfg: AnyOrderConfig, grid: Tensor) -> Tensor:
    """(B, T, Cg, E) grid -> (B, T, J + 1, 6) per-channel motion elements."""
    return ungroup_channels(cfg, grid) if cfg.group_frames else grid


def _grid_view(cfg: AnyOrderConfig, x: Tensor) -> Tensor:
    return group_channels(cfg, x) if cfg.group_frames else x


def to_key_frame(cfg: AnyOrderConfig, grid: Tensor, ref: Tensor) -> Tensor:
    """Motion elements seen from the reference frame ``ref`` (B,) (-1: unchanged): each joint's rotation
    R_ref^T R_t (6D), the root x_t - x_ref. A capture's per-joint rest and twist conventions mostly cancel
    in R_ref^T R_t, and the facing in the root's. grid (B, T, Cg, E) -> same shape (new tensor)."""
    x = _motion_view(cfg, grid)
    idx = ref.clamp(min=0).view(-1, 1, 1, 1).expand(-1, 1, *x.shape[2:])
    r = x.gather(1, idx)  # (B, 1, J + 1, 6)
    rot = matrix_to_rot6d(rot6d_to_matrix(r[..., :-1, :]).transpose(-1, -2) @ rot6d_to_matrix(x[..., :-1, :]))
    root = x[..., -1:, :] - r[..., -1:, :]
    out = torch.cat([rot, root], -2)
    return _grid_view(cfg, torch.where((ref >= 0).view(-1, 1, 1, 1), out, x))


def from_key_frame(cfg: AnyOrderConfig, grid: Tensor, ref_values: Tensor, ref: Tensor) -> Tensor:
    """Inverse of ``to_key_frame``: ``ref_values`` (B, 1, Cg, E) are the reference frame's ORIGINAL values.
    grid (B, T, Cg, E) relative -> absolute (new tensor)."""
    x, r = _motion_view(cfg, grid), _motion_view(cfg, ref_values)
    rot = matrix_to_rot6d(rot6d_to_matrix(r[..., :-1, :]) @ rot6d_to_matrix(x[..., :-1, :]))
    root = x[..., -1:, :] + r[..., -1:, :]
    out = torch.cat([rot, root], -2)
    return _grid_view(cfg, torch.where((ref >= 0).view(-1, 1, 1, 1), out, x))


# ----------------------------------------------------------------------------- layouts
def group_channels(cfg: AnyOrderConfig, x: Tensor) -> Tensor:
    """Per-channel padded values (..., T, C, W) -> grouped frame elements (..., T, 1, E) (each channel's
    used dims, concatenated in channel order). W = cfg.channel_width."""
    parts = [x[..., c, :KIND_DIMS[k]] for c, k in enumerate(cfg.kinds)]
    return torch.cat(parts, -1).unsqueeze(-2)


def ungroup_channels(cfg: AnyOrderConfig, x: Tensor) -> Tensor:
    """Inverse of ``group_channels``: (..., T, 1, E) -> (..., T, C, W), zero padded."""
    W, out, off = cfg.channel_width, [], 0
    for k in cfg.kinds:
        w = KIND_DIMS[k]
        out.append(F.pad(x[..., 0, off:off + w], (0, W - w)))
        off += w
    return torch.stack(out, -2)


def motion_config(num_joints: int, **kwargs) -> AnyOrderConfig:
    """Config for motion elements: channels 0..J-1 are joint rotations ("rot6d"), channel J the root
    translation ("vec3", expected normalised by the caller, e.g. z-scored with training statistics)."""
    return AnyOrderConfig(num_channels=num_joints + 1, channel_kinds=("rot6d",) * num_joints + ("vec3",),
                          head="mog", **kwargs)


def motion_to_elements(quats: Tensor, root: Tensor) -> Tensor:
    """WXYZ local rotations (..., T, J, 4) and root translation (..., T, 3) -> elements (..., T, J+1, 6):
    6D rotations, then the root zero padded to 6."""
    return torch.cat([quat_to_rot6d(quats), F.pad(root, (0, 3)).unsqueeze(-2)], -2)


def elements_to_motion(x: Tensor) -> tuple[Tensor, Tensor]:
    """Elements (..., T, J+1, 6) -> WXYZ quaternions (..., T, J, 4) (Gram-Schmidt) and root (..., T, 3)."""
    return rot6d_to_quat(x[..., :-1, :]), x[..., -1, :3]
