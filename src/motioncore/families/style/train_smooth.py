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

import numpy as np
import torch
from torch import Tensor

from motioncore.features.layout import Layout
from motioncore.features.normaliser import Normaliser


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
