"""Rotation conversions and operations for numpy arrays and torch tensors alike.

Legend: ``...`` any leading (batch) dimensions; q quaternion (..., 4); m rotation matrix
(..., 3, 3); d 6D rotation (..., 6); v axis-angle or vector (..., 3); angles Euler (..., 3).

Conventions:

- Every function takes numpy arrays or torch tensors and returns the same type, dtype
  (float32 or float64) and device; torch inputs are never converted to numpy, so autograd works.
  Other array-likes (lists, ints) become numpy float64.
- Quaternions are WXYZ (scalar first, as Blender) and are assumed unit unless said otherwise.
  ``q`` and ``-q`` are the same rotation.
- Rotation matrices act on column vectors: ``v' = m @ v``. ``quat_mul(a, b)`` is the rotation
  ``b`` followed by ``a`` (matrix ``A @ B``).
- Euler angles (``core.euler``): ``order`` is one of XYZ, XZY, YXZ, YZX, ZXY, ZYX (uppercase), intrinsic, exactly as a BVH
  channel order: "ZXY" with angles ``a`` means ``m = Rz(a[..., 0]) @ Rx(a[..., 1]) @ Ry(a[..., 2])``,
  equal to scipy ``Rotation.from_euler("ZXY", a)``. Radians unless ``degrees=True``.
- 6D (Zhou et al. 2019): the first two columns of ``m``: ``d = cat(m[..., :, 0], m[..., :, 1])``.
- Axis-angle (log map): the 3-vector ``axis * angle`` with angle in [0, pi].
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import ShapeError

__all__ = [
    "quat_identity", "quat_normalize", "quat_conj", "quat_inv", "quat_mul", "quat_apply",
    "quat_to_matrix", "matrix_to_quat", "quat_to_axis_angle", "axis_angle_to_quat",
    "axis_angle_to_matrix", "matrix_to_axis_angle", "matrix_to_rot6d", "rot6d_to_matrix",
    "quat_to_rot6d", "rot6d_to_quat", "quat_slerp", "quat_continuity", "quat_angle", "quat_between",
    "EULER_ORDERS",
]

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_EPS = 1e-12


# ----------------------------------------------------------------------------- backend shim
class _NumpyNS:
    """numpy backend: the handful of array functions this module needs, under one spelling."""

    sqrt, sin, cos, abs, hypot = (staticmethod(f) for f in (np.sqrt, np.sin, np.cos, np.abs, np.hypot))
    atan2, where, argmax = (staticmethod(f) for f in (np.arctan2, np.where, np.argmax))

    @staticmethod
    def stack(xs, axis=-1):
        return np.stack(xs, axis=axis)

    @staticmethod
    def cat(xs, axis=-1):
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def sum(x, axis=-1, keepdims=False):
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def clip(x, lo=None, hi=None):
        return np.clip(x, lo, hi)

    @staticmethod
    def take_along(x, idx, axis):
        return np.take_along_axis(x, idx, axis=axis)

    @staticmethod
    def cumsum_parity(flips, axis):
        return np.cumsum(flips, axis=axis, dtype=np.int64) % 2 == 1

    @staticmethod
    def moveaxis(x, src, dst):
        return np.moveaxis(x, src, dst)

    @staticmethod
    def asarray(x, like):
        return np.asarray(x, dtype=like.dtype)

    @staticmethod
    def eps(x):
        return float(np.finfo(x.dtype).eps)


class _TorchNS:
    """torch backend, same spelling as `_NumpyNS`; created on first use of a tensor."""

    def __init__(self, torch):
        self.t = torch
        self.sqrt, self.sin, self.cos, self.abs, self.hypot = torch.sqrt, torch.sin, torch.cos, torch.abs, torch.hypot
        self.atan2, self.where, self.argmax = torch.atan2, torch.where, torch.argmax

    def stack(self, xs, axis=-1):
        return self.t.stack(list(xs), dim=axis)

    def cat(self, xs, axis=-1):
        return self.t.cat(list(xs), dim=axis)

    def sum(self, x, axis=-1, keepdims=False):
        return self.t.sum(x, dim=axis, keepdim=keepdims)

    def clip(self, x, lo=None, hi=None):
        return self.t.clamp(x, min=lo, max=hi)

    def take_along(self, x, idx, axis):
        return self.t.take_along_dim(x, idx, dim=axis)

    def cumsum_parity(self, flips, axis):
        return self.t.cumsum(flips.to(self.t.int64), dim=axis) % 2 == 1

    def moveaxis(self, x, src, dst):
        return self.t.movedim(x, src, dst)

    def asarray(self, x, like):
        return self.t.as_tensor(x, dtype=like.dtype, device=like.device)

    def eps(self, x):
        return float(self.t.finfo(x.dtype).eps)


_NP = _NumpyNS()
_TORCH: _TorchNS | None = None


def _ns(*xs: Any) -> tuple[Any, ...]:
    """Backend for the inputs plus the inputs as arrays of that backend (torch wins if any is a tensor)."""
    global _TORCH
    torch = sys.modules.get("torch")
    ref = next((x for x in xs if isinstance(x, torch.Tensor)), None) if torch is not None else None
    if ref is None or torch is None:
        arrs = [np.asarray(x) for x in xs]
        return (_NP, *[a if a.dtype.kind == "f" else a.astype(np.float64) for a in arrs])
    if _TORCH is None:
        _TORCH = _TorchNS(torch)
    dtype = ref.dtype if ref.is_floating_point() else torch.get_default_dtype()
    conv = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=dtype, device=ref.device) for x in xs]
    return (_TORCH, *[x if x.is_floating_point() else x.to(dtype) for x in conv])


def _check(x: Any, shape: tuple[int, ...], name: str) -> None:
    if tuple(x.shape[len(x.shape) - len(shape):]) != shape or x.ndim < len(shape):
        raise ShapeError(f"{name}: expected shape (..., {', '.join(map(str, shape))}), got {tuple(x.shape)}")


def _norm(ns, x, keepdims=True):
    """Euclidean norm over the last axis whose gradient is 0 (not NaN) at the zero vector."""
    s2 = ns.sum(x * x, -1, keepdims)
    pos = s2 > 0
    return ns.where(pos, ns.sqrt(ns.where(pos, s2, 1.0)), 0.0)


def _cross(ns, a, b):
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return ns.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)


# ----------------------------------------------------------------------------- quaternion basics
def quat_identity(shape: int | tuple[int, ...] = (), like: Any = None) -> Any:
    """Identity quaternions WXYZ (1, 0, 0, 0) of shape (*shape, 4); type/dtype/device of ``like`` (default numpy float64)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
        q = torch.zeros(shape + (4,), dtype=dtype, device=like.device)
    else:
        dtype = np.asarray(like).dtype if like is not None else np.float64
        q = np.zeros(shape + (4,), dtype=dtype if np.dtype(dtype).kind == "f" else np.float64)
    q[..., 0] = 1
    return q


