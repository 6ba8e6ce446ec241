"""Per-frame hand-object conditions for the hand in-filling model (ManipNet: the object's 6-DoF track).

Everything is derived from the wrist and the object only (never from the fingers, which are what the
model fills): at frame t, with the wrist's world rotation R_w and position p_w and the object's R_o, p_o,

- [0:6]   the object's rotation in the wrist frame, R_w^T R_o, as 6D;
- [6:9]   the object's position in the wrist frame, R_w^T (p_o - p_w), z-scored (``norm``);
- [9:12]  its velocity in the wrist frame, (rel(t + 2) - rel(t - 2)) / 4 frames (ends clamped), z-scored;
- [12]    the wrist-object distance |p_o - p_w|, z-scored;
- [13]    1 (the object is there). A request without an object sends the zero vector.

These are invariant to any rigid move of the world (the windows' yaw re-framing included), so they are
computed on the clips as captured and cut into windows alongside the hand.

Legend: T frames, D = COND_DIM features.
"""
from __future__ import annotations

import numpy as np

from ..core.rotations import quat_apply, quat_conj, quat_mul, quat_normalize, quat_to_rot6d
from .windows import window_starts

__all__ = ["COND_DIM", "VEL_FRAMES", "object_features", "cond_stats", "normalise_cond", "window_cond"]

COND_DIM = 14
VEL_FRAMES = 2  # velocity from rel(t + 2) - rel(t - 2)
_SCALED = slice(6, 13)  # the z-scored dims


def object_features(wrist_q: np.ndarray, wrist_p: np.ndarray, obj_q: np.ndarray, obj_p: np.ndarray) -> np.ndarray:
    """Raw (unnormalised) features (T, COND_DIM) from WXYZ world rotations (T, 4) and positions (T, 3)."""
    wq, oq = quat_normalize(np.asarray(wrist_q, np.float64)), quat_normalize(np.asarray(obj_q, np.float64))
    wp, op = np.asarray(wrist_p, np.float64), np.asarray(obj_p, np.float64)
    inv = quat_conj(wq)
    rot = quat_to_rot6d(quat_mul(inv, oq))  # (T, 6)
    rel = quat_apply(inv, op - wp)  # (T, 3)
    T = rel.shape[0]
    t = np.arange(T)
    a, b = np.clip(t + VEL_FRAMES, 0, T - 1), np.clip(t - VEL_FRAMES, 0, T - 1)
    vel = (rel[a] - rel[b]) / np.maximum(a - b, 1)[:, None]
    dist = np.linalg.norm(op - wp, axis=-1, keepdims=True)
    return np.concatenate([rot, rel, vel, dist, np.ones((T, 1))], -1)


def cond_stats(raw: np.ndarray) -> dict[str, list[float]]:
    """Mean and std (floored at 1e-3) of the z-scored dims over raw features (..., COND_DIM)."""
    x = np.asarray(raw, np.float64)[..., _SCALED].reshape(-1, _SCALED.stop - _SCALED.start)
    return {"mean": x.mean(0).tolist(), "std": np.maximum(x.std(0), 1e-3).tolist()}


def normalise_cond(raw: np.ndarray, norm: dict[str, list[float]]) -> np.ndarray:
    """Raw features (..., COND_DIM) -> the model's input (float32): dims 6..12 z-scored with ``norm``."""
    out = np.array(raw, np.float64)
    out[..., _SCALED] = (out[..., _SCALED] - np.asarray(norm["mean"])) / np.asarray(norm["std"])
    return out.astype(np.float32)


def window_cond(clips, length: int, offset: int, root_joint: int = 0) -> np.ndarray:
    """Raw features (N, length, COND_DIM) of every window of ``clips`` in ``lafan1_windows``' order (the
    same starts); the root joint must be a skeleton root (its local pose is its world pose). Clips without
    an object track give zeros (no object)."""
    out = []
    for c in clips:
        if int(c.motion.skeleton.parents[root_joint]) >= 0:
            raise ValueError("window_cond: the root joint must have no parent")
        if "object_rotations" in c.extras:
            f = object_features(c.motion.rotations[:, root_joint], c.motion.positions[:, root_joint],
                                c.extras["object_rotations"], c.extras["object_positions"])
        else:
            f = np.zeros((c.motion.num_frames, COND_DIM))
        out.extend(f[s:s + length] for s in window_starts(c.motion.num_frames, length, offset))
    return np.stack(out)
