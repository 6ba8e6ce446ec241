"""Shared pieces of the PFNN and MANN feature layouts: root frames, trajectory sampling, foot-contact
phase, column layouts and the block-wise z-score normaliser.

Legend: T frames, J joints, S trajectory samples, N samples (rows of X / Y), D features. Y is up and
the ground is the XZ plane. Quaternions are WXYZ. Lengths are in the clip's units (cm for our mocap).

A *root frame* is the character's frame on the ground: origin at the ground projection (y = 0) of the
root joint (Hips), +Z along the facing direction, +Y up (so +X is the character's left). It is stored
as a position and a yaw angle: facing = (sin yaw, 0, cos yaw).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.ndimage import gaussian_filter1d

from ..core.kinematics import BodyJoints, facing_directions, yaw_quat
from ..core.motion import Motion
from ..core.rotations import matrix_to_quat, quat_apply, quat_conj, quat_mul, quat_to_matrix
from ..core.skeleton import Skeleton
from ..errors import DataError, MotioncoreError, ShapeError

TRAJ_PAST = 6  # trajectory samples before the current frame (k = -6..-1)
TRAJ_FUTURE = 6  # samples from the current frame on (k = 0..5)
FACING_SIGMA_S = 1.0 / 3.0  # Gaussian smoothing of the facing direction, seconds (Holden: 20 frames at 60 fps)
DEFAULT_CYCLE_S = 1.1  # phase cycle length where no steps are seen (median Bandai walk cycle: 1.07-1.10 s)
MIN_STEP_S = 0.1  # onsets closer than this to the previous one are dropped (shuffles, kicks)


# ----------------------------------------------------------------------------- root frames
@dataclass(frozen=True, eq=False)
class RootFrame:
    """Root frame(s) with any leading shape: ``position`` (..., 3) on the ground, ``yaw`` (...) radians.
    Transform methods take arrays whose leading dims start with the frame's dims, e.g. frames (T,)
    and joint positions (T, J, 3)."""

    position: np.ndarray  # (..., 3) world ground point (y = 0)
    yaw: np.ndarray  # (...,) rotation about +Y taking +Z to the facing direction

    def __post_init__(self) -> None:
        pos, yaw = np.asarray(self.position, np.float64), np.asarray(self.yaw, np.float64)
        if pos.shape != yaw.shape + (3,):
            raise ShapeError(f"RootFrame: position {pos.shape} does not match yaw {yaw.shape} + (3,)")
        object.__setattr__(self, "position", pos)
        object.__setattr__(self, "yaw", yaw)

    @classmethod
    def from_forward(cls, position: np.ndarray, forward: np.ndarray) -> RootFrame:
        """Frame at ``position`` (projected to y = 0) facing ``forward`` (..., 3) (its XZ part)."""
        pos = np.asarray(position, np.float64) * np.array([1.0, 0.0, 1.0])
        fwd = np.asarray(forward, np.float64)
        return cls(pos, np.arctan2(fwd[..., 0], fwd[..., 2]))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.yaw.shape

    @property
    def forward(self) -> np.ndarray:
        """(..., 3) unit facing direction."""
        return np.stack([np.sin(self.yaw), np.zeros_like(self.yaw), np.cos(self.yaw)], -1)

    @property
    def quat(self) -> np.ndarray:
        """(..., 4) WXYZ rotation of the frame (yaw about +Y)."""
        return yaw_quat(self.yaw)

    def __getitem__(self, idx: Any) -> RootFrame:
        return RootFrame(self.position[idx], self.yaw[idx])

    def _q(self, x: np.ndarray, tail: int) -> tuple[np.ndarray, np.ndarray]:
        """Frame quaternion and position broadcast against x (..., extra..., tail)."""
        extra = np.ndim(x) - 1 - self.yaw.ndim
        if extra < 0 or np.shape(x)[:self.yaw.ndim] != self.shape or np.shape(x)[-1] != tail:
            raise ShapeError(f"expected shape {self.shape} + (..., {tail}), got {np.shape(x)}")
        sh = self.shape + (1,) * extra
        return self.quat.reshape(sh + (4,)), self.position.reshape(sh + (3,))

    def points_to_local(self, p: np.ndarray) -> np.ndarray:
        q, o = self._q(p, 3)
        return quat_apply(quat_conj(q), p - o)

    def points_to_world(self, p: np.ndarray) -> np.ndarray:
        q, o = self._q(p, 3)
        return quat_apply(q, p) + o

    def dirs_to_local(self, v: np.ndarray) -> np.ndarray:
        return quat_apply(quat_conj(self._q(v, 3)[0]), v)

    def dirs_to_world(self, v: np.ndarray) -> np.ndarray:
        return quat_apply(self._q(v, 3)[0], v)

    def rots_to_local(self, r: np.ndarray) -> np.ndarray:
        return quat_mul(quat_conj(self._q(r, 4)[0]), r)

    def rots_to_world(self, r: np.ndarray) -> np.ndarray:
        return quat_mul(self._q(r, 4)[0], r)

    def relative(self, other: RootFrame) -> tuple[np.ndarray, np.ndarray]:
        """``other`` seen from this frame: its origin (..., 3) in local coordinates and the yaw change
        (...) wrapped to (-pi, pi]."""
        return self.points_to_local(other.position), wrap_angle(other.yaw - self.yaw)

    def advance(self, delta: np.ndarray, dyaw: np.ndarray) -> RootFrame:
        """The frame moved by ``delta`` (..., 3), given in this frame (y ignored), turned by ``dyaw``."""
        d = np.asarray(delta, np.float64) * np.array([1.0, 0.0, 1.0])
        return RootFrame(self.points_to_world(d), self.yaw + np.asarray(dyaw, np.float64))


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles wrapped to (-pi, pi]."""
    return np.pi - np.mod(np.pi - np.asarray(a, np.float64), 2 * np.pi)


