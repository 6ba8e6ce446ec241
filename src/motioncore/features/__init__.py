"""Layer features: the feature machinery shared by the PFNN and MANN layouts (their own layouts live in their families). May import data, io, core, errors.

Feature layouts of the papers: PFNN (Holden et al. 2017) for bipeds and MANN (Zhang, Starke et al.
2018) for quadrupeds, with the shared root frames, foot-contact phase and block-wise normaliser.
Column tables and labelling rules: docs/features.md."""
from __future__ import annotations

from .layout import Block, Layout
from .normaliser import Normaliser, layout_normalisers
from .phase import DEFAULT_CYCLE_S, contact_onsets, foot_phase, phase_from_onsets, side_contacts
from .poses import ClipFeatures, Pose, clip_features, local_pose, local_rotations_from_root_relative, pose_to_world
from .root_frame import (
    RootFrame,
    Trajectory,
    future_offsets,
    ground_velocity,
    root_frames,
    sample_range,
    trajectory_offsets,
    trajectory_step,
)

__all__ = [
    "DEFAULT_CYCLE_S", "Block", "ClipFeatures", "Layout", "Normaliser", "Pose", "RootFrame", "Trajectory",
    "clip_features", "contact_onsets", "foot_phase", "future_offsets", "ground_velocity", "layout_normalisers",
    "local_pose", "local_rotations_from_root_relative", "phase_from_onsets", "pose_to_world", "root_frames",
    "sample_range", "side_contacts", "trajectory_offsets", "trajectory_step",
]
