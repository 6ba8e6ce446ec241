"""Foot-contact preservation after retargeting: where the source foot is planted, the target's ankle is
pinned in place by two-bone IK on the leg, so the feet do not slide.

Retargeting by rotations keeps every bone's direction but not where the feet land: a target with other
proportions (or a root scaled by leg length) slides its planted feet. For each leg (hip, knee, ankle of
the target) and each run of frames where the source's ankle is in contact, the target ankle's goal is
its mean ground position (x, z) over the run at its own height per frame; the goal blends in and out
over ``blend`` frames around the run so nothing pops. Per frame, analytic two-bone IK: the knee bends
about the leg's plane normal to make the hip-ankle distance reach the goal (lengths kept: the goal is
clamped to what the leg can reach), then the hip swings the whole leg onto the goal (shortest arc).
The ankle's world rotation is kept, so the foot keeps its orientation; nothing above the hips moves.

Contacts: ``core.feet.contacts`` of the source's ankles (the one foot-contact definition of the in-fill and its
benchmarks: within 3 cm of the ankle's own ground and under 40 cm/s), in cm from the source's units
(`source_cm_per_unit`: its legs against a human's, snapped to a power of ten when near one).

Feet on the target's ground (`stand_on`): a retargeted clip is moved up or down, as a whole, so that its contact
height (``core.feet.contact_height``: the median over frames of the lowest toe's height) is the target clip's.

Legend: T frames, J joints. Quaternions WXYZ, numpy float64.
"""
from __future__ import annotations

import numpy as np

from ..core import feet
from ..core.gaps import runs as mask_runs
from ..core.kinematics import BodyJoints, find_body_joints
from ..core.motion import Motion
from ..core.plant import two_bone_ik
from ..core.rotations import quat_inv, quat_mul, quat_normalize
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from .mapping import RetargetError
from .topology import find_body, foot_joints

__all__ = ["leg_chains", "source_contacts", "pin_feet", "contact_thresholds", "feet_of", "source_cm_per_unit",
           "contact_height_of", "stand_on"]

HEIGHT_FRAC, SPEED_FRAC = 0.10, 0.60
HUMAN_LEG_CM = 82.0   # thigh + shin of an adult: Bandai 80 cm, CMU 07 81 cm (14.3 ASF units), CMU in cm 83-84


