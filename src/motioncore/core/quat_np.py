"""WXYZ quaternions in plain numpy float64: the few operations the add-on and rest alignment need.

Vendored into the Blender add-on by scripts/build_addon.py (imports numpy only); ``core.rotations`` is the
library's full set for numpy and torch alike. Legend: ``...`` leading dimensions; q (..., 4) WXYZ, unit
unless said otherwise; m (..., 3, 3) rotation matrices acting on column vectors.
"""
from __future__ import annotations

import numpy as np

IDENT = np.array([1.0, 0.0, 0.0, 0.0])


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of WXYZ quaternions (``b`` then ``a``), broadcasting over leading axes."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, np.float64), -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (the inverse of a unit quaternion), WXYZ."""
    return np.asarray(q, np.float64) * np.array([1.0, -1.0, -1.0, -1.0])


def quat_apply(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors (..., 3) by unit WXYZ quaternions (..., 4)."""
    qv = np.concatenate([np.zeros(np.shape(v)[:-1] + (1,)), v], -1)
    return quat_mul(quat_mul(q, qv), quat_conj(q))[..., 1:]


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """WXYZ quaternions (..., 4) scaled to unit length; a (near) zero one becomes the identity."""
    q = np.asarray(q, np.float64)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(n > 1e-12, q / np.maximum(n, 1e-12), IDENT)


def quat_align(q: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``q`` (..., 4) with each quaternion's sign flipped where it lies in the other hemisphere from ``ref``: the
    same rotations, sign-continuous with the reference (q and -q are one rotation)."""
    q = np.asarray(q, np.float64)
    return np.where(np.sum(q * np.asarray(ref, np.float64), -1, keepdims=True) < 0, -q, q)


def quat_between_many(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Shortest-arc unit WXYZ quaternions (N, 4) taking directions u (N, 3) onto v (N, 3), for directions never
    antiparallel (a small swing); one that is comes back as the identity."""
    nuv = np.sqrt(np.sum(u * u, -1) * np.sum(v * v, -1))
    return quat_normalize(np.concatenate([(nuv + np.sum(u * v, -1))[:, None], np.cross(u, v)], -1))


def quat_between(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Shortest-arc unit WXYZ quaternion taking direction u (3,) onto v (3,) (a 180 degree turn if antiparallel)."""
    nuv = np.sqrt(u @ u * (v @ v))
    w = nuv + u @ v
    if w <= 1e-12 * nuv:
        o = np.array([0.0, u[2], -u[1]]) if u[0] ** 2 < u[1] ** 2 else np.array([-u[2], 0.0, u[0]])
        q = np.r_[0.0, o]
    else:
        q = np.r_[w, np.cross(u, v)]
    return q / np.linalg.norm(q)


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (radians) between WXYZ rotations, from the chord (no floor from |q| != 1 or arccos near 1)."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    d = np.minimum(np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1))
    return 4 * np.arcsin(np.clip(d / 2, 0.0, 1.0))


def quat_mean(q: np.ndarray) -> np.ndarray:
    """Eigen-average (4,) of WXYZ quaternions (N, 4), sign-invariant; w >= 0."""
    m = np.linalg.eigh(np.einsum("ni,nj->ij", q, q))[1][:, -1]
    return m if m[0] >= 0 else -m


def quat_about(u: np.ndarray, th: float) -> np.ndarray:
    """Unit WXYZ turn by ``th`` radians about the unit axis ``u`` (3,)."""
    return np.r_[np.cos(th / 2), np.sin(th / 2) * u]


def matrix_to_quat(m: np.ndarray) -> np.ndarray:
    """(..., 3, 3) -> (..., 4) unit WXYZ of the nearest rotation (polar decomposition: a scaled or sheared
    matrix, such as an object's world matrix, gives its rotation), w >= 0."""
    u, _, vt = np.linalg.svd(np.asarray(m, np.float64))
    r = u @ vt
    r = np.where((np.linalg.det(r) < 0)[..., None, None], -r, r)   # a mirrored object: its rotation part
    t = np.trace(r, axis1=-2, axis2=-1)
    cand = np.stack([1 + t, 1 + 2 * r[..., 0, 0] - t, 1 + 2 * r[..., 1, 1] - t, 1 + 2 * r[..., 2, 2] - t], -1)
    i = np.argmax(cand, axis=-1)   # the numerically safe pivot
    q = np.zeros(r.shape[:-2] + (4,))
    s = np.sqrt(np.maximum(np.take_along_axis(cand, i[..., None], -1)[..., 0], 1e-300)) * 2   # 4 |q_i|
    w = [r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]]
    pairs = [r[..., 0, 1] + r[..., 1, 0], r[..., 0, 2] + r[..., 2, 0], r[..., 1, 2] + r[..., 2, 1]]
    piv = [np.stack([s / 4, w[0] / s, w[1] / s, w[2] / s], -1),
           np.stack([w[0] / s, s / 4, pairs[0] / s, pairs[1] / s], -1),
           np.stack([w[1] / s, pairs[0] / s, s / 4, pairs[2] / s], -1),
           np.stack([w[2] / s, pairs[1] / s, pairs[2] / s, s / 4], -1)]
    for k in range(4):
        q = np.where((i == k)[..., None], piv[k], q)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def euler_to_quat(angles: np.ndarray, order: str) -> np.ndarray:
    """(..., 3) -> (..., 4) WXYZ from *intrinsic* Euler angles in ``order`` (``angles[..., 0]`` about ``order[0]``,
    applied first in the parent's frame): "ZXY" is Rz(a0) Rx(a1) Ry(a2), BVH channel order. The one Euler
    convention of the project (``core.euler.euler_to_quat`` is the same for numpy and torch, a test checks);
    Blender's rotation modes are read through it by ``blender_euler_to_quat``."""
    axis = {"X": 0, "Y": 1, "Z": 2}
    if not isinstance(order, str) or len(order) != 3 or sorted(order) != ["X", "Y", "Z"]:
        raise ValueError(f"Euler order must be a permutation of 'XYZ', got {order!r}")
    a = np.asarray(angles, np.float64)
    q = np.zeros(a.shape[:-1] + (4,))
    q[..., 0] = 1.0
    for n, c in enumerate(order):   # q = q_order[0] q_order[1] q_order[2]
        turn = np.zeros(a.shape[:-1] + (4,))
        turn[..., 0] = np.cos(a[..., n] / 2)
        turn[..., 1 + axis[c]] = np.sin(a[..., n] / 2)
        q = quat_mul(q, turn)
    return q


def blender_euler_to_quat(xyz: np.ndarray, mode: str) -> np.ndarray:
    """(..., 3) Blender ``rotation_euler`` (x, y, z) in rotation mode ``mode`` ('XYZ': X applied first, so
    R = Rz Ry Rx) -> (..., 4) WXYZ: the intrinsic angles of the reversed order, ``euler_to_quat`` (checked
    against real Blender for all six modes)."""
    axis = {"X": 0, "Y": 1, "Z": 2}
    rev = mode[::-1]
    return euler_to_quat(np.asarray(xyz, np.float64)[..., [axis[c] for c in rev]], rev)


def quat_continuity(q: np.ndarray, axis: int = 0) -> np.ndarray:
    """Signs flipped along ``axis`` (time) so consecutive quaternions have a non-negative dot product (q and -q
    are the same rotation; interpolating f-curves needs the near one). ``core.rotations.quat_continuity`` for
    numpy; a test checks they agree."""
    qm = np.moveaxis(np.asarray(q, np.float64), axis, 0)
    if qm.shape[0] < 2:
        return np.array(q, np.float64)
    flips = np.sum(qm[1:] * qm[:-1], -1) < 0
    odd = (np.cumsum(flips, axis=0) % 2).astype(bool)[..., None]
    return np.moveaxis(np.concatenate([qm[:1], np.where(odd, -qm[1:], qm[1:])], 0), 0, axis)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) WXYZ (normalised here) -> (..., 3, 3)."""
    q = np.asarray(q, np.float64)
    w, x, y, z = np.moveaxis(q / np.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def blender_euler_pair(q: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of :func:`blender_euler_to_quat`: (..., 4) -> both Blender ``rotation_euler`` (x, y, z)
    solutions in rotation mode ``mode`` ('XYZ': X applied first): the principal one (middle angle within
    +-90 degrees) and its twin (a + pi, pi - b, c + pi)."""
    axis = {"X": 0, "Y": 1, "Z": 2}
    m = quat_to_matrix(q)
    i, j, k = (axis[a] for a in mode)
    s = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    a = np.arctan2(s * m[..., k, j], m[..., k, k])
    b = np.arcsin(np.clip(-s * m[..., k, i], -1.0, 1.0))
    c = np.arctan2(s * m[..., j, i], m[..., i, i])
    out = np.zeros(m.shape[:-2] + (3,))
    out[..., i], out[..., j], out[..., k] = a, b, c
    alt = np.zeros_like(out)
    alt[..., i], alt[..., j], alt[..., k] = a + np.pi, np.pi - b, c + np.pi
    return out, alt