def root_frames(global_positions: np.ndarray, body: BodyJoints, fps: float,
                sigma_s: float = FACING_SIGMA_S) -> RootFrame:
    """(T,) root frames: ground projection of ``body.root`` and the hip/shoulder facing smoothed with a
    Gaussian of ``sigma_s`` seconds (mode 'nearest'), renormalised; where smoothing cancels out (a
    sharp 180 degree turn) the raw facing is kept."""
    raw = facing_directions(global_positions, body)  # (T, 3)
    fwd = gaussian_filter1d(raw, sigma_s * fps, axis=0, mode="nearest") if sigma_s > 0 else raw
    n = np.linalg.norm(fwd, axis=-1, keepdims=True)
    fwd = np.where(n > 1e-3, fwd / np.maximum(n, 1e-12), raw)
    return RootFrame.from_forward(global_positions[:, body.root], fwd)


def ground_velocity(frames: RootFrame, fps: float, sigma_s: float = 0.1) -> np.ndarray:
    """(T, 3) world velocity of the root frame origin (units/s), central differences smoothed with a
    Gaussian of ``sigma_s`` seconds."""
    p = frames.position
    v = np.gradient(p, axis=0) * fps if len(p) > 1 else np.zeros_like(p)
    return gaussian_filter1d(v, sigma_s * fps, axis=0, mode="nearest") if sigma_s > 0 else v


# ----------------------------------------------------------------------------- trajectory sampling
def trajectory_step(fps: float) -> int:
    """Frames between trajectory samples: fps / 6 (5 at 30 fps, 10 at 60 fps), so 12 samples span +-1 s."""
    step = int(round(fps / 6.0))
    if step < 1:
        raise MotioncoreError(f"fps: {fps} is too low for 12 trajectory samples over +-1 s")
    return step


def trajectory_offsets(fps: float) -> np.ndarray:
    """(12,) frame offsets k * fps/6 for k = -6..5."""
    return np.arange(-TRAJ_PAST, TRAJ_FUTURE) * trajectory_step(fps)


