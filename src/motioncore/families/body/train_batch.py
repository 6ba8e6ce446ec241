"""One training batch of the infill-body recipe: its key pattern (``sample_task``), its windows (``sample_batch``)
and the model's loss on it (``Net``, ``batch_loss``, which live in ``families.body.loss``: Learn This Action
trains with the same loss at request time).

The task and loss designs are described in ``families.body.train``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from motioncore.families.body.loss import JERK_WEIGHT, Net, batch_loss
from motioncore.families.body.train import BodyRecipe

__all__ = ["sample_task", "sample_batch", "another_performer", "Net", "batch_loss", "JERK_WEIGHT"]


def sample_task(rng: np.random.Generator, J: int, max_gap: int = 60, blocking: float = 0.4
                ) -> tuple[np.ndarray, int]:
    """One key pattern ``known`` (T, J + 1) bool (channel J: the root translation) and its longest gap;
    ``blocking`` the share of sparse patterns (a pose every N frames)."""
    if rng.random() >= blocking:  # dense context around a gap
        lengths = np.arange(1, max_gap + 1)
        p = 1.0 / lengths
        gap = int(rng.choice(lengths, p=p / p.sum()))
        ctx = 10 if rng.random() < 0.7 else int(rng.integers(1, 11))
        post = 1 if rng.random() < 0.7 else int(rng.integers(1, 11))
        T = ctx + gap + post
        frames = np.zeros(T, bool)
        frames[:ctx] = True
        frames[ctx + gap:] = True
    else:  # sparse keys every N frames: mostly an animator's blocking, a pose every 6-24 frames
        N = int(rng.integers(6, 25)) if rng.random() < 0.75 else int(rng.integers(2, 31))
        k = max(2, int(math.ceil(48 / N)))
        while N * k + 1 > 121:
            k -= 1
        T = N * k + 1
        frames = np.zeros(T, bool)
        frames[::N] = True
        gap = N - 1
    known = np.repeat(frames[:, None], J + 1, axis=1)
    holes = np.flatnonzero(~frames)
    u = rng.random()
    if u < 0.2 and holes.size:  # some joints keyed inside the gap
        at = rng.choice(holes, size=min(holes.size, int(rng.integers(1, 4))), replace=False)
        joints = rng.choice(J + 1, size=int(rng.integers(1, J // 2 + 1)), replace=False)
        known[np.ix_(at, joints)] = True
    elif u < 0.35:  # a path: the root keyed at every frame
        known[:, J] = True
    elif u < 0.5:  # poses keyed, the root only at the first key
        first = int(np.flatnonzero(frames)[0])
        known[:, J] = False
        known[first, J] = True
    return known, gap


def sample_batch(rng: np.random.Generator, data: dict[str, Any], recipe: BodyRecipe):
    """(rotations (B, T, J, 4), positions (B, T, J, 3), known (B, T, J + 1), gap, contacts (B, T, F) or None:
    the capture's contact labels of the feet, when ``data`` has them)."""
    J = data["skeleton"].num_joints
    known, gap = sample_task(rng, J, recipe.max_gap, recipe.blocking)
    T = known.shape[0]
    B = int(np.clip(recipe.tokens // T, 16, 160 * max(1, recipe.tokens // 2560)))  # a GPU's large batch: more windows
    bounds, source = data["bounds"], data["source"]
    lengths = bounds[:, 1] - bounds[:, 0] - T
    ok = lengths > 0
    w = np.where(ok, lengths, 0).astype(np.float64)
    if source.min() != source.max():  # each source's share of the windows (train_data.SOURCES)
        gest = recipe.gesture_share if (source == 2).any() else 0.0
        for s, share in ((0, 1.0 - recipe.cmu_share - gest), (1, recipe.cmu_share), (2, gest)):
            w[source == s] *= share / max(w[source == s].sum(), 1e-9)
    clip = rng.choice(len(bounds), size=B, p=w / w.sum())
    start = bounds[clip, 0] + (rng.random(B) * lengths[clip]).astype(np.int64)
    idx = start[:, None] + np.arange(T)
    labels = data["contacts"][idx] if "contacts" in data else None
    r, p = data["rotations"][idx].astype(np.float64), data["positions"][idx].astype(np.float64)
    if recipe.posture_deg > 0 or recipe.root_height_cm > 0:
        r, p = another_performer(rng, r, p, data["skeleton"], recipe.posture_deg, recipe.root_height_cm)
    return r, p, np.broadcast_to(known, (B,) + known.shape).copy(), gap, labels


def another_performer(rng: np.random.Generator, rotations: np.ndarray, positions: np.ndarray, skeleton,
                      posture_deg: float, root_height_cm: float) -> tuple[np.ndarray, np.ndarray]:
    """Windows (B, T, J, 4) / (B, T, J, 3) re-posed as another performer would stand, inputs and truth alike: every
    joint below the body root gets its own fixed rotation over the window (a random axis, an angle drawn from a
    normal of ``posture_deg`` degrees) multiplied on the right of its local rotation, and the body root's height
    moves by a uniform +- ``root_height_cm``. Half the windows are left as captured."""
    from motioncore.core.kinematics import find_body_joints
    from motioncore.core.rotations import axis_angle_to_quat, quat_mul

    B, T, J = rotations.shape[:3]
    root = find_body_joints(skeleton).root
    below = np.array([j for j in range(J) if _below(skeleton, j, root) and j != root])
    on = rng.random(B) < 0.5
    axis = rng.normal(size=(B, len(below), 3))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    angle = np.radians(posture_deg) * rng.normal(size=(B, len(below), 1)) * on[:, None, None]
    turn = axis_angle_to_quat(axis * angle)  # (B, |below|, 4)
    r = rotations.copy()
    r[:, :, below] = quat_mul(r[:, :, below], turn[:, None])
    p = positions.copy()
    p[:, :, root, 1] += (rng.uniform(-1.0, 1.0, B) * root_height_cm * on)[:, None]
    return r, p


def _below(skeleton, j: int, root: int) -> bool:
    while j >= 0:
        if j == root:
            return True
        j = skeleton.parents[j]
    return False
