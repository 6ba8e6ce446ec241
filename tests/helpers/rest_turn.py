"""A clip re-expressed on another rest convention, its world motion unchanged (the probe of
../shared/notes/transfer.md): each joint's frame turned by a fixed rotation R_j, so

    L'_j = R_parent^-1 L_j R_j       o'_j = R_parent^-1 o_j (offsets and position channels)       end sites R_j^-1 o_e

(the root: R_parent = identity). World joint positions are unchanged; world rotations become G_j R_j.
"""
from __future__ import annotations

import numpy as np

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_apply, quat_inv, quat_mul, quat_normalize
from motioncore.core.skeleton import Skeleton

IDENT = np.array([1.0, 0.0, 0.0, 0.0])


def about(axis: np.ndarray, deg: float) -> np.ndarray:
    """The turn of ``deg`` degrees about ``axis`` (WXYZ)."""
    a = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    h = np.radians(deg) / 2
    return np.concatenate([[np.cos(h)], np.sin(h) * a])


def random_turns(J: int, deg: float, seed: int = 0) -> np.ndarray:
    """(J, 4) turns of ``deg`` degrees each about random axes."""
    rng = np.random.default_rng(seed)
    return np.stack([about(rng.normal(size=3), deg) for _ in range(J)])


def roll_turns(skeleton: Skeleton, deg: float) -> np.ndarray:
    """(J, 4) turns of ``deg`` degrees about each joint's bone: the offset to its first child with a length (else
    its first end site; a joint with neither: no turn), as a re-export with other bone rolls."""
    sk = skeleton
    ends = {j: np.asarray(o, np.float64) for j, o in reversed(sk.end_sites)}
    out = np.tile(IDENT, (sk.num_joints, 1))
    for j in range(sk.num_joints):
        bone = next((sk.offsets[c] for c in sk.children(j) if np.linalg.norm(sk.offsets[c]) > 1e-9), ends.get(j))
        if bone is not None and np.linalg.norm(bone) > 1e-9:
            out[j] = about(bone, deg)
    return out


def turn_rest(motion: Motion, R: np.ndarray) -> Motion:
    """``motion`` with each joint's frame turned by ``R`` (J, 4) (module docstring): the same world motion."""
    sk = motion.skeleton
    R = np.asarray(R, np.float64)
    par = [int(p) for p in sk.parents]
    Rp = np.stack([R[p] if p >= 0 else IDENT for p in par])      # (J, 4)
    inv_p = quat_inv(Rp)
    rot = quat_normalize(quat_mul(quat_mul(inv_p[None], motion.rotations), R[None]))
    pos = quat_apply(np.broadcast_to(inv_p, motion.positions.shape[:-1] + (4,)), motion.positions)
    off = quat_apply(inv_p, sk.offsets)
    ends = tuple((j, tuple(quat_apply(quat_inv(R[j]), np.asarray(o, np.float64)))) for j, o in sk.end_sites)
    new = Skeleton(sk.names, sk.parents, off, sk.channels, ends)
    return Motion(new, rot, pos, motion.fps, motion.name)
