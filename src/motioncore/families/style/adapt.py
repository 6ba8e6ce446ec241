"""Request-time style code fitting: a few gradient steps on the learnet's style code z so that the learnet
PFNN predicts ONE exemplar clip's next frames, starting from the encoder's code, kept near the training
codes by a Gaussian prior, and invariant to the exemplar's stance height (`level_stance`).

Every weight stays shared (``W_k + M1 diag(f(z)) M2``): only the Z numbers of z move, so the fit is a
few hundred small matrix products on CPU. The step count is chosen on the exemplar itself: its last
``holdout`` fraction of rows is never fitted, and the z (step 0, the encoder's, included) with the lowest
error on those rows is returned, so a code that only memorises the exemplar's first seconds is not kept.

Legend: N exemplar rows, D_in PFNN inputs, D_out outputs, Z style code, T frames, J joints.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.core.kinematics import find_body_joints
from motioncore.core.motion import Motion
from motioncore.errors import MotioncoreError

FLOOR_PERCENTILE = 5.0  # the exemplar's floor: this percentile over frames of its lowest foot joint's height


@dataclass(frozen=True)
class FitConfig:
    # the defaults: of the settings tried (docs/style.md), next-frame error on the held-out styles' other
    # clips near the best and the judge's verdicts kept; a stronger pull to the codes' mean (prior_weight 1)
    # made elderly's walks "giant" and "masculine" (the mean of the training codes is no neutral walk)
    steps: int = 40  # Adam steps on z (at most; the best step on the held-back rows is kept)
    lr: float = 0.1  # Adam learning rate on z (codes have a spread of about 0.8 per component)
    prior_weight: float = 0.05  # weight of the prior cost (z - mean)^T cov^-1 (z - mean) / Z
    anchor_weight: float = 0.2  # weight of the same cost around the encoder's code z0 instead of the mean
    holdout: float = 0.25  # last fraction of the exemplar's rows, never fitted, that picks the step
    max_rows: int = 600  # rows used at most (evenly spaced): bounds the time of a long exemplar
    outputs: str = "pose"  # Y columns fitted: "pose" (joint positions, velocities, rotations: the style) or "all"
    prior: str = "gaussian"  # "gaussian": the cost around the codes' mean; "nearest": around the nearest code
    nearest_tau: float = 0.1  # softness of "nearest": -tau log sum_k exp(-d_k / tau) over the codes k

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"FitConfig.steps: expected an int >= 0, got {self.steps!r}")
        if self.lr <= 0 or self.prior_weight < 0 or self.anchor_weight < 0 or not 0 < self.holdout < 1 or self.max_rows < 8:
            raise ValueError("FitConfig: need lr > 0, prior_weight >= 0, 0 < holdout < 1, max_rows >= 8")
        if self.prior not in ("gaussian", "nearest") or self.nearest_tau <= 0:
            raise ValueError(f"FitConfig.prior: expected 'gaussian' or 'nearest' (nearest_tau > 0), got {self.prior!r}")
        if self.outputs not in ("all", "pose"):
            raise ValueError(f"FitConfig.outputs: expected 'all' or 'pose', got {self.outputs!r}")


class CodePrior:
    """The training styles' codes: a Gaussian over them (``mean`` (Z,), ``cov`` (Z, Z)) and, optionally, the
    codes themselves (``codes`` (N, Z), for the nearest-code cost)."""

    def __init__(self, mean: np.ndarray, cov: np.ndarray, n: int = 0, codes: np.ndarray | None = None):
        self.mean, self.cov, self.n = np.asarray(mean, np.float64), np.asarray(cov, np.float64), int(n)
        Z = len(self.mean)
        if self.cov.shape != (Z, Z):
            raise MotioncoreError(f"code prior: cov must be ({Z}, {Z}), got {self.cov.shape}")
        self.codes = None if codes is None else np.asarray(codes, np.float64).reshape(-1, Z)
        self.precision = np.linalg.inv(self.cov + 1e-3 * np.eye(Z))

    @staticmethod
    def from_codes(codes: np.ndarray) -> CodePrior:
        """From (N, Z) training codes (N > Z)."""
        c = np.asarray(codes, np.float64)
        if c.ndim != 2 or len(c) <= c.shape[1]:
            raise MotioncoreError(f"code prior: need (N > Z, Z) codes, got {c.shape}")
        return CodePrior(c.mean(0), np.cov(c.T), len(c), c)

    def to_dict(self) -> dict[str, Any]:
        out = {"mean": self.mean.round(6).tolist(), "cov": self.cov.round(6).tolist(), "n": self.n}
        return out if self.codes is None else {**out, "codes": self.codes.round(4).tolist()}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CodePrior:
        return CodePrior(np.asarray(d["mean"]), np.asarray(d["cov"]), int(d.get("n", 0)), d.get("codes"))

    def nearest_cost(self, z: Tensor, tau: float) -> Tensor:
        """(1, Z) -> scalar: a soft minimum over the training codes c_k of (z - c_k)^T cov^-1 (z - c_k) / Z,
        ``-tau log sum_k exp(-d_k / tau)``: near 0 on any training code, not pulled towards their mean."""
        if self.codes is None:
            raise MotioncoreError("code prior: no codes stored (rerun scripts/style_code_prior.py) for prior 'nearest'")
        c = torch.as_tensor(self.codes, dtype=z.dtype, device=z.device)  # (N, Z)
        prec = torch.as_tensor(self.precision, dtype=z.dtype, device=z.device)
        d = z.reshape(1, -1) - c  # (N, Z)
        dist = ((d @ prec) * d).sum(1) / d.shape[1]  # (N,)
        return -tau * torch.logsumexp(-dist / tau, 0)

    def cost(self, z: Tensor, centre: Tensor | None = None) -> Tensor:
        """(1, Z) -> scalar: (z - mean)^T cov^-1 (z - mean) / Z (about 1 for a typical training code);
        ``centre`` (1, Z) replaces the mean (the training codes' spread as the metric around another code)."""
        mu = torch.as_tensor(self.mean, dtype=z.dtype, device=z.device) if centre is None else centre
        prec = torch.as_tensor(self.precision, dtype=z.dtype, device=z.device)
        d = (z - mu).reshape(-1)
        return d @ prec @ d / len(d)


def foot_floor(motion: Motion) -> float:
    """The height (cm) of the floor the clip's feet stand on: the ``FLOOR_PERCENTILE`` percentile over
    frames of the lowest contact joint (ankles, toes)."""
    body = find_body_joints(motion.skeleton)
    _, gp = motion.global_transforms()  # (T, J, 3)
    return float(np.percentile(gp[:, list(body.feet), 1].min(1), FLOOR_PERCENTILE))


def level_stance(motion: Motion, floor_cm: float) -> Motion:
    """The clip with its root joint moved up or down so that its feet stand on ``floor_cm`` (the training
    data's `foot_floor`): the stance height a rig's object location or another actor's hips gives is not
    part of the style. Rotations and the horizontal root path are unchanged."""
    body = find_body_joints(motion.skeleton)
    pos = motion.positions.copy()
    pos[:, body.root, 1] += floor_cm - foot_floor(motion)
    return Motion(motion.skeleton, motion.rotations, pos, motion.fps, motion.name)


def fit_code(pfnn: nn.Module, x: Tensor, y: Tensor, phase: Tensor, z0: Tensor, prior: CodePrior,
             cfg: FitConfig | None = None, cols: Tensor | None = None) -> tuple[Tensor, dict[str, Any]]:
    """z (1, Z) fitted to predict ``y`` (N, D_out) from ``x`` (N, D_in), ``phase`` (N,) (all z-scored as in
    training) with the learnet PFNN ``pfnn`` (weights frozen), from ``z0`` (1, Z); and what happened
    (steps, the best step, losses, ``held_back_rows``: the indices of the rows that picked it, seconds). The
    first (1 - holdout) of the rows are fitted, in order; the rest pick the step. ``cols``: the Y columns scored (None: all)."""
    t0 = time.perf_counter()
    cfg = cfg or FitConfig()
    N = x.shape[0]
    if N < 8 or y.shape[0] != N or phase.shape != (N,) or z0.ndim != 2 or z0.shape[0] != 1:
        raise MotioncoreError(f"fit_code: x {tuple(x.shape)}, y {tuple(y.shape)}, phase {tuple(phase.shape)}, "
                              f"z0 {tuple(z0.shape)}: need N >= 8 rows and z0 (1, Z)")
    keep = torch.arange(N)
    if N > cfg.max_rows:
        keep = torch.linspace(0, N - 1, cfg.max_rows).round().long()
        x, y, phase = x[keep], y[keep], phase[keep]
        N = cfg.max_rows
    cut = N - max(1, int(round(cfg.holdout * N)))
    was = pfnn.training
    pfnn.eval()
    if cols is not None:
        y = y[:, cols]
    pick = (lambda out: out) if cols is None else (lambda out: out[:, cols])  # noqa: E731
    z = z0.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([z], lr=cfg.lr)
    best, best_z, best_step, val = float("inf"), z0.detach().clone(), 0, []
    for step in range(cfg.steps + 1):
        with torch.no_grad():
            v = float(nn.functional.mse_loss(pick(pfnn(x[cut:], phase[cut:], z.expand(N - cut, -1))), y[cut:]))
        val.append(v)
        if v < best:
            best, best_z, best_step = v, z.detach().clone(), step
        if step == cfg.steps:
            break
        loss = nn.functional.mse_loss(pick(pfnn(x[:cut], phase[:cut], z.expand(cut, -1))), y[:cut])
        loss = loss + cfg.prior_weight * (prior.cost(z) if cfg.prior == "gaussian" else prior.nearest_cost(z, cfg.nearest_tau))
        if cfg.anchor_weight:
            loss = loss + cfg.anchor_weight * prior.cost(z, z0.detach())
        (z.grad,) = torch.autograd.grad(loss, [z])  # z alone: the shared weights get no gradient
        opt.step()
    pfnn.train(was)
    return best_z, {"steps": cfg.steps, "best_step": best_step, "held_back_mse": val, "rows": N,
                    "held_back_rows": keep[cut:].tolist(), "fit_s": time.perf_counter() - t0}