def future_offsets(fps: float) -> np.ndarray:
    """(6,) frame offsets k * fps/6 for k = 0..5 (the output trajectory, from the next frame on)."""
    return np.arange(TRAJ_FUTURE) * trajectory_step(fps)


def sample_range(num_frames: int, fps: float) -> range:
    """Frames i that have a full window: the trajectory around i (k = -6..5), the previous pose (i - 1,
    with its velocity from i - 2) and the next frame's trajectory (i + 1 + 5 * step). Holden skips the
    clip ends the same way."""
    step = trajectory_step(fps)
    return range(max(TRAJ_PAST * step, 2), num_frames - 1 - (TRAJ_FUTURE - 1) * step)


@dataclass(eq=False)
class Trajectory:
    """Trajectory samples in world space. PFNN uses positions, directions and labels (gaits); MANN adds
    velocities and speeds (labels are then the actions)."""

    positions: np.ndarray  # (..., S, 3) ground points (y ignored)
    directions: np.ndarray  # (..., S, 3) unit facing directions
    labels: np.ndarray | None = None  # (..., S, C) gait / action values
    velocities: np.ndarray | None = None  # (..., S, 3) ground velocity, units/s
    speeds: np.ndarray | None = None  # (..., S) |velocity|, units/s


@dataclass(eq=False)
class Pose:
    """A pose in one root frame's coordinates (the frame is stated by whoever holds it)."""

    positions: np.ndarray  # (..., J, 3)
    velocities: np.ndarray  # (..., J, 3) per frame (PFNN) or per second (MANN), see the layout
    rotations: np.ndarray | None = None  # (..., J, 4) WXYZ, relative to the root frame


# ----------------------------------------------------------------------------- root-relative poses
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
    from ..core.kinematics import find_body_joints

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
    from ..core.kinematics import find_body_joints

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
    from ..core.kinematics import find_body_joints

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


# ----------------------------------------------------------------------------- phase
def side_contacts(contacts: np.ndarray, fps: float, gap_s: float = 0.07, min_s: float = 0.07) -> np.ndarray:
    """(T,) bool contact of one side (any of its contact joints, contacts (T, F)), with gaps of at most
    ``gap_s`` closed and contacts shorter than ``min_s`` dropped (flicker at 30 fps)."""
    c = np.asarray(contacts, bool).reshape(len(contacts), -1).any(axis=1)
    c = _fill_runs(c, False, int(round(gap_s * fps)), inner_only=True)
    return _fill_runs(c, True, int(round(min_s * fps)) - 1, inner_only=False)


def _fill_runs(c: Any, value: bool, max_len: int, inner_only: bool) -> np.ndarray:
    """Flip runs of ``value`` of length <= max_len (only those between two other runs if inner_only)."""
    c = np.array(c, bool)
    if max_len < 1 or len(c) == 0:
        return c
    edges = np.flatnonzero(np.diff(c.astype(np.int8))) + 1
    starts, stops = np.r_[0, edges], np.r_[edges, len(c)]
    for a, b in zip(starts, stops):
        if c[a] == value and b - a <= max_len and (not inner_only or (a > 0 and b < len(c))):
            c[a:b] = not value
    return c


def contact_onsets(side: np.ndarray) -> np.ndarray:
    """Frames where a (cleaned) side contact starts; a contact already under way at frame 0 has no onset."""
    s = np.asarray(side, bool)
    return np.flatnonzero(s[1:] & ~s[:-1]) + 1