def feet_of(skeleton: Skeleton, poses: np.ndarray | None = None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(left, right) legs' foot and toe joints for ``core.feet``: by topology (`retarget.topology.foot_joints`;
    ``poses`` (F, J, 3), some of the clip's world frames, tell left from right), else by name
    (``find_body_joints``), else None (a hand, a rig without two legs)."""
    body = find_body(skeleton.parents, skeleton.offsets, skeleton.names, poses)
    if body is not None and body.parts.get("l_leg_end") and body.parts.get("r_leg_end"):
        return foot_joints(body)
    try:
        f = find_body_joints(skeleton).feet
    except MotioncoreError:   # no legs by name either
        return None
    return (f[:2], f[2:]) if len(f) == 4 else None


def leg_chains(skeleton: Skeleton, body: BodyJoints | None = None) -> list[tuple[int, int, int]]:
    """[(hip, knee, ankle)] for the left and right legs: each ankle of `find_body_joints` (the first foot
    joint per side) and its parent and grandparent."""
    body = body or find_body_joints(skeleton)
    if len(body.feet) < 4:
        raise RetargetError(f"contacts: need two legs with ankle and toe joints, found feet {body.feet}")
    out = []
    for ankle in (body.feet[0], body.feet[2]):
        knee = int(skeleton.parents[ankle])
        hip = int(skeleton.parents[knee]) if knee >= 0 else -1
        if hip < 0:
            raise RetargetError(f"contacts: joint {skeleton.names[ankle]!r} has no knee and hip above it")
        out.append((hip, knee, int(ankle)))
    return out


def _leg_length(skeleton: Skeleton, chain: tuple[int, int, int]) -> float:
    return float(np.linalg.norm(skeleton.offsets[chain[1]]) + np.linalg.norm(skeleton.offsets[chain[2]]))


def contact_thresholds(skeleton: Skeleton) -> tuple[float, float]:
    """(height, speed) contact thresholds in the skeleton's units: 10% of a leg, 60% of a leg per second."""
    leg = float(np.mean([_leg_length(skeleton, c) for c in leg_chains(skeleton)]))
    return HEIGHT_FRAC * leg, SPEED_FRAC * leg


def source_cm_per_unit(skeleton: Skeleton) -> float:
    """cm per position unit of a human clip from its legs (thigh + shin) against ``HUMAN_LEG_CM``
    (``core.feet.cm_per_unit``: 1 for a BVH in cm, 100 in metres, ~5.6 for CMU's ASF units)."""
    leg = float(np.mean([_leg_length(skeleton, c) for c in leg_chains(skeleton)]))
    return feet.cm_per_unit(HUMAN_LEG_CM / leg) if leg > 0 else 1.0


def source_contacts(source: Motion) -> np.ndarray:
    """(T, 2) bool: the source's left and right ankles in contact (``core.feet.contacts``)."""
    chains = leg_chains(source.skeleton)
    _, gp = source.global_transforms()
    return feet.contacts(gp, source.fps, [c[2] for c in chains], unit=source_cm_per_unit(source.skeleton))


def contact_height_of(motion: Motion) -> float | None:
    """The clip's contact height (``core.feet.contact_height`` of each leg's toe, else foot; Y up, position units),
    None for a body without two legs."""
    _, gp = motion.global_transforms()
    legs = feet_of(motion.skeleton, gp[:: max(1, motion.num_frames // 64)])
    return None if legs is None else feet.contact_height(gp, [leg[-1] for leg in legs])


def stand_on(motion: Motion, height: float) -> tuple[Motion, float]:
    """(``motion`` moved up or down as a whole so that its contact height is ``height``, the move: up positive, in
    position units). Only the roots' translations change; a body without legs is returned as is, moved 0."""
    now = contact_height_of(motion)
    if now is None:
        return motion, 0.0
    dy = float(height) - now
    pos = motion.positions.copy()
    pos[:, motion.skeleton.parents < 0, 1] += dy
    return Motion(motion.skeleton, motion.rotations.copy(), pos, motion.fps, motion.name), dy


def _goals(p: np.ndarray, contact: np.ndarray, blend: int) -> tuple[np.ndarray, np.ndarray]:
    """Per frame goal position (T, 3) and weight (T,) for one ankle with positions p (T, 3)."""
    T = len(p)
    goal, w = p.copy(), np.zeros(T)
    for s, e in mask_runs(contact):
        xz = p[s:e, [0, 2]].mean(axis=0)
        lo, hi = max(0, s - blend), min(T, e + blend)
        for t in range(lo, hi):
            wt = 1.0 if s <= t < e else (1.0 - (s - t) / (blend + 1) if t < s else 1.0 - (t - e + 1) / (blend + 1))
            if wt > w[t]:   # overlapping ramps of two runs: the stronger pin wins
                w[t] = wt
                goal[t, [0, 2]] = xz
    return goal, w


def pin_feet(motion: Motion, contacts: np.ndarray, blend: int = 4,
             chains: list[tuple[int, int, int]] | None = None) -> Motion:
    """``motion`` with each leg's ankle pinned where ``contacts`` (T, 2: left, right) is True (see the
    module doc). Returns a new Motion; only the hip, knee and ankle local rotations change."""
    sk = motion.skeleton
    chains = chains or leg_chains(sk)
    c = np.asarray(contacts, bool)
    if c.shape != (motion.num_frames, len(chains)):
        raise RetargetError(f"contacts: expected ({motion.num_frames}, {len(chains)}), got {c.shape}")
    rot = motion.rotations.copy()
    gq, gp = sk.forward_kinematics(rot, motion.positions)
    for leg, (hip, knee, ankle) in enumerate(chains):
        goal, w = _goals(gp[:, ankle], c[:, leg], blend)
        sel = np.flatnonzero(w > 0)
        if sel.size == 0:
            continue
        H, K, A = gp[sel, hip], gp[sel, knee], gp[sel, ankle]
        D = A + w[sel, None] * (goal[sel] - A)
        gh, gk, _ = two_bone_ik(H, K, A, D, gq[sel, hip], gq[sel, knee], gq[sel, ankle])   # core.plant's IK
        parent = sk.parents[hip]
        gpar = gq[sel, parent] if parent >= 0 else np.tile([1.0, 0, 0, 0], (sel.size, 1))
        rot[sel, hip] = quat_mul(quat_inv(gpar), gh)
        rot[sel, knee] = quat_mul(quat_inv(gh), gk)
        rot[sel, ankle] = quat_mul(quat_inv(gk), gq[sel, ankle])                    # the foot keeps its world rotation
        # later legs see the updated pose
        gq, gp = sk.forward_kinematics(quat_normalize(rot), motion.positions)
    return Motion(sk, quat_normalize(rot), motion.positions.copy(), motion.fps, motion.name)
