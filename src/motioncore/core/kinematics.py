"""Whole-clip kinematics on `Motion`: root trajectory, facing, foot contacts, mirroring, resampling,
and the rigid re-framing used by windowed datasets.

Legend: T frames, J joints, F feet. Y is up; the ground is the XZ plane. Quaternions are WXYZ.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import MotioncoreError
from .motion import Motion
from .rotations import (
    matrix_to_quat,
    quat_angle,
    quat_apply,
    quat_continuity,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_matrix,
)
from .skeleton import Skeleton

_LEFT = re.compile(r"(^|[^a-z])(l|left)([^a-z]|$)|^left|left$|_l$|\.l$", re.I)
_RIGHT = re.compile(r"(^|[^a-z])(r|right)([^a-z]|$)|^right|right$|_r$|\.r$", re.I)
_CMU_PARTS = {"hipjoint", "femur", "tibia", "foot", "toes", "clavicle", "humerus", "radius", "wrist",
              "hand", "fingers", "thumb"}  # CMU ASF names: 'lfemur', 'rhumerus'


@dataclass(frozen=True)
class BodyJoints:
    """Named landmarks a skeleton-agnostic algorithm needs, as joint indices."""

    root: int  # the joint whose projection on the ground is the character's trajectory (e.g. Hips)
    hips: tuple[int, int]  # (left, right) upper legs: their difference gives the facing
    shoulders: tuple[int, int] | None  # (left, right) upper arms, if any
    feet: tuple[int, ...]  # contact joints: (left ankle, left toe, right ankle, right toe) or paws


def side_of(name: str) -> str | None:
    """'L', 'R' or None from a joint name ('Foot_L', 'LeftFoot', 'lfemur', 'Hand.R'...)."""
    if name[:1] in "lr" and name[1:] in _CMU_PARTS:
        return name[0].upper()
    if _LEFT.search(name) or name.lower().startswith("left"):
        return "L"
    if _RIGHT.search(name) or name.lower().startswith("right"):
        return "R"
    return None


def mirror_map(skeleton: Skeleton) -> np.ndarray:
    """(J,) index of each joint's mirror partner found by swapping Left/Right in its name
    (identity for centre joints and for joints without a partner)."""
    swaps = [("Left", "Right"), ("left", "right"), ("_L", "_R"), ("_l", "_r"), (".L", ".R"), ("L", "R")]
    out = np.arange(skeleton.num_joints)
    for j, name in enumerate(skeleton.names):
        for a, b in swaps:
            for x, y in ((a, b), (b, a)):
                cand = _swap_token(name, x, y)
                if cand != name and cand in skeleton._index:
                    out[j] = skeleton.index(cand)
                    break
            if out[j] != j:
                break
    return out


def _swap_token(name: str, a: str, b: str) -> str:
    if len(a) == 1:  # single letters only at the start: "LHipJoint", CMU "lfemur"
        if name.startswith(a) and len(name) > 1 and name[1].isupper():
            return b + name[1:]
        if name.startswith(a.lower()) and name[1:] in _CMU_PARTS:
            return b.lower() + name[1:]
        return name
    return name.replace(a, b)


def find_body_joints(skeleton: Skeleton) -> BodyJoints:
    """Locate root, hips, shoulders and feet by name (Bandai, CMU, MANN dog, LaFAN1, Mixamo...).
    Raises MotioncoreError naming what could not be found."""
    names = [n.lower() for n in skeleton.names]

    def pick(keys: tuple[str, ...], side: str, exclude: tuple[str, ...] = ()) -> int | None:
        for key in keys:
            for j, n in enumerate(names):
                if key in n and side_of(skeleton.names[j]) == side and not any(e in n for e in exclude):
                    return j
        return None

    root = next((j for j, n in enumerate(names) if n in ("hips", "pelvis", "hip")), None)
    if root is None:
        root = next((j for j in range(skeleton.num_joints) if skeleton.has_position(j) and j > 0
                     and skeleton.parents[j] == 0), 0)
    upleg = ("upperleg", "upleg", "upper_leg", "thigh", "femur", "hipjoint", "hip")
    arm = ("upperarm", "upper_arm", "humerus", "arm")
    hips = (pick(upleg, "L", ("fore",)), pick(upleg, "R", ("fore",)))
    shoulders = (pick(arm, "L", ("fore", "lower")), pick(arm, "R", ("fore", "lower")))
    foot = ("foot", "ankle")
    toe = ("toe", "ball")
    feet = [pick(foot, "L"), pick(toe, "L"), pick(foot, "R"), pick(toe, "R")]
    if hips[0] is None or hips[1] is None:
        raise MotioncoreError(f"cannot find left/right upper legs in joints {list(skeleton.names)}")
    feet_found = tuple(f for f in feet if f is not None)
    if not feet_found:
        raise MotioncoreError(f"cannot find feet in joints {list(skeleton.names)}")
    sh = shoulders if shoulders[0] is not None and shoulders[1] is not None else None
    return BodyJoints(root, (hips[0], hips[1]), sh, feet_found)  # type: ignore[arg-type]


def facing_directions(global_positions: np.ndarray, body: BodyJoints) -> np.ndarray:
    """(T, 3) unit facing directions on the ground plane from hip (and shoulder) across-vectors:
    forward = across x up, with across = left - right."""
    gp = global_positions
    across = gp[..., body.hips[0], :] - gp[..., body.hips[1], :]
    if body.shoulders is not None:
        across = across + gp[..., body.shoulders[0], :] - gp[..., body.shoulders[1], :]
    fwd = np.cross(across, np.array([0.0, 1.0, 0.0]))
    fwd[..., 1] = 0.0
    norm = np.linalg.norm(fwd, axis=-1, keepdims=True)
    return fwd / np.maximum(norm, 1e-9)


def root_trajectory(motion: Motion, body: BodyJoints | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ground projection of the root (T, 3) with y = 0, and unit facing directions (T, 3)."""
    body = body or find_body_joints(motion.skeleton)
    _, gp = motion.global_transforms()
    ground = gp[:, body.root].copy()
    ground[:, 1] = 0.0
    return ground, facing_directions(gp, body)


