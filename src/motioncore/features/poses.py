"""Root-relative poses: a clip's joints seen from its root frames (the rows of X / Y are cut from these),
and the way back to local rotations and translations for a `Motion` / BVH.

Legend: T frames, J joints, P points (the joints, then any end sites). Quaternions are WXYZ. Bandai's
static ``joint_Root`` (an ancestor of the body root) stands for the root frame itself (`ground_joints`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.kinematics import BodyJoints, find_body_joints
from ..core.motion import Motion
from ..core.rotations import matrix_to_quat, quat_conj, quat_mul, quat_to_matrix
from ..core.skeleton import Skeleton
from ..errors import ShapeError
from .layout import check_last
from .root_frame import RootFrame, root_frames


@dataclass(eq=False)
class Pose:
    """A pose in one root frame's coordinates (the frame is stated by whoever holds it)."""

    positions: np.ndarray  # (..., J, 3)
    velocities: np.ndarray  # (..., J, 3) per frame (PFNN) or per second (MANN), see the layout
    rotations: np.ndarray | None = None  # (..., J, 4) WXYZ, relative to the root frame


def ground_joints(skeleton: Skeleton, body: BodyJoints) -> list[int]:
    """Strict ancestors of the body root (Bandai's static ``joint_Root``). In features they stand for the
    root frame itself: position = frame origin, rotation = frame yaw."""
    out, p = [], int(skeleton.parents[body.root])
    while p >= 0:
        out.append(p)
        p = int(skeleton.parents[p])
    return sorted(out)


