"""Evaluation of the path-driven controllers (PFNN vs its PhaseMLP baseline, MANN vs single-expert MANN)
on the held-out (test split) clips of their data set.

Per checkpoint:
(a) next-frame joint position error, cm: teacher-forced on the test rows of `build_rows(recipe, "test")`,
    de-normalised, mean per-joint Euclidean distance of Y's joint positions (root frame i; the joints
    that stand for the root frame, such as Bandai's ``joint_Root``, and the dog's paw sites left out);
(b) foot skating, cm of horizontal slide per frame while in contact, on the rollouts of (c) and, as a
    reference, on the same frames of the ground-truth clips (same rule and the same per-foot ground
    levels, taken from the ground truth: `foot_contacts`, `skating_terms`);
(c) path following, cm: each selected test clip's own root path (ground projection of the root, with its
    speed profile, facing and gait / action labels per point) drives the controller from the clip's own
    state; reported are the mean distance of the achieved root to the path and, as a check on lagging,
    the mean distance to the clip's root at the same frame (tracking);
(d) PFNN only: each evaluation form (weights, and Holden's constant / linear / cubic runtimes) against
    the exact model on the test rows: max and mean |dY| of the z-scored outputs and the joint position
    difference in cm.

Legend: N rows, T frames, F feet, J joints.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

import numpy as np

from motioncore.families.mann.features import PAW_HEIGHT, PAW_SPEED, TRAJ_VEL_SIGMA_S
from motioncore.families.pfnn.features import CONTACT_HEIGHT, CONTACT_SPEED, gait_labels, gait_of_content

from ..core.feet import GROUND_PERCENTILE  # a foot's ground level: this percentile of its height
from ..core.motion import Motion
from ..errors import MotioncoreError
from ..features.layout import one_hot
from ..features.poses import ground_joints
from ..features.root_frame import ground_velocity, root_frames
from ..io.atomic import atomic_write_text
from ..models.kinds import KINDS
from ..tasks.paths import Path, distance_to_polyline
from ..tasks.rollout import stack_states

PFNN_MODES = ("weights", "constant", "linear", "cubic")  # compared with the exact model ("outputs")


@dataclass(frozen=True)
class ControllerEvalConfig:
    max_clips: int = 64  # test clips driven along their own root paths (evenly spread over the split)
    max_frames: int = 300  # frames per rollout, at the model's fps (biped 10 s, dog 5 s)
    max_rows: int = 0  # teacher-forced test rows, evenly spread (0: all of them)
    modes: tuple[str, ...] = PFNN_MODES  # PFNN forms compared with the exact model (empty: skip)
    batch: int = 4096  # rows per network call

    def __post_init__(self) -> None:
        for name in ("max_clips", "max_frames", "batch"):
            if getattr(self, name) < 1:
                raise MotioncoreError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.max_rows < 0:
            raise MotioncoreError(f"max_rows: expected >= 0, got {self.max_rows}")
        bad = [m for m in self.modes if m not in PFNN_MODES]
        if bad:
            raise MotioncoreError(f"modes: unknown {bad}; known: {list(PFNN_MODES)}")


# ----------------------------------------------------------------------------- metrics


def ground_levels(positions: np.ndarray) -> np.ndarray:
    """(F,) each foot's ground level: the GROUND_PERCENTILE-th percentile of its height over positions
    (T, F, 3) (robust to a single dip, unlike the minimum of `kinematics.foot_contacts`)."""
    p = np.asarray(positions, np.float64)
    if p.ndim != 3 or p.shape[-1] != 3 or len(p) == 0:
        raise MotioncoreError(f"positions: expected (T, F, 3) with T > 0, got {p.shape}")
    return np.percentile(p[..., 1], GROUND_PERCENTILE, axis=0)


def foot_contacts(positions: np.ndarray, fps: float, height: float, speed: float,
                  ground: np.ndarray | None = None) -> np.ndarray:
    """(T, F) bool: a foot (positions (T, F, 3)) is in contact when it is within ``height`` above its
    ground level and slower than ``speed`` (units/s; frame 0 takes frame 1's speed). ``ground`` (F,):
    the ground levels (the evaluation takes them from the ground-truth clips and applies them to the
    generated motion too); default `ground_levels` of these positions."""
    p = np.asarray(positions, np.float64)
    g = ground_levels(p) if ground is None else np.asarray(ground, np.float64)
    if g.shape != p.shape[1:2]:
        raise MotioncoreError(f"ground: expected ({p.shape[1]},) levels, got {g.shape}")
    vel = np.zeros(p.shape[:2])
    vel[1:] = np.linalg.norm(np.diff(p, axis=0), axis=-1) * fps
    vel[0] = vel[1] if len(p) > 1 else 0.0
    return (p[..., 1] - g < height) & (vel < speed)


def skating_terms(positions: np.ndarray, fps: float, height: float, speed: float,
                  ground: np.ndarray | None = None) -> tuple[float, int, int, int]:
    """(summed horizontal slide, frame pairs in contact, foot-frames in contact, foot-frames) of feet
    positions (T, F, 3), contacts by `foot_contacts`. The slide of frame t is the foot's horizontal (xz)
    displacement from t - 1, counted when the foot is in contact at t - 1 and at t."""
    c = foot_contacts(positions, fps, height, speed, ground)  # (T, F)
    p = np.asarray(positions, np.float64)
    T, F = c.shape
    both = c[1:] & c[:-1]  # (T-1, F)
    slide = np.linalg.norm(np.diff(p[..., [0, 2]], axis=0), axis=-1)  # (T-1, F)
    return float(slide[both].sum()), int(both.sum()), int(c.sum()), T * F


def foot_skating(positions: np.ndarray, fps: float, height: float, speed: float,
                 ground: np.ndarray | None = None) -> float | None:
    """Mean horizontal foot slide per frame while in contact (units/frame; None if never in contact)."""
    total, pairs, _, _ = skating_terms(positions, fps, height, speed, ground)
    return total / pairs if pairs else None


def path_error(root: np.ndarray, path_xz: np.ndarray) -> float:
    """Mean distance of root positions (T, 3) (or ground points (T, 2)) to the polyline (N, 2)."""
    r = np.asarray(root, np.float64)
    xz = r[:, [0, 2]] if r.shape[-1] == 3 else r
    return float(distance_to_polyline(xz, path_xz).mean())


def joint_position_error(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean per-joint Euclidean distance of joint positions (..., J, 3)."""
    if np.shape(pred) != np.shape(true):
        raise MotioncoreError(f"pred {np.shape(pred)} and true {np.shape(true)} differ")
    return float(np.linalg.norm(np.asarray(pred) - np.asarray(true), axis=-1).mean())


# ----------------------------------------------------------------------------- per character
def _joint_columns(ctl: Any) -> np.ndarray:
    """(J', 3) Y columns of the joint positions compared in (a): skeleton joints except the ground ones."""
    J, lay = ctl.skeleton.num_joints, ctl.layout
    keep = [j for j in range(J) if j not in ground_joints(ctl.skeleton, ctl.body)]
    if KINDS[ctl.kind].gated:
        start = lay.output_block("joints").start
        return np.array([[start + 12 * j + a for a in range(3)] for j in keep])
    start = lay.output_block("joint_pos").start
    return np.array([[start + 3 * j + a for a in range(3)] for j in keep])


def feet_positions(ctl: Any, motion: Motion) -> np.ndarray:
    """(T, F, 3) world positions of the contact points: the biped's feet and toes, the dog's paws."""
    gq, gp = motion.global_transforms()
    if KINDS[ctl.kind].gated:
        from motioncore.families.mann.features import find_paws

        return motion.skeleton.end_site_positions(gq, gp)[:, list(find_paws(motion.skeleton, ctl.body))]
    return gp[:, list(ctl.body.feet)]


def contact_rule(ctl: Any) -> tuple[float, float]:
    """(height cm, speed cm/s) of the contact rule: the thresholds the features label with."""
    return (PAW_HEIGHT, PAW_SPEED) if KINDS[ctl.kind].gated else (CONTACT_HEIGHT, CONTACT_SPEED)


def _even(n: int, k: int) -> np.ndarray:
    """Up to k indices spread evenly over range(n)."""
    return np.unique(np.linspace(0, n - 1, min(k, n)).round().astype(np.int64)) if n else np.zeros(0, np.int64)


def next_frame_errors(ctl: Any, rows: Mapping[str, np.ndarray], cfg: ControllerEvalConfig) -> dict[str, Any]:
    """(a) and (d) on the test rows."""
    idx = _even(len(rows["X"]), cfg.max_rows) if cfg.max_rows else np.arange(len(rows["X"]))
    x, y = rows["X"][idx].astype(np.float64), rows["Y"][idx].astype(np.float64)
    phase = rows["phase"][idx] if "phase" in rows else None
    cols = _joint_columns(ctl)

    def run(c: Any) -> np.ndarray:
        return np.concatenate([c.predict(x[i:i + cfg.batch], None if phase is None else phase[i:i + cfg.batch], True)
                               for i in range(0, len(x), cfg.batch)])

    exact = run(ctl)
    pose = lambda yn: ctl.y_norm.inverse(yn)[:, cols]  # noqa: E731  (N, J', 3) cm
    out: dict[str, Any] = {"test_rows": int(len(x)), "next_frame_cm": joint_position_error(pose(exact), y[:, cols])}
    if len(KINDS[ctl.kind].modes) > 2 and cfg.modes:   # the PFNN: its spline evaluation modes too
        from ..tasks.locomotion import Controller

        out["modes"] = {}
        for mode in cfg.modes:
            approx = run(Controller.from_model(ctl.model, ctl.meta, mode))
            d = np.abs(approx - exact)
            out["modes"][mode] = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
                                  "pose_cm": joint_position_error(pose(approx), pose(exact))}
    return out


