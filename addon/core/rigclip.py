"""Rigs as animators have them, in plain numpy (no bpy): every rotation mode read as quaternions and written
back in the bone's own mode, the root translation wherever the rig carries it, and the frames an in-fill
reads (the windows themselves: the vendored library module `vendor.gaps`). The operators read f-curves into these arrays and write the results back.

Legend: T frames, B bones. Quaternions are WXYZ (Blender's order). Euler angles are always (x, y, z) in
radians whatever the order; order "XYZ" applies X first: R = Rz Ry Rx (Blender's convention).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..vendor.quat_np import (
    blender_euler_pair,
    blender_euler_to_quat,
    nearest_euler,
    quat_to_matrix,
    wrap_near,
)

AXIS = {"X": 0, "Y": 1, "Z": 2}
EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
CHANNELS = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4),
            **{o: ("rotation_euler", 3) for o in EULER_ORDERS}}


def axis_angle_to_quat(v: np.ndarray) -> np.ndarray:
    """(..., 4) Blender axis-angle (angle, x, y, z) -> (..., 4) WXYZ (identity for a zero axis)."""
    v = np.asarray(v, np.float64)
    ax = v[..., 1:]
    n = np.linalg.norm(ax, axis=-1, keepdims=True)
    unit = np.where(n > 1e-12, ax / np.maximum(n, 1e-12), 0.0)
    half = v[..., :1] / 2
    return np.concatenate([np.cos(half), np.sin(half) * unit], -1) * np.where(n > 1e-12, 1.0, 0.0) + \
        np.where(n > 1e-12, 0.0, np.array([1.0, 0, 0, 0]))


def quat_to_axis_angle(q: np.ndarray, prev: np.ndarray | None = None) -> np.ndarray:
    """(..., 4) WXYZ -> (..., 4) (angle, x, y, z); with ``prev`` (..., 4) the equivalent value nearest to it:
    the axis on prev's side (angle negated with it), the angle wrapped by 2 pi, prev's axis at angle 0."""
    q = np.asarray(q, np.float64)
    v = q[..., 1:]
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2 * np.arctan2(n[..., 0], q[..., 0])
    fallback = np.array([0.0, 1.0, 0.0]) if prev is None else np.asarray(prev, np.float64)[..., 1:]
    axis = np.where(n > 1e-9, v / np.maximum(n, 1e-12), fallback)
    if prev is not None:
        p = np.asarray(prev, np.float64)
        flip = np.sum(axis * p[..., 1:], -1) < 0
        axis = np.where(flip[..., None], -axis, axis)
        angle = wrap_near(np.where(flip, -angle, angle), p[..., 0])
    return np.concatenate([angle[..., None], axis], -1)


def to_quat(values: np.ndarray, mode: str) -> np.ndarray:
    """(..., C) a bone's rotation channels in ``mode`` -> (..., 4) unit WXYZ."""
    if mode == "QUATERNION":
        v = np.asarray(values, np.float64)
        n = np.linalg.norm(v, axis=-1, keepdims=True)
        return np.where(n > 1e-12, v / np.maximum(n, 1e-12), np.array([1.0, 0, 0, 0]))
    if mode == "AXIS_ANGLE":
        return axis_angle_to_quat(values)
    if mode in EULER_ORDERS:
        return blender_euler_to_quat(values, mode)   # the library's one convention, vendored
    raise ValueError(f"unknown rotation mode {mode!r}")


def from_quat(q: np.ndarray, mode: str, prev: np.ndarray) -> np.ndarray:
    """(T, 4) WXYZ -> (T, C) channels in ``mode``, frame by frame continuous with the one before, the
    first with ``prev`` (C,) (the channels' value on the frame before): no sign flips, no 360 degree jumps.
    The conversions are vectorised; only the choice of the nearest equivalent runs frame by frame."""
    q = np.asarray(q, np.float64)
    out = np.zeros((q.shape[0], CHANNELS[mode][1]))
    last = np.asarray(prev, np.float64)
    if mode == "QUATERNION":
        for t in range(q.shape[0]):
            last = out[t] = q[t] if np.dot(q[t], last) >= 0 else -q[t]
    elif mode == "AXIS_ANGLE":
        for t in range(q.shape[0]):
            last = out[t] = quat_to_axis_angle(q[t], last)
    else:
        one, two = blender_euler_pair(q, mode)
        for t in range(q.shape[0]):
            last = out[t] = nearest_euler(one[t], two[t], last)
    return out


# ------------------------------------------------------------------------------------- root motion