def quat_normalize(q: Any) -> Any:
    """Unit quaternion q / |q| (WXYZ); the zero quaternion stays zero."""
    ns, q = _ns(q)
    _check(q, (4,), "q")
    return q / ns.clip(_norm(ns, q), _EPS)


def quat_conj(q: Any) -> Any:
    """Conjugate (w, -x, -y, -z) of WXYZ quaternions; the inverse rotation for unit q."""
    ns, q = _ns(q)
    _check(q, (4,), "q")
    return ns.cat([q[..., :1], -q[..., 1:]], -1)


def quat_inv(q: Any) -> Any:
    """Inverse conj(q) / |q|^2 of WXYZ quaternions (need not be unit)."""
    ns, q = _ns(q)
    return quat_conj(q) / ns.clip(ns.sum(q * q, -1, True), _EPS)


def quat_mul(a: Any, b: Any) -> Any:
    """Hamilton product a * b of WXYZ quaternions (rotation b then a, matrix A @ B), broadcasting."""
    ns, a, b = _ns(a, b)
    _check(a, (4,), "a")
    _check(b, (4,), "b")
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return ns.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], -1)


def quat_apply(q: Any, v: Any) -> Any:
    """Rotate 3-vectors v (..., 3) by unit WXYZ quaternions q (..., 4): ``quat_to_matrix(q) @ v``, broadcasting."""
    ns, q, v = _ns(q, v)
    _check(q, (4,), "q")
    _check(v, (3,), "v")
    u = q[..., 1:]
    t = 2.0 * _cross(ns, u, v)
    return v + q[..., :1] * t + _cross(ns, u, t)


# ----------------------------------------------------------------------------- matrices
def quat_to_matrix(q: Any) -> Any:
    """Rotation matrices (..., 3, 3) acting on column vectors from WXYZ quaternions (normalized implicitly)."""
    ns, q = _ns(q)
    _check(q, (4,), "q")
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    s = 2.0 / ns.clip(ns.sum(q * q, -1), _EPS)
    xx, yy, zz, xy, xz, yz = s * x * x, s * y * y, s * z * z, s * x * y, s * x * z, s * y * z
    wx, wy, wz = s * w * x, s * w * y, s * w * z
    return ns.stack([
        ns.stack([1.0 - yy - zz, xy - wz, xz + wy], -1),
        ns.stack([xy + wz, 1.0 - xx - zz, yz - wx], -1),
        ns.stack([xz - wy, yz + wx, 1.0 - xx - yy], -1),
    ], -2)


