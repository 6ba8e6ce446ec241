"""Match a retargeted clip's rotation convention to the target's own data, without moving any joint.

Retargeting fixes every bone's direction, not the twist about it: rest alignment turns bones by shortest
arcs, so a joint's local rotations can differ from the target capture's by a constant turn about the
bone (and a leaf joint's by any constant turn), with identical joint positions. A model trained on the
target's data (the any-order in-filler) then receives rotations unlike its training set. Given the
target data's mean local rotation per joint (``mean_rotations``, stored in a checkpoint's metadata as
``convention``), ``match_convention`` chooses, parents first,

- for a joint with one child bone: the constant twist about that bone (a grid of 5 degrees, refined to
  0.25) whose local rotations come closest on average to the reference;
- for a leaf joint: the constant turn that puts its mean local rotation on the reference;
- for a joint with several child bones (hips, chest): nothing (the bones pin it).

Every joint position is unchanged (to float precision); only rotations' twists move.
"""
from __future__ import annotations

import numpy as np

from ..core.motion import Motion
from ..core.rotations import axis_angle_to_quat, quat_inv, quat_mul, quat_normalize

__all__ = ["mean_rotations", "match_convention"]


def _mean_quat(q: np.ndarray) -> np.ndarray:
    """Eigen-average of unit quaternions (N, 4) (sign-invariant); w >= 0."""
    m = np.linalg.eigh(np.einsum("ni,nj->ij", q, q))[1][:, -1]
    return m if m[0] >= 0 else -m


def mean_rotations(rotations: np.ndarray) -> np.ndarray:
    """(J, 4) mean local rotation per joint of (N, J, 4) rotations (frames of the target's data)."""
    q = np.asarray(rotations, np.float64)
    return np.stack([_mean_quat(q[:, j]) for j in range(q.shape[1])])


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 2 * np.arccos(np.clip(np.abs(np.sum(a * b, -1)), 0.0, 1.0))


def match_convention(motion: Motion, reference: np.ndarray) -> Motion:
    """``motion`` with each joint's free twist chosen to match ``reference`` (J, 4) (see the module doc)."""
    sk = motion.skeleton
    J = sk.num_joints
    ref = np.asarray(reference, np.float64)
    if ref.shape != (J, 4):
        raise ValueError(f"reference: expected ({J}, 4), got {ref.shape}")
    g, _ = sk.forward_kinematics(motion.rotations, motion.positions)
    g = g.copy()
    ident = np.tile([1.0, 0.0, 0.0, 0.0], (len(g), 1))
    kids = [[c for c in range(J) if sk.parents[c] == j] for j in range(J)]
    for j in range(J):
        p = sk.parents[j]
        gp = g[:, p] if p >= 0 else ident
        if not kids[j]:
            loc = quat_mul(quat_inv(gp), g[:, j])
            g[:, j] = quat_mul(g[:, j], quat_mul(quat_inv(_mean_quat(loc)), ref[j]))
            continue
        bones = [c for c in kids[j] if np.linalg.norm(sk.offsets[c]) > 1e-9]
        if len(bones) != 1:
            continue
        u = sk.offsets[bones[0]] / np.linalg.norm(sk.offsets[bones[0]])

        def cost(th: float, j: int = j, gp: np.ndarray = gp, u: np.ndarray = u) -> float:
            return float(_angle(quat_mul(quat_inv(gp), quat_mul(g[:, j], axis_angle_to_quat(u * th))), ref[j]).mean())

        coarse = np.radians(np.arange(0.0, 360.0, 5.0))
        best = coarse[int(np.argmin([cost(t) for t in coarse]))]
        fine = best + np.radians(np.arange(-5.0, 5.01, 0.25))
        best = fine[int(np.argmin([cost(t) for t in fine]))]
        g[:, j] = quat_mul(g[:, j], axis_angle_to_quat(u * best))
    local = g.copy()
    for j in range(J):
        if sk.parents[j] >= 0:
            local[:, j] = quat_mul(quat_inv(g[:, sk.parents[j]]), g[:, j])
    return Motion(sk, quat_normalize(local), motion.positions.copy(), motion.fps, motion.name)