def foot_contacts(global_positions: np.ndarray, feet: tuple[int, ...], fps: float,
                  height: float = 5.0, speed: float = 30.0) -> np.ndarray:
    """(T, F) bool contacts: a foot is in contact when it is within ``height`` of its lowest point
    in the clip and moves slower than ``speed`` (units per second, cm/s for our data)."""
    p = global_positions[:, list(feet)]  # (T, F, 3)
    vel = np.zeros(p.shape[:2])
    vel[1:] = np.linalg.norm(np.diff(p, axis=0), axis=-1) * fps
    vel[0] = vel[1] if len(vel) > 1 else 0.0
    h = p[..., 1] - p[..., 1].min(axis=0, keepdims=True)
    return (h < height) & (vel < speed)


def _signed_reflections() -> np.ndarray:
    """The 24 signed permutation matrices with determinant -1, diag(-1, 1, 1) first."""
    import itertools

    out = [np.diag([-1.0, 1.0, 1.0])]
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            m = np.zeros((3, 3))
            m[range(3), perm] = signs
            if np.linalg.det(m) < 0 and not any(np.array_equal(m, o) for o in out):
                out.append(m)
    return np.array(out)


_REFLECTIONS = _signed_reflections()


def mirror_frames(skeleton: Skeleton, pairs: np.ndarray | None = None, rotations: np.ndarray | None = None
                  ) -> np.ndarray:
    """(J, 3, 3) per joint the reflection X_j that carries its partner's rest geometry onto its own: the
    signed axis permutation of determinant -1 that best maps the partner's children's rest offsets (and end
    sites) onto its own children's. For a skeleton whose rest pose is symmetric about x = 0 every X_j is
    diag(-1, 1, 1); BVH conversions whose joint frames are not world-aligned at rest (Bandai's legs and arms)
    need others. A root joint takes diag(-1, 1, 1): the world is mirrored across x = 0.

    Offsets fix a bone's direction, not its twist: where several reflections fit the offsets equally (a bone
    along an axis), ``rotations`` (T, J, 4), frames of the data to mirror, break the tie: the one that carries
    the partner's mean local rotation closest to the joint's own (parents first)."""
    pairs = mirror_map(skeleton) if pairs is None else np.asarray(pairs)
    J = skeleton.num_joints
    kids: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(J)]  # (child or -1, offset) per joint
    for c in range(J):
        if skeleton.parents[c] >= 0:
            kids[int(skeleton.parents[c])].append((c, skeleton.offsets[c]))
    ends: list[list[np.ndarray]] = [[] for _ in range(J)]
    for j, o in skeleton.end_sites:
        ends[j].append(np.asarray(o, np.float64))
    X = np.empty((J, 3, 3))
    for j in range(J):
        k = int(pairs[j])
        if skeleton.parents[j] < 0:
            X[j] = _REFLECTIONS[0]
            continue
        src = [(pairs[c], o) for c, o in kids[j]]  # my child c <- the partner's child pairs[c]
        theirs = {c: o for c, o in kids[k]}
        vec = [(theirs[int(pc)], o) for pc, o in src if int(pc) in theirs]
        vec += list(zip(ends[k], ends[j], strict=False))
        vec = [(a, b) for a, b in vec if np.linalg.norm(b) > 1e-9]
        if not vec:
            X[j] = X[int(skeleton.parents[j])]
            continue
        A = np.stack([a for a, _ in vec])
        B = np.stack([b for _, b in vec])
        err = np.array([np.abs(A @ R.T - B).sum() for R in _REFLECTIONS])
        fits = np.flatnonzero(err <= err.min() + 0.1 * max(1e-9, np.abs(B).sum()))  # left and right differ a little
        if rotations is not None and fits.size > 1:
            mk, mj = (quat_to_matrix(_mean_rotation(rotations[:, i])) for i in (k, j))
            Xp = X[int(skeleton.parents[j])]
            ang = np.array([float(quat_angle(matrix_to_quat(Xp @ mk @ _REFLECTIONS[i]), matrix_to_quat(mj)))
                            for i in fits])
            best = int(np.argmin(ang))
            if fits[0] == 0 and ang[0] <= ang[best] + np.radians(30.0):
                best = 0  # the plain x-mirror unless the data clearly says otherwise
            fits = fits[[best]]
        X[j] = _REFLECTIONS[int(fits[0])]
    return X