def wrap_near(a: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Angles (radians) moved by whole turns to lie within pi of ``ref``."""
    return a - 2 * np.pi * np.round((a - ref) / (2 * np.pi))


def nearest_euler(one: np.ndarray, two: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Of two equivalent Euler solutions (each wrapped near ``prev``), the one nearer ``prev`` (Blender's
    ``to_euler(order, compat)``)."""
    one, two = wrap_near(one, prev), wrap_near(two, prev)
    pick = np.abs(two - prev).sum(-1, keepdims=True) < np.abs(one - prev).sum(-1, keepdims=True)
    return np.where(pick, two, one)


def blender_quat_to_euler(q: np.ndarray, mode: str, prev: np.ndarray | None = None) -> np.ndarray:
    """(..., 4) -> (..., 3) Blender ``rotation_euler`` in ``mode``; with ``prev`` (..., 3) the equivalent angles
    nearest to it (:func:`nearest_euler`)."""
    out, alt = blender_euler_pair(q, mode)
    return out if prev is None else nearest_euler(out, alt, np.asarray(prev, np.float64))


def blend_pose(uq: np.ndarray, up: np.ndarray, fq: np.ndarray, fp: np.ndarray, w: float | np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """From the user's curve (rotations ``uq`` (..., J, 4), positions ``up``) toward the fill (``fq``, ``fp``) by
    ``w``: a number, or per frame an array that broadcasts against the rotations' (..., J) and the positions' (..., 3)
    (a clip's (T, 1)). Rotations by normalised linear interpolation on the user's hemisphere, positions linearly;
    ``w`` 0 gives the user's curve exactly. The one blend of the server's gate (``families.body.gate_curve``) and the
    add-on's correction (``addon/core/correct.py``)."""
    w = np.asarray(w, np.float64)
    wq = w[..., None] if w.ndim else w
    f = np.where(np.sum(uq * fq, -1, keepdims=True) < 0, -fq, fq)
    q = np.where(wq == 0.0, uq, quat_normalize(uq + wq * (f - uq)))
    return q, np.where(w == 0.0, up, up + w * (fp - up))