def matrix_to_quat(m: Any) -> Any:
    """Unit WXYZ quaternions with w >= 0 from rotation matrices (column-vector convention).

    Shepperd's method: of the four candidates (each proportional to q times one of 4w, 4x, 4y, 4z)
    the one with the largest diagonal term is used, so no square root of a small number is taken
    and gradients stay finite everywhere (identity and 180 degrees included).
    """
    ns, m = _ns(m)
    _check(m, (3, 3), "m")
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    t = [1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22, 1.0 - m00 - m11 + m22]
    wx, wy, wz = m21 - m12, m02 - m20, m10 - m01
    xy, xz, yz = m10 + m01, m02 + m20, m21 + m12
    cand = ns.stack([
        ns.stack([t[0], wx, wy, wz], -1),
        ns.stack([wx, t[1], xy, xz], -1),
        ns.stack([wy, xy, t[2], yz], -1),
        ns.stack([wz, xz, yz, t[3]], -1),
    ], -2)
    best = ns.argmax(ns.stack(t, -1), -1)
    q = ns.take_along(cand, best[..., None, None], -2)[..., 0, :]
    q = q / _norm(ns, q)
    return ns.where(q[..., :1] < 0, -q, q)


# ----------------------------------------------------------------------------- axis-angle
def axis_angle_to_quat(v: Any) -> Any:
    """Unit WXYZ quaternions from axis-angle vectors ``axis * angle`` (Taylor series near 0: finite gradients at identity)."""
    ns, v = _ns(v)
    _check(v, (3,), "v")
    a2 = ns.sum(v * v, -1, True)
    small = a2 < 1e-6
    a = ns.sqrt(ns.where(small, 1.0, a2))
    k = ns.where(small, 0.5 - a2 / 48.0 + a2 * a2 / 3840.0, ns.sin(0.5 * a) / a)  # sin(a/2) / a
    w = ns.where(small, 1.0 - a2 / 8.0 + a2 * a2 / 384.0, ns.cos(0.5 * a))
    return ns.cat([w, v * k], -1)


def quat_to_axis_angle(q: Any) -> Any:
    """Axis-angle vectors ``axis * angle``, angle in [0, pi], from WXYZ quaternions (need not be unit; stable near identity)."""
    ns, q = _ns(q)
    _check(q, (4,), "q")
    neg = q[..., :1] < 0
    w, u = ns.abs(q[..., :1]), ns.where(neg, -q[..., 1:], q[..., 1:])
    s2, w2 = ns.sum(u * u, -1, True), w * w
    small = s2 <= 1e-6 * w2
    s = ns.sqrt(ns.where(small, 1.0, s2))
    r2 = s2 / ns.where(small, w2, 1.0)
    ws = ns.where(small, w, 1.0)
    k = ns.where(small, (2.0 / ws) * (1.0 - r2 / 3.0 + r2 * r2 / 5.0), 2.0 * ns.atan2(s, w) / s)  # angle / |u|
    return u * k


def axis_angle_to_matrix(v: Any) -> Any:
    """Rotation matrices (column vectors) from axis-angle vectors ``axis * angle``."""
    return quat_to_matrix(axis_angle_to_quat(v))


def matrix_to_axis_angle(m: Any) -> Any:
    """Axis-angle vectors ``axis * angle``, angle in [0, pi], from rotation matrices (column vectors)."""
    return quat_to_axis_angle(matrix_to_quat(m))


# ----------------------------------------------------------------------------- 6D
def matrix_to_rot6d(m: Any) -> Any:
    """6D rotations (Zhou et al.): first two matrix columns concatenated, ``cat(m[..., :, 0], m[..., :, 1])``."""
    ns, m = _ns(m)
    _check(m, (3, 3), "m")
    return ns.cat([m[..., :, 0], m[..., :, 1]], -1)