def _mean_rotation(q: np.ndarray) -> np.ndarray:
    """Eigen-average of unit quaternions (N, 4), sign-invariant."""
    q = np.asarray(q, np.float64)
    return np.linalg.eigh(q.T @ q)[1][:, -1]


def mirror(motion: Motion, pairs: np.ndarray | None = None, frames: np.ndarray | None = None) -> Motion:
    """Mirror across the YZ plane (x -> -x) and swap left/right joints by ``pairs`` (default: by name).
    The world-space motion is reflected: joint j takes its partner k's motion, with local rotations
    ``X_parent(j) L_k X_j`` and translations ``X_parent(j) t_k`` (``mirror_frames``), which is ``M L M`` for
    a skeleton whose rest pose is symmetric about x = 0 and stays right where the joint frames are not
    world-aligned at rest (Bandai). Exact when the rest pose is symmetric under those reflections. ``frames``:
    ``mirror_frames`` computed once for a dataset (default: from this clip's own rotations)."""
    sk = motion.skeleton
    pairs = mirror_map(sk) if pairs is None else np.asarray(pairs)
    X = mirror_frames(sk, pairs, motion.rotations) if frames is None else np.asarray(frames)
    Xp = np.stack([X[int(p)] if p >= 0 else np.diag([-1.0, 1.0, 1.0]) for p in sk.parents])  # (J, 3, 3)
    R = quat_to_matrix(motion.rotations[:, pairs])  # (T, J, 3, 3)
    q = matrix_to_quat(Xp[None] @ R @ X[None])
    p = np.einsum("jab,tjb->tja", Xp, motion.positions[:, pairs])
    fixed = [j for j in range(sk.num_joints) if not sk.has_position(j)]
    p[:, fixed] = sk.offsets[fixed]  # joints without channels keep their own rest offsets
    return Motion(sk, quat_continuity(q, axis=0), p, motion.fps, motion.name + "_mirror" if motion.name else "")


