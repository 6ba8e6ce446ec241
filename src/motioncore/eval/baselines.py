"""Naive in-betweening baselines of the LaFAN1 benchmark: Zero-Velocity, Interpolation, and Blender's
Bezier F-curves through the keys the model sees (``bezier`` on BVH Euler channels, ``bezier-quat`` on
quaternion channels).

A "model" is any callable ``fill(skeleton, rotations, positions, n_past, n_trans) -> (rotations,
positions)`` on LOCAL rotations (N, T, J, 4) WXYZ and LOCAL translations (N, T, J, 3) of whole windows
(N windows, T frames, J joints). It must not read the transition frames ``[n_past, n_past + n_trans)``
and returns full windows with those frames filled; the target keyframe is frame ``n_past + n_trans``.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.euler import euler_to_quat, quat_to_euler
from ..core.fcurve import keys_bezier
from ..core.rotations import quat_continuity, quat_normalize, quat_slerp
from ..core.skeleton import Skeleton
from ..errors import ShapeError

Fill = Callable[[Skeleton, np.ndarray, np.ndarray, int, int], tuple[np.ndarray, np.ndarray]]


def _check(rotations: np.ndarray, positions: np.ndarray, n_past: int, n_trans: int) -> None:
    if rotations.ndim != 4 or rotations.shape[-1] != 4:
        raise ShapeError(f"rotations: expected (N, T, J, 4), got {rotations.shape}")
    if positions.shape != rotations.shape[:-1] + (3,):
        raise ShapeError(f"positions: expected {rotations.shape[:-1] + (3,)}, got {positions.shape}")
    if n_past < 1 or n_trans < 1 or n_past + n_trans >= rotations.shape[1]:
        raise ShapeError(
            f"need n_past >= 1, n_trans >= 1 and a target frame: n_past={n_past}, n_trans={n_trans}, "
            f"T={rotations.shape[1]}"
        )


def zerovel(
    skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, n_past: int, n_trans: int
) -> tuple[np.ndarray, np.ndarray]:
    """Zero-Vel: every transition frame is a copy of the last context frame ``n_past - 1`` (all joints,
    rotations and translations). (N, T, J, 4), (N, T, J, 3) -> same shapes, new arrays."""
    rotations, positions = np.asarray(rotations), np.asarray(positions)
    _check(rotations, positions, n_past, n_trans)
    rot, pos = rotations.copy(), positions.copy()
    end = n_past + n_trans
    rot[:, n_past:end] = rotations[:, n_past - 1 : n_past]
    pos[:, n_past:end] = positions[:, n_past - 1 : n_past]
    return rot, pos


def interp(
    skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, n_past: int, n_trans: int
) -> tuple[np.ndarray, np.ndarray]:
    """Interp: local translations (root included) lerped and local quaternions slerped (short path,
    normalised ends and results, as LaFAN1) between the last context frame ``n_past - 1`` and the target
    ``n_past + n_trans``; transition frame i (0-based) uses t = (i + 1) / (n_trans + 1).
    (N, T, J, 4), (N, T, J, 3) -> same shapes, new arrays."""
    rotations, positions = np.asarray(rotations), np.asarray(positions)
    _check(rotations, positions, n_past, n_trans)
    rot, pos = rotations.copy(), positions.copy()
    end = n_past + n_trans
    t = (np.arange(1, n_trans + 1, dtype=np.float64) / (n_trans + 1))[None, :, None, None]  # (1, n, 1, 1)
    p0, p1 = positions[:, n_past - 1 : n_past], positions[:, end : end + 1]  # (N, 1, J, 3)
    pos[:, n_past:end] = p0 + t * (p1 - p0)
    q0 = quat_normalize(rotations[:, n_past - 1 : n_past])  # (N, 1, J, 4)
    q1 = quat_normalize(rotations[:, end : end + 1])
    rot[:, n_past:end] = quat_normalize(quat_slerp(q0, q1, t[..., 0]))  # t (1, n, 1) -> (N, n, J, 4)
    return rot, pos


def _key_frames(n_past: int, n_trans: int) -> np.ndarray:
    """Window frame indices of the keys: the context ``[0, n_past)`` and the target ``n_past + n_trans``."""
    return np.r_[np.arange(n_past), n_past + n_trans]


def _bezier_channels(keys: np.ndarray, x: np.ndarray, n_past: int, n_trans: int) -> np.ndarray:
    """Blender Bezier (Auto Clamped, Continuous Acceleration) through key values ``keys`` (N, K, ...) at
    frames ``x`` (K,), evaluated on the transition frames -> (N, n_trans, ...)."""
    N, K = keys.shape[:2]
    y = np.moveaxis(keys, 1, -1).reshape(-1, K)  # (C, K): every (window, channel) is one curve
    out = keys_bezier(x, y, n_past + n_trans + 1)[:, n_past:n_past + n_trans]  # (C, n_trans)
    return np.moveaxis(out.reshape(keys.shape[:1] + keys.shape[2:] + (n_trans,)), -1, 1)


def bezier(
    skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, n_past: int, n_trans: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bezier: what Blender's graph editor gives an animator who keyed the context frames and the target.
    Each joint's local rotation becomes Euler angles in its BVH channel order (radians), unwrapped over
    the keys so no channel jumps by 360 degrees, as in a BVH file; every Euler and translation channel is
    an Auto Clamped Bezier F-curve (``core.fcurve``); back to WXYZ quaternions, sign-continuous with
    the last context frame (L2Q compares quaternions as they are).
    (N, T, J, 4), (N, T, J, 3) -> same shapes, new arrays."""
    rotations, positions = np.asarray(rotations), np.asarray(positions)
    _check(rotations, positions, n_past, n_trans)
    rot, pos = rotations.copy(), positions.copy()
    x = _key_frames(n_past, n_trans)
    end = n_past + n_trans
    pos[:, n_past:end] = _bezier_channels(positions[:, x], x.astype(np.float64), n_past, n_trans)
    for j in range(skeleton.num_joints):
        order = skeleton.rotation_order(j)
        eul = np.unwrap(quat_to_euler(quat_normalize(rotations[:, x, j]), order), axis=1)  # (N, K, 3)
        fill = _bezier_channels(eul, x.astype(np.float64), n_past, n_trans)  # (N, n_trans, 3)
        q = np.concatenate([rotations[:, n_past - 1 : n_past, j], euler_to_quat(fill, order)], axis=1)
        rot[:, n_past:end, j] = quat_continuity(q, axis=1)[:, 1:]  # same sign as the last context key (L2Q)
    return rot, pos


def bezier_quat(
    skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, n_past: int, n_trans: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bezier-Quat: as `bezier`, but each joint's W, X, Y, Z (sign-continuous over the keys) are the
    F-curves, as a quaternion-mode bone in Blender; results normalised.
    (N, T, J, 4), (N, T, J, 3) -> same shapes, new arrays."""
    rotations, positions = np.asarray(rotations), np.asarray(positions)
    _check(rotations, positions, n_past, n_trans)
    rot, pos = rotations.copy(), positions.copy()
    x = _key_frames(n_past, n_trans)
    end = n_past + n_trans
    xf = x.astype(np.float64)
    pos[:, n_past:end] = _bezier_channels(positions[:, x], xf, n_past, n_trans)
    q = quat_continuity(quat_normalize(rotations[:, x]), axis=1)  # (N, K, J, 4)
    rot[:, n_past:end] = quat_normalize(_bezier_channels(q, xf, n_past, n_trans))
    return rot, pos


BASELINES: dict[str, Fill] = {"zerovel": zerovel, "interp": interp, "bezier": bezier, "bezier-quat": bezier_quat}