def phase_from_onsets(num_frames: int, left: Sequence[int] | np.ndarray, right: Sequence[int] | np.ndarray, fps: float,
                      default_cycle_s: float = DEFAULT_CYCLE_S, standing_after_s: float = 1.0,
                      min_step_s: float = MIN_STEP_S) -> tuple[np.ndarray, np.ndarray]:
    """Phase (T,) in [0, 2 pi) and its change (T,) in radians per frame (phase[t+1] - phase[t], unwrapped;
    the last frame repeats the previous value).

    Phase is 0 at each left onset and pi at each right onset, linear in between and unwrapped (an L -> R
    or R -> L step adds pi, a repeated side adds 2 pi). Where a step takes longer than ``standing_after_s``
    per half cycle (the character stood), whole cycles are added so the rate comes nearest the default
    (one cycle per ``default_cycle_s``). Before the first / after the last onset the phase is extrapolated
    at the neighbouring interval's rate, or at the default rate if there is a single onset or the stretch
    is longer than ``standing_after_s``. Without onsets it advances at the default rate from 0. Onsets
    closer than ``min_step_s`` to the previous kept one are dropped."""
    T = int(num_frames)
    rate0 = 2 * np.pi / (default_cycle_s * fps)  # radians per frame
    ev: dict[int, float] = {int(f): np.pi for f in right}
    ev.update({int(f): 0.0 for f in left})  # a left and right onset on one frame: left wins
    kept: list[int] = []
    for f in sorted(f for f in ev if 0 <= f < T):
        if not kept or f - kept[-1] >= min_step_s * fps:
            kept.append(f)
    frames = np.array(kept, dtype=np.int64)
    t = np.arange(T, dtype=np.float64)
    if len(frames) == 0:
        u = rate0 * t
    else:
        vals = [ev[int(frames[0])]]
        for f0, f1 in zip(frames[:-1], frames[1:]):
            d = (ev[int(f1)] - vals[-1]) % (2 * np.pi)
            d = d if d > 1e-9 else 2 * np.pi
            n = 0
            if (f1 - f0) / fps > standing_after_s * d / np.pi:  # a stand between the steps
                n = max(0, int(np.floor((rate0 * (f1 - f0) - d) / (2 * np.pi) + 0.5)))
            vals.append(vals[-1] + d + 2 * np.pi * n)
        v = np.array(vals)
        u = np.interp(t, frames, v)
        long_s = standing_after_s * fps
        r_first = (v[1] - v[0]) / (frames[1] - frames[0]) if len(v) > 1 and frames[0] <= long_s else rate0
        r_last = (v[-1] - v[-2]) / (frames[-1] - frames[-2]) if len(v) > 1 and T - 1 - frames[-1] <= long_s else rate0
        u = np.where(t < frames[0], v[0] - r_first * (frames[0] - t), u)
        u = np.where(t > frames[-1], v[-1] + r_last * (t - frames[-1]), u)
    du = np.diff(u, append=u[-1:] + (u[-1] - u[-2] if T > 1 else rate0))
    return np.mod(u, 2 * np.pi), du


def foot_phase(global_positions: np.ndarray, left_feet: Sequence[int], right_feet: Sequence[int], fps: float,
               height: float = 8.0, speed: float = 50.0, **kwargs: float) -> tuple[np.ndarray, np.ndarray]:
    """Phase (T,) in [0, 2 pi) and radians per frame (T,) from foot contacts (`kinematics.foot_contacts`:
    within ``height`` of the joint's lowest point in the clip and slower than ``speed`` units/s; the
    defaults suit cm at 30-60 fps). A side is in contact when any of its joints is."""
    from ..core.kinematics import foot_contacts

    ct = foot_contacts(global_positions, tuple(left_feet) + tuple(right_feet), fps, height, speed)
    nl = len(left_feet)
    left = contact_onsets(side_contacts(ct[:, :nl], fps))
    right = contact_onsets(side_contacts(ct[:, nl:], fps))
    return phase_from_onsets(len(global_positions), left, right, fps, **kwargs)


# ----------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class Block:
    """A contiguous run of columns of X or Y."""

    name: str
    start: int
    stop: int
    meaning: str
    units: str
    frame: str  # coordinate frame the values are expressed in

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def slice(self) -> slice:
        return slice(self.start, self.stop)