def _locomotion(ctl: Any, clip: Any) -> bool:
    """Whether a test clip can drive the controller: the dog's always; the biped's unless its content is
    an action (kick, punch...), which has no gait label."""
    if KINDS[ctl.kind].gated:
        return True

    content = clip.labels.get("content")
    return content is None or gait_of_content(content) is not None


def _clip_labels(ctl: Any, clip: Any, frames: Any) -> np.ndarray:
    """(T, C) gait / action values of a test clip, as the features label them."""
    if KINDS[ctl.kind].gated:
        from motioncore.families.mann.features import dog_actions

        return dog_actions(clip.motion, ctl.body)[1]

    return one_hot(gait_labels(frames, clip.motion.fps, clip.labels.get("content"), ctl.labels), len(ctl.labels))


def path_following(ctl: Any, clips: Sequence[Any], cfg: ControllerEvalConfig) -> dict[str, Any]:
    """(b) and (c): every selected clip's root path drives the controller from the clip's own state."""
    H = 6 * ctl.step  # past frames a start state needs; the path must also reach 1 s beyond the last frame
    shortest = min(cfg.max_frames, int(ctl.fps))  # frames a clip must offer beyond those 2 s
    jobs = [(c, min(cfg.max_frames, c.motion.num_frames - 2 * H)) for c in clips
            if c.motion.num_frames - 2 * H >= shortest and c.motion.skeleton.same_topology(ctl.skeleton)
            and _locomotion(ctl, c)]
    if not jobs:
        raise MotioncoreError(f"no test clip is long enough ({2 * H + shortest} frames) to drive the controller")
    starts, paths, used = [], [], []
    for i in _even(len(jobs), cfg.max_clips):
        clip, n = jobs[i]
        m = clip.motion
        _, gp = m.global_transforms()
        fr = root_frames(gp, ctl.body, m.fps)
        labels = _clip_labels(ctl, clip, fr)
        seg = slice(H, H + n + H)  # frames walked plus the last frame's 1 s look-ahead
        speed = np.linalg.norm(ground_velocity(fr, m.fps, TRAJ_VEL_SIGMA_S), axis=-1)
        paths.append(Path(fr.position[seg][:, [0, 2]] / 100.0, m.fps, speed[seg] / 100.0, labels[seg],
                          np.degrees(fr.yaw[seg])))
        starts.append(ctl.state_from_clip(m, H, labels))
        used.append((clip, n, gp, fr))
    ro = ctl.rollout(paths, max(n for _, n, _, _ in used), stack_states(starts))
    height, speed = contact_rule(ctl)
    gen, gt = np.zeros(4), np.zeros(4)
    dist, track, frames = 0.0, 0.0, 0
    gen_feet, true_feet = [], []
    for b, (clip, n, _, fr) in enumerate(used):
        root = ro.root[b, :n]
        dist += distance_to_polyline(root[:, [0, 2]], fr.position[H:2 * H + n][:, [0, 2]]).sum()
        track += np.linalg.norm(root - fr.position[H:H + n], axis=-1).sum()
        frames += n
        true_feet.append(feet_positions(ctl, clip.motion.slice(H, H + n)))
        gen_feet.append(feet_positions(ctl, ro.motion(b).slice(0, n)))
    ground = ground_levels(np.concatenate(true_feet))  # (F,) from the mocap, applied to both
    for g, t in zip(gen_feet, true_feet):
        gen += skating_terms(g, ctl.fps, height, speed, ground)
        gt += skating_terms(t, ctl.fps, height, speed, ground)
    ratio = lambda a, b: float(a / b) if b else None  # noqa: E731
    return {"clips": len(used), "frames": frames, "path_error_cm": dist / frames, "tracking_cm": track / frames,
            "skate_cm": ratio(gen[0], gen[1]), "contact": ratio(gen[2], gen[3]),
            "gt_skate_cm": ratio(gt[0], gt[1]), "gt_contact": ratio(gt[2], gt[3])}


