"""How a controller follows its paths (steps 2 and 3 of `locomotion`): per-character speed and gait
defaults for paths that leave them out (`Character`, `BIPED`, `DOG`), and the 12 trajectory samples fed to
the network each frame: the past from the character's own motion, the future desired by the paths
blended with the network's previous prediction with Holden's bias (`blend_scale`, `path_trajectory`).

Paths are in metres (see docs/paths.md); the tracks (`paths.PathTrack`) and the samples are in model units.

Legend: B characters (paths), K = 6 future samples, C gait / action classes.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..features.layout import one_hot
from ..features.root_frame import TRAJ_FUTURE, TRAJ_PAST, Trajectory
from .paths import PathTrack
from .rollout import State

__all__ = ["BIPED", "DIRECTION_BIAS", "DOG", "POSITION_BIAS", "Character", "blend_scale", "path_trajectory",
           "stop_labels"]

POSITION_BIAS = 1.5  # Holden's blend bias for future positions (and MANN velocities): larger = follow the path later
DIRECTION_BIAS = 1.5  # ... and for future facing directions


@dataclass(frozen=True)
class Character:
    """Per-character tables for paths that leave out speed or gait (speeds in m/s)."""

    stop: str  # label asked for when the path has run out (if the last label moves)
    default_speed: dict[str, float]  # speed of each label when the path gives none
    gait_by_speed: tuple[tuple[float, str], ...]  # (upper speed bound, label) when the path gives no gait
    aliases: dict[str, str] = field(default_factory=dict)  # other names accepted in path.json


BIPED = Character("stand", {"stand": 0.0, "walk": 1.1, "run": 2.6},  # Bandai test medians: 0.05, 1.07, 2.63
                  ((0.25, "stand"), (1.8, "walk"), (math.inf, "run")), {"idle": "stand"})
DOG = Character("idle", {"idle": 0.0, "walk": 0.7, "trot": 1.8, "canter": 3.0, "sit": 0.0, "jump": 1.6},
                ((0.2, "idle"), (1.4, "walk"), (2.4, "trot"), (math.inf, "canter")),
                {"stand": "idle", "run": "canter", "gallop": "canter", "pace": "walk", "lie": "sit"})


def blend_scale(bias: float, k: int = TRAJ_FUTURE) -> np.ndarray:
    """(k,) Holden's blend towards the desired trajectory: 1 - (1 - j/6) ** bias for samples j = 0..k-1."""
    return 1.0 - (1.0 - np.arange(k) / TRAJ_FUTURE) ** bias


def stop_labels(character: Character, labels: Sequence[str]) -> np.ndarray:
    """(C,) the values of the stop label (stand / idle)."""
    name = character.stop if character.stop in labels else labels[0]
    return one_hot(np.array(labels.index(name)), len(labels))


def path_trajectory(st: State, tracks: Sequence[PathTrack], character: Character, labels: Sequence[str],
                    step: int, fps: float) -> tuple[Trajectory, np.ndarray]:
    """The 12 input samples (B, 12, .) in world space, and each character's arc length on its path:
    the past 6 from the state's buffer (every ``step`` frames), the future 6 desired by the paths (walked
    at their speeds from each character's projection, ``fps`` the model's) blended with the state's
    predicted future (`blend_scale`); ``labels`` are the model's gait / action names."""
    B, K, C = st.batch, TRAJ_FUTURE, len(labels)
    secs = np.arange(K) * step / fps
    d_pos, d_dir, d_vel = np.zeros((B, K, 3)), np.zeros((B, K, 3)), np.zeros((B, K, 3))
    d_lab, s0 = np.zeros((B, K, C)), np.zeros(B)
    stop = stop_labels(character, labels)
    for b, tr in enumerate(tracks):
        s0[b] = tr.project(st.frame.position[b, [0, 2]], float(st.progress[b]))
        s = tr.walk(s0[b], secs)  # (K,) arc lengths at the sample times
        xz, a = tr.position(s), tr.yaw(s)
        d_pos[b, :, 0], d_pos[b, :, 2] = xz[:, 0], xz[:, 1]
        d_dir[b, :, 0], d_dir[b, :, 2] = np.sin(a), np.cos(a)
        lab, speed = tr.labels_at(s), tr.speed_at(s)
        ended = s >= tr.length - 1e-6  # past the end: stop (still labels such as sit stay)
        moving = lab @ np.array([character.default_speed.get(n, 1.0) > 0 for n in labels], float)
        lab[ended] = lab[ended] * (1 - moving[ended, None]) + stop * moving[ended, None]
        speed[ended] = 0.0
        here = st.frame.position[b, [0, 2]]
        if ended[0] and np.dot(here - tr.xz[-1], tr.tangent(np.array(tr.length))) > 0:
            d_pos[b, :, 0], d_pos[b, :, 2] = here[0], here[1]  # overshot the end: stop here, no U-turn
        tan = tr.tangent(s)
        d_vel[b, :, 0], d_vel[b, :, 2] = tan[:, 0] * speed, tan[:, 1] * speed
        d_lab[b] = lab
    sp, sd = blend_scale(POSITION_BIAS)[None, :, None], blend_scale(DIRECTION_BIAS)[None, :, None]
    f = st.future
    fut_pos = f.positions + sp * (d_pos - f.positions)
    fut_pos[:, 0] = st.frame.position  # sample k = 0 is the character itself
    fut_dir = f.directions + sd * (d_dir - f.directions)
    n = np.linalg.norm(fut_dir, axis=-1, keepdims=True)
    fut_dir = np.where(n > 1e-6, fut_dir / np.maximum(n, 1e-6), d_dir)
    fut_dir[:, 0] = st.frame.forward
    idx = np.arange(TRAJ_PAST) * step  # past samples k = -6..-1 in the H-frame buffer
    p = st.past
    assert p.labels is not None
    traj = Trajectory(np.concatenate([p.positions[:, idx], fut_pos], 1), np.concatenate([p.directions[:, idx], fut_dir], 1),
                      np.concatenate([p.labels[:, idx], d_lab], 1))
    if f.velocities is not None and p.velocities is not None:
        fut_vel = f.velocities + sp * (d_vel - f.velocities)
        traj.velocities = np.concatenate([p.velocities[:, idx], fut_vel], 1)
        traj.speeds = np.linalg.norm(traj.velocities, axis=-1)
    return traj, s0
