"""The block-wise z-score normaliser of X and Y (PFNN convention: one std per feature group, joint
weights), for numpy arrays and torch tensors alike.

Legend: N samples (rows of X / Y), D features.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError
from .layout import Block, Layout


@dataclass(eq=False)
class Normaliser:
    """z-score ``(x - mean) / std`` with the PFNN convention: every column of a group gets the group's
    mean std (Holden: one std per feature block), optionally divided by per-column weights (joint
    weights: a smaller weight gives a larger std, so that joint counts less). Works on numpy arrays and
    torch tensors alike."""

    mean: np.ndarray  # (D,)
    std: np.ndarray  # (D,)

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, np.float64).reshape(-1)
        self.std = np.asarray(self.std, np.float64).reshape(-1)
        if self.mean.shape != self.std.shape or not (self.std > 0).all():
            raise ShapeError(f"Normaliser: mean {self.mean.shape} and std {self.std.shape} must match, std > 0")

    @classmethod
    def fit(cls, x: np.ndarray, groups: Mapping[str, np.ndarray] | Sequence[Any] = (),
            weights: np.ndarray | None = None, eps: float = 1e-8) -> Normaliser:
        """Mean and block-mean std of ``x`` (N, D). ``groups``: name -> column indices (or slices, or
        `Block`s); columns in no group keep their own std. Constant groups get std 1."""
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or len(x) == 0:
            raise ShapeError(f"x: expected (N, D) with N > 0, got {x.shape}")
        mean, col_std = x.mean(0), x.std(0)
        std = col_std.copy()
        items = groups.values() if isinstance(groups, Mapping) else groups
        for g in items:
            cols = g.slice if isinstance(g, Block) else g
            std[cols] = col_std[cols].mean()
        std = np.where(std > eps, std, 1.0)
        if weights is not None:
            w = np.asarray(weights, np.float64)
            if w.shape != std.shape or not (w > 0).all():
                raise ShapeError(f"weights: expected ({len(std)},) positive values, got {w.shape}")
            std = std / w
        return cls(mean, std)

    def _params(self, x: Any) -> tuple[Any, Any]:
        if x.shape[-1] != len(self.mean):
            raise ShapeError(f"expected (..., {len(self.mean)}) features, got {tuple(x.shape)}")
        if isinstance(x, np.ndarray):
            return self.mean.astype(x.dtype), self.std.astype(x.dtype)
        import torch

        return (torch.as_tensor(self.mean, dtype=x.dtype, device=x.device),
                torch.as_tensor(self.std, dtype=x.dtype, device=x.device))

    def transform(self, x: Any) -> Any:
        mean, std = self._params(x)
        return (x - mean) / std

    def inverse(self, z: Any) -> Any:
        mean, std = self._params(z)
        return z * std + mean

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Normaliser:
        try:
            return cls(np.asarray(d["mean"], np.float64), np.asarray(d["std"], np.float64))
        except (KeyError, TypeError, ValueError) as e:
            raise ShapeError(f"normaliser description: {e}") from e


def layout_normalisers(layout: Layout, x: np.ndarray, y: np.ndarray, joint_weights: Any = None
                       ) -> tuple[Normaliser, Normaliser]:
    """Normalisers of X and Y fitted with the layout's groups; ``joint_weights`` (by name or (J,)) scale
    the input joint position and velocity groups (Holden divides their std by the weight)."""
    w = None
    if joint_weights is not None:
        w = layout.joint_weights(joint_weights, [g for g in layout.in_groups if g in ("joint_pos", "joint_vel")])
    return Normaliser.fit(x, layout.in_groups, w), Normaliser.fit(y, layout.out_groups)
