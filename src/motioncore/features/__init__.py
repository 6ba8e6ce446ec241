"""Layer features: PFNN and MANN feature layouts. May import data, io, core, errors.

Feature layouts of the papers: PFNN (Holden et al. 2017) for bipeds and MANN (Zhang, Starke et al.
2018) for quadrupeds, with the shared root frames, foot-contact phase and block-wise normaliser.
Column tables and labelling rules: docs/features.md."""
from __future__ import annotations

from .layout import Block, Layout
from .mann import (
    ACTIONS,
    MANNOutput,
    dog_actions,
    find_paws,
    mann_clip,
    mann_dataset,
    mann_decode,
    mann_encode,
    mann_layout,
    mann_output,
)
from .normaliser import Normaliser, layout_normalisers
from .pfnn import (
    GAIT_OF_CONTENT,
    GAITS,
    PFNNOutput,
    advance_phase,
    gait_labels,
    gait_of_content,
    pfnn_clip,
    pfnn_dataset,
    pfnn_decode,
    pfnn_encode,
    pfnn_layout,
    pfnn_output,
)
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
    "ACTIONS", "DEFAULT_CYCLE_S", "GAITS", "GAIT_OF_CONTENT", "Block", "ClipFeatures", "Layout", "MANNOutput",
    "Normaliser", "PFNNOutput", "Pose", "RootFrame", "Trajectory", "advance_phase", "clip_features",
    "contact_onsets", "dog_actions", "find_paws", "foot_phase", "future_offsets", "gait_labels",
    "gait_of_content", "ground_velocity", "layout_normalisers", "local_pose", "local_rotations_from_root_relative",
    "mann_clip", "mann_dataset", "mann_decode", "mann_encode", "mann_layout", "mann_output", "pfnn_clip",
    "pfnn_dataset", "pfnn_decode", "pfnn_encode", "pfnn_layout", "pfnn_output", "phase_from_onsets",
    "pose_to_world", "root_frames", "sample_range", "side_contacts", "trajectory_offsets", "trajectory_step",
]
