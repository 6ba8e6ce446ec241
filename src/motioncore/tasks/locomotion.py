"""Path-driven character controllers: roll out a PFNN (biped) or MANN (quadruped) checkpoint frame by
frame along requested root paths, as Holden's PFNN demo and Starke's MANN demo do.

Each frame:
1. the past 6 trajectory samples come from the character's actual motion (a buffer of root frames);
2. the desired future samples come from the path: the character is projected onto it, then walks along
   it at the requested speed to each sample's time (k * 1/6 s, k = 0..5); facing = path tangent unless
   given; gait / action values per sample;
3. the network's predicted future (from the previous frame) is blended with the desired one with
   Holden's bias: ``scale_k = 1 - (1 - k/6) ** bias`` (k = 0 keeps the character's own sample, k = 5
   is mostly the path), bias 1.5 for positions, directions (and MANN velocities);
4. the network runs (batched over characters), the phase advances (`advance_phase`, PFNN) and the root
   frame moves by the predicted root motion; the decoded pose is fed back unchanged;
5. the written pose takes the predicted rotations with each limb bone turned towards its child's
   predicted position (`align_bones`; it was added for checkpoints trained on log-map rotations, which
   jump near 180 degrees; see `families.pfnn.features`).

A rollout starts moving (`Controller.initial_state`: the mocap rarely starts from a stand) or from a
clip's own state (`Controller.state_from_clip`).

Paths are in metres (see docs/paths.md); the models work in the data's units (cm).

This module holds the controllers and the loop. Steps 2 and 3 (the characters' speed and gait defaults,
the blended trajectory samples) live in `path_follow`; the rollout's state and result, and
`align_bones`, in `rollout`.

Legend: B characters (paths), T frames, J joints, P feature points (MANN: J + 4 paws), H past frames
kept (6 * fps/6), K = 6 future samples, C gait / action classes, D features.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import Any

import numpy as np
import torch

from motioncore.families.mann.features import (
    TRAJ_VEL_SIGMA_S,
    dog_actions,
    find_paws,
    mann_decode,
    mann_encode,
    mann_layout,
)
from motioncore.families.pfnn.features import (
    CONTACT_HEIGHT,
    CONTACT_SPEED,
    advance_phase,
    contact_joints,
    gait_labels,
    pfnn_decode,
    pfnn_encode,
    pfnn_layout,
    rotation_encoding,
)
from motioncore.models.kinds import KINDS, controller, kinds_for

from ..core.kinematics import find_body_joints
from ..core.motion import Motion
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from ..features.layout import Layout, one_hot
from ..features.normaliser import Normaliser
from ..features.phase import foot_phase
from ..features.poses import Pose, clip_features, ground_joints, local_pose
from ..features.root_frame import TRAJ_FUTURE, TRAJ_PAST, RootFrame, Trajectory, ground_velocity, trajectory_step
from ..models.checkpoint import CheckpointError
from ..models.registry import load_model
from .path_follow import BIPED, DOG, Character, path_trajectory
from .paths import Path, PathError, PathTrack, resolve_labels
from .rollout import Rollout, State, align_bones, map_trajectories

UNITS_PER_METRE = 100.0  # all our mocap (and so every checkpoint) is in cm
INPUT_CLIP = 20.0  # z-scored inputs are clipped to +-20 std: no effect on real motion, stops a stray model exploding
MAX_DEFAULT_SECONDS = 60.0  # a path that takes longer to walk needs an explicit length (frames); never cut
MODES = max((k.modes for k in KINDS.values()), key=len)  # network evaluation forms of the controllers (models.kinds)


# ----------------------------------------------------------------------------- controllers
class Controller:
    """A checkpoint plus its feature layout and normalisers, rolled out along paths. Use
    `Controller.load` (it picks `PFNNController` or `MANNController` from the checkpoint)."""

    character: Character = BIPED
    velocities = False  # whether the trajectory carries velocities and speeds (MANN)

    def __init__(self, model: torch.nn.Module, meta: dict[str, Any], mode: str = "outputs"):
        for key in ("kind", "layout", "x_norm", "y_norm", "skeleton", "fps"):
            if key not in meta:
                raise CheckpointError(f"checkpoint metadata has no {key!r}: not a controller checkpoint "
                                      "(train one with `motioncore train`)")
        self.model, self.meta, self.kind = model.eval(), meta, str(meta["kind"])
        self.skeleton = Skeleton.from_dict(meta["skeleton"])
        self.fps = float(meta["fps"])
        self.step = trajectory_step(self.fps)
        self.body = find_body_joints(self.skeleton)
        self.layout = self._layout()
        stored = meta["layout"]
        if (list(self.layout.joints) != list(stored.get("joints", [])) or self.layout.d_in != stored.get("d_in")
                or self.layout.d_out != stored.get("d_out")):
            raise CheckpointError(f"checkpoint layout ({stored.get('d_in')} -> {stored.get('d_out')}) does not match "
                                  f"the {self.layout.model} layout of its skeleton ({self.layout.d_in} -> {self.layout.d_out})")
        self.x_norm, self.y_norm = Normaliser.from_dict(meta["x_norm"]), Normaliser.from_dict(meta["y_norm"])
        self.labels = self.layout.labels
        self.mode = self._check_mode(mode)
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device  # inputs go there, outputs come back to numpy
        self.bones = self._bones()

    # --- loading ---------------------------------------------------------------------------------------
    @staticmethod
    def load(name_or_path: str | FilePath, mode: str = "outputs") -> Controller:
        """A bundled model name (``pfnn-biped``, ``mann-dog``) or a checkpoint path. PFNN and PhaseMLP
        checkpoints roll out as PFNN (phase from Δphase), MANN and single-expert MANN as MANN."""
        model, meta = load_model(name_or_path)
        return Controller.from_model(model, meta, mode)

    @staticmethod
    def from_model(model: torch.nn.Module, meta: dict[str, Any], mode: str = "outputs") -> Controller:
        kind = meta.get("kind")
        if not controller(kind):
            raise CheckpointError(f"checkpoint kind {kind!r} is not a path controller (expected "
                                  f"{', '.join(kinds_for('controller')[:-1])} or {kinds_for('controller')[-1]})")
        return (MANNController if KINDS[kind].gated else PFNNController)(model, meta, mode)

    def _layout(self) -> Layout:
        raise NotImplementedError

    def _bones(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(joint, rest offset, target point) of the bones `align_bones` fits: every joint with a single
        child joint, except the ground joints (Bandai's ``joint_Root``)."""
        sk, ground = self.skeleton, ground_joints(self.skeleton, self.body)
        kids = [[c for c in range(sk.num_joints) if sk.parents[c] == j] for j in range(sk.num_joints)]
        pairs = [(j, k[0]) for j, k in enumerate(kids) if len(k) == 1 and j not in ground
                 and np.linalg.norm(sk.offsets[k[0]]) > 1e-6]
        j = np.array([a for a, _ in pairs], np.int64)
        c = np.array([b for _, b in pairs], np.int64)
        return j, sk.offsets[c].reshape(-1, 3), c

    def _check_mode(self, mode: str) -> str:
        allowed = KINDS[self.kind].modes or ("outputs",)
        if mode not in allowed:
            raise MotioncoreError(f"mode: {self.kind} checkpoints run in {list(allowed)}, got {mode!r}")
        return mode

    # --- paths -----------------------------------------------------------------------------------------
    def track(self, path: Path) -> PathTrack:
        """The path in model units with speed and label values resolved (defaults: docs/paths.md)."""
        ch = self.character
        labels = None if path.gait is None else resolve_labels(path.gait, self.labels, ch.aliases)
        if path.speed is not None:
            speed = path.speed
        elif labels is not None:
            missing = [n for n in self.labels if n not in ch.default_speed]
            if missing:
                raise PathError(f"speed: required for this model (no default speed for {missing})")
            speed = labels @ np.array([ch.default_speed[n] for n in self.labels])
        else:
            speed = np.full(path.num_points, ch.default_speed.get("walk", 1.0))
        if labels is None:
            names = [next(g for bound, g in ch.gait_by_speed if v < bound) for v in speed]
            labels = resolve_labels(tuple(names), self.labels, ch.aliases)
        return PathTrack(path.points, speed, labels, path.facing, UNITS_PER_METRE)

    def default_frames(self, tracks: Sequence[PathTrack]) -> int:
        """Frames to walk the longest path at its speeds plus 1 s to settle. A path longer than
        MAX_DEFAULT_SECONDS is refused (one line saying how long it takes), never cut: ask for its frames."""
        seconds = max(t.duration for t in tracks) + 1.0
        if seconds > MAX_DEFAULT_SECONDS:
            raise MotioncoreError(f"path: walking it takes {seconds:.0f} s, over the {MAX_DEFAULT_SECONDS:g} s a default "
                                  f"length may have; give its length (--frames {math.ceil(seconds * self.fps)} at "
                                  f"{self.fps:g} fps) to generate it whole, or split the path")
        return max(1, int(math.ceil(seconds * self.fps)))

    # --- states ----------------------------------------------------------------------------------------
    def mean_pose(self, batch: int) -> Pose:
        """(B, P) the training mean pose (from the input normaliser) with zero velocities."""
        raise NotImplementedError

    def initial_state(self, tracks: Sequence[PathTrack]) -> State:
        """A running start at each path's first point: the mean pose, facing the path's first facing (or
        its tangent), as if the character had already been moving along the first tangent at the first
        point's speed and gait for the past second (a rigid glide: every joint's velocity is the root's).
        The training clips rarely start from a stand, so starting still and then walking is out of
        distribution: a half-trained biped started that way spun in circles, and started moving it
        followed the path to within 2 cm."""
        B, H, K, C = len(tracks), TRAJ_PAST * self.step, TRAJ_FUTURE, len(self.labels)
        zero = np.zeros(())
        xz = np.stack([t.position(zero) for t in tracks])  # (B, 2)
        tan = np.stack([t.tangent(zero) for t in tracks])  # (B, 2)
        speed = np.array([float(t.speed_at(zero)) for t in tracks])  # (B,) units/s
        pos = np.stack([xz[:, 0], np.zeros(B), xz[:, 1]], -1)  # (B, 3)
        vel = np.stack([tan[:, 0], np.zeros(B), tan[:, 1]], -1) * speed[:, None]  # (B, 3) units/s
        frame = RootFrame(pos, np.array([float(t.yaw(zero)) for t in tracks]))
        past_t = (np.arange(H) - H) / self.fps  # (H,) seconds of the past frames (-1 s .. -1 frame)
        fut_t = np.arange(K) * self.step / self.fps  # (K,) seconds of the future samples
        rep = lambda a, n: np.repeat(a[:, None], n, 1)  # noqa: E731  (B, ...) -> (B, n, ...)
        lab = np.stack([t.labels_at(zero) for t in tracks])  # (B, C)
        v = self.velocities
        past = Trajectory(pos[:, None] + vel[:, None] * past_t[None, :, None], rep(frame.forward, H),
                          np.broadcast_to(lab[:, None], (B, H, C)).copy(), rep(vel, H) if v else None,
                          rep(speed, H) if v else None)
        future = Trajectory(pos[:, None] + vel[:, None] * fut_t[None, :, None], rep(frame.forward, K), None,
                            rep(vel, K) if v else None)
        prev = self.mean_pose(B)
        glide = frame.dirs_to_local(vel) / (1.0 if v else self.fps)  # (B, 3) per second (MANN) or per frame
        prev.velocities = np.broadcast_to(glide[:, None], prev.velocities.shape).copy()
        return State(frame, prev, past, future, np.zeros(B), np.zeros(B))

    def state_from_clip(self, motion: Motion, frame: int, labels: np.ndarray | None = None) -> State:
        """(B = 1) the state of a mocap clip at ``frame``: its root history, previous pose, phase and its
        own future as the "predicted" one, so a rollout continues the clip. ``labels`` (T, C) gait /
        action values per frame (default: PFNN's speed rule / `dog_actions`)."""
        H, K, T = TRAJ_PAST * self.step, TRAJ_FUTURE, motion.num_frames
        if not motion.skeleton.same_topology(self.skeleton):
            raise MotioncoreError(f"motion {motion.name!r}: its skeleton differs from the model's")
        if not (max(H, 2) <= frame and frame + (K - 1) * self.step < T):
            raise MotioncoreError(f"frame: {frame} has no full +-1 s window in a clip of {T} frames")
        cf = self._clip_features(motion)
        labels = self._clip_labels(motion, cf) if labels is None else np.asarray(labels, np.float64)
        if labels.shape != (T, len(self.labels)):
            raise MotioncoreError(f"labels: expected ({T}, {len(self.labels)}), got {labels.shape}")
        fr = cf.frames
        vel = ground_velocity(fr, self.fps, TRAJ_VEL_SIGMA_S)
        pi, fi = np.arange(frame - H, frame), frame + np.arange(K) * self.step
        v = self.velocities
        past = Trajectory(fr.position[pi], fr.forward[pi], labels[pi], vel[pi] if v else None,
                          np.linalg.norm(vel[pi], axis=-1) if v else None)
        future = Trajectory(fr.position[fi], fr.forward[fi], None, vel[fi] if v else None)
        prev = Pose(cf.positions[frame - 1:frame], cf.velocities[frame - 1:frame], cf.rotations[frame - 1:frame])
        one = lambda a: a[None]  # noqa: E731  add the batch axis
        return State(fr[frame:frame + 1], prev, map_trajectories(one, [past]), map_trajectories(one, [future]),
                     np.array([self._clip_phase(cf, frame)]), np.zeros(1))

    def _clip_features(self, motion: Motion) -> Any:
        return clip_features(motion, self.body)

    def _clip_labels(self, motion: Motion, cf: Any) -> np.ndarray:
        raise NotImplementedError

    def _clip_phase(self, cf: Any, frame: int) -> float:
        return 0.0

    # --- the loop --------------------------------------------------------------------------------------
    def rollout(self, paths: Sequence[Path] | Path, frames: int | None = None, start: State | None = None,
                fit_bones: bool = True) -> Rollout:
        """Animate one character per path for ``frames`` frames at the model's fps (default: long
        enough to walk the longest path), from ``start`` (default: `initial_state`). ``fit_bones``
        turns each limb bone of the written pose towards its child's predicted position (`align_bones`);
        the state fed back to the network is the network's own output either way."""
        paths = [paths] if isinstance(paths, Path) else list(paths)
        if not paths:
            raise PathError("paths: expected at least one path")
        tracks = [self.track(p) for p in paths]
        T = self.default_frames(tracks) if frames is None else int(frames)
        if T < 1:
            raise MotioncoreError(f"frames: expected a positive number of frames, got {frames}")
        st = self.initial_state(tracks) if start is None else start
        if st.batch != len(tracks):
            raise MotioncoreError(f"start: a state of {st.batch} characters for {len(tracks)} paths")
        B, J = len(tracks), self.skeleton.num_joints
        rot, pos = np.zeros((B, T, J, 4)), np.zeros((B, T, J, 3))
        root, yaw, prog, phase = np.zeros((B, T, 3)), np.zeros((B, T)), np.zeros((B, T)), np.zeros((B, T))
        contacts = np.zeros((B, T, 4))
        with torch.no_grad():
            for t in range(T):
                traj, s0 = self._trajectory(st, tracks)
                y = self.predict(self._encode(st.frame, traj, st.prev), st.phase / (2 * np.pi))
                out = self._decode(y, st.frame)
                q = out.pose.rotations[:, :J]
                q = align_bones(q, out.pose.positions, self.bones) if fit_bones else q
                rot[:, t], pos[:, t] = local_pose(self.skeleton, q, out.pose.positions[:, :J], st.frame, self.body)
                root[:, t], yaw[:, t], prog[:, t], phase[:, t] = st.frame.position, st.frame.yaw, s0, st.phase / (2 * np.pi)
                if hasattr(out, "contacts"):
                    contacts[:, t] = out.contacts
                st = self._advance(st, traj, out, s0)
        pfnn = not KINDS[self.kind].gated
        return Rollout(self.skeleton, self.fps, rot, pos, root, yaw, prog, phase if pfnn else None,
                       contacts if pfnn else None)

    def _trajectory(self, st: State, tracks: Sequence[PathTrack]) -> tuple[Trajectory, np.ndarray]:
        """The 12 input samples (B, 12, .) in world space, and each character's arc length on its path
        (`path_follow.path_trajectory`)."""
        return path_trajectory(st, tracks, self.character, self.labels, self.step, self.fps)

    def predict(self, x: np.ndarray, phase: np.ndarray | None = None, normalised: bool = False) -> np.ndarray:
        """Y (B, D_out) for raw features X (B, D_in) and the phase (B,) in cycles (PFNN and its
        baseline; ignored by MANN). Inputs are z-scored and clipped to +-INPUT_CLIP; ``normalised``
        returns the network's z-scored output instead of de-normalising it."""
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or x.shape[1] != self.layout.d_in:
            raise MotioncoreError(f"x: expected (B, {self.layout.d_in}), got {x.shape}")
        cycles = np.zeros(len(x)) if phase is None else np.mod(np.asarray(phase, np.float64).reshape(-1), 1.0)
        if cycles.shape != (len(x),):
            raise MotioncoreError(f"phase: expected ({len(x)},) in cycles, got {cycles.shape}")
        xn = np.clip(self.x_norm.transform(x), -INPUT_CLIP, INPUT_CLIP)
        with torch.no_grad():
            y = self._net(torch.as_tensor(xn, dtype=self.dtype, device=self.device), cycles)
        y = y.cpu().to(torch.float64).numpy()
        return y if normalised else self.y_norm.inverse(y)

    def _advance(self, st: State, traj: Trajectory, out: Any, s0: np.ndarray) -> State:
        """Push the current sample into the history; the prediction becomes the next state."""
        c = TRAJ_PAST  # index of sample k = 0
        past = map_trajectories(lambda h, a: np.concatenate([h[:, 1:], a[:, c:c + 1]], 1), [st.past, traj])
        return State(out.next_frame, out.pose, past, out.future, self._next_phase(st, traj, out), s0)

    def _next_phase(self, st: State, traj: Trajectory, out: Any) -> np.ndarray:
        return st.phase

    def _encode(self, frame: RootFrame, traj: Trajectory, prev: Pose) -> np.ndarray:
        raise NotImplementedError

    def _decode(self, y: np.ndarray, frame: RootFrame) -> Any:
        raise NotImplementedError

    def _net(self, x: torch.Tensor, cycles: np.ndarray) -> torch.Tensor:
        """z-scored X (B, D_in) and phase (B,) in [0, 1) -> z-scored Y (B, D_out)."""
        raise NotImplementedError