def blocks_from(specs: Sequence[tuple[str, int, str, str, str]]) -> tuple[Block, ...]:
    """Consecutive blocks from (name, size, meaning, units, frame) tuples."""
    out, at = [], 0
    for name, size, meaning, units, frame in specs:
        out.append(Block(name, at, at + size, meaning, units, frame))
        at += size
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Layout:
    """Column layout of one model's X and Y. ``in_groups`` / ``out_groups`` name column sets that share
    one std in the normaliser (and are what encode/decode fill); ``gating`` indexes X (MANN)."""

    model: str
    joints: tuple[str, ...]  # names of the J feature points, in order
    labels: tuple[str, ...]  # gait (PFNN) or action (MANN) names
    fps: float
    inputs: tuple[Block, ...]
    outputs: tuple[Block, ...]
    in_groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    out_groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    gating: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def d_in(self) -> int:
        return self.inputs[-1].stop

    @property
    def d_out(self) -> int:
        return self.outputs[-1].stop

    def input_block(self, name: str) -> Block:
        return self._find(self.inputs, name, "X")

    def output_block(self, name: str) -> Block:
        return self._find(self.outputs, name, "Y")

    def _find(self, blocks: tuple[Block, ...], name: str, side: str) -> Block:
        for b in blocks:
            if b.name == name:
                return b
        raise KeyError(f"no block {name!r} in {side} of the {self.model} layout: {[b.name for b in blocks]}")

    def joint_weights(self, weights: Mapping[str, float] | np.ndarray, groups: Sequence[str]) -> np.ndarray:
        """(D_in,) column weights for `Normaliser.fit`: 1 everywhere, ``weights`` per joint (by name or
        as a (J,) array) on the named input groups, whose columns are joint-major."""
        J = len(self.joints)
        w = np.array([weights.get(n, 1.0) for n in self.joints] if isinstance(weights, Mapping) else weights,
                     np.float64)
        if w.shape != (J,):
            raise ShapeError(f"joint weights: expected ({J},), got {w.shape}")
        out = np.ones(self.d_in)
        for g in groups:
            cols = self.in_groups[g]
            out[cols] = np.repeat(w, len(cols) // J)
        return out

    def to_dict(self) -> dict[str, Any]:
        blocks = lambda bs: [[b.name, b.start, b.stop, b.meaning, b.units, b.frame] for b in bs]  # noqa: E731
        return {"model": self.model, "joints": list(self.joints), "labels": list(self.labels), "fps": self.fps,
                "d_in": self.d_in, "d_out": self.d_out, "inputs": blocks(self.inputs),
                "outputs": blocks(self.outputs), "gating": self.gating.tolist()}

    def markdown(self) -> str:
        """Markdown tables of the blocks (docs/features.md is generated from these)."""
        rows = []
        for title, bs in (("X (input)", self.inputs), ("Y (output)", self.outputs)):
            rows += [f"| {title} | name | size | meaning | units | frame |", "|---|---|---|---|---|---|"]
            rows += [f"| {b.start if b.size == 1 else f'{b.start}-{b.stop - 1}'} | `{b.name}` | {b.size} | {b.meaning} | {b.units} | {b.frame} |"
                     for b in bs]
            rows.append("")
        return "\n".join(rows)


def strided(start: int, count: int, stride: int, width: int = 1, offset: int = 0) -> np.ndarray:
    """Column indices of field ``offset..offset+width`` in each of ``count`` records of ``stride`` columns."""
    base = start + offset + np.arange(count)[:, None] * stride
    return (base + np.arange(width)[None]).reshape(-1)


# ----------------------------------------------------------------------------- normalisation
@dataclass(eq=False)
class Normaliser:
    """z-score ``(x - mean) / std`` with the PFNN convention: every column of a group gets the group's
    mean std (Holden: one std per feature block), optionally divided by per-column weights (joint
    weights: a smaller weight gives a larger std, so that joint counts less). Works on numpy arrays and
    torch tensors alike."""

    mean: np.ndarray  # (D,)
    std: np.ndarray  # (D,)

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, np.float64).reshape(-1)
        self.std = np.asarray(self.std, np.float64).reshape(-1)
        if self.mean.shape != self.std.shape or not (self.std > 0).all():
            raise ShapeError(f"Normaliser: mean {self.mean.shape} and std {self.std.shape} must match, std > 0")

    @classmethod
    def fit(cls, x: np.ndarray, groups: Mapping[str, np.ndarray] | Sequence[Any] = (),
            weights: np.ndarray | None = None, eps: float = 1e-8) -> Normaliser:
        """Mean and block-mean std of ``x`` (N, D). ``groups``: name -> column indices (or slices, or
        `Block`s); columns in no group keep their own std. Constant groups get std 1."""
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or len(x) == 0:
            raise ShapeError(f"x: expected (N, D) with N > 0, got {x.shape}")
        mean, col_std = x.mean(0), x.std(0)
        std = col_std.copy()
        items = groups.values() if isinstance(groups, Mapping) else groups
        for g in items:
            cols = g.slice if isinstance(g, Block) else g
            std[cols] = col_std[cols].mean()
        std = np.where(std > eps, std, 1.0)
        if weights is not None:
            w = np.asarray(weights, np.float64)
            if w.shape != std.shape or not (w > 0).all():
                raise ShapeError(f"weights: expected ({len(std)},) positive values, got {w.shape}")
            std = std / w
        return cls(mean, std)

    def _params(self, x: Any) -> tuple[Any, Any]:
        if x.shape[-1] != len(self.mean):
            raise ShapeError(f"expected (..., {len(self.mean)}) features, got {tuple(x.shape)}")
        if isinstance(x, np.ndarray):
            return self.mean.astype(x.dtype), self.std.astype(x.dtype)
        import torch

        return (torch.as_tensor(self.mean, dtype=x.dtype, device=x.device),
                torch.as_tensor(self.std, dtype=x.dtype, device=x.device))

    def transform(self, x: Any) -> Any:
        mean, std = self._params(x)
        return (x - mean) / std

    def inverse(self, z: Any) -> Any:
        mean, std = self._params(z)
        return z * std + mean

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Normaliser:
        try:
            return cls(np.asarray(d["mean"], np.float64), np.asarray(d["std"], np.float64))
        except (KeyError, TypeError, ValueError) as e:
            raise ShapeError(f"normaliser description: {e}") from e


