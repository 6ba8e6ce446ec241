"""Motion: a skeleton plus per-frame local rotations and translations.

Legend: T frames, J joints. Quaternions are WXYZ. Lengths are in the file's units (cm for our BVH).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError
from .skeleton import Skeleton


@dataclass(eq=False)
class Motion:
    """A clip. ``positions[:, j]`` is joint j's translation in its parent's frame: its position channels
    where the file has them, else its rest offset. Both arrays are float64 numpy."""

    skeleton: Skeleton
    rotations: np.ndarray  # (T, J, 4) local rotations, WXYZ, unit
    positions: np.ndarray  # (T, J, 3) local translations
    fps: float  # frames per second
    name: str = ""  # clip name (file stem), for reports

    def __post_init__(self) -> None:
        J = self.skeleton.num_joints
        self.rotations = np.asarray(self.rotations, dtype=np.float64)
        self.positions = np.asarray(self.positions, dtype=np.float64)
        if self.rotations.ndim != 3 or self.rotations.shape[1:] != (J, 4):
            raise ShapeError(f"rotations: expected (T, {J}, 4), got {self.rotations.shape}")
        if self.positions.shape != self.rotations.shape[:1] + (J, 3):
            raise ShapeError(f"positions: expected ({self.rotations.shape[0]}, {J}, 3), got {self.positions.shape}")
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise ShapeError(f"fps: expected a positive number, got {self.fps}")

    @property
    def num_frames(self) -> int:
        return int(self.rotations.shape[0])

    @property
    def root_positions(self) -> np.ndarray:
        """(T, 3) translation of the root joint (joint 0)."""
        return self.positions[:, 0]

    def global_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """Global rotations (T, J, 4) and positions (T, J, 3) by forward kinematics."""
        return self.skeleton.forward_kinematics(self.rotations, self.positions)

    def slice(self, start: int, stop: int) -> Motion:
        return Motion(self.skeleton, self.rotations[start:stop], self.positions[start:stop], self.fps, self.name)
