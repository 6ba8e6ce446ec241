"""The deterministic hand in-fill map (``infill-hands``): per finger gap, inputs (``families.hands.fill.gap_inputs``)
to the coefficients of a smooth correction over Blender's Bezier (K basis curves x F finger joints x 3).

A small network by design: the ManipNet hands data has 6 training takes, and a transformer trained to
convergence on them over-fits within a minute (docs/hands.md). ``hidden = 0`` is a linear map (the ridge
fit of ``families.hands.train``); otherwise one hidden layer. Inputs are standardised with the training set's
mean and std (buffers); the output layer starts at zero, so an untrained model *is* the Bezier in-fill.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

__all__ = ["InfillHandsConfig", "InfillHands"]


@dataclass(frozen=True)
class InfillHandsConfig:
    in_dim: int  # D gap inputs
    num_fingers: int = 16  # F finger joints
    basis: int = 4  # K basis curves per gap
    hidden: int = 0  # 0: linear
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class InfillHands(nn.Module):
    kind = "infill-hands"

    def __init__(self, cfg: InfillHandsConfig) -> None:
        super().__init__()
        self.cfg = cfg
        out = cfg.basis * cfg.num_fingers * 3
        self.register_buffer("mean", torch.zeros(cfg.in_dim))
        self.register_buffer("std", torch.ones(cfg.in_dim))
        if cfg.hidden:
            self.body: nn.Module = nn.Sequential(nn.Linear(cfg.in_dim, cfg.hidden), nn.GELU(), nn.Dropout(cfg.dropout))
            self.out = nn.Linear(cfg.hidden, out)
        else:
            self.body = nn.Identity()
            self.out = nn.Linear(cfg.in_dim, out)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, D) gap inputs -> (B, K, F * 3) basis coefficients (axis-angle, radians)."""
        h = self.body((x - self.mean) / self.std)
        return self.out(h).reshape(x.shape[0], self.cfg.basis, self.cfg.num_fingers * 3)