def layout_normalisers(layout: Layout, x: np.ndarray, y: np.ndarray, joint_weights: Any = None
                       ) -> tuple[Normaliser, Normaliser]:
    """Normalisers of X and Y fitted with the layout's groups; ``joint_weights`` (by name or (J,)) scale
    the input joint position and velocity groups (Holden divides their std by the weight)."""
    w = None
    if joint_weights is not None:
        w = layout.joint_weights(joint_weights, [g for g in layout.in_groups if g in ("joint_pos", "joint_vel")])
    return Normaliser.fit(x, layout.in_groups, w), Normaliser.fit(y, layout.out_groups)


def stack_rows(parts: Sequence[dict[str, np.ndarray]], skipped: Sequence[str], what: str) -> dict[str, np.ndarray]:
    """Concatenate per-clip row dicts; X and Y as float32; ``skipped`` clip names kept as an array."""
    if not parts:
        raise DataError(f"{what}: no clip has a full +-1 s window")
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["X"], out["Y"] = out["X"].astype(np.float32), out["Y"].astype(np.float32)
    out["skipped"] = np.array(skipped, dtype=str)
    return out


def one_hot(ids: np.ndarray, n: int) -> np.ndarray:
    """(..., n) float one-hot of integer ids (...)."""
    return (np.asarray(ids)[..., None] == np.arange(n)).astype(np.float64)


def check_last(name: str, x: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as float64, checked to end in ``shape``; raises ShapeError naming ``name`` (also if None)."""
    if x is None:
        raise ShapeError(f"{name}: missing, expected (..., {', '.join(map(str, shape))})")
    a = np.asarray(x, np.float64)
    if a.shape[a.ndim - len(shape):] != shape or a.ndim < len(shape):
        raise ShapeError(f"{name}: expected (..., {', '.join(map(str, shape))}), got {a.shape}")
    return a
