"""Continuity costs for the style model (issue 40): the learnet PFNN's joint rotations must not turn faster
between consecutive frames than the training data's joints do, for the training styles' codes AND for codes
it never saw.

The flail it fixes: walking with a held-out style's code, the shared network predicted the lower arm's
forward axis swinging from +z to -z in 3 frames (73.8 degrees per frame against the data's 26.4). Each row's
output is trained alone (MSE per frame), so nothing tied frame i's rotation to frame i-1's, and a code off
the training codes could land where the rotation output is steep. Here every training row i whose clip also
has row i-1 is predicted twice with the same code, at i and at i-1, and:

- ``turn``: each joint's *local* rotation (relative to its parent: what a BVH stores and what
  `core.kinematics.rotation_steps` measures) turning from i-1 to i by more than ``margin`` x the data's
  99.9th-percentile turn of that joint costs the square of the excess (radians), summed over joints;
- ``vel``: the change of the rotation outputs (z-scored axes) from i-1 to i matches the data's change (MSE);
- both with the row's own code AND with a *mixed* code (`mixed_codes`): two codes of the batch blended
  with a weight from ``-mix`` to ``1 + mix`` plus noise, i.e. between and beyond the training styles, where
  the held-out styles' codes land. The turn cost needs no target, so it can be applied there.

`TurnMeter` is the differentiable per-joint turn, checked against `rotation_steps` in the tests.

Legend: B batch, J joints, Z style code, D_out outputs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.features.layout import Layout
from motioncore.features.normaliser import Normaliser

if TYPE_CHECKING:
    from motioncore.families.style.train_heldout import StyleConfig, StylePrepared


def axes_matrices(axes: Tensor) -> Tensor:
    """(..., J, 6) forward (local z) + up (local y) axes -> (..., J, 3, 3) rotation matrices whose columns
    are the local x, y, z axes: Gram-Schmidt with z first, exactly as `features.poses.axes_to_rotation`."""
    fwd, up = axes[..., :3], axes[..., 3:]
    z = fwd / fwd.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    y = up - (up * z).sum(-1, keepdim=True) * z
    y = y / y.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return torch.stack([torch.cross(y, z, dim=-1), y, z], dim=-1)


class TurnMeter:
    """Per-joint local rotation turn (radians) between two z-scored PFNN outputs (rows i-1 and i)."""

    def __init__(self, layout: Layout, y_norm: Normaliser, parents: np.ndarray):
        cols = layout.output_block("joint_axes").slice
        self.cols = cols
        self.mean = torch.as_tensor(y_norm.mean[cols], dtype=torch.float32)
        self.std = torch.as_tensor(y_norm.std[cols], dtype=torch.float32)
        parents = np.asarray(parents, np.int64)
        self.J = len(parents)
        self.child = torch.as_tensor(np.flatnonzero(parents >= 0))  # joints with a parent: their local turn
        self.parent = torch.as_tensor(parents[parents >= 0])

    def local(self, pred: Tensor) -> Tensor:
        """pred (B, D_out) z-scored -> (B, J', 3, 3) local rotations of the joints with a parent."""
        raw = pred[:, self.cols] * self.std + self.mean  # (B, 6J) root-frame axes
        R = axes_matrices(raw.reshape(len(pred), self.J, 6))  # (B, J, 3, 3) relative to the root frame
        return R[:, self.parent].transpose(-1, -2) @ R[:, self.child]  # parent^T child

    def turns(self, prev: Tensor, cur: Tensor) -> Tensor:
        """(B, J') radians each joint's local rotation turns from ``prev`` to ``cur`` (z-scored outputs)."""
        a, b = self.local(prev), self.local(cur)
        cos = ((a * b).sum((-1, -2)) - 1.0) / 2.0  # trace(a^T b) = cos formula of the relative rotation
        return torch.acos(cos.clamp(-1.0 + 1e-6, 1.0 - 1e-6))

    def excess(self, prev: Tensor, cur: Tensor, limit_rad: Tensor) -> Tensor:
        """Mean over rows of the summed squared excess of each joint's turn over ``limit_rad`` (J',)."""
        return torch.relu(self.turns(prev, cur) - limit_rad).pow(2).sum(1).mean()


def mixed_codes(z: Tensor, mix: float, noise: float, gen: torch.Generator) -> Tensor:
    """(B, Z) codes between and beyond the batch's codes: z + a (z[perm] - z), a ~ U(-mix, 1 + mix), plus
    Gaussian noise of ``noise`` x the batch codes' per-dimension sd. No gradient reaches the encoder."""
    z = z.detach()
    perm = torch.randperm(len(z), generator=gen)
    a = torch.rand(len(z), 1, generator=gen) * (1 + 2 * mix) - mix
    sd = z.std(0, keepdim=True) if len(z) > 1 else torch.ones_like(z)
    return z + a * (z[perm] - z) + noise * sd * torch.randn(z.shape, generator=gen)


def previous_rows(row: Tensor, starts: Tensor, clip: Tensor) -> tuple[Tensor, Tensor]:
    """(keep (B,) bool: row i-1 is in the same clip, prev (B',) its row index) for rows ``row`` of clips ``clip``."""
    keep = row > starts[clip]
    return keep, row[keep] - 1


def batch_seed(row: Tensor, seed: int) -> int:
    """A seed that is a function of the batch's rows only, so a resumed run draws exactly what the
    uninterrupted one drew (the loop's data order is saved; torch's global generator is not)."""
    r = row.to(torch.int64)
    return int((r * (r % 9973 + 1)).sum() % 2_147_483_647) + 7919 * seed


class Smoothness:
    """The continuity costs (`train_smooth`) of a training batch: rows i with a row i-1 in the same clip,
    predicted at i-1 and i with the row's code (and with a mixed code when ``turn_mix`` > 0)."""

    def __init__(self, cfg: StyleConfig, prep: StylePrepared, limits_deg: np.ndarray):
        self.cfg, self.prep = cfg, prep
        self.meter = TurnMeter(prep.layout, prep.y_norm, prep.clips[0].motion.skeleton.parents)
        lim = np.radians(np.asarray(limits_deg, np.float64)) * cfg.turn_margin  # (J,)
        self.limit = torch.as_tensor(lim[self.meter.child.numpy()], dtype=torch.float32)  # (J',)
        self.starts = torch.as_tensor(np.asarray(prep.starts, np.int64))
        self.gen = torch.Generator()
        self.states: dict[str, Tensor] | None = None  # walks of the starting network (roll_weight > 0)
        lay = prep.layout
        self.pose_cols = torch.as_tensor(np.r_[lay.input_block("joint_pos").start:lay.input_block("joint_pos").stop,
                                               lay.input_block("joint_vel").start:lay.input_block("joint_vel").stop])

    def rollout_cost(self, m: nn.Module, gen: torch.Generator) -> Tensor:
        """The turn cost on ``turn_rows`` random consecutive frame pairs of the stored walks (`train_rollouts`)."""
        st = self.states
        R, T = st["phase"].shape
        r = torch.randint(0, R, (self.cfg.turn_rows,), generator=gen)
        t = torch.randint(1, T, (self.cfg.turn_rows,), generator=gen)
        z = st["z"][st["code"][r]]
        p0, p1 = m(st["x"][r, t - 1], st["phase"][r, t - 1], z), m(st["x"][r, t], st["phase"][r, t], z)
        return self.meter.excess(p0, p1, self.limit)

    def pose_noise(self, n: int) -> Tensor:
        """(n, D_in) Gaussian noise of sd ``input_noise`` on the previous-pose columns, zero elsewhere."""
        noise = torch.zeros(n, self.prep.x.shape[1])
        noise[:, self.pose_cols] = self.cfg.input_noise * torch.randn(n, len(self.pose_cols))
        return noise

    def cost(self, m: nn.Module, b: dict[str, Tensor], z: Tensor | None) -> Tensor:
        cfg = self.cfg
        keep, _ = previous_rows(b["row"], self.starts, b["clip"])
        keep[cfg.turn_rows:] = False  # a shuffled batch: its first rows are a random subset
        prev = b["row"][keep] - 1
        codes = [None if z is None else z[keep]]
        self.gen.manual_seed(batch_seed(b["row"], cfg.seed) + 2)
        if cfg.turn_mix > 0 and z is not None:
            codes.append(mixed_codes(z[keep], cfg.turn_mix, cfg.turn_mix_noise, self.gen))
        was = m.training
        m.eval()  # the same network at i-1 and i (no dropout masks apart): the one that runs at request time
        try:
            return self._costs(m, b, keep, prev, codes)
        finally:
            m.train(was)

    def _costs(self, m: nn.Module, b: dict[str, Tensor], keep: Tensor, prev: Tensor, codes: list) -> Tensor:
        cfg, prep, cols = self.cfg, self.prep, self.meter.cols
        x0, ph0, x1, ph1 = prep.x[prev], prep.phase[prev], b["x"][keep], b["phase"][keep]
        if "noise" in b:  # the same shift at i-1 as at i (x1 has it already): smooth near the data, not only on it
            x0 = x0 + b["noise"][keep]
        total = b["x"].new_zeros(())
        if self.states is not None and cfg.roll_weight:
            total = total + cfg.roll_weight * self.rollout_cost(m, self.gen)
        for k, zk in enumerate(codes):
            p0, p1 = m(x0, ph0, zk), m(x1, ph1, zk)  # (B', D_out) at i-1 and i, the same code
            if cfg.turn_weight:
                total = total + cfg.turn_weight * self.meter.excess(p0, p1, self.limit)
            if cfg.vel_weight and k == 0:  # the data's change is the target only for the row's own code
                dy = b["y"][keep][:, cols] - prep.y[prev][:, cols]
                total = total + cfg.vel_weight * nn.functional.mse_loss(p1[:, cols] - p0[:, cols], dy)
        return total
