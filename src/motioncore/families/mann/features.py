"""MANN features (Zhang, Starke, Komura, Saito 2018) for a quadruped (the MANN dog: 21 joints, paws are
end sites, 60 fps, cm).

Row i of X / Y (the paper's indexing, as for PFNN):
- X: 12 trajectory samples around frame i (k = -6..5, every fps/6 frames) in root frame i, 13 values each
  (x, z position; x, z facing; x, z velocity; speed; 6 action values), then the previous frame's (i - 1)
  points in root frame i - 1, 12 values each (position, forward = the local z axis of the point's global
  rotation, up = its y axis, velocity). The points are the 21 joints, then the 4 paw end sites (with their
  parent's orientation), so the paw velocities the gating network needs are columns of X.
- Y: the 6 samples of frame i + 1 (k = 0..5 from i + 1) in root frame i + 1, 6 values each (position,
  facing, velocity), the points of frame i in root frame i, and the root motion from i to i + 1 in root
  frame i as (dx, dangle, dz) per second (AI4Animation divides by the frame rate at runtime).
- gating: columns of X for the 4 paw velocities (frame i - 1), the speed and the 6 actions at frame i.

Legend: N rows, T frames, J joints, P = J + 4 points, S = 12 samples, A = 6 actions.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.ndimage import gaussian_filter1d, minimum_filter1d, uniform_filter1d

from motioncore.core.kinematics import BodyJoints, find_body_joints, side_of
from motioncore.core.motion import Motion
from motioncore.core.skeleton import Skeleton
from motioncore.data.datasets import Clip
from motioncore.errors import DataError
from motioncore.features.layout import Layout, blocks_from, check_last, stack_rows, strided
from motioncore.features.poses import ClipFeatures, Pose, axes_to_rotation, clip_features, rotation_axes
from motioncore.features.root_frame import (
    TRAJ_FUTURE,
    TRAJ_PAST,
    RootFrame,
    Trajectory,
    future_offsets,
    ground_velocity,
    sample_range,
    trajectory_offsets,
)

ACTIONS = ("idle", "walk", "trot", "canter", "sit", "jump")
IDLE_SPEED = 20.0  # cm/s: below this (smoothed root speed) the dog is idle
TROT_SPEED = 80.0  # cm/s: a diagonal gait counts as a trot from this speed on
TROT_SYNC = 0.4  # diagonal minus same-side contact correlation above which a gait is a trot
CANTER_SPEED = 150.0  # cm/s: with fewer than CANTER_DUTY paws down on average: canter / gallop
CANTER_DUTY = 1.0  # mean number of paws in contact over the gait window
GALLOP_SPEED = 350.0  # cm/s: always canter above this
SIT_HEIGHT = 28.0  # cm: pelvis above the local ground (standing: ~46) -> sit (sitting or lying)
JUMP_AIR_S = 0.25  # s: all paws off the ground at least this long is a jump (gait flights last <= 0.23 s)
JUMP_PAD_S = 0.2  # s: the jump label also covers this much before take-off and after landing
PAW_HEIGHT, PAW_SPEED = 5.0, 60.0  # cm, cm/s: paw contact thresholds above the local ground
GROUND_WINDOW_S = 0.5  # s: local ground = lowest paw over this window (platforms, boxes)
GAIT_WINDOW_S = 0.5  # s: window of the contact correlations (about one trot stride)
SPEED_SIGMA_S = 0.25  # s: smoothing of the root speed for labels
LABEL_SIGMA_S = 0.1  # s: Gaussian smoothing of the one-hot labels (soft actions; ids = argmax)
TRAJ_VEL_SIGMA_S = 0.1  # s: smoothing of the trajectory velocities (the pelvis sways every step)
_FIELDS_IN = 13  # per trajectory sample
_FIELDS_OUT = 6  # per future sample
_FIELDS_JOINT = 12  # per point


# ----------------------------------------------------------------------------- paws and actions
def find_paws(skeleton: Skeleton, body: BodyJoints | None = None) -> tuple[int, int, int, int]:
    """Indices into ``skeleton.end_sites`` of the (left front, right front, left hind, right hind) paws:
    the end sites below the shoulders (front) and the upper legs (hind), sided by name."""
    body = body or find_body_joints(skeleton)
    if body.shoulders is None:
        raise DataError(f"cannot find front legs in joints {list(skeleton.names)}")
    found: dict[tuple[str, str], int] = {}
    for e, (j, _) in enumerate(skeleton.end_sites):
        chain, p = [], j
        while p >= 0:
            chain.append(p)
            p = int(skeleton.parents[p])
        limb = "hind" if set(chain) & set(body.hips) else "front" if set(chain) & set(body.shoulders) else None
        side = side_of(skeleton.names[j])
        if limb and side:
            found.setdefault((limb, side), e)
    keys = [("front", "L"), ("front", "R"), ("hind", "L"), ("hind", "R")]
    if any(k not in found for k in keys):
        raise DataError(f"need 4 paw end sites (front/hind x left/right), found {found}")
    return tuple(found[k] for k in keys)  # type: ignore[return-value]


def _window_corr(a: np.ndarray, b: np.ndarray, w: int) -> np.ndarray:
    """Correlation of two (T,) signals over a centred window of w frames (0 where either is constant)."""
    mean = lambda x: uniform_filter1d(x, w, mode="nearest")  # noqa: E731
    ma, mb = mean(a), mean(b)
    va, vb = mean(a * a) - ma ** 2, mean(b * b) - mb ** 2
    ok = (va > 1e-4) & (vb > 1e-4)
    return np.where(ok, (mean(a * b) - ma * mb) / np.sqrt(np.where(ok, va * vb, 1.0)), 0.0)


def paw_contacts(paws: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Contacts (T, 4) bool and the local ground height (T,) from paw world positions (T, 4, 3): a paw is
    down within PAW_HEIGHT of the lowest paw over GROUND_WINDOW_S and slower than PAW_SPEED."""
    ground = minimum_filter1d(paws[..., 1].min(1), max(1, int(round(GROUND_WINDOW_S * fps))), mode="nearest")
    speed = np.zeros(paws.shape[:2])
    if len(paws) > 1:
        speed = np.linalg.norm(np.gradient(paws, axis=0), axis=-1) * fps
    return (paws[..., 1] - ground[:, None] < PAW_HEIGHT) & (speed < PAW_SPEED), ground


