"""PFNN features (Holden, Komura, Saito 2017) for a biped (Bandai Namco: 22 joints, 30 fps, cm).

Row i of X / Y (Holden's indexing, kept so the runtime loop needs no re-framing):
- X: the trajectory around frame i (12 samples, k = -6..5, every fps/6 frames) in root frame i, each with
  x/z position, x/z facing and a gait one-hot, then the *previous* pose (frame i - 1) in root frame i - 1:
  joint positions and velocities (p[i-1] - p[i-2]). Phase is not a column: it selects the weights.
- Y: root motion from frame i to i + 1 in root frame i (x, z, yaw), the phase change (cycles per frame),
  the 4 foot contacts at frame i, the trajectory of frame i + 1 (samples k = 0..5 from i + 1) in root frame
  i + 1, then the pose of frame i in root frame i: positions, velocities (p[i] - p[i-1]) and rotations
  (each joint's global rotation relative to the root frame as its forward and up axes, ``joint_axes``,
  as MANN does). Checkpoints trained before issue 27 have the log map (axis * angle) instead
  (``joint_rot``): it jumps by 2 pi near 180 degrees, where Bandai's right limbs sit (their
  root-relative rotations span 100-180 degrees and cross 180 in 2-7% of the frames), so those targets
  were bimodal and the trained net's right limbs flipped. `rotation_encoding` tells them apart.
So decoding Y_i gives exactly the pose that X_{i+1} takes as its previous pose. No terrain heights: our
terrain is flat. Bandai's static ``joint_Root`` stands for the root frame itself (see `poses.ground_joints`).

Legend: N rows, T frames, J joints, S = 12 trajectory samples, G gaits.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from motioncore.core.kinematics import BodyJoints, find_body_joints, foot_contacts, side_of
from motioncore.core.motion import Motion
from motioncore.core.rotations import axis_angle_to_quat, quat_to_axis_angle
from motioncore.core.skeleton import Skeleton
from motioncore.data.datasets import Clip
from motioncore.errors import DataError
from motioncore.features.layout import Layout, blocks_from, check_last, one_hot, stack_rows
from motioncore.features.phase import foot_phase
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

GAITS = ("stand", "walk", "run")
GAIT_OF_CONTENT = {  # Bandai content label -> gait; contents not listed (kick, punch, slash, dance-short) are skipped
    "walk": "walk", "walk-turn-left": "walk", "walk-turn-right": "walk", "walk-back": "walk",
    "walk-left": "walk", "walk-right": "walk", "run": "run", "dash": "run",
    "bow": "stand", "bye": "stand", "byebye": "stand", "call": "stand", "guide": "stand", "respond": "stand"}
STAND_SPEED = 25.0  # cm/s: smoothed root speed below this is `stand` (Bandai walks never drop below 35)
RUN_SPEED = 180.0  # cm/s: walk/run split for clips without a content label (speed-only fallback)
SPEED_SIGMA_S = 0.25  # Gaussian smoothing of the root speed for gait labels, seconds
CONTACT_HEIGHT = 8.0  # cm above the joint's lowest point in the clip
CONTACT_SPEED = 50.0  # cm/s (at 30 fps 5 cm / 30 cm/s flickers on fast runs)
ROTATION_ENCODINGS = ("axes", "logmap")  # Y's joint rotations: forward + up axes (continuous), or the legacy log map


# ----------------------------------------------------------------------------- labels
def gait_of_content(content: str | None) -> str | None:
    """Gait name for a Bandai content label; None for non-locomotion actions (kick, punch, slash...)."""
    return GAIT_OF_CONTENT.get(content) if content is not None else None


def locomotion_clips(clips: Sequence[Clip]) -> list[Clip]:
    """The clips whose content the PFNN can drive (walks, turns, side and back steps, runs, dashes);
    clips without a content label are kept."""
    return [c for c in clips if c.labels.get("content") is None
            or GAIT_OF_CONTENT.get(str(c.labels.get("content")), "stand") != "stand"]


def gait_labels(frames: RootFrame, fps: float, content: str | None = None, gaits: Sequence[str] = GAITS,
                stand_speed: float = STAND_SPEED, run_speed: float = RUN_SPEED) -> np.ndarray:
    """(T,) gait ids into ``gaits``: the content's gait, overridden to ``stand`` where the root speed
    (smoothed over ``SPEED_SIGMA_S``) is below ``stand_speed``. Without a content label (your own mocap)
    the speed alone decides: stand / walk / run at ``stand_speed`` and ``run_speed``."""
    speed = np.linalg.norm(ground_velocity(frames, fps, SPEED_SIGMA_S), axis=-1)
    gaits = tuple(gaits)
    if content is None:
        name = np.where(speed < run_speed, "walk", "run")
    else:
        g = gait_of_content(content)
        if g is None:
            raise DataError(f"content {content!r} is not locomotion; known: {sorted(GAIT_OF_CONTENT)}")
        name = np.full(len(speed), g)
    name = np.where(speed < stand_speed, "stand", name)
    missing = set(name.tolist()) - set(gaits)
    if missing:
        raise DataError(f"gaits {sorted(missing)} not in {gaits}")
    return np.array([gaits.index(n) for n in name], dtype=np.int64)


# ----------------------------------------------------------------------------- layout
def rotation_encoding(layout: Layout | dict) -> str:
    """``axes`` or ``logmap``: how a PFNN layout (or its stored dict, a checkpoint's ``layout``) encodes
    Y's joint rotations (the block is ``joint_axes`` or, in checkpoints from before issue 27, ``joint_rot``)."""
    names = [b.name for b in layout.outputs] if isinstance(layout, Layout) else [b[0] for b in layout.get("outputs", [])]
    return "logmap" if "joint_rot" in names else "axes"


def pfnn_layout(skeleton: Skeleton, gaits: Sequence[str] = GAITS, fps: float = 30.0,
                rotations: str = "axes") -> Layout:
    """Every column block of X and Y for ``skeleton`` (J = its joints) and ``gaits`` (G); ``rotations``
    is Y's joint rotation encoding (`ROTATION_ENCODINGS`; ``logmap`` only to load old checkpoints)."""
    if rotations not in ROTATION_ENCODINGS:
        raise DataError(f"rotations: expected one of {ROTATION_ENCODINGS}, got {rotations!r}")
    J, G, S, F = skeleton.num_joints, len(gaits), TRAJ_PAST + TRAJ_FUTURE, TRAJ_FUTURE
    k = "samples k = -6..5 at frames i + k*fps/6"
    inputs = blocks_from([
        ("traj_pos_x", S, f"root trajectory x, {k}", "cm", "root i"),
        ("traj_pos_z", S, f"root trajectory z, {k}", "cm", "root i"),
        ("traj_dir_x", S, "facing direction x at the samples", "unit vector", "root i"),
        ("traj_dir_z", S, "facing direction z at the samples", "unit vector", "root i"),
        ("traj_gait", S * G, f"gait one-hot, class-major: ({', '.join(gaits)}) x 12 samples", "0/1", "-"),
        ("joint_pos", 3 * J, "joint positions of frame i-1, joint-major (x, y, z)", "cm", "root i-1"),
        ("joint_vel", 3 * J, "joint velocities p[i-1] - p[i-2]", "cm/frame", "root i-1"),
    ])
    outputs = blocks_from([
        ("root_vel", 2, "root displacement (x, z) from frame i to i+1", "cm/frame", "root i"),
        ("root_angvel", 1, "yaw change from frame i to i+1", "rad/frame", "-"),
        ("dphase", 1, "phase change from frame i to i+1", "cycles/frame", "-"),
        ("contacts", 4, "foot contacts at frame i: left foot, left toe, right foot, right toe", "0/1", "-"),
        ("future_pos", 2 * F, "trajectory of frame i+1: x of samples k = 0..5 at i+1+k*fps/6, then z", "cm",
         "root i+1"),
        ("future_dir", 2 * F, "facing at those samples: x (6), then z (6)", "unit vector", "root i+1"),
        ("joint_pos", 3 * J, "joint positions of frame i", "cm", "root i"),
        ("joint_vel", 3 * J, "joint velocities p[i] - p[i-1]", "cm/frame", "root i"),
        ("joint_axes", 6 * J, "joint rotations relative to the root frame: forward (local z) xyz, up (local y) xyz",
         "unit vector", "root i") if rotations == "axes" else
        ("joint_rot", 3 * J, "joint rotations relative to the root frame, log map (axis * angle)", "rad", "root i"),
    ])
    groups = lambda bs: {b.name: np.arange(b.start, b.stop) for b in bs}  # noqa: E731  Holden's blocks
    return Layout("pfnn", tuple(skeleton.names), tuple(gaits), float(fps), inputs, outputs,
                  groups(inputs), groups(outputs))


# ----------------------------------------------------------------------------- runtime: encode / decode
def pfnn_encode(layout: Layout, frame: RootFrame, trajectory: Trajectory, prev_pose: Pose) -> np.ndarray:
    """X (..., D_in) from the current root frame (...), the world trajectory around it (positions and
    directions (..., 12, 3), gait values (..., 12, G)) and the previous pose (positions and per-frame
    velocities (..., J, 3) in the previous root frame, as `pfnn_decode` returns them)."""
    J, G, S = len(layout.joints), len(layout.labels), TRAJ_PAST + TRAJ_FUTURE
    pos = frame.points_to_local(check_last("trajectory.positions", trajectory.positions, (S, 3)))
    d = frame.dirs_to_local(check_last("trajectory.directions", trajectory.directions, (S, 3)))
    g = check_last("trajectory.labels", trajectory.labels, (S, G))
    jp = check_last("prev_pose.positions", prev_pose.positions, (J, 3))
    jv = check_last("prev_pose.velocities", prev_pose.velocities, (J, 3))
    lead = frame.shape
    x = np.concatenate([pos[..., 0], pos[..., 2], d[..., 0], d[..., 2],
                        np.swapaxes(g, -1, -2).reshape(lead + (G * S,)),  # (..., G, S) class-major
                        jp.reshape(lead + (3 * J,)), jv.reshape(lead + (3 * J,))], -1)
    assert x.shape[-1] == layout.d_in
    return x


def pfnn_output(layout: Layout, frame: RootFrame, next_frame: RootFrame, dphase: np.ndarray,
                contacts: np.ndarray, future: Trajectory, pose: Pose) -> np.ndarray:
    """Y (..., D_out): the inverse of `pfnn_decode`. ``dphase`` in cycles per frame, ``contacts`` (..., 4),
    ``future`` world positions / directions (..., 6, 3) of the next frame's samples, ``pose`` of the frame
    in ``frame`` coordinates with rotations (..., J, 4)."""
    J, F, lead = len(layout.joints), TRAJ_FUTURE, frame.shape
    delta, dyaw = frame.relative(next_frame)
    fp = next_frame.points_to_local(check_last("future.positions", future.positions, (F, 3)))
    fd = next_frame.dirs_to_local(check_last("future.directions", future.directions, (F, 3)))
    q = check_last("pose.rotations", pose.rotations, (J, 4))
    rot = quat_to_axis_angle(q) if rotation_encoding(layout) == "logmap" else rotation_axes(q)  # (..., J, 3 | 6)
    flat = lambda a, name: check_last(name, a, (J, 3)).reshape(lead + (3 * J,))  # noqa: E731
    y = np.concatenate([delta[..., [0, 2]], dyaw[..., None], np.asarray(dphase, np.float64)[..., None],
                        check_last("contacts", contacts, (4,)), fp[..., 0], fp[..., 2], fd[..., 0], fd[..., 2],
                        flat(pose.positions, "pose.positions"), flat(pose.velocities, "pose.velocities"),
                        rot.reshape(lead + (-1,))], -1)
    assert y.shape[-1] == layout.d_out
    return y


@dataclass(eq=False)
class PFNNOutput:
    """A decoded Y. ``pose`` is in the coordinates of the frame it was decoded with (root frame i)."""

    next_frame: RootFrame  # root frame i + 1 (the current frame advanced by the root motion)
    root_velocity: np.ndarray  # (..., 2) x, z displacement, units/frame, in root frame i
    root_angular_velocity: np.ndarray  # (...) yaw change, rad/frame
    dphase: np.ndarray  # (...) cycles per frame
    contacts: np.ndarray  # (..., 4) left foot, left toe, right foot, right toe
    future: Trajectory  # world positions / unit directions (..., 6, 3) of the next frame's samples
    pose: Pose  # positions, velocities (..., J, 3) and rotations (..., J, 4) in root frame i


def pfnn_decode(layout: Layout, y: np.ndarray, frame: RootFrame) -> PFNNOutput:
    """Split Y (..., D_out) predicted in root frame i (``frame``) into the next root frame, phase change,
    contacts, world future trajectory and the pose (root-frame-relative; see `pose_to_world`)."""
    y = check_last("y", y, (layout.d_out,))
    J, F, lead = len(layout.joints), TRAJ_FUTURE, frame.shape
    col = lambda name: y[..., layout.output_block(name).slice]  # noqa: E731
    vel, angvel = col("root_vel"), col("root_angvel")[..., 0]
    nxt = frame.advance(np.stack([vel[..., 0], np.zeros_like(angvel), vel[..., 1]], -1), angvel)
    fp, fd = col("future_pos"), col("future_dir")
    zeros = np.zeros(lead + (F,))
    fpos = nxt.points_to_world(np.stack([fp[..., :F], zeros, fp[..., F:]], -1))
    fdir = np.stack([fd[..., :F], zeros, fd[..., F:]], -1)
    fdir = nxt.dirs_to_world(fdir / np.maximum(np.linalg.norm(fdir, axis=-1, keepdims=True), 1e-9))
    if rotation_encoding(layout) == "logmap":
        rot = axis_angle_to_quat(col("joint_rot").reshape(lead + (J, 3)))
    else:
        ax = col("joint_axes").reshape(lead + (J, 6))  # (..., J, forward xyz + up xyz)
        rot = axes_to_rotation(ax[..., :3], ax[..., 3:])
    pose = Pose(col("joint_pos").reshape(lead + (J, 3)), col("joint_vel").reshape(lead + (J, 3)), rot)
    return PFNNOutput(nxt, vel, angvel, col("dphase")[..., 0], col("contacts"), Trajectory(fpos, fdir), pose)


def advance_phase(phase: np.ndarray, dphase: np.ndarray, stand: np.ndarray | float = 0.0) -> np.ndarray:
    """Holden's runtime update, radians in [0, 2 pi): phase + (m * 0.9 + 0.1) * 2 pi * dphase with
    m = (1 - stand) ** 0.25 (``stand``: the stand gait value at the current sample), so a standing
    character's phase creeps at a tenth of the predicted rate."""
    m = (1.0 - np.asarray(stand, np.float64)) ** 0.25
    return np.mod(phase + (m * 0.9 + 0.1) * 2 * np.pi * np.asarray(dphase), 2 * np.pi)


# ----------------------------------------------------------------------------- dataset
def contact_joints(skeleton: Skeleton, body: BodyJoints) -> tuple[list[int], list[int]]:
    """(left, right) contact joints (ankle, toe) from `find_body_joints`; PFNN needs 2 per side."""
    left = [j for j in body.feet if side_of(skeleton.names[j]) == "L"]
    right = [j for j in body.feet if side_of(skeleton.names[j]) == "R"]
    if len(left) != 2 or len(right) != 2:
        raise DataError(f"PFNN needs a foot and a toe per side, found left {left} right {right} in "
                        f"{list(skeleton.names)}")
    return left, right


def pfnn_clip(layout: Layout, motion: Motion, gait_ids: np.ndarray, body: BodyJoints | None = None,
              cf: ClipFeatures | None = None) -> dict[str, np.ndarray]:
    """X, Y (float64), phase (fraction of a cycle) and the frame index of every row of one clip
    (``gait_ids`` (T,) from `gait_labels`; ``cf`` from `clip_features` if already computed)."""
    body = body or find_body_joints(motion.skeleton)
    left, right = contact_joints(motion.skeleton, body)
    cf = cf or clip_features(motion, body)
    ph, dph = foot_phase(cf.global_positions, left, right, motion.fps, CONTACT_HEIGHT, CONTACT_SPEED)
    ct = foot_contacts(cf.global_positions, tuple(left + right), motion.fps, CONTACT_HEIGHT, CONTACT_SPEED)
    i = np.array(sample_range(motion.num_frames, motion.fps), dtype=np.int64)
    if len(i) == 0:
        return {}
    ti, fi = i[:, None] + trajectory_offsets(motion.fps), i[:, None] + 1 + future_offsets(motion.fps)
    fr, G = cf.frames, len(layout.labels)
    x = pfnn_encode(layout, fr[i], Trajectory(fr.position[ti], fr.forward[ti], one_hot(gait_ids[ti], G)),
                    Pose(cf.positions[i - 1], cf.velocities[i - 1]))
    y = pfnn_output(layout, fr[i], fr[i + 1], dph[i] / (2 * np.pi), ct[i].astype(np.float64),
                    Trajectory(fr.position[fi], fr.forward[fi]),
                    Pose(cf.positions[i], cf.velocities[i], cf.rotations[i]))
    return {"X": x, "Y": y, "phase": ph[i] / (2 * np.pi), "frame": i}


def pfnn_dataset(clips: Sequence[Clip], gaits: Sequence[str] = GAITS, stand_speed: float = STAND_SPEED,
                 rotations: str = "axes") -> dict[str, np.ndarray]:
    """Rows of every frame with a full +-1 s window (`root_frame.sample_range`) of ``clips``.

    Returns X (N, D_in) and Y (N, D_out) float32, phase (N,) in [0, 1), clip (N,) index into ``clips``,
    frame (N,) frame index, gait (N,) id at the row's frame, style (N,) strings (not an input: for style
    adaptation), and skipped: names of clips left out (non-locomotion content, or too short). ``rotations``:
    Y's joint rotation encoding (`pfnn_layout`; ``logmap`` to evaluate a checkpoint from before issue 27)."""
    if not clips:
        raise DataError("pfnn_dataset: no clips")
    sk = clips[0].motion.skeleton
    layout = pfnn_layout(sk, gaits, clips[0].motion.fps, rotations)
    body = find_body_joints(sk)
    parts, skipped = [], []
    for n, c in enumerate(clips):
        if not c.motion.skeleton.same_topology(sk):
            raise DataError(f"clip {c.name!r} has a different joint hierarchy from {clips[0].name!r}")
        content = c.labels.get("content")
        if content is not None and gait_of_content(content) is None:
            skipped.append(c.name)
            continue
        cf = clip_features(c.motion, body)
        gid = gait_labels(cf.frames, c.motion.fps, content, gaits, stand_speed)
        rows = pfnn_clip(layout, c.motion, gid, body, cf)
        if not rows:
            skipped.append(c.name)
            continue
        rows.update(clip=np.full(len(rows["frame"]), n), gait=gid[rows["frame"]],
                    style=np.full(len(rows["frame"]), str(c.labels.get("style", ""))))
        parts.append(rows)
    out = stack_rows(parts, skipped, "pfnn_dataset")
    ph = out["phase"].astype(np.float32)
    out["phase"] = np.where(ph >= 1.0, np.float32(0.0), ph)  # 0.99999999 rounds up in float32
    return out
