"""The any-order transformer's element codec: motion (WXYZ rotations and a root translation) to elements
and back, one element per channel or one per frame (``group_frames``), the motion config, and the values
seen from a keyed reference frame (``AnyOrderConfig(relative=True)``).

Legend: B batch, T frames, J joints, C channels (J joints + the root), Cg channels of the element grid
(1 when frames are grouped), W the per-channel padded width, E element value width.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from motioncore.core.kinematics import BodyJoints, find_body_joints
from motioncore.core.rotations import matrix_to_rot6d, quat_to_rot6d, rot6d_to_matrix, rot6d_to_quat
from motioncore.families.anyorder.model import KIND_DIMS, AnyOrderConfig

__all__ = [
    "group_channels", "ungroup_channels", "reference_frames", "to_key_frame", "from_key_frame", "motion_config",
    "motion_to_elements", "elements_to_motion",
    "body_joints", "ROOT_SCALE_FRAMES", "root_stats", "to_elements",
]


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


def body_joints(skeleton):
    """``BodyJoints`` for windowing: ``find_body_joints`` for bodies; for a hand (ManipNet: WRIST,
    INDEX_MCP, PINKY_MCP) the wrist as root and index minus pinky knuckle as the across vector."""
    names = [n.upper() for n in skeleton.names]
    if "WRIST" in names and "INDEX_MCP" in names and "PINKY_MCP" in names:
        w, i, p = names.index("WRIST"), names.index("INDEX_MCP"), names.index("PINKY_MCP")
        return BodyJoints(w, (i, p), None, (w,))
    return find_body_joints(skeleton)


ROOT_SCALE_FRAMES = 10  # the root is scaled by the spread of its displacement over this many frames


def root_stats(positions: np.ndarray, root_joint: int) -> dict[str, list[float]]:
    """Normalisation of joint ``root_joint``'s local translation in windows (N, L, J, 3): per axis, the
    mean position and, as the scale, the std (floored at 1e-3) of its displacement over
    ``ROOT_SCALE_FRAMES`` frames. The in-filling residuals live on that scale (a few centimetres), not on
    the window's whole travel (metres): with the travel's std (190 cm along Bandai's facing axis) a
    network error of 0.03 units was a 5 cm bias."""
    r = positions[..., root_joint, :].astype(np.float64)  # (N, L, 3)
    n = min(ROOT_SCALE_FRAMES, r.shape[1] - 1)
    d = (r[:, n:] - r[:, :-n]).reshape(-1, 3) if n > 0 else r.reshape(-1, 3)
    return {"mean": r.reshape(-1, 3).mean(0).tolist(), "std": np.maximum(d.std(0), 1e-3).tolist()}


def to_elements(rotations: np.ndarray, positions: np.ndarray, root_norm: dict[str, list[float]],
                root_joint: int) -> Tensor:
    """Local quaternions (N, L, J, 4) and translations (N, L, J, 3) -> float32 elements (N, L, J+1, 6),
    channel J being joint ``root_joint``'s translation z-scored with ``root_norm``."""
    mean, std = np.asarray(root_norm["mean"]), np.asarray(root_norm["std"])
    root = (positions[..., root_joint, :] - mean) / std
    return motion_to_elements(torch.as_tensor(rotations, dtype=torch.float64),
                              torch.as_tensor(root, dtype=torch.float64)).to(torch.float32)
