"""Euler angles for numpy arrays and torch tensors alike (the conventions of ``core.rotations``): ``order`` is one
of XYZ, XZY, YXZ, YZX, ZXY, ZYX (uppercase), intrinsic, exactly as a BVH channel order: "ZXY" with angles ``a``
means ``m = Rz(a[..., 0]) @ Rx(a[..., 1]) @ Ry(a[..., 2])``, equal to scipy ``Rotation.from_euler("ZXY", a)``.
Radians unless ``degrees=True``.

Legend: ``...`` any leading (batch) dimensions; q quaternion (..., 4); m rotation matrix (..., 3, 3); angles (..., 3).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .rotations import EULER_ORDERS, _check, _ns, quat_to_matrix

__all__ = ["EULER_ORDERS", "euler_to_quat", "euler_to_matrix", "matrix_to_euler", "quat_to_euler"]

_AXIS = {"X": 0, "Y": 1, "Z": 2}


def _parse_order(order: Any) -> tuple[tuple[int, int, int], int]:
    """Axis indices and permutation parity (+1 cyclic, -1 anticyclic) of an intrinsic Euler order."""
    if not isinstance(order, str) or order not in EULER_ORDERS:
        raise ValueError(f"Euler order must be one of {', '.join(EULER_ORDERS)} (intrinsic, uppercase), got {order!r}")
    idx = (_AXIS[order[0]], _AXIS[order[1]], _AXIS[order[2]])
    return idx, (1 if (idx[1] - idx[0]) % 3 == 1 else -1)


def euler_to_quat(angles: Any, order: str, degrees: bool = False) -> Any:
    """WXYZ quaternions from intrinsic Euler angles: order "ZXY" is Rz(a0) @ Rx(a1) @ Ry(a2) (BVH, scipy "ZXY")."""
    (i, j, k), p = _parse_order(order)
    ns, angles = _ns(angles)
    _check(angles, (3,), "angles")
    h = angles * (np.pi / 360.0 if degrees else 0.5)
    c, s = ns.cos(h), ns.sin(h)
    c1, c2, c3, s1, s2, s3 = c[..., 0], c[..., 1], c[..., 2], s[..., 0], s[..., 1], s[..., 2]
    pc = float(p)  # e_i e_j = p e_k for the axis unit quaternions (p = -1 for anticyclic orders)
    out = [c1 * c2 * c3 - pc * (s1 * s2 * s3), None, None, None]
    out[1 + i] = s1 * c2 * c3 + pc * (c1 * s2 * s3)
    out[1 + j] = c1 * s2 * c3 - pc * (s1 * c2 * s3)
    out[1 + k] = c1 * c2 * s3 + pc * (s1 * s2 * c3)
    return ns.stack(out, -1)


def euler_to_matrix(angles: Any, order: str, degrees: bool = False) -> Any:
    """Rotation matrices from intrinsic Euler angles: order "ZXY" is Rz(a0) @ Rx(a1) @ Ry(a2) (BVH, scipy "ZXY")."""
    return quat_to_matrix(euler_to_quat(angles, order, degrees))


def matrix_to_euler(m: Any, order: str, degrees: bool = False) -> Any:
    """Intrinsic Euler angles (..., 3) with m = R_order[0](a0) @ R_order[1](a1) @ R_order[2](a2); middle angle in [-90, 90] deg.

    At gimbal lock (middle angle +-90 deg) the first angle is set to 0 and the third carries the
    rotation; the third angle is always solved from the first, so the round trip is exact and NaN-free.
    """
    (i, j, k), p = _parse_order(order)
    ns, m = _ns(m)
    _check(m, (3, 3), "m")
    idx = (i, j, k)

    def M(r, c):  # m conjugated by the axis permutation: an XYZ decomposition with angles * p
        return m[..., idx[r], idx[c]]

    cb = ns.sqrt(M(0, 0) * M(0, 0) + M(0, 1) * M(0, 1))
    b = ns.atan2(M(0, 2), cb)
    a = ns.where(cb < 16.0 * ns.eps(m), 0.0, ns.atan2(-M(1, 2), M(2, 2)))
    ca, sa = ns.cos(a), ns.sin(a)
    c = ns.atan2(ca * M(1, 0) + sa * M(2, 0), ca * M(1, 1) + sa * M(2, 1))
    out = ns.stack([a, b, c], -1) * float(p)
    return out * (180.0 / np.pi) if degrees else out


def quat_to_euler(q: Any, order: str, degrees: bool = False) -> Any:
    """Intrinsic Euler angles from WXYZ quaternions, same result and gimbal rule as `matrix_to_euler` ("ZXY": Rz @ Rx @ Ry).

    Direct half-angle method (cf. Bernardes & Viollet 2022): after permuting the axes to XYZ,
    (x+z, w+y) and (x-z, w-y) are the half-sum and half-difference of the outer angles scaled by
    cos(b/2) +- sin(b/2); no matrix is built.
    """
    (i, j, k), p = _parse_order(order)
    ns, q = _ns(q)
    _check(q, (4,), "q")
    w, x, y, z = q[..., 0], q[..., 1 + i], q[..., 1 + j], q[..., 1 + k]
    if p < 0:  # an odd axis permutation is a reflection: the angles change sign
        x, y, z = -x, -y, -z
    sp, cp, sm, cm = x + z, w + y, x - z, w - y
    n_p, n_m = ns.hypot(sp, cp), ns.hypot(sm, cm)
    b = 2.0 * ns.atan2(n_p, n_m) - 0.5 * np.pi
    hs, hd = ns.atan2(sp, cp), ns.atan2(sm, cm)  # (a + c) / 2, (a - c) / 2
    tol = 16.0 * ns.eps(q) * (n_p + n_m)
    hd = ns.where(n_m <= tol, -hs, hd)  # gimbal lock: first angle 0, the third carries the rotation
    hs = ns.where(n_p <= tol, -hd, hs)
    a, c = hs + hd, hs - hd
    a = ns.where(a > np.pi, a - 2.0 * np.pi, ns.where(a <= -np.pi, a + 2.0 * np.pi, a))
    c = ns.where(c > np.pi, c - 2.0 * np.pi, ns.where(c <= -np.pi, c + 2.0 * np.pi, c))
    out = ns.stack([a, b, c], -1) * float(p)
    return out * (180.0 / np.pi) if degrees else out
