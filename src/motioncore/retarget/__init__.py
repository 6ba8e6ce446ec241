"""Layer retarget: joint maps and retargeting onto another skeleton. May import train and every layer below.

Retargeting: joint maps (presets, auto-matching, override files) and world-space rotation-offset
retargeting of a Motion onto another Skeleton. See docs/retarget.md."""
from __future__ import annotations

from .core import leg_length, leg_scale, own_convention, rest_rotations, retarget
from .mapping import (
                      CANONICAL,
                      PRESETS,
                      JointMap,
                      RetargetError,
                      SkeletonMismatch,
                      apply_overrides,
                      auto_map,
                      check_map,
                      clip_poses,
                      detect_preset,
                      load_overrides,
                      normalise_name,
)

__all__ = ["CANONICAL", "PRESETS", "JointMap", "RetargetError", "SkeletonMismatch", "apply_overrides", "auto_map",
           "check_map", "clip_poses", "detect_preset",
           "leg_length", "leg_scale", "load_overrides", "normalise_name", "own_convention", "rest_rotations",
           "retarget"]