def resample(motion: Motion, fps: float) -> Motion:
    """Resample to ``fps``: slerp for rotations, lerp for translations, over the clip's duration."""
    if not (np.isfinite(fps) and fps > 0):
        raise MotioncoreError(f"fps: expected a positive number, got {fps}")
    T = motion.num_frames
    if T < 2 or abs(fps - motion.fps) < 1e-9:
        return Motion(motion.skeleton, motion.rotations.copy(), motion.positions.copy(), fps, motion.name)
    duration = (T - 1) / motion.fps
    t = np.arange(int(np.floor(duration * fps + 1e-6)) + 1) * (motion.fps / fps)  # source frame coords
    i0 = np.minimum(np.floor(t).astype(np.int64), T - 2)
    a = (t - i0)[:, None]  # (T', 1)
    q = quat_continuity(motion.rotations, axis=0)
    rot = quat_slerp(q[i0], q[i0 + 1], a)  # t (T', 1) broadcasts over joints
    pos = motion.positions[i0] * (1 - a[..., None]) + motion.positions[i0 + 1] * a[..., None]
    return Motion(motion.skeleton, quat_normalize(rot), pos, fps, motion.name)


def yaw_quat(angle: np.ndarray) -> np.ndarray:
    """(..., 4) rotations about +Y by ``angle`` radians."""
    out = np.zeros(np.shape(angle) + (4,))
    out[..., 0], out[..., 2] = np.cos(angle / 2), np.sin(angle / 2)
    return out


def reframe(rotations: np.ndarray, positions: np.ndarray, skeleton: Skeleton, body: BodyJoints,
            frame: int, centre: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Rigidly move windows (N, T, J, 4) / (N, T, J, 3) so the root's ground position is at the
    origin (its mean over the window, or at ``frame`` with centre='frame') and the character faces
    +Z at ``frame`` (the LaFAN1 convention, frame = last context frame). Applied to joint 0."""
    gq, gp = skeleton.forward_kinematics(rotations, positions)
    fwd = facing_directions(gp[:, frame], body)  # (N, 3)
    yaw = -np.arctan2(fwd[:, 0], fwd[:, 2])  # rotate fwd onto +Z
    r = yaw_quat(yaw)[:, None]  # (N, 1, 4)
    ground = gp[:, :, body.root] * np.array([1.0, 0.0, 1.0])  # (N, T, 3)
    c = ground.mean(axis=1) if centre == "mean" else ground[:, frame]  # (N, 3)
    rot, pos = rotations.copy(), positions.copy()
    rot[:, :, 0] = quat_mul(r, rotations[:, :, 0])
    pos[:, :, 0] = quat_apply(r, positions[:, :, 0] - c[:, None])
    return rot, pos


def rotation_steps(rotations: np.ndarray) -> np.ndarray:
    """(T - 1, J) degrees each joint's local rotation turns between consecutive frames of (T, J, 4)."""
    q = np.asarray(rotations, np.float64)
    return np.degrees(quat_angle(q[1:], q[:-1]))


def rotation_step_limits(motions: Sequence[Motion], percentile: float = 99.9) -> np.ndarray:
    """(J,) per joint, the ``percentile`` of its frame-to-frame local rotation change (degrees) over
    ``motions`` (a controller's training clips, at their own fps): what "no flips" is measured against.
    A high percentile rather than the maximum, so one glitched mocap frame does not set the bar."""
    if not motions:
        raise MotioncoreError("rotation_step_limits: no motions")
    steps = np.concatenate([rotation_steps(m.rotations) for m in motions if m.num_frames > 1])
    return np.percentile(steps, percentile, axis=0)
