"""Phase-Functioned Neural Network (Holden, Komura, Saito, SIGGRAPH 2017).

Legend: B batch, K control points (weight sets blended per sample), S stored sets of a runtime,
D features (D_in, D_out per layer), R style adapter rank, Z style code size.

Every layer holds K = 4 weight sets placed around the phase cycle; the weights used for a frame are a
cyclic Catmull-Rom blend of them at the frame's phase p in [0, 1) (a fraction of the cycle, not
radians). The blend is linear, so ``W(p) x = sum_k c_k(p) W_k x`` for dense coefficients c (B, K):
the net can either build W(p) per sample (``mode="weights"``) or run every control point and blend
the outputs (``mode="outputs"``, the default: faster on CPU at every batch size we measured, and it
batches characters with different phases). Both are exact. ``BlendedLinear`` and ``BlendedMLP`` take
arbitrary coefficients, so MANN reuses them with gating coefficients in place of c(p).

``PFNNRuntime`` (``families.pfnn.model_runtime``) holds the precomputed modes of Holden's runtime (constant: 50
sets, nearest; linear: 10 sets, lerp; cubic: the 4 control points, exact) for inference only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from motioncore.errors import ShapeError
from motioncore.families.style.model_layers import FactorizedAdapter

MODES = ("weights", "outputs")


@dataclass(frozen=True)
class PFNNConfig:
    input_dim: int  # D_in: input features per frame (342 in Holden's data); the phase is not a column
    output_dim: int  # D_out: output features per frame (311 in Holden's data)
    hidden_dim: int = 512  # width of every hidden layer
    num_layers: int = 3  # phase-blended linear layers (num_layers - 1 hidden layers, ELU between)
    dropout: float = 0.3  # drop probability on every layer's input in training (Holden: keep 0.7)
    control_points: int = 4  # K: weight sets around the phase cycle (cyclic Catmull-Rom needs >= 4)
    style_rank: int = 0  # R: rank of each layer's one-shot style adapter (0 = off)
    style_dim: int = 0  # Z: size of the style code z the adapters read (0 = off; set both or neither)

    def __post_init__(self) -> None:
        check_dims(self, ("input_dim", "output_dim", "hidden_dim", "num_layers"), minimum=1)
        check_dims(self, ("style_rank", "style_dim"), minimum=0)
        check_dropout(self)
        if not isinstance(self.control_points, int) or self.control_points < 4:
            raise ValueError(f"PFNNConfig.control_points: expected an int >= 4, got {self.control_points!r}")
        check_style(self)


def check_dims(cfg: Any, names: tuple[str, ...], minimum: int) -> None:
    """Raise ValueError naming the first field of ``cfg`` that is not an int >= ``minimum``."""
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{type(cfg).__name__}.{name}: expected an int >= {minimum}, got {value!r}")


def check_dropout(cfg: Any) -> None:
    value = cfg.dropout
    if not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValueError(f"{type(cfg).__name__}.dropout: expected a probability in [0, 1), got {value!r}")


def check_style(cfg: Any) -> None:
    rank, dim = cfg.style_rank, cfg.style_dim
    if (rank == 0) != (dim == 0):
        raise ValueError(f"{type(cfg).__name__}.style_rank/style_dim: set both > 0 or both 0, got {rank} and {dim}")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")


# --- cyclic Catmull-Rom ------------------------------------------------------------------------------


def catmull_rom_weights(phase: torch.Tensor, num_points: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Cyclic Catmull-Rom over ``num_points`` control points (Holden's formula, as in REFERENCES.md).

    phase (B,) in cycles (any real; only its fractional part matters) -> (idx (B, 4) long, w (B, 4)):
    control points k1-1, k1, k1+1, k1+2 (mod K) and their weights, which sum to 1. At p = k/K the
    weights are exactly (0, 1, 0, 0), i.e. control point k. Differentiable in ``phase`` through w.
    """
    if phase.ndim != 1 or not phase.is_floating_point():
        raise ShapeError(f"phase: expected a float (B,) tensor, got {phase.dtype} {tuple(phase.shape)}")
    pscale = num_points * phase  # (B,)
    base = torch.floor(pscale)
    mu = pscale - base  # (B,) in [0, 1)
    k1 = base.long() % num_points
    idx = (k1[:, None] + torch.arange(-1, 3, device=phase.device)) % num_points  # (B, 4)
    mu2, mu3 = mu * mu, mu * mu * mu
    w = torch.stack(
        [
            -0.5 * mu + mu2 - 0.5 * mu3,
            1.0 - 2.5 * mu2 + 1.5 * mu3,
            0.5 * mu + 2.0 * mu2 - 1.5 * mu3,
            -0.5 * mu2 + 0.5 * mu3,
        ],
        dim=1,
    )  # (B, 4)
    return idx, w


def catmull_rom_dense(phase: torch.Tensor, num_points: int = 4) -> torch.Tensor:
    """The same blend as coefficients per control point: phase (B,) -> (B, K), zeros where unused."""
    idx, w = catmull_rom_weights(phase, num_points)
    return torch.zeros(phase.shape[0], num_points, dtype=w.dtype, device=w.device).scatter_add(1, idx, w)  # (B, K)


