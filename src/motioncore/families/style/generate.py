"""One-shot style adaptation: a learnet PFNN reads a style code z from ONE exemplar clip, fits it to the
clip with a few gradient steps on z alone (`style_fit`), and walks paths in that style with its weights
``W_k + M1 diag(f(z)) M2`` (every weight shared, no fine-tuning).

The model (kind ``learnet-pfnn``) is trained by `motioncore.families.style.train`; the bundled ``learnet-biped``
holds out the styles elderly, not-confident and proud (`motioncore eval style` measures it; its numbers
are in the checkpoint's ``metrics`` and docs/style.md). Its metadata carries ``code_prior`` (a Gaussian
over the training clips' codes) and ``stance_floor_cm`` (the training data's foot floor), written by
``scripts/style_code_prior.py``; the exemplar's feet are put on that floor before anything reads it.

Use::

    ad = StyleAdapter.load("learnet-biped")
    z = ad.fit(exemplar_motion)         # (Z,): the encoder's code, then fitted to the clip
    z = ad.code(exemplar_motion)        # (Z,): the encoder alone (the clip's central <= 4 s)
    ctl = ad.controller(z)              # a PFNNController with z baked in: ctl.rollout(path)

Legend: T frames, N rows, D_in PFNN inputs, Z style code.
"""
from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np
import torch

from motioncore.core.kinematics import resample
from motioncore.core.motion import Motion
from motioncore.errors import MotioncoreError
from motioncore.families.style.adapt import CodePrior, FitConfig, fit_code, level_stance
from motioncore.families.style.generate_outside import POSE_BLOCKS, OutsideController, base_states
from motioncore.families.style.generate_quality import assess, held_out_cm, training_distances
from motioncore.families.style.model import LearnetPFNN, StyledPFNN


