"""The learnet PFNN (kind ``learnet-pfnn``): a PFNN with factorised style adapters ``W_k + M1 diag(f(z)) M2``
plus the encoder that reads the style code z from an exemplar clip; `StyledPFNN` is its PFNN with one z fixed.
`motioncore.families.style.generate.StyleAdapter` uses them to walk paths in an exemplar's style.

Legend: B batch, W exemplar windows, L rows per window, D_in PFNN inputs, D_out outputs, Z style code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from motioncore.families.pfnn.model import PFNN, PFNNConfig
from motioncore.families.style.model_layers import StyleEncoder, StyleEncoderConfig


@dataclass
class LearnetPFNNConfig:
    """The two halves of a ``learnet-pfnn`` checkpoint's config (as JSON objects or configs)."""

    pfnn: Any
    encoder: Any

    def __post_init__(self) -> None:
        if isinstance(self.pfnn, dict):
            self.pfnn = PFNNConfig(**self.pfnn)
        if isinstance(self.encoder, dict):
            self.encoder = StyleEncoderConfig(**self.encoder)


class LearnetPFNN(nn.Module):
    """A PFNN with style adapters plus the encoder that reads z from an exemplar clip."""

    def __init__(self, pfnn_cfg: PFNNConfig | LearnetPFNNConfig, encoder_cfg: StyleEncoderConfig | None = None):
        super().__init__()
        if isinstance(pfnn_cfg, LearnetPFNNConfig):
            pfnn_cfg, encoder_cfg = pfnn_cfg.pfnn, pfnn_cfg.encoder  # type: ignore[union-attr]
        assert isinstance(pfnn_cfg, PFNNConfig) and isinstance(encoder_cfg, StyleEncoderConfig)
        if pfnn_cfg.style_dim != encoder_cfg.z_dim or pfnn_cfg.style_rank < 1:
            raise ValueError(f"style_dim {pfnn_cfg.style_dim} must equal z_dim {encoder_cfg.z_dim}, style_rank >= 1")
        self.pfnn = PFNN(pfnn_cfg)
        self.encoder = StyleEncoder(encoder_cfg)

    def forward(self, x: Tensor, phase: Tensor, z: Tensor | None = None) -> Tensor:
        """x (B, D_in), phase (B,), z (B, Z) or None -> y (B, D_out)."""
        return self.pfnn(x, phase, z)

    def encode(self, exemplar: Tensor, lengths: Tensor | None = None) -> Tensor:
        """exemplar (W, L, D_in) z-scored X rows -> z (W, Z)."""
        return self.encoder(exemplar, lengths)


class StyledPFNN(nn.Module):
    """The learnet's PFNN with one style code fixed: ``forward(x, phase, mode)`` like a plain PFNN, so a
    `PFNNController` rolls it out unchanged."""

    def __init__(self, pfnn: PFNN, z: Tensor):
        super().__init__()
        self.pfnn, self.cfg = pfnn, pfnn.cfg
        self.register_buffer("z", z.reshape(1, -1))

    def forward(self, x: Tensor, phase: Tensor, mode: str = "outputs") -> Tensor:
        z: Tensor = self.z  # type: ignore[assignment]  # a registered buffer
        return self.pfnn(x, phase, z.to(x.dtype).expand(x.shape[0], -1), mode)