def substitute_ground(gq: np.ndarray, gp: np.ndarray, frames: RootFrame, ground: Sequence[int]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Global rotations/positions (T, J, .) with the ground joints replaced by the root frames."""
    gq, gp = gq.copy(), gp.copy()
    for j in ground:
        gq[:, j], gp[:, j] = frames.quat, frames.position
    return gq, gp


@dataclass(frozen=True, eq=False)
class ClipFeatures:
    """Whole-clip arrays every row of X / Y is cut from. P points = the J joints, then any end sites."""

    frames: RootFrame  # (T,) root frames
    positions: np.ndarray  # (T, P, 3) point positions, each frame in its own root frame
    velocities: np.ndarray  # (T, P, 3) p[t] - p[t-1] in root frame t (per frame or per second; frame 0: 0)
    rotations: np.ndarray  # (T, P, 4) global rotations relative to root frame t (end sites: their parent's)
    global_positions: np.ndarray  # (T, J, 3) world joint positions (ground joints as in the file)


def clip_features(motion: Motion, body: BodyJoints | None = None, per_second: bool = False,
                  sites: Sequence[int] = ()) -> ClipFeatures:
    """Root frames and root-relative positions / velocities / rotations of every frame, for the joints
    followed by the end sites ``sites`` (indices into ``skeleton.end_sites``). Velocities are per frame,
    or per second with ``per_second``. Ground joints (Bandai's ``joint_Root``) become the root frame."""
    sk = motion.skeleton
    body = body or find_body_joints(sk)
    gq, gp = motion.global_transforms()
    frames = root_frames(gp, body, motion.fps)
    sq, sp = substitute_ground(gq, gp, frames, ground_joints(sk, body))
    if len(sites):
        ends = sk.end_site_positions(gq, gp)[:, list(sites)]  # (T, E, 3)
        parents = [sk.end_sites[e][0] for e in sites]
        sq, sp = np.concatenate([sq, gq[:, parents]], 1), np.concatenate([sp, ends], 1)
    vel = np.zeros_like(sp)
    vel[1:] = frames[1:].dirs_to_local(sp[1:] - sp[:-1]) * (motion.fps if per_second else 1.0)
    return ClipFeatures(frames, frames.points_to_local(sp), vel, frames.rots_to_local(sq), gp)


def local_rotations_from_root_relative(skeleton: Skeleton, rot_root_space: np.ndarray, frame: RootFrame,
                                       pos_root_space: np.ndarray, body: BodyJoints | None = None
                                       ) -> tuple[np.ndarray, np.ndarray]:
    """Local joint rotations (..., J, 4) WXYZ and the body root's local translation (..., 3) from joint
    rotations relative to ``frame`` (..., J, 4) and joint positions in it (..., J, 3) (only the body root's
    row is used). Joints above the body root (Bandai's ``joint_Root``) are given their rest transform
    (identity, rest offset), as in the source files, so writing ``rotations`` and putting the translation
    on the body root gives a valid BVH of the same skeleton. Other joints take their rest offsets."""
    body = body or find_body_joints(skeleton)
    J = skeleton.num_joints
    if np.shape(rot_root_space)[-2:] != (J, 4) or np.shape(pos_root_space)[-2:] != (J, 3):
        raise ShapeError(f"expected rotations (..., {J}, 4) and positions (..., {J}, 3), got "
                         f"{np.shape(rot_root_space)} and {np.shape(pos_root_space)}")
    gq = frame.rots_to_world(np.asarray(rot_root_space, np.float64))
    ground = ground_joints(skeleton, body)
    ident = np.zeros(gq.shape[:-2] + (4,))
    ident[..., 0] = 1.0
    gp_ground: dict[int, np.ndarray] = {}
    for j in ground:  # rest transform: identity rotations, offsets accumulate
        gq[..., j, :] = ident
        p = int(skeleton.parents[j])
        gp_ground[j] = skeleton.offsets[j] + (gp_ground[p] if p >= 0 else 0.0)
    local = gq.copy()
    for j in range(J):
        p = int(skeleton.parents[j])
        if p >= 0:
            local[..., j, :] = quat_mul(quat_conj(gq[..., p, :]), gq[..., j, :])
    root_world = frame.points_to_world(np.asarray(pos_root_space, np.float64)[..., body.root, :])
    parent = int(skeleton.parents[body.root])
    trans = root_world - gp_ground[parent] if parent >= 0 else root_world  # ground joints are unrotated
    return local, trans


def pose_to_world(pose: Pose, frame: RootFrame) -> tuple[np.ndarray, np.ndarray]:
    """World joint positions (..., J, 3) and rotations (..., J, 4) of a root-frame-relative pose."""
    J = np.shape(pose.positions)[-2]
    return frame.points_to_world(pose.positions), frame.rots_to_world(check_last("pose.rotations", pose.rotations, (J, 4)))


def local_pose(skeleton: Skeleton, rot_root_space: np.ndarray, pos_root_space: np.ndarray, frame: RootFrame,
               body: BodyJoints | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Full local arrays for a `Motion` / BVH: rotations (..., J, 4) and translations (..., J, 3) (rest
    offsets, with the body root's translation from `local_rotations_from_root_relative`)."""
    body = body or find_body_joints(skeleton)
    rot, trans = local_rotations_from_root_relative(skeleton, rot_root_space, frame, pos_root_space, body)
    pos = np.broadcast_to(skeleton.offsets, rot.shape[:-1] + (3,)).copy()
    pos[..., body.root, :] = trans
    return rot, pos


def rotation_axes(rot: np.ndarray) -> np.ndarray:
    """(..., P, 6) forward (local z) and up (local y) axes of WXYZ rotations (..., P, 4): a continuous
    encoding (no jump anywhere, unlike the log map at 180 degrees)."""
    m = quat_to_matrix(rot)
    return np.concatenate([m[..., :, 2], m[..., :, 1]], -1)


def axes_to_rotation(fwd: np.ndarray, up: np.ndarray) -> np.ndarray:
    """WXYZ rotations (..., 4) whose local z / y axes are ``fwd`` / ``up`` (Gram-Schmidt, z first)."""
    z = fwd / np.maximum(np.linalg.norm(fwd, axis=-1, keepdims=True), 1e-9)
    y = up - (up * z).sum(-1, keepdims=True) * z
    y = y / np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-9)
    return matrix_to_quat(np.stack([np.cross(y, z), y, z], -1))