# ----------------------------------------------------------------------------- runner and report
def evaluate_controller(name_or_path: str, cfg: ControllerEvalConfig = ControllerEvalConfig(),
                        cache: dict | None = None, progress: bool = False) -> dict[str, Any]:
    """Every metric of one checkpoint; ``cache`` shares the test rows between checkpoints of one data set."""
    from ..tasks.locomotion import Controller
    from ..train.controllers import ControllerRecipe, build_rows

    t0 = time.perf_counter()
    ctl = Controller.load(name_or_path)
    recipe = ControllerRecipe(**{**ctl.meta.get("recipe", {}), "max_clips": 0})
    cache = {} if cache is None else cache
    key = (recipe.dataset, KINDS[ctl.kind].gated)  # PFNN and PhaseMLP share their rows, as do MANN and MANN-1
    if key not in cache:
        cache[key] = build_rows(recipe, "test", progress)
    rows, _, clips = cache[key]
    res: dict[str, Any] = {"model": str(name_or_path), "kind": ctl.kind, "recipe": recipe.model, "data": recipe.dataset,
                           "fps": ctl.fps}
    res.update(next_frame_errors(ctl, rows, cfg))
    res.update(path_following(ctl, clips, cfg))
    res["wall_s"] = time.perf_counter() - t0
    return res


