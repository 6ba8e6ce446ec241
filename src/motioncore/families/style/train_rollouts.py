"""The states a style model's own rollouts visit, for the continuity cost (issue 40).

On the training clips' own inputs the bundled learnet's rotations never turn faster than the data's
(teacher-forced, every joint under its 99.9th percentile for training and held-out codes alike); the
flails (73.8 degrees per frame) happen only when it walks a path, feeding itself its own poses, which
drift off the data. A cost on data rows cannot see those states. So before training, the starting
network walks random paths (never the evaluation's demo, sharp-turn or judge paths) in training
styles' codes and mixtures of them; every frame's input row and phase is kept, and training adds the
turn cost on consecutive frames of these walks (`families.style.train_heldout.Smoothness`). No target is needed: the
cost only asks that no joint turns faster than the data's joints do.

Legend: R walks, T frames, D_in inputs, Z style code.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn


def random_paths(n: int, seed: int) -> list[Any]:
    """``n`` walks of 3-5 straight legs of 1.5-3.5 m, each turning by 20-150 degrees left or right, at
    0.8-1.6 m/s (a fifth of them run at 2.2-3.0 m/s)."""
    from motioncore.tasks.paths import Path

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        legs = int(rng.integers(3, 6))
        heading, p, pts = rng.uniform(0, 2 * np.pi), np.zeros(2), [np.zeros(2)]
        for k in range(legs):
            if k:
                heading += np.radians(rng.uniform(20, 150)) * rng.choice([-1.0, 1.0])
            p = p + rng.uniform(1.5, 3.5) * np.array([np.sin(heading), np.cos(heading)])
            pts.append(p)
        run = rng.random() < 0.2
        speed = rng.uniform(2.2, 3.0) if run else rng.uniform(0.8, 1.6)
        out.append(Path(np.array(pts), speed=np.full(len(pts), speed), gait=("run" if run else "walk",) * len(pts)))
    return out


class _Recorder(nn.Module):
    """Wraps a controller's network and keeps every (x, phase) it is given."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net, self.cfg, self.seen = net, net.cfg, []

    def forward(self, x: Tensor, phase: Tensor, mode: str = "outputs") -> Tensor:
        self.seen.append((x.detach().clone(), phase.detach().clone()))
        return self.net(x, phase, mode)


@torch.no_grad()
def rollout_states(adapter: Any, codes: np.ndarray, paths: list[Any], frames: int) -> dict[str, Tensor]:
    """Walk every path in every code (R = codes x paths walks of ``frames`` frames): x (R, T, D_in) the
    z-scored rows the network was given, phase (R, T) cycles, code (R,) index into ``codes``."""
    xs, phs, idx = [], [], []
    for k, z in enumerate(codes):
        ctl = adapter.controller(z)
        rec = _Recorder(ctl.model)
        ctl.model = rec
        ctl.rollout(paths, frames)
        x = torch.stack([a for a, _ in rec.seen[:frames]], 1)  # (B, T, D_in)
        ph = torch.stack([b for _, b in rec.seen[:frames]], 1)  # (B, T)
        xs.append(x)
        phs.append(ph)
        idx += [k] * len(paths)
    return {"x": torch.cat(xs).float(), "phase": torch.cat(phs).float(), "code": torch.as_tensor(idx),
            "z": torch.as_tensor(np.asarray(codes, np.float32))}


def training_codes(adapter: Any, motions: list[Any], n_mix: int, seed: int) -> np.ndarray:
    """The codes of training clips (as a request reads them: `StyleAdapter.code`) plus ``n_mix`` blends of
    two of them with a weight in [-0.5, 1.5] (between and beyond, where held-out styles' codes land)."""
    codes = np.stack([adapter.code(m) for m in motions])
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(codes), n_mix), rng.integers(0, len(codes), n_mix)
    a = rng.uniform(-0.5, 1.5, (n_mix, 1))
    return np.concatenate([codes, codes[i] + a * (codes[j] - codes[i])]).astype(np.float32)
