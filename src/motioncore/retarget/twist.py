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

The twists are fitted on at most ``FIT_FRAMES`` frames spread evenly over the clip (every frame of a shorter one).

Every joint position is unchanged (to float precision); only rotations' twists move.
"""
from __future__ import annotations

import numpy as np

from ..core.motion import Motion
from ..core.quat_np import quat_mean
from ..core.rotations import quat_inv, quat_mul, quat_normalize
from . import rest

__all__ = ["mean_rotations", "match_convention"]


def mean_rotations(rotations: np.ndarray) -> np.ndarray:
    """(J, 4) mean local rotation per joint of (N, J, 4) rotations (frames of the target's data)."""
    q = np.asarray(rotations, np.float64)
    return np.stack([quat_mean(q[:, j]) for j in range(q.shape[1])])


FIT_FRAMES = 2048  # frames the twists are fitted on, evenly spread (a longer clip: its cost stays bounded)


def match_convention(motion: Motion, reference: np.ndarray) -> Motion:
    """``motion`` with each joint's free twist chosen to match ``reference`` (J, 4) (see the module doc)."""
    sk = motion.skeleton
    J = sk.num_joints
    ref = np.asarray(reference, np.float64)
    if ref.shape != (J, 4):
        raise ValueError(f"reference: expected ({J}, 4), got {ref.shape}")
    g, _ = sk.forward_kinematics(motion.rotations, motion.positions)
    fit = np.unique(np.linspace(0, len(g) - 1, min(len(g), FIT_FRAMES)).round().astype(np.int64))
    g = quat_mul(g, rest.twists(g[fit], list(sk.parents), sk.offsets, ref, np.ones(J, bool)))   # each (T, J, 4)
    local = g.copy()
    for j in range(J):
        if sk.parents[j] >= 0:
            local[:, j] = quat_mul(quat_inv(g[:, sk.parents[j]]), g[:, j])
    return Motion(sk, quat_normalize(local), motion.positions.copy(), motion.fps, motion.name)