def rot6d_to_matrix(d: Any) -> Any:
    """Rotation matrices from 6D ``cat(col0, col1)`` by Gram-Schmidt; col2 = col0 x col1."""
    ns, d = _ns(d)
    _check(d, (6,), "d")
    a1, a2 = d[..., :3], d[..., 3:]
    b1 = a1 / ns.clip(_norm(ns, a1), _EPS)
    b2 = a2 - ns.sum(b1 * a2, -1, True) * b1
    b2 = b2 / ns.clip(_norm(ns, b2), _EPS)
    return ns.stack([b1, b2, _cross(ns, b1, b2)], -1)


def quat_to_rot6d(q: Any) -> Any:
    """6D rotations ``cat(m[..., :, 0], m[..., :, 1])`` from WXYZ quaternions."""
    return matrix_to_rot6d(quat_to_matrix(q))


def rot6d_to_quat(d: Any) -> Any:
    """Unit WXYZ quaternions (w >= 0) from 6D ``cat(col0, col1)`` rotations (Gram-Schmidt)."""
    return matrix_to_quat(rot6d_to_matrix(d))


# ----------------------------------------------------------------------------- interpolation, misc
def quat_slerp(q0: Any, q1: Any, t: Any) -> Any:
    """Spherical interpolation of unit WXYZ quaternions along the short path; t (...) broadcasts with q's leading dims.

    ``t`` has no quaternion axis: q0, q1 (..., 4) and t (...) broadcast like q0[..., 0], e.g. keys (J, 4)
    and t (T, 1) give (T, J, 4). Returns q0 at t=0 and q1 (or -q1) at t=1; normalized lerp when nearly parallel.
    """
    ns, q0, q1 = _ns(q0, q1)
    _check(q0, (4,), "q0")
    _check(q1, (4,), "q1")
    t = ns.asarray(t, like=q0)[..., None]
    q1 = ns.where(ns.sum(q0 * q1, -1, True) < 0, -q1, q1)
    theta = 2.0 * ns.atan2(_norm(ns, q1 - q0), _norm(ns, q1 + q0))
    near = theta < 1e-4
    sin_t = ns.sin(ns.where(near, 1.0, theta))
    w0 = ns.where(near, 1.0 - t, ns.sin((1.0 - t) * theta) / sin_t)
    w1 = ns.where(near, t, ns.sin(t * theta) / sin_t)
    out = w0 * q0 + w1 * q1
    return ns.where(near, out / ns.clip(_norm(ns, out), _EPS), out)


def quat_continuity(q: Any, axis: int = 0) -> Any:
    """Flip signs of WXYZ quaternions along ``axis`` (time) so consecutive ones have dot >= 0; same rotations."""
    ns, q = _ns(q)
    _check(q, (4,), "q")
    ax = axis + q.ndim if axis < 0 else axis
    if not 0 <= ax < q.ndim - 1:
        raise ValueError(f"axis {axis} is not a time axis of quaternions with shape {tuple(q.shape)}")
    qm = ns.moveaxis(q, ax, 0)
    if qm.shape[0] < 2:
        return q * 1.0
    flips = ns.sum(qm[1:] * qm[:-1], -1) < 0
    odd = ns.cumsum_parity(flips, 0)[..., None]
    out = ns.cat([qm[:1], ns.where(odd, -qm[1:], qm[1:])], 0)
    return ns.moveaxis(out, 0, ax)


def quat_angle(a: Any, b: Any) -> Any:
    """Angle in radians, in [0, pi], of the rotation between WXYZ quaternions a and b (sign-invariant; atan2, precise near 0)."""
    ns, a, b = _ns(a, b)
    r = quat_mul(quat_conj(a), b)
    return 2.0 * ns.atan2(_norm(ns, r[..., 1:], False), ns.abs(r[..., 0]))


def quat_between(u: Any, v: Any) -> Any:
    """Shortest-arc unit WXYZ quaternion q with quat_apply(q, u) parallel to v (any 180 deg turn if antiparallel)."""
    ns, u, v = _ns(u, v)
    _check(u, (3,), "u")
    _check(v, (3,), "v")
    nuv = ns.sqrt(ns.sum(u * u, -1, True) * ns.sum(v * v, -1, True))
    w = nuv + ns.sum(u * v, -1, True)
    anti = w <= 8.0 * ns.eps(w) * nuv
    ux, uy, uz = u[..., 0], u[..., 1], u[..., 2]
    zero = ux * 0.0
    ortho = ns.where((ux * ux < uy * uy)[..., None], ns.stack([zero, uz, -uy], -1), ns.stack([-uz, zero, ux], -1))
    q = ns.where(anti, ns.cat([zero[..., None], ortho], -1), ns.cat([w, _cross(ns, u, v)], -1))
    return q / ns.clip(_norm(ns, q), _EPS)