def evaluate_controllers(names: Sequence[str], cfg: ControllerEvalConfig = ControllerEvalConfig(),
                         progress: bool = False) -> list[dict[str, Any]]:
    """Each checkpoint in turn (a bar with an ETA over them when ``progress``)."""
    from tqdm import tqdm

    cache: dict = {}
    return [evaluate_controller(n, cfg, cache, progress)
            for n in tqdm(names, desc="controllers", unit="model", disable=not progress or len(names) < 2)]


def _fmt(v: Any, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def format_table(results: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: one row per checkpoint, then (if any) the PFNN evaluation forms against the exact model."""
    lines = ["| model | kind | next-frame joints (cm) | foot skating (cm/frame) | GT skating (cm/frame) | "
             "path error (cm) | tracking (cm) | clips x frames |",
             "|:---|:---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {FilePath(r['model']).name} | {r['recipe']} | {_fmt(r['next_frame_cm'])} | {_fmt(r['skate_cm'])} "
                     f"| {_fmt(r['gt_skate_cm'])} | {_fmt(r['path_error_cm'], 1)} | {_fmt(r['tracking_cm'], 1)} "
                     f"| {r['clips']} x {r['frames'] // max(r['clips'], 1)} |")
    modes = [(r, m, v) for r in results for m, v in r.get("modes", {}).items()]
    if modes:
        lines += ["", "| model | form | max abs dY (z-score) | mean abs dY (z-score) | joints vs exact (cm) |",
                  "|:---|:---|---:|---:|---:|"]
        lines += [f"| {FilePath(r['model']).name} | {m} | {v['max_abs']:.2e} | {v['mean_abs']:.2e} | {v['pose_cm']:.4f} |"
                  for r, m, v in modes]
    return "\n".join(lines)


def write_json(results: Any, path: str | os.PathLike) -> None:
    """Indented JSON, written atomically."""
    atomic_write_text(path, json.dumps(results, indent=2) + "\n")  # the umask's mode, not mkstemp's 0600
