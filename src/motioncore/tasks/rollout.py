"""What a controller rollout carries from frame to frame (`State`, batched over characters; `stack_states`)
and what it returns (`Rollout`: the animations, their root path, phase and contacts), and the fit of the
written pose (`align_bones`). The loop that uses them: `locomotion.Controller.rollout`.

Legend: B characters (paths), T frames, J joints, P feature points (MANN: J + 4 paws), H past frames
kept (6 * fps/6), K = 6 future samples, C gait / action classes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.kinematics import resample
from ..core.motion import Motion
from ..core.rotations import quat_apply, quat_between, quat_mul
from ..core.skeleton import Skeleton
from ..features.poses import Pose
from ..features.root_frame import RootFrame, Trajectory

__all__ = ["Rollout", "State", "align_bones", "map_trajectories", "stack_states"]


def align_bones(rotations: np.ndarray, positions: np.ndarray, bones: tuple[np.ndarray, np.ndarray, np.ndarray]
                ) -> np.ndarray:
    """Global rotations (..., J, 4) (any common frame) with the swing of each bone corrected so that it
    points from its joint's position to its target's; twists are kept. ``bones`` = (joint (M,), rest
    offset (M, 3) of the bone, target (M,) index into ``positions`` (..., P, 3): the joint's only child,
    or a MANN paw point). Checkpoints from before issue 27 give rotations as log maps relative to the root
    frame, which jump near 180 degrees, where Bandai's right limbs sit (160-170 degrees): such a PFNN gets
    their rotations 13-50 degrees wrong while their positions are right, so without this the written
    right foot slides (``joint_axes`` checkpoints do not jump; the fit still plants the predicted feet)."""
    j, offset, target = bones
    if len(j) == 0:
        return rotations
    q = rotations[..., j, :]  # (..., M, 4)
    now = quat_apply(q, np.broadcast_to(offset, q.shape[:-1] + (3,)))  # (..., M, 3) bones as rotated
    want = positions[..., target, :] - positions[..., j, :]  # (..., M, 3) bones as predicted
    out = rotations.copy()
    out[..., j, :] = quat_mul(quat_between(now, want), q)
    return out


@dataclass(eq=False)
class State:
    """Everything a rollout carries from frame to frame, batched over B characters (world space)."""

    frame: RootFrame  # (B,) root frame of the frame about to be generated
    prev: Pose  # (B, P, 3) previous pose in the previous root frame (MANN also rotations (B, P, 4))
    past: Trajectory  # (B, H, .) root samples of the last H frames, oldest first (labels (B, H, C))
    future: Trajectory  # (B, K, 3) the network's predicted samples k = 0..5 around the current frame
    phase: np.ndarray  # (B,) radians (PFNN and its baseline; unused by MANN)
    progress: np.ndarray  # (B,) arc length reached on each path (model units)

    @property
    def batch(self) -> int:
        return int(self.phase.shape[0])


def map_trajectories(fn: Callable[..., np.ndarray], trajs: Sequence[Trajectory]) -> Trajectory:
    """A trajectory whose every field is ``fn`` of that field of ``trajs`` (fields the first lacks stay None)."""
    out: list[Any] = []
    for name in ("positions", "directions", "labels", "velocities", "speeds"):
        xs = [getattr(t, name) for t in trajs]
        out.append(None if xs[0] is None else fn(*xs))
    return Trajectory(*out)


def stack_states(states: Sequence[State]) -> State:
    """One batched state from several (e.g. one per clip from `Controller.state_from_clip`)."""
    cat = lambda *xs: np.concatenate(xs, 0)  # noqa: E731
    rot = [s.prev.rotations for s in states]
    return State(RootFrame(cat(*[s.frame.position for s in states]), cat(*[s.frame.yaw for s in states])),
                 Pose(cat(*[s.prev.positions for s in states]), cat(*[s.prev.velocities for s in states]),
                      None if rot[0] is None else cat(*rot)),
                 map_trajectories(cat, [s.past for s in states]), map_trajectories(cat, [s.future for s in states]),
                 cat(*[s.phase for s in states]), cat(*[s.progress for s in states]))


@dataclass(eq=False)
class Rollout:
    """B animations of T frames at the model's fps, in the model's units (cm)."""

    skeleton: Skeleton
    fps: float
    rotations: np.ndarray  # (B, T, J, 4) local rotations, WXYZ
    positions: np.ndarray  # (B, T, J, 3) local translations
    root: np.ndarray  # (B, T, 3) root frame origins (ground projection of the hips), world
    yaw: np.ndarray  # (B, T) root facing angle, radians
    progress: np.ndarray  # (B, T) arc length reached on the path, model units
    phase: np.ndarray | None = None  # (B, T) phase in cycles (PFNN and its baseline)
    contacts: np.ndarray | None = None  # (B, T, 4) predicted foot contacts (PFNN and its baseline)

    @property
    def batch(self) -> int:
        return int(self.rotations.shape[0])

    @property
    def frames(self) -> int:
        return int(self.rotations.shape[1])

    def motion(self, b: int = 0, name: str = "", fps: float | None = None) -> Motion:
        """Character b as a `Motion` (writeable with `write_bvh`), resampled to ``fps`` if given."""
        m = Motion(self.skeleton, self.rotations[b], self.positions[b], self.fps, name)
        return resample(m, fps) if fps is not None and abs(fps - self.fps) > 1e-9 else m