# --- blended layers (shared with MANN) --------------------------------------------------------------------


class BlendedLinear(nn.Module):
    """A linear layer with K weight sets, blended per sample by coefficients c (B, K):
    ``y = (sum_k c_k W_k) x + sum_k c_k b_k``. Init: uniform +-sqrt(6 / (D_in * D_out)) (a product, as
    Holden's and Starke's code), zero biases."""

    def __init__(self, num_sets: int, in_dim: int, out_dim: int):
        super().__init__()
        bound = math.sqrt(6.0 / (in_dim * out_dim))
        self.weight = nn.Parameter(torch.empty(num_sets, out_dim, in_dim).uniform_(-bound, bound))  # (K, D_out, D_in)
        self.bias = nn.Parameter(torch.zeros(num_sets, out_dim))  # (K, D_out)

    def forward(self, x: torch.Tensor, coeff: torch.Tensor, mode: str = "outputs") -> torch.Tensor:
        """x (B, D_in), coeff (B, K) -> (B, D_out). "weights" builds W (B, D_out, D_in) then bmm;
        "outputs" runs every set and blends the outputs (no per-sample W)."""
        bias = coeff @ self.bias  # (B, K) @ (K, D_out) -> (B, D_out)
        if mode == "weights":
            w = torch.einsum("bk,koi->boi", coeff, self.weight)  # (B, D_out, D_in)
            return torch.baddbmm(bias[:, :, None], w, x[:, :, None])[:, :, 0]  # (B, D_out, 1) -> (B, D_out)
        per_set = torch.einsum("bi,koi->bko", x, self.weight)  # (B, K, D_out): every set's W_k x
        return torch.einsum("bk,bko->bo", coeff, per_set) + bias  # (B, D_out)


class BlendedMLP(nn.Module):
    """Stack of ``BlendedLinear`` with dropout on each layer's input and ELU between layers (none after
    the last); optionally a ``FactorizedAdapter`` per layer added to its blended output when z is given."""

    def __init__(self, num_sets: int, dims: list[int], dropout: float, style_rank: int = 0, style_dim: int = 0):
        super().__init__()
        pairs = list(zip(dims[:-1], dims[1:], strict=True))
        self.layers = nn.ModuleList(BlendedLinear(num_sets, d_in, d_out) for d_in, d_out in pairs)
        self.drop = nn.Dropout(dropout)
        self.adapters = (
            nn.ModuleList(FactorizedAdapter(d_in, d_out, style_rank, style_dim) for d_in, d_out in pairs)
            if style_rank > 0
            else None
        )

    def layer_list(self) -> list[BlendedLinear]:
        return cast(list[BlendedLinear], list(self.layers))

    def adapter_list(self) -> list[FactorizedAdapter]:
        """The style adapters, one per layer ([] when style is off)."""
        return [] if self.adapters is None else cast(list[FactorizedAdapter], list(self.adapters))

    def forward(
        self, x: torch.Tensor, coeff: torch.Tensor, z: torch.Tensor | None = None, mode: str = "outputs"
    ) -> torch.Tensor:
        """x (B, D_in), coeff (B, K), z (B, Z) or None -> (B, D_out)."""
        check_mode(mode)
        if z is not None and self.adapters is None:
            raise ValueError("z: this model has no style adapters (style_rank = 0); pass z=None")
        adapters = self.adapter_list()
        h = x
        for i, layer in enumerate(self.layers):
            h = self.drop(h)
            y = layer(h, coeff, mode)
            if z is not None:
                y = y + adapters[i](h, z)
            h = F.elu(y) if i < len(self.layers) - 1 else y
        return h


def check_batch(x: torch.Tensor, dim: int, name: str = "x") -> int:
    """x must be (B, dim); returns B."""
    if x.ndim != 2 or x.shape[1] != dim:
        raise ShapeError(f"{name}: expected (B, {dim}), got {tuple(x.shape)}")
    return x.shape[0]


# --- the model -------------------------------------------------------------------------------------------


class PFNN(nn.Module):
    """PFNN: ``forward(x (B, D_in), phase (B,) in cycles, z (B, Z) | None, mode) -> y (B, D_out)``."""

    def __init__(self, cfg: PFNNConfig):
        super().__init__()
        self.cfg = cfg
        dims = [cfg.input_dim] + [cfg.hidden_dim] * (cfg.num_layers - 1) + [cfg.output_dim]
        self.net = BlendedMLP(cfg.control_points, dims, cfg.dropout, cfg.style_rank, cfg.style_dim)

    def phase_coefficients(self, phase: torch.Tensor) -> torch.Tensor:
        """phase (B,) -> dense Catmull-Rom coefficients (B, K)."""
        return catmull_rom_dense(phase, self.cfg.control_points)

    def forward(
        self, x: torch.Tensor, phase: torch.Tensor, z: torch.Tensor | None = None, mode: str = "outputs"
    ) -> torch.Tensor:
        B = check_batch(x, self.cfg.input_dim)
        if phase.shape != (B,):
            raise ShapeError(f"phase: expected ({B},) in cycles, got {tuple(phase.shape)}")
        coeff = self.phase_coefficients(phase).to(x.dtype)  # (B, K)
        return self.net(x, coeff, z, mode)
