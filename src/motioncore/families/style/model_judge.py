"""The style judge (kind ``style-judge``): a temporal conv classifier that names a clip's style from its
pose and relative joint motion. It judges the style model's walks and is trained on real clips only
(`motioncore.families.style.evaluate_judge`), never with the style model: a judge that is not the model.

Legend: B windows, T frames, D features per frame, C conv channels, S styles.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from motioncore.errors import ShapeError


@dataclass(frozen=True)
class StyleJudgeConfig:
    input_dim: int  # D: features per frame
    num_styles: int  # S
    channels: int = 64  # C
    num_layers: int = 3
    kernel_size: int = 5
    dropout: float = 0.2

    def __post_init__(self) -> None:
        for name in ("input_dim", "num_styles", "channels", "num_layers", "kernel_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"StyleJudgeConfig.{name}: expected a positive int, got {getattr(self, name)!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"StyleJudgeConfig.dropout: expected [0, 1), got {self.dropout}")


class StyleJudge(nn.Module):
    """(B, T, D) z-scored per-frame features -> (B, S) style logits: Conv1d + ELU layers (stride 2 after
    the first), mean and max pooling over time, dropout, Linear."""

    def __init__(self, cfg: StyleJudgeConfig):
        super().__init__()
        self.cfg = cfg
        dims = [cfg.input_dim] + [cfg.channels] * cfg.num_layers
        self.convs = nn.ModuleList(nn.Conv1d(a, b, cfg.kernel_size, stride=1 if i == 0 else 2, padding=cfg.kernel_size // 2)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)))
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(2 * cfg.channels, cfg.num_styles)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.cfg.input_dim or x.shape[1] < 1:
            raise ShapeError(f"x: expected (B, T >= 1, {self.cfg.input_dim}), got {tuple(x.shape)}")
        h = x.transpose(1, 2)  # (B, D, T)
        for conv in self.convs:
            h = F.elu(conv(h))
        return self.out(self.drop(torch.cat([h.mean(2), h.amax(2)], 1)))  # (B, 2C) -> (B, S)
