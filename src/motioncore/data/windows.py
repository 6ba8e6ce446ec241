"""Fixed-length windows in the LaFAN1 convention (Harvey et al. 2020).

Training windows are 50 frames every 20 frames; test windows are 65 frames every 40. Each window
has its local quaternion sign flips removed over time, is centred on its mean root XZ and rotated
so the character faces +Z at the last context frame (frame 9).

Legend: N windows, L window length, J joints.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.kinematics import BodyJoints, find_body_joints, reframe
from ..core.rotations import quat_continuity
from ..core.skeleton import Skeleton
from ..errors import DataError
from .datasets import Clip

TRAIN = (50, 20)  # (length, offset)
TEST = (65, 40)


@dataclass(eq=False)
class Windows:
    skeleton: Skeleton  # shared topology; per-clip rest offsets live in ``positions``
    rotations: np.ndarray  # (N, L, J, 4) local, WXYZ
    positions: np.ndarray  # (N, L, J, 3) local translations
    clip_index: np.ndarray  # (N,) index into the clip list each window came from
    body: BodyJoints

    def __len__(self) -> int:
        return int(self.rotations.shape[0])


def window_starts(num_frames: int, length: int, offset: int) -> range:
    """Start frames exactly as LaFAN1's extractor: while start + length < num_frames."""
    return range(0, max(num_frames - length, 0), offset)


def lafan1_windows(clips: Sequence[Clip], length: int, offset: int, face_frame: int = 9,
                   body: BodyJoints | None = None) -> Windows:
    """All windows of ``clips`` (which must share one joint topology), re-framed as LaFAN1 does."""
    if not clips:
        raise DataError("no clips to window")
    sk = clips[0].motion.skeleton
    for c in clips:
        if not c.motion.skeleton.same_topology(sk):
            raise DataError(f"clip {c.name!r} has a different joint hierarchy from {clips[0].name!r}")
    body = body or find_body_joints(sk)
    rots, poss, idx = [], [], []
    for i, c in enumerate(clips):
        q = quat_continuity(c.motion.rotations, axis=0)
        for s in window_starts(c.motion.num_frames, length, offset):
            rots.append(q[s:s + length])
            poss.append(c.motion.positions[s:s + length])
            idx.append(i)
    if not rots:
        raise DataError(f"no clip is longer than the window length {length}")
    rot, pos = reframe(np.stack(rots), np.stack(poss), sk, body, face_frame)
    return Windows(sk, rot, pos, np.asarray(idx), body)