def basis(loc: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(T, 4, 4) pose-bone basis T(loc) R(q) (scale 1)."""
    m = np.zeros(q.shape[:-1] + (4, 4))
    m[..., :3, :3] = quat_to_matrix(q)
    m[..., :3, 3] = loc
    m[..., 3, 3] = 1.0
    return m


def chain_pose(rests: Sequence[np.ndarray], locs: Sequence[np.ndarray], quats: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Armature-space pose matrices (T, 4, 4) of a bone chain, top ancestor first: ``rests`` (4, 4) the
    bones' ``matrix_local``, ``locs`` (T, 3) / ``quats`` (T, 4) their pose channels.
    M_0 = Rest_0 B_0, M_i = M_(i-1) Rest_(i-1)^-1 Rest_i B_i (Blender's pose evaluation without constraints)."""
    out: list[np.ndarray] = []
    for i, (r, lo, q) in enumerate(zip(rests, locs, quats, strict=True)):
        m = np.asarray(r, np.float64) if i == 0 else out[-1] @ (np.linalg.inv(rests[i - 1]) @ r)
        out.append(m @ basis(lo, q))
    return out


def root_in_parent(rests: Sequence[np.ndarray], locs: Sequence[np.ndarray], quats: Sequence[np.ndarray],
                   object_offset: np.ndarray | None = None) -> np.ndarray:
    """(T, 3) the root bone's (last of the chain) head relative to its parent's head, in the parent's posed
    rotation frame (armature axes at rest): R_p^-1 (h_b - h_p + o), o the object's animated location in
    armature axes (``object_offset`` (T, 3), zero if None). No parent: h_b + o."""
    ms = chain_pose(rests, locs, quats)
    h = ms[-1][:, :3, 3] + (0.0 if object_offset is None else object_offset)
    if len(ms) == 1:
        return h
    rp = ms[-2][:, :3, :3] @ np.asarray(rests[-2], np.float64)[:3, :3].T
    return np.einsum("tji,tj->ti", rp, h - ms[-2][:, :3, 3])


def root_location(rests: Sequence[np.ndarray], locs: Sequence[np.ndarray], quats: Sequence[np.ndarray],
                  rel: np.ndarray, object_offset: np.ndarray | None = None) -> np.ndarray:
    """The inverse of :func:`root_in_parent` for the root bone's own location channels: the (T, 3) ``location``
    that puts its head at ``rel`` (T, 3) relative to the parent (``locs[-1]`` is ignored)."""
    parent = chain_pose(rests[:-1], locs[:-1], quats[:-1]) if len(rests) > 1 else []
    o = 0.0 if object_offset is None else object_offset
    rb = np.asarray(rests[-1], np.float64)
    if not parent:
        head, to_bone = np.asarray(rel) - o, np.broadcast_to(rb, (len(rel), 4, 4))
    else:
        mp = parent[-1]
        rp = mp[:, :3, :3] @ np.asarray(rests[-2], np.float64)[:3, :3].T
        head = mp[:, :3, 3] + np.einsum("tij,tj->ti", rp, rel) - o
        to_bone = mp @ (np.linalg.inv(rests[-2]) @ rb)
    inv = np.linalg.inv(to_bone)
    return np.einsum("tij,tj->ti", inv[:, :3, :3], head) + inv[:, :3, 3]


def object_in_parent(rests: Sequence[np.ndarray], locs: Sequence[np.ndarray], quats: Sequence[np.ndarray],
                     mats: np.ndarray, object_offset: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Another object's pose in the frame :func:`root_in_parent` gives the root in: ``mats`` (T, 4, 4) its
    matrices in armature space -> ((T, 3, 3) rotations, (T, 3) positions) relative to the root bone's
    parent's head in its posed rotation frame (armature axes at rest), the rig object's animated location
    ``object_offset`` added as for the root; no parent: armature space plus that offset. The rotations are
    the matrices' nearest rotations (scale removed)."""
    m = np.asarray(mats, np.float64)
    u, _, vt = np.linalg.svd(m[:, :3, :3])
    rot = u @ vt
    pos = m[:, :3, 3] + (0.0 if object_offset is None else object_offset)
    if len(rests) == 1:
        return rot, pos
    ms = chain_pose(rests, locs, quats)
    rp = ms[-2][:, :3, :3] @ np.asarray(rests[-2], np.float64)[:3, :3].T
    return np.einsum("tji,tjk->tik", rp, rot), np.einsum("tji,tj->ti", rp, pos - ms[-2][:, :3, 3])


def units_scale(model_lengths: np.ndarray, rig_lengths: np.ndarray) -> float:
    """Model units per rig unit from the ratio of the mapped bones' summed lengths: the nearest power of ten
    when the ratio is within 10^0.2 (x1.6) of it (a rig in metres -> 100 for a model in cm; a BVH imported at
    scale 1 -> 1, exactly, whatever the actor's size), else the ratio itself (a rig in other units: CMU's ASF
    units, 5.644 cm each, would otherwise walk 1.8 times too fast for the model)."""
    ml, rl = float(np.sum(model_lengths)), float(np.sum(rig_lengths))
    if ml <= 0 or rl <= 0:
        return 1.0
    e = np.log10(ml / rl)
    return float(10.0 ** np.round(e)) if abs(e - np.round(e)) <= 0.2 else ml / rl


def object_offset_for(rests: Sequence[np.ndarray], locs: Sequence[np.ndarray], quats: Sequence[np.ndarray],
                      rel: np.ndarray) -> np.ndarray:
    """(T, 3) the object offset o (armature axes) for which :func:`root_in_parent` gives ``rel``, the bones'
    own channels unchanged: o = R_p rel - (h_b - h_p)."""
    ms = chain_pose(rests, locs, quats)
    now = root_in_parent(rests, locs, quats)
    if len(ms) == 1:
        return np.asarray(rel) - now
    rp = ms[-2][:, :3, :3] @ np.asarray(rests[-2], np.float64)[:3, :3].T
    return np.einsum("tij,tj->ti", rp, np.asarray(rel) - now)