class PFNNController(Controller):
    """PFNN (and the PhaseMLP baseline, which takes the phase as an input) on a biped."""

    character = BIPED

    def __init__(self, model: torch.nn.Module, meta: dict[str, Any], mode: str = "outputs"):
        super().__init__(model, meta, mode)
        self.runtime = None
        if self.mode in ("constant", "linear", "cubic"):
            from motioncore.families.pfnn.model_runtime import PFNNRuntime

            self.runtime = PFNNRuntime.from_model(model, self.mode)  # type: ignore[arg-type]

    def _layout(self) -> Layout:
        stored = self.meta["layout"]
        return pfnn_layout(self.skeleton, stored.get("labels", ("stand", "walk", "run")), self.fps,
                           rotation_encoding(stored))

    def mean_pose(self, batch: int) -> Pose:
        J = self.skeleton.num_joints
        jp = self.x_norm.mean[self.layout.input_block("joint_pos").slice].reshape(J, 3)
        rot = np.zeros((batch, J, 4))
        rot[..., 0] = 1.0
        return Pose(np.repeat(jp[None], batch, 0), np.zeros((batch, J, 3)), rot)

    def _clip_labels(self, motion: Motion, cf: Any) -> np.ndarray:
        return one_hot(gait_labels(cf.frames, self.fps, None, self.labels), len(self.labels))

    def _clip_phase(self, cf: Any, frame: int) -> float:
        left, right = contact_joints(self.skeleton, self.body)
        phase, _ = foot_phase(cf.global_positions, left, right, self.fps, CONTACT_HEIGHT, CONTACT_SPEED)
        return float(phase[frame])

    def _encode(self, frame: RootFrame, traj: Trajectory, prev: Pose) -> np.ndarray:
        return pfnn_encode(self.layout, frame, traj, prev)

    def _decode(self, y: np.ndarray, frame: RootFrame) -> Any:
        return pfnn_decode(self.layout, y, frame)

    def _net(self, x: torch.Tensor, cycles: np.ndarray) -> torch.Tensor:
        if self.runtime is not None:
            return self.runtime(x, torch.as_tensor(cycles, dtype=torch.float64))
        phase = torch.as_tensor(cycles, dtype=x.dtype, device=x.device)
        if KINDS[self.kind].plain_mlp:
            return self.model(x, phase)
        return self.model(x, phase, mode=self.mode)

    def _next_phase(self, st: State, traj: Trajectory, out: Any) -> np.ndarray:
        stand = self.labels.index("stand") if "stand" in self.labels else None
        assert traj.labels is not None
        amount = 0.0 if stand is None else np.clip(traj.labels[:, TRAJ_PAST, stand], 0.0, 1.0)
        return advance_phase(st.phase, out.dphase, amount)


