"""Root frames and the trajectory sampled in them, shared by the PFNN and MANN layouts.

Legend: T frames, J joints, S trajectory samples. Y is up and the ground is the XZ plane. Quaternions are
WXYZ. Lengths are in the clip's units (cm for our mocap).

A *root frame* is the character's frame on the ground: origin at the ground projection (y = 0) of the
root joint (Hips), +Z along the facing direction, +Y up (so +X is the character's left). It is stored
as a position and a yaw angle: facing = (sin yaw, 0, cos yaw). The trajectory is 12 samples, fps / 6
frames apart, spanning +-1 s around the current frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.ndimage import gaussian_filter1d

from ..core.kinematics import BodyJoints, facing_directions, yaw_quat
from ..core.rotations import quat_apply, quat_conj, quat_mul
from ..errors import MotioncoreError, ShapeError

TRAJ_PAST = 6  # trajectory samples before the current frame (k = -6..-1)
TRAJ_FUTURE = 6  # samples from the current frame on (k = 0..5)
FACING_SIGMA_S = 1.0 / 3.0  # Gaussian smoothing of the facing direction, seconds (Holden: 20 frames at 60 fps)


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

