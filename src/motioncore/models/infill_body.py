"""The deterministic body in-fill network (``infill-body``): a transformer encoder over frames that predicts
a residual to Blender's Bezier in-fill of the keys (``tasks.body_fill`` builds its inputs).

Per frame the input is ``R * 7 + 4`` values (R model joints: the Bezier base's 6D local rotation and a keyed
flag each; the root position in metres and its flag), plus a learned embedding of the frame's index. The
output is a 6D residual per joint and a root-position residual (metres), from a zero-initialised layer: the
untrained network returns the base. Keyed elements are restored exactly by ``assemble``.

Trained for the best single answer (``recipes.infill_body``): L1 on global rotations and positions through the
skeleton's forward kinematics, plus L1 on local rotations, over the frames that were not keyed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from ..core.rotations import matrix_to_quat, rot6d_to_matrix

__all__ = ["InfillBodyConfig", "InfillBody", "assemble"]


@dataclass(frozen=True)
class InfillBodyConfig:
    num_joints: int  # R: model joints (the root's ancestors folded into it)
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 768
    dropout: float = 0.0
    max_frames: int = 128

    def to_dict(self) -> dict:
        return asdict(self)


class InfillBody(nn.Module):
    kind = "infill-body"

    def __init__(self, cfg: InfillBodyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        R, d = cfg.num_joints, cfg.d_model
        self.inp = nn.Linear(R * 7 + 4, d)
        self.frame = nn.Embedding(cfg.max_frames, d)
        layer = nn.TransformerEncoderLayer(d, cfg.n_heads, cfg.d_ff, cfg.dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, R * 6 + 3)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, features: Tensor) -> Tensor:
        """(B, T, R*7+4) -> residual (B, T, R*6+3)."""
        B, T, _ = features.shape
        if T > self.cfg.max_frames:
            raise ValueError(f"{T} frames in one pass; this model takes at most {self.cfg.max_frames}")
        h = self.inp(features) + self.frame(torch.arange(T, device=features.device))
        return self.out(self.norm(self.encoder(h)))


def assemble(features: Tensor, residual: Tensor, known: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Base + residual where not keyed: local rotation matrices (B, T, R, 3, 3), quaternions (B, T, R, 4) WXYZ
    and the root position in metres (B, T, 3). ``known`` (B, T, R + 1) bool."""
    B, T, _ = features.shape
    R = known.shape[-1] - 1
    base6 = features[..., : R * 6].reshape(B, T, R, 6)
    root = features[..., R * 7 : R * 7 + 3]
    kr, kp = known[..., :R, None], known[..., R:]
    d6 = torch.where(kr, base6, base6 + residual[..., : R * 6].reshape(B, T, R, 6))
    mats = rot6d_to_matrix(d6)
    pos = torch.where(kp, root, root + residual[..., R * 6 :])
    return mats, matrix_to_quat(mats), pos
