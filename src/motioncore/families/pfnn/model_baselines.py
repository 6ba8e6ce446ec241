"""Comparison networks for the controllers' evaluation.

``PhaseMLP``: an MLP of the same layer sizes as a PFNN that takes the phase as a plain input
(sin and cos of 2 pi p appended to x), so "does the phase *function* help" is a fair question.
The MANN baseline needs no class: it is ``MANN`` with ``num_experts=1``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class PhaseMLPConfig:
    input_dim: int  # D_in, without the 2 phase columns
    output_dim: int  # D_out
    hidden_dim: int = 512  # units per hidden layer, as the PFNN it is compared with
    num_layers: int = 3  # linear layers
    dropout: float = 0.3  # on each layer's input (keep probability 0.7)

    def __post_init__(self) -> None:
        for name in ("input_dim", "output_dim", "hidden_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.num_layers < 2:
            raise ValueError(f"num_layers: must be >= 2, got {self.num_layers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {self.dropout}")


class PhaseMLP(nn.Module):
    def __init__(self, cfg: PhaseMLPConfig):
        super().__init__()
        self.cfg = cfg
        dims = [cfg.input_dim + 2] + [cfg.hidden_dim] * (cfg.num_layers - 1) + [cfg.output_dim]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers += [nn.Dropout(cfg.dropout), nn.Linear(a, b)]
            if i < len(dims) - 2:
                layers.append(nn.ELU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """x (B, D_in), phase (B,) in cycles -> (B, D_out)."""
        a = 2 * math.pi * phase.to(x.dtype)[:, None]  # (B, 1)
        return self.net(torch.cat([x, torch.sin(a), torch.cos(a)], -1))
