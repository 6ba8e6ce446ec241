"""The deterministic body in-fill network (``infill-body``): a transformer encoder over frames that predicts
a residual to Blender's Bezier in-fill of the keys (``families.body.fill`` builds its inputs).

Per frame the input is ``R * 7 + 4`` values (R model joints: the Bezier base's 6D local rotation and a keyed
flag each; the root position in metres and its flag), plus a learned embedding of the frame's index. The
output is a 6D residual per joint and a root-position residual (metres), from a zero-initialised layer: the
untrained network returns the base. Keyed elements are restored exactly by ``assemble``, which
also turns the residual into smooth curves over each gap that vanish at the keys with zero velocity (``smooth_residual``).

Trained for the best single answer (``families.body.train``): L1 on global rotations and positions through the
skeleton's forward kinematics, plus L1 on local rotations, over the frames that were not keyed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.core.rotations import matrix_to_quat, rot6d_to_matrix

__all__ = ["InfillBodyConfig", "InfillBody", "assemble", "smooth_residual", "gap_basis", "gap_projection", "gap_blocks",
           "MAX_TERMS", "basis_of"]


@dataclass(frozen=True)
class InfillBodyConfig:
    num_joints: int  # R: model joints (the root's ancestors folded into it)
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 768
    dropout: float = 0.0
    max_frames: int = 128
    basis: str = "sine"  # the correction's curves: "sine" (a bump per gap, ``gap_basis``) | "spline" (``model_spline``)
    contacts: int = 0  # contact logits per frame (the skeleton's feet, ``find_body_joints(...).feet``); 0: none

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
        if cfg.basis not in ("sine", "spline"):
            raise ValueError(f"basis: expected 'sine' or 'spline', got {cfg.basis!r}")
        self.contact = nn.Linear(d, cfg.contacts) if cfg.contacts else None

    def forward(self, features: Tensor, contacts: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """(B, T, R*7+4) -> residual (B, T, R*6+3); ``contacts``: also the contact logits (B, T, cfg.contacts)
        (a model without a contact output raises)."""
        B, T, _ = features.shape
        if T > self.cfg.max_frames:
            raise ValueError(f"{T} frames in one pass; this model takes at most {self.cfg.max_frames}")
        h = self.norm(self.encoder(self.inp(features) + self.frame(torch.arange(T, device=features.device))))
        if not contacts:
            return self.out(h)
        if self.contact is None:
            raise ValueError("this in-fill model has no contact output (config contacts = 0)")
        return self.out(h), self.contact(h)


def basis_of(model) -> str:
    """The correction basis a model was trained with ("sine" for checkpoints from before the field)."""
    return getattr(getattr(model, "cfg", None), "basis", "sine")


def assemble(features: Tensor, residual: Tensor, known: Tensor, smooth: bool = True,
             weights: Tensor | None = None, quats: bool = True, basis: str = "sine"
             ) -> tuple[Tensor, Tensor | None, Tensor]:
    """Base + residual where not keyed: local rotation matrices (B, T, R, 3, 3), quaternions (B, T, R, 4) WXYZ
    and the root position in metres (B, T, 3). ``known`` (B, T, R + 1) bool. ``smooth``: the residual as smooth
    curves over each gap (``smooth_residual``; False only for the parity test). ``weights`` (B, 2): the scale of
    the rotations' and the root's correction (the request-time gate; 0 gives the Bezier base exactly). ``quats``
    False: no quaternions (None in their place), for callers that need only matrices. ``basis``: the model's
    (``basis_of``)."""
    B, T, _ = features.shape
    if smooth:
        residual = smooth_residual(residual, known, basis)
    if weights is not None:
        R6 = residual.shape[-1] - 3
        scale = torch.cat([weights[:, :1].expand(B, R6), weights[:, 1:].expand(B, 3)], -1).to(residual)
        residual = residual * scale[:, None]
    R = known.shape[-1] - 1
    base6 = features[..., : R * 6].reshape(B, T, R, 6)
    root = features[..., R * 7 : R * 7 + 3]
    kr, kp = known[..., :R, None], known[..., R:]
    d6 = torch.where(kr, base6, base6 + residual[..., : R * 6].reshape(B, T, R, 6))
    mats = rot6d_to_matrix(d6)
    pos = torch.where(kp, root, root + residual[..., R * 6 :])
    return mats, matrix_to_quat(mats) if quats else None, pos


# --- the correction as a smooth curve over each gap ----------------------------------------------------------
# The network's per-frame residual is projected, per element (a joint's 6D, the root's position) and per run of
# unkeyed frames, onto a few smooth curves that vanish at the keys with zero velocity: between two keys
# sin(pi s) sin(pi k s), k = 1..K (s from 0 at the key before to 1 at the key after); after the last key (or
# before the first) 1 - cos(pi k s / 2). K grows with the gap (one curve per ``FRAMES_PER_TERM`` frames, at most
# ``MAX_TERMS``), so the correction's shortest wave spans about 16 frames: it cannot jitter, and it meets the keys
# smoothly. With one curve per 4 frames it could wiggle: the demo walk's jerk was 2.3x the truth's (1.5x with 8),
# and Bandai's at 30-frame gaps 1.77x (1.16x), for 1-3% of L2Q at 5 and 15 frames.
MAX_TERMS = 8  # curves per gap, at most
FRAMES_PER_TERM = 8  # one curve per this many gap frames


def gap_basis(n: int, closed: bool, terms: int | None = None) -> np.ndarray:
    """(n, K) smooth curves over a gap of ``n`` frames; ``closed``: keys on both sides (else a key before only)."""
    K = min(n, terms or MAX_TERMS, max(1, -(-n // FRAMES_PER_TERM)))
    k = np.arange(1, K + 1)[None]
    if closed:
        s = np.arange(1, n + 1)[:, None] / (n + 1.0)
        return np.sin(np.pi * s) * np.sin(np.pi * k * s)
    s = np.arange(1, n + 1)[:, None] / float(n)
    return 1.0 - np.cos(np.pi * k * s / 2.0)


@lru_cache(maxsize=1024)
def gap_projection(n: int, closed: bool, backwards: bool = False) -> np.ndarray:
    """(n, n) least-squares projection of a gap's per-frame values onto its ``gap_basis`` curves: one block per
    gap, sized by the gap alone (``backwards``: a gap before the first key, the curve growing back from it)."""
    phi = gap_basis(n, closed)
    if backwards:
        phi = phi[::-1]
    return phi @ np.linalg.pinv(phi)


def gap_blocks(known: np.ndarray) -> tuple[list[tuple[int, bool, bool, np.ndarray, np.ndarray]], np.ndarray]:
    """The gaps of per-row key masks ``known`` (N, T) bool, grouped by shape: [(n, closed, backwards, rows (M,),
    starts (M,))] per distinct gap, and the rows with no key at all (their values pass through unchanged)."""
    N, T = known.shape
    d = np.diff(np.pad((~known).astype(np.int8), ((0, 0), (1, 1))), axis=1)
    r0, s0 = np.nonzero(d == 1)
    r1, e0 = np.nonzero(d == -1)   # row-major: the ends pair with the starts, row by row
    bare = ~known.any(axis=1)
    keep = ~bare[r0]
    r0, s0, e0 = r0[keep], s0[keep], e0[keep]
    n = e0 - s0
    closed = (s0 > 0) & (e0 < T)
    back = (s0 == 0) & (e0 < T)
    groups = []
    code = (n * 2 + closed) * 2 + back
    for c in np.unique(code):
        m = code == c
        groups.append((int(n[m][0]), bool(closed[m][0]), bool(back[m][0]), r0[m], s0[m]))
    return groups, np.flatnonzero(bare)


def _smooth_rows(x: Tensor, known: np.ndarray) -> Tensor:
    """``x`` (N, T, C) per row projected gap by gap (``gap_projection``); zero on keyed frames, as is for rows
    with no key. Each gap costs its own (n, n) block: nothing grows with the square of T."""
    out = torch.zeros_like(x)
    groups, bare = gap_blocks(known)
    for n, closed, back, rows, starts in groups:
        P = torch.as_tensor(gap_projection(n, closed, back), dtype=x.dtype, device=x.device)
        r = torch.as_tensor(rows, device=x.device)[:, None]
        t = torch.as_tensor(starts, device=x.device)[:, None] + torch.arange(n, device=x.device)
        out[r, t] = torch.einsum("st,mtc->msc", P, x[r, t])
    if bare.size:
        b = torch.as_tensor(bare, device=x.device)
        out[b] = x[b]
    return out


def smooth_residual(residual: Tensor, known: Tensor, basis: str = "sine") -> Tensor:
    """The residual (B, T, R*6+3) projected per element onto smooth curves (``known`` (B, T, R + 1)): per gap
    onto ``gap_basis`` (``basis="sine"``), or per run of gaps onto one C2 spline (``"spline"``, ``model_spline``)."""
    from .model_spline import smooth_spline

    smooth = _smooth_rows if basis == "sine" else smooth_spline
    B, T, _ = residual.shape
    E = known.shape[-1]
    R = E - 1
    km = np.moveaxis(known.detach().cpu().numpy().astype(bool), 1, -1)  # (B, E, T)
    rot = residual[..., : R * 6].reshape(B, T, R, 6).permute(0, 2, 1, 3).reshape(B * R, T, 6)
    root = residual[..., R * 6 :]  # (B, T, 3)
    rot = smooth(rot, km[:, :R].reshape(B * R, T)).reshape(B, R, T, 6).permute(0, 2, 1, 3)
    root = smooth(root, km[:, R])
    return torch.cat([rot.reshape(B, T, R * 6), root], dim=-1)
