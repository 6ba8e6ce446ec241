"""One-shot style adaptation: a learnet (Bertinetto et al., NeurIPS 2016) predicts part of a layer's
weights from a single exemplar clip.

Legend: B batch, T frames, D features, C conv channels, R factorisation rank, Z style code size.

Predicting a full (D_out, D_in) weight per exemplar is intractable, so it is factorised as
``W(z) = M1 diag(f(z)) M2`` with M1 (D_out, R) and M2 (R, D_in) learned and shared by every exemplar;
only the R numbers ``f(z)`` are predicted from the style code z. Here that factorised weight is an
*additive adapter* on a base layer: ``y = W0 x + b0 + M1 diag(f(z)) M2 x``. The last layer of ``f``
starts at zero, so ``f(z) = 0`` and an untrained adapter is exactly the base model (the same reason
LoRA starts one factor at zero). A consequence worth knowing: at that zero start only f's last layer
receives a gradient (M1, M2, the rest of f and the encoder are multiplied by f(z) = 0); after the first
optimiser step every part does.

``StyleEncoder`` maps a clip's per-frame features (B, T, D) to z (B, Z); ``FactorizedAdapter`` is the
additive term alone (what PFNN and MANN add to each blended layer when their ``style_rank`` > 0) and
``FactorizedLinear`` is a plain ``nn.Linear`` base plus that adapter.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from motioncore.errors import ShapeError


@dataclass(frozen=True)
class StyleEncoderConfig:
    input_dim: int  # D: features per frame of the exemplar clip
    z_dim: int = 64  # Z: size of the style code
    channels: int = 128  # C: channels of every temporal conv layer
    num_layers: int = 3  # number of Conv1d + ELU layers
    kernel_size: int = 5  # temporal kernel (odd, "same" zero padding so any T >= 1 works)

    def __post_init__(self) -> None:
        for name in ("input_dim", "z_dim", "channels", "num_layers", "kernel_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"StyleEncoderConfig.{name}: expected a positive int, got {value!r}")
        if self.kernel_size % 2 == 0:
            raise ValueError(f"StyleEncoderConfig.kernel_size: expected an odd int, got {self.kernel_size}")


class StyleEncoder(nn.Module):
    """Temporal conv net: (B, T, D) per-frame features of a clip -> style code z (B, Z).

    Conv1d layers (zero "same" padding, ELU), then mean and max pooling over time (concatenated), then
    a Linear to Z. Clips of different lengths can share a batch if ``lengths`` is given: frames past a
    clip's length are zeroed after every layer, which is exactly what the zero padding of that clip on
    its own would see, and pooling ignores them; so z does not depend on what else is in the batch.
    """

    def __init__(self, cfg: StyleEncoderConfig):
        super().__init__()
        self.cfg = cfg
        dims = [cfg.input_dim] + [cfg.channels] * cfg.num_layers
        self.convs = nn.ModuleList(
            nn.Conv1d(d_in, d_out, cfg.kernel_size, padding=cfg.kernel_size // 2) for d_in, d_out in zip(dims[:-1], dims[1:], strict=True)
        )
        self.out = nn.Linear(2 * cfg.channels, cfg.z_dim)

    def forward(self, clip: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """clip (B, T, D); lengths (B,) valid frames per clip (None: all T) -> z (B, Z)."""
        if clip.ndim != 3 or clip.shape[-1] != self.cfg.input_dim or clip.shape[1] < 1:
            raise ShapeError(f"clip: expected (B, T >= 1, {self.cfg.input_dim}), got {tuple(clip.shape)}")
        B, T, _ = clip.shape
        mask = None
        if lengths is not None:
            if lengths.shape != (B,) or bool((lengths < 1).any()) or bool((lengths > T).any()):
                raise ShapeError(f"lengths: expected ({B},) ints in [1, {T}], got {lengths.tolist()}")
            mask = (torch.arange(T, device=clip.device)[None, :] < lengths[:, None]).to(clip.dtype)  # (B, T)
            mask = mask[:, None, :]  # (B, 1, T) broadcast over channels
        h = clip.transpose(1, 2)  # (B, D, T) channels first for Conv1d
        if mask is not None:
            h = h * mask
        for conv in self.convs:
            h = F.elu(conv(h))  # (B, C, T)
            if mask is not None:
                h = h * mask
        if mask is None:
            mean, peak = h.mean(dim=2), h.amax(dim=2)  # (B, C) each
        else:
            mean = h.sum(dim=2) / mask.sum(dim=2)  # (B, C)
            peak = h.masked_fill(mask == 0, float("-inf")).amax(dim=2)  # (B, C)
        return self.out(torch.cat([mean, peak], dim=1))  # (B, 2C) -> (B, Z)


class FactorizedAdapter(nn.Module):
    """The additive term ``M1 diag(f(z)) M2 x`` of a factorised one-shot layer (no base weight).

    M1 (D_out, R) and M2 (R, D_in) are shared; ``f`` is a small MLP Z -> hidden -> R whose last layer
    starts at zero, so the adapter starts as exactly zero. Evaluated as ``((x M2^T) * f(z)) M1^T``,
    O(B R (D_in + D_out)), without building the (B, D_out, D_in) weight.
    """

    def __init__(self, in_dim: int, out_dim: int, rank: int, z_dim: int, hidden: int = 64):
        super().__init__()
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("rank", rank), ("z_dim", z_dim), ("hidden", hidden)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"FactorizedAdapter.{name}: expected a positive int, got {value!r}")
        self.in_dim, self.out_dim, self.rank, self.z_dim = in_dim, out_dim, rank, z_dim
        self.m1 = nn.Parameter(torch.empty(out_dim, rank).uniform_(-1, 1) / math.sqrt(rank))  # (D_out, R)
        self.m2 = nn.Parameter(torch.empty(rank, in_dim).uniform_(-1, 1) / math.sqrt(in_dim))  # (R, D_in)
        last = nn.Linear(hidden, rank)
        nn.init.zeros_(last.weight)  # f(z) = 0: the adapter starts as exactly zero
        nn.init.zeros_(last.bias)
        self.f = nn.Sequential(nn.Linear(z_dim, hidden), nn.ELU(), last)

    def scales(self, z: torch.Tensor) -> torch.Tensor:
        """z (B, Z) -> f(z) (B, R), the predicted diagonal."""
        if z.ndim != 2 or z.shape[1] != self.z_dim:
            raise ShapeError(f"z: expected (B, {self.z_dim}), got {tuple(z.shape)}")
        return self.f(z)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """x (B, D_in), z (B, Z) -> M1 diag(f(z)) M2 x, (B, D_out)."""
        s = self.scales(z)  # (B, R)
        if x.ndim != 2 or x.shape != (s.shape[0], self.in_dim):
            raise ShapeError(f"x: expected ({s.shape[0]}, {self.in_dim}), got {tuple(x.shape)}")
        return ((x @ self.m2.T) * s) @ self.m1.T  # (B, R) -> (B, D_out)

    def weight(self, z: torch.Tensor) -> torch.Tensor:
        """The explicit factorised weight M1 diag(f(z)) M2 per sample, (B, D_out, D_in)."""
        s = self.scales(z)  # (B, R)
        return torch.einsum("or,br,ri->boi", self.m1, s, self.m2)  # (B, D_out, D_in)


class FactorizedLinear(nn.Module):
    """``y = W0 x + b0 + M1 diag(f(z)) M2 x``: an ``nn.Linear`` base plus a ``FactorizedAdapter``.

    With ``z=None`` it is the base layer alone; with an untrained adapter (f(z) = 0) it equals it too.
    """

    def __init__(self, in_dim: int, out_dim: int, rank: int, z_dim: int, hidden: int = 64):
        super().__init__()
        self.base = nn.Linear(in_dim, out_dim)
        self.adapter = FactorizedAdapter(in_dim, out_dim, rank, z_dim, hidden)

    def forward(self, x: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, D_in), z (B, Z) or None -> (B, D_out)."""
        y = self.base(x)
        return y if z is None else y + self.adapter(x, z)

    def weight(self, z: torch.Tensor) -> torch.Tensor:
        """The explicit W(z) = W0 + M1 diag(f(z)) M2 per sample, (B, D_out, D_in)."""
        return self.base.weight + self.adapter.weight(z)  # (D_out, D_in) + (B, D_out, D_in)