class StyleAdapter:
    """A loaded ``learnet-pfnn`` checkpoint: exemplar clip -> style code -> path controller."""

    def __init__(self, model: LearnetPFNN, meta: dict[str, Any]):
        from motioncore.tasks.locomotion import Controller

        self.model, self.meta = model.eval(), meta
        plain = {**meta, "kind": "pfnn", "config": meta["config"]["pfnn"]}
        self._base = Controller.from_model(model.pfnn, plain)  # layout, normalisers, skeleton checks
        self.skeleton, self.fps, self.layout = self._base.skeleton, self._base.fps, self._base.layout
        exp = meta.get("experiment") or {}
        self.window_rows = int(round(float(exp.get("window_max_s", 4.0)) * self.fps))
        self.min_rows = int(round(float(exp.get("window_min_s", 2.0)) * self.fps)) // 2
        self.prior = CodePrior.from_dict(meta["code_prior"]) if meta.get("code_prior") else None
        self.floor_cm = meta.get("stance_floor_cm")

    @staticmethod
    def load(name_or_path: str | os.PathLike, device: str | torch.device = "cpu") -> StyleAdapter:
        from motioncore.models.registry import load_model

        model, meta = load_model(str(name_or_path), device)
        if meta.get("kind") != "learnet-pfnn":
            raise MotioncoreError(f"{name_or_path}: kind {meta.get('kind')!r} is not a style model (learnet-pfnn)")
        return StyleAdapter(model, meta)  # type: ignore[arg-type]

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def exemplar_rows(self, motion: Motion) -> np.ndarray:
        """(N, D_in) raw PFNN input rows of an exemplar clip on the model's skeleton (phase from the
        feet, gait from speed, as in training). Raises MotioncoreError naming the problem."""
        return self.exemplar_data(motion)["X"]

    def exemplar_data(self, motion: Motion) -> dict[str, np.ndarray]:
        """The exemplar's raw PFNN rows (X, Y, phase: `families.pfnn.features.pfnn_clip`), its feet first put on the
        training data's floor (`style_fit.level_stance`, when the metadata has ``stance_floor_cm``)."""
        from motioncore.families.pfnn.features import gait_labels, pfnn_clip
        from motioncore.features.poses import clip_features

        if not motion.skeleton.same_topology(self.skeleton):
            raise MotioncoreError(f"exemplar: needs the model's {self.skeleton.num_joints}-joint skeleton "
                                  f"({', '.join(self.skeleton.names[:4])}, ...), got {motion.skeleton.num_joints} joints")
        if abs(motion.fps - self.fps) > 1e-6:
            raise MotioncoreError(f"exemplar: {motion.fps:g} fps; the model runs at {self.fps:g} fps "
                                  "(kinematics.resample it)")
        if self.floor_cm is not None:
            motion = level_stance(motion, float(self.floor_cm))
        body = self._base.body
        cf = clip_features(motion, body)
        gid = gait_labels(cf.frames, self.fps, None, self.layout.labels)
        rows = pfnn_clip(self.layout, motion, gid, body, cf)
        n = 0 if not rows else len(rows["X"])
        if n < self.min_rows:
            need = (self.min_rows + 2 * int(self.fps)) / self.fps
            raise MotioncoreError(f"exemplar: {motion.num_frames} frames ({motion.num_frames / self.fps:.1f} s) give "
                                  f"{n} rows; at least {need:.1f} s of motion is needed")
        return rows

    def motion(self, rotations: np.ndarray, root: np.ndarray, joints: list[str] | None = None,
               fps: float | None = None, ground: bool = False) -> tuple[Motion, list[str]]:
        """(the exemplar as a Motion on the model's skeleton at the model's fps, the model joints it
        lacked) from the rotation form: ``rotations`` (T, J, 4) local WXYZ in the columns named by
        ``joints`` (default: the model's joint order), ``root`` (T, 3) the translation of the root joint
        (`BodyJoints.root`, Bandai's Hips) in cm, sampled at ``fps`` (default: the model's; resampled).
        ``ground``: ``root`` is the root joint's ground projection (a rig's object location): the root
        joint's rest height is added. Joints the request lacks stay at their rest pose; more than a
        quarter missing raises, naming them. Extra joints are ignored."""
        names = list(self.skeleton.names)
        joints = names if joints is None else list(joints)
        if len(joints) != rotations.shape[1]:
            raise MotioncoreError(f"joints: {len(joints)} names for {rotations.shape[1]} columns of rotations")
        col = {n: i for i, n in enumerate(joints)}
        missing = [n for n in names if n not in col]
        if len(missing) > len(names) // 4:
            raise MotioncoreError(f"exemplar: the model's joints {missing} are missing (map the rig's bones to "
                                  f"the {len(names)}-joint skeleton: {', '.join(names)})")
        T = rotations.shape[0]
        rot = np.zeros((T, len(names), 4))
        rot[..., 0] = 1.0
        have = [j for j, n in enumerate(names) if n in col]
        rot[:, have] = np.asarray(rotations, np.float64)[:, [col[names[j]] for j in have]]
        pos = np.repeat(self.skeleton.offsets[None], T, 0).astype(np.float64)
        r = self._base.body.root
        pos[:, r] = root
        if ground:
            chain, k = [], r
            while k >= 0:
                chain.append(k)
                k = int(self.skeleton.parents[k])
            pos[:, r, 1] += float(self.skeleton.offsets[chain, 1].sum())
        m = Motion(self.skeleton, rot, pos, self.fps if fps is None else float(fps), "exemplar")
        return (m if fps is None else resample(m, self.fps)), missing

    def code(self, motion: Motion) -> np.ndarray:
        """(Z,) style code from the exemplar's central <= window rows (z-scored as in training)."""
        return self._encode(self.exemplar_rows(motion))

    @torch.no_grad()
    def _encode(self, x: np.ndarray) -> np.ndarray:
        n = min(len(x), self.window_rows)
        s = (len(x) - n) // 2
        xn = torch.as_tensor(self._base.x_norm.transform(x[s:s + n]), dtype=torch.float32, device=self.device)
        return self.model.encode(xn[None]).reshape(-1).cpu().numpy()  # (1, L, D) -> (Z,)

    def fit(self, motion: Motion, cfg: FitConfig | None = None) -> np.ndarray:
        """(Z,) style code: the encoder's, then fitted to predict the exemplar's own next frames
        (`style_fit.fit_code`). Raises MotioncoreError if the checkpoint has no ``code_prior``."""
        return self.fit_report(motion, cfg)[0]

    def fit_report(self, motion: Motion, cfg: FitConfig | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """(z (Z,), what the fit did: `style_fit.fit_code`'s report plus ``z_encoder``)."""
        if self.prior is None:
            raise MotioncoreError("this style model has no code_prior in its metadata (run scripts/style_code_prior.py "
                                  "on it); use code() for the encoder alone")
        rows = self.exemplar_data(motion)
        z0 = self._encode(rows["X"])
        t = lambda a: torch.as_tensor(np.asarray(a, np.float64), dtype=torch.float32, device=self.device)  # noqa: E731
        x, y = t(self._base.x_norm.transform(rows["X"])), t(self._base.y_norm.transform(rows["Y"]))
        cfg = cfg or FitConfig()
        cols = None
        if cfg.outputs == "pose":
            names = [b.name for b in self.layout.outputs if b.name in ("joint_pos", "joint_vel", "joint_axes", "joint_rot")]
            cols = torch.as_tensor(np.concatenate([np.arange(self.layout.output_block(n).start,
                                                             self.layout.output_block(n).stop) for n in names]))
        ph = t(rows["phase"])
        held = None
        if self.outside:  # the code acts on the base's states: fit it on the exemplar's rows in both states
            xf, yf, phf, held = self._outside_rows(x, y, ph, cfg.holdout)
            z, info = fit_code(self.model.pfnn, xf, yf, phf, t(z0)[None], self.prior, cfg, cols)
        else:
            z, info = fit_code(self.model.pfnn, x, y, ph, t(z0)[None], self.prior, cfg, cols)
        z_np = z.reshape(-1).cpu().numpy()
        held = info["held_back_rows"] if held is None else held
        return z_np, {**info, "z_encoder": z0, "quality": self._quality(rows, x, ph, held, z_np, z0)}

    def _outside_rows(self, x: torch.Tensor, y: torch.Tensor, ph: torch.Tensor,
                      holdout: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """The exemplar's N rows twice, in its own state and in the base's (`outside.base_states`: the base rolled
        along the exemplar's trajectory and phase), ordered so that `fit_code`'s held-back last quarter is the
        last quarter of both; and the styled rows' held-back indices (the exemplar's quality is read there)."""
        n = len(x)
        xb = base_states(self.model.pfnn, self.layout, self._base.x_norm, self._base.y_norm, x, ph,
                         np.array([0]), np.array([n]))
        k = n - max(1, int(round(holdout * n)))
        order = torch.cat([torch.arange(k), n + torch.arange(k), torch.arange(k, n), n + torch.arange(k, n)])
        return torch.cat([x, xb])[order], torch.cat([y, y])[order], torch.cat([ph, ph])[order], list(range(k, n))

    def _quality(self, rows: dict[str, np.ndarray], x: torch.Tensor, phase: torch.Tensor, held: list[int],
                 z: np.ndarray, z0: np.ndarray) -> dict[str, Any]:
        """`generate_quality.assess` of a fit: its length, held-out errors and code distance."""
        from motioncore.features.poses import ground_joints

        assert self.prior is not None
        sk, body = self.skeleton, self._base.body
        keep = np.setdiff1d(np.arange(sk.num_joints), ground_joints(sk, body))
        cols = self.layout.output_block("joint_pos").slice
        err = {name: held_out_cm(self.model.pfnn, x, phase, rows["Y"].astype(np.float64), held, code,
                                 self._base.y_norm.inverse, cols, keep)
               for name, code in (("fitted", z), ("encoder", z0), ("no_style", None))}
        d = z.astype(np.float64) - self.prior.mean
        dist = float(d @ self.prior.precision @ d / len(d))
        train = training_distances(self.prior)
        min_s = float((self.meta.get("experiment") or {}).get("window_min_s", 2.0))
        return assess(len(rows["X"]) / self.fps, min_s, err, dist, float(np.percentile(train, 99)) if len(train) else 0.0,
                      self.meta.get("exemplar_error_cm"))

    @property
    def outside(self) -> bool:
        """Whether the style acts outside the rollout (issue 56: the checkpoint's ``style_outside``): the base
        walks on its own poses and the styled pose is only written."""
        return bool(self.meta.get("style_outside"))

    def controller(self, z: np.ndarray | None) -> Any:
        """A PFNNController walking in style z ((Z,); None: the adapters off, the unadapted network). For a
        model trained outside the rollout (`outside`), an `OutsideController`: the base's walk, styled poses
        written."""
        if z is None:
            return self._base
        zt = torch.as_tensor(np.asarray(z, np.float32).reshape(1, -1), device=self.device)
        if zt.shape[1] != self.model.pfnn.cfg.style_dim:
            raise MotioncoreError(f"z: expected {self.model.pfnn.cfg.style_dim} values, got {zt.shape[1]}")
        if self.outside:
            return OutsideController(self._base, StyledPFNN(self.model.pfnn, zt).eval(),
                                     self.meta["style_outside"].get("columns", POSE_BLOCKS))
        ctl = copy.copy(self._base)
        ctl.model = StyledPFNN(self.model.pfnn, zt).eval()
        return ctl