def dog_actions(motion: Motion, body: BodyJoints | None = None, paws: Sequence[int] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Action ids (T,) into ACTIONS and soft values (T, 6) (one-hot smoothed over LABEL_SIGMA_S; ids are
    their argmax). Per frame, first match wins: jump (inside a flight of >= JUMP_AIR_S, padded by
    JUMP_PAD_S), sit (pelvis < SIT_HEIGHT above the local ground), idle (speed < IDLE_SPEED), canter
    (speed >= GALLOP_SPEED, or >= CANTER_SPEED with < CANTER_DUTY paws down), trot (speed >= TROT_SPEED and
    diagonal paws in step: corr(diagonal) - corr(same side) > TROT_SYNC), else walk (walk and pace)."""
    sk, fps = motion.skeleton, motion.fps
    body = body or find_body_joints(sk)
    paws = find_paws(sk, body) if paws is None else tuple(paws)
    gq, gp = motion.global_transforms()
    pw = sk.end_site_positions(gq, gp)[:, list(paws)]  # (T, 4, 3) LF, RF, LH, RH
    ct, ground = paw_contacts(pw, fps)
    c = ct.astype(np.float64)
    w = max(2, int(round(GAIT_WINDOW_S * fps)))
    same = (_window_corr(c[:, 0], c[:, 2], w) + _window_corr(c[:, 1], c[:, 3], w)) / 2
    diag = (_window_corr(c[:, 0], c[:, 3], w) + _window_corr(c[:, 1], c[:, 2], w)) / 2
    duty = uniform_filter1d(c.sum(1), w, mode="nearest")
    ground_pos = gp[:, body.root] * np.array([1.0, 0.0, 1.0])
    vel = np.gradient(ground_pos, axis=0) * fps if len(gp) > 1 else np.zeros_like(ground_pos)
    speed = np.linalg.norm(gaussian_filter1d(vel, SPEED_SIGMA_S * fps, axis=0, mode="nearest"), axis=-1)
    pelvis = gaussian_filter1d(gp[:, body.root, 1] - ground, 0.1 * fps, mode="nearest")
    ids = np.full(len(gp), ACTIONS.index("walk"))
    ids[(diag - same > TROT_SYNC) & (speed >= TROT_SPEED)] = ACTIONS.index("trot")
    ids[(speed >= GALLOP_SPEED) | ((duty < CANTER_DUTY) & (speed >= CANTER_SPEED))] = ACTIONS.index("canter")
    ids[speed < IDLE_SPEED] = ACTIONS.index("idle")
    ids[pelvis < SIT_HEIGHT] = ACTIONS.index("sit")
    ids[_jumps(~ct.any(1), fps)] = ACTIONS.index("jump")
    soft = np.eye(len(ACTIONS))[ids]
    if LABEL_SIGMA_S > 0:
        soft = gaussian_filter1d(soft, LABEL_SIGMA_S * fps, axis=0, mode="nearest")
    return soft.argmax(1), soft


def _jumps(air: Any, fps: float) -> np.ndarray:
    """(T,) bool: flights of at least JUMP_AIR_S, padded by JUMP_PAD_S on both sides."""
    edges = np.flatnonzero(np.diff(np.r_[0, air.astype(np.int8), 0]))
    out, pad = np.zeros(len(air), bool), int(round(JUMP_PAD_S * fps))
    for a, b in zip(edges[::2], edges[1::2]):
        if b - a >= JUMP_AIR_S * fps:
            out[max(0, a - pad):b + pad] = True
    return out


# ----------------------------------------------------------------------------- layout
def mann_layout(skeleton: Skeleton, fps: float = 60.0, paws: Sequence[int] | None = None,
                actions: Sequence[str] = ACTIONS) -> Layout:
    """Every column block of X and Y; ``in_groups`` / ``out_groups`` name each field across samples and
    points (normaliser groups), ``gating`` the 19 gating columns of X."""
    paws = find_paws(skeleton) if paws is None else tuple(paws)
    names = tuple(skeleton.names) + tuple(skeleton.names[skeleton.end_sites[e][0]] + "_paw" for e in paws)
    P, S, F, A = len(names), TRAJ_PAST + TRAJ_FUTURE, TRAJ_FUTURE, len(actions)
    if A + 7 != _FIELDS_IN:
        raise DataError(f"MANN uses 6 action values, got {A}")
    act = ", ".join(actions)
    inputs = blocks_from([
        ("trajectory", S * _FIELDS_IN, f"12 samples k = -6..5 at frames i + k*fps/6, 13 each: pos x, z (cm); "
         f"dir x, z (unit); vel x, z (cm/s); speed (cm/s); actions ({act})", "see meaning", "root i"),
        ("joints", P * _FIELDS_JOINT, f"{P} points of frame i-1 ({P - 4} joints then 4 paws), 12 each: pos xyz "
         "(cm); forward xyz, up xyz (unit: local z / y axis); vel xyz (cm/s)", "see meaning", "root i-1"),
    ])
    outputs = blocks_from([
        ("future", F * _FIELDS_OUT, "6 samples k = 0..5 at frames i+1 + k*fps/6, 6 each: pos x, z (cm); "
         "dir x, z (unit); vel x, z (cm/s)", "see meaning", "root i+1"),
        ("joints", P * _FIELDS_JOINT, f"the {P} points of frame i, as in X", "see meaning", "root i"),
        ("root_motion", 3, "root motion from frame i to i+1: dx (cm/s), dangle (rad/s), dz (cm/s)", "per second",
         "root i"),
    ])
    ti, jo, fo, yj = 0, inputs[1].start, 0, outputs[1].start
    in_groups = {"traj_pos": strided(ti, S, 13, 2, 0), "traj_dir": strided(ti, S, 13, 2, 2),
                 "traj_vel": strided(ti, S, 13, 2, 4), "traj_speed": strided(ti, S, 13, 1, 6),
                 "traj_action": strided(ti, S, 13, A, 7)}
    out_groups = {"future_pos": strided(fo, F, 6, 2, 0), "future_dir": strided(fo, F, 6, 2, 2),
                  "future_vel": strided(fo, F, 6, 2, 4)}
    for k, name in enumerate(("pos", "fwd", "up", "vel")):
        in_groups[f"joint_{name}"] = strided(jo, P, 12, 3, 3 * k)
        out_groups[f"joint_{name}"] = strided(yj, P, 12, 3, 3 * k)
    r = outputs[2].start
    out_groups.update(root_vel=np.array([r, r + 2]), root_angvel=np.array([r + 1]))
    centre = TRAJ_PAST * _FIELDS_IN  # sample k = 0
    gating = np.r_[strided(jo, 4, 12, 3, 9 + 12 * (P - 4)), centre + 6 + np.arange(1 + A)]
    return Layout("mann", names, tuple(actions), float(fps), inputs, outputs, in_groups, out_groups, gating)


# ----------------------------------------------------------------------------- runtime: encode / decode
def mann_encode(layout: Layout, frame: RootFrame, trajectory: Trajectory, prev_pose: Pose) -> np.ndarray:
    """X (..., D_in) from the current root frame (...), the world trajectory around it (positions,
    directions, velocities (..., 12, 3) in cm/s, speeds (..., 12), actions (..., 12, 6)) and the previous
    points (positions, velocities in cm/s, rotations) in the previous root frame, as `mann_decode` gives."""
    P, S, lead = len(layout.joints), TRAJ_PAST + TRAJ_FUTURE, frame.shape
    pos = frame.points_to_local(check_last("trajectory.positions", trajectory.positions, (S, 3)))
    d = frame.dirs_to_local(check_last("trajectory.directions", trajectory.directions, (S, 3)))
    v = frame.dirs_to_local(check_last("trajectory.velocities", trajectory.velocities, (S, 3)))
    sp = check_last("trajectory.speeds", trajectory.speeds, (S,))[..., None]
    a = check_last("trajectory.labels", trajectory.labels, (S, len(layout.labels)))
    traj = np.concatenate([pos[..., [0, 2]], d[..., [0, 2]], v[..., [0, 2]], sp, a], -1)  # (..., S, 13)
    jp = check_last("prev_pose.positions", prev_pose.positions, (P, 3))
    jv = check_last("prev_pose.velocities", prev_pose.velocities, (P, 3))
    ax = rotation_axes(check_last("prev_pose.rotations", prev_pose.rotations, (P, 4)))
    joints = np.concatenate([jp, ax, jv], -1)  # (..., P, 12)
    x = np.concatenate([traj.reshape(lead + (-1,)), joints.reshape(lead + (-1,))], -1)
    assert x.shape[-1] == layout.d_in
    return x


def mann_output(layout: Layout, frame: RootFrame, next_frame: RootFrame, future: Trajectory, pose: Pose,
                fps: float | None = None) -> np.ndarray:
    """Y (..., D_out): the inverse of `mann_decode`. ``future``: world positions, directions, velocities
    (..., 6, 3) of the next frame's samples; ``pose``: the points of frame i in ``frame`` coordinates."""
    P, F, lead = len(layout.joints), TRAJ_FUTURE, frame.shape
    fps = fps or layout.fps
    fp = next_frame.points_to_local(check_last("future.positions", future.positions, (F, 3)))
    fd = next_frame.dirs_to_local(check_last("future.directions", future.directions, (F, 3)))
    fv = next_frame.dirs_to_local(check_last("future.velocities", future.velocities, (F, 3)))
    fut = np.concatenate([fp[..., [0, 2]], fd[..., [0, 2]], fv[..., [0, 2]]], -1)  # (..., F, 6)
    ax = rotation_axes(check_last("pose.rotations", pose.rotations, (P, 4)))
    joints = np.concatenate([check_last("pose.positions", pose.positions, (P, 3)), ax,
                             check_last("pose.velocities", pose.velocities, (P, 3))], -1)
    delta, dyaw = frame.relative(next_frame)
    root = np.stack([delta[..., 0], dyaw, delta[..., 2]], -1) * fps
    y = np.concatenate([fut.reshape(lead + (-1,)), joints.reshape(lead + (-1,)), root], -1)
    assert y.shape[-1] == layout.d_out
    return y


@dataclass(eq=False)
class MANNOutput:
    """A decoded Y. ``pose`` is in the coordinates of the frame it was decoded with (root frame i)."""

    next_frame: RootFrame  # root frame i + 1
    root_motion: np.ndarray  # (..., 3) dx (units/s), dangle (rad/s), dz (units/s) in root frame i
    future: Trajectory  # world positions, unit directions, velocities (..., 6, 3)
    pose: Pose  # points of frame i: positions, velocities (units/s), rotations (..., P, 4)


def mann_decode(layout: Layout, y: np.ndarray, frame: RootFrame, fps: float | None = None) -> MANNOutput:
    """Split Y (..., D_out) predicted in root frame i (``frame``) into the next root frame, the world
    future trajectory and the points of frame i (rotations rebuilt from forward / up)."""
    y = check_last("y", y, (layout.d_out,))
    P, F, lead, fps = len(layout.joints), TRAJ_FUTURE, frame.shape, fps or layout.fps
    fut = y[..., layout.output_block("future").slice].reshape(lead + (F, _FIELDS_OUT))
    jt = y[..., layout.output_block("joints").slice].reshape(lead + (P, _FIELDS_JOINT))
    root = y[..., layout.output_block("root_motion").slice]
    nxt = frame.advance(np.stack([root[..., 0], np.zeros_like(root[..., 0]), root[..., 2]], -1) / fps,
                        root[..., 1] / fps)
    xz = lambda a: np.stack([a[..., 0], np.zeros_like(a[..., 0]), a[..., 1]], -1)  # noqa: E731
    d = xz(fut[..., 2:4])
    d = d / np.maximum(np.linalg.norm(d, axis=-1, keepdims=True), 1e-9)
    future = Trajectory(nxt.points_to_world(xz(fut[..., 0:2])), nxt.dirs_to_world(d),
                        velocities=nxt.dirs_to_world(xz(fut[..., 4:6])))
    pose = Pose(jt[..., 0:3], jt[..., 9:12], axes_to_rotation(jt[..., 3:6], jt[..., 6:9]))
    return MANNOutput(nxt, root, future, pose)


# ----------------------------------------------------------------------------- dataset
def mann_clip(layout: Layout, motion: Motion, soft_actions: np.ndarray, paws: Sequence[int],
              body: BodyJoints | None = None, cf: ClipFeatures | None = None) -> dict[str, np.ndarray]:
    """X, Y (float64) and the frame index of every row of one clip (``soft_actions`` (T, 6))."""
    body = body or find_body_joints(motion.skeleton)
    cf = cf or clip_features(motion, body, per_second=True, sites=paws)
    i = np.array(sample_range(motion.num_frames, motion.fps), dtype=np.int64)
    if len(i) == 0:
        return {}
    fr = cf.frames
    vel = ground_velocity(fr, motion.fps, TRAJ_VEL_SIGMA_S)
    speed = np.linalg.norm(vel, axis=-1)
    ti, fi = i[:, None] + trajectory_offsets(motion.fps), i[:, None] + 1 + future_offsets(motion.fps)
    x = mann_encode(layout, fr[i], Trajectory(fr.position[ti], fr.forward[ti], soft_actions[ti], vel[ti], speed[ti]),
                    Pose(cf.positions[i - 1], cf.velocities[i - 1], cf.rotations[i - 1]))
    y = mann_output(layout, fr[i], fr[i + 1], Trajectory(fr.position[fi], fr.forward[fi], velocities=vel[fi]),
                    Pose(cf.positions[i], cf.velocities[i], cf.rotations[i]), motion.fps)
    return {"X": x, "Y": y, "frame": i}


def mann_dataset(clips: Sequence[Clip]) -> dict[str, np.ndarray]:
    """Rows of every frame with a full +-1 s window of ``clips``: X (N, D_in), Y (N, D_out) float32,
    gating (19,) column indices into X, clip (N,) index into ``clips``, frame (N,), action (N,) id at the
    row's frame, family (N,) the clip-name action family, skipped: names of clips too short."""
    if not clips:
        raise DataError("mann_dataset: no clips")
    sk = clips[0].motion.skeleton
    body = find_body_joints(sk)
    paws = find_paws(sk, body)
    layout = mann_layout(sk, clips[0].motion.fps, paws)
    parts, skipped = [], []
    for n, c in enumerate(clips):
        if not c.motion.skeleton.same_topology(sk):
            raise DataError(f"clip {c.name!r} has a different joint hierarchy from {clips[0].name!r}")
        ids, soft = dog_actions(c.motion, body, paws)
        rows = mann_clip(layout, c.motion, soft, paws, body)
        if not rows:
            skipped.append(c.name)
            continue
        rows.update(clip=np.full(len(rows["frame"]), n), action=ids[rows["frame"]],
                    family=np.full(len(rows["frame"]), str(c.labels.get("action", ""))))
        parts.append(rows)
    out = stack_rows(parts, skipped, "mann_dataset")
    out["gating"] = layout.gating.copy()
    return out