class MANNController(Controller):
    """MANN (and its single-expert baseline) on a quadruped with 4 paw end sites."""

    character = DOG
    velocities = True

    def _layout(self) -> Layout:
        return mann_layout(self.skeleton, self.fps)

    def mean_pose(self, batch: int) -> Pose:
        y = np.zeros(self.layout.d_out)
        blk = self.layout.output_block("joints").slice  # same per-point fields as X's joints block
        y[blk] = self.x_norm.mean[self.layout.input_block("joints").slice]
        pose = mann_decode(self.layout, y, RootFrame(np.zeros(3), np.zeros(())), self.fps).pose
        rep = lambda a: np.repeat(a[None], batch, 0)  # noqa: E731
        return Pose(rep(pose.positions), np.zeros((batch,) + pose.positions.shape), rep(pose.rotations))

    def _bones(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The joints' bones, and each paw's parent (a leaf joint) towards the predicted paw point."""
        j, off, c = super()._bones()
        paws = find_paws(self.skeleton, self.body)
        sites = [self.skeleton.end_sites[e] for e in paws]
        J = self.skeleton.num_joints
        return (np.r_[j, [p for p, _ in sites]].astype(np.int64), np.r_[off, np.array([o for _, o in sites], float)],
                np.r_[c, J + np.arange(len(paws))].astype(np.int64))

    def _clip_features(self, motion: Motion) -> Any:
        return clip_features(motion, self.body, per_second=True, sites=find_paws(self.skeleton, self.body))

    def _clip_labels(self, motion: Motion, cf: Any) -> np.ndarray:
        return dog_actions(motion, self.body)[1]

    def _encode(self, frame: RootFrame, traj: Trajectory, prev: Pose) -> np.ndarray:
        return mann_encode(self.layout, frame, traj, prev)

    def _decode(self, y: np.ndarray, frame: RootFrame) -> Any:
        return mann_decode(self.layout, y, frame, self.fps)

    def _net(self, x: torch.Tensor, cycles: np.ndarray) -> torch.Tensor:
        gate = x[:, torch.as_tensor(self.layout.gating, dtype=torch.long, device=x.device)]  # (B, 19) gating columns
        return self.model(x, gate, mode=self.mode)


def generate(model: str | FilePath | Controller, path: Path, frames: int | None = None, mode: str = "outputs",
             name: str = "") -> tuple[Motion, Rollout]:
    """One animation along ``path`` at the path's fps (default: the model's). ``frames`` counts output
    frames. Returns the motion and the raw rollout (model fps and units)."""
    ctl = model if isinstance(model, Controller) else Controller.load(model, mode)
    fps = path.fps or ctl.fps
    if frames is not None and frames < 1:
        raise MotioncoreError(f"frames: expected a positive number of frames, got {frames}")
    n = None if frames is None else int(math.ceil(frames * ctl.fps / fps)) + 1
    ro = ctl.rollout([path], n)
    m = ro.motion(0, name, fps)
    return (m if frames is None else m.slice(0, frames)), ro
