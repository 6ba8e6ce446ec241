"""One training batch of the infill-body recipe: its key pattern (``sample_task``), its windows (``sample_batch``)
and the model's loss on it (``Net``, ``batch_loss``).

The task and loss designs are described in ``recipes.infill_body``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .infill_body import BodyRecipe

__all__ = ["sample_task"]


def sample_task(rng: np.random.Generator, J: int, max_gap: int = 60) -> tuple[np.ndarray, int]:
    """One key pattern ``known`` (T, J + 1) bool (channel J: the root translation) and its longest gap."""
    if rng.random() < 0.6:  # dense context around a gap
        lengths = np.arange(1, max_gap + 1)
        p = 1.0 / lengths
        gap = int(rng.choice(lengths, p=p / p.sum()))
        ctx = 10 if rng.random() < 0.7 else int(rng.integers(1, 11))
        post = 1 if rng.random() < 0.7 else int(rng.integers(1, 11))
        T = ctx + gap + post
        frames = np.zeros(T, bool)
        frames[:ctx] = True
        frames[ctx + gap:] = True
    else:  # sparse keys every N frames
        N = int(rng.integers(2, 31))
        k = max(2, int(math.ceil(48 / N)))
        while N * k + 1 > 121:
            k -= 1
        T = N * k + 1
        frames = np.zeros(T, bool)
        frames[::N] = True
        gap = N - 1
    known = np.repeat(frames[:, None], J + 1, axis=1)
    holes = np.flatnonzero(~frames)
    u = rng.random()
    if u < 0.2 and holes.size:  # some joints keyed inside the gap
        at = rng.choice(holes, size=min(holes.size, int(rng.integers(1, 4))), replace=False)
        joints = rng.choice(J + 1, size=int(rng.integers(1, J // 2 + 1)), replace=False)
        known[np.ix_(at, joints)] = True
    elif u < 0.35:  # a path: the root keyed at every frame
        known[:, J] = True
    elif u < 0.5:  # poses keyed, the root only at the first key
        first = int(np.flatnonzero(frames)[0])
        known[:, J] = False
        known[first, J] = True
    return known, gap


def sample_batch(rng: np.random.Generator, data: dict[str, Any], recipe: BodyRecipe):
    """(rotations (B, T, J, 4), positions (B, T, J, 3), known (B, T, J + 1), gap)."""
    J = data["skeleton"].num_joints
    known, gap = sample_task(rng, J, recipe.max_gap)
    T = known.shape[0]
    B = int(np.clip(recipe.tokens // T, 16, 160))
    bounds, source = data["bounds"], data["source"]
    lengths = bounds[:, 1] - bounds[:, 0] - T
    ok = lengths > 0
    w = np.where(ok, lengths, 0).astype(np.float64)
    if source.min() != source.max():  # recipe.cmu_share of the windows from CMU (source 1), the rest from Bandai
        for s, share in ((0, 1.0 - recipe.cmu_share), (1, recipe.cmu_share)):
            w[source == s] *= share / max(w[source == s].sum(), 1e-9)
    clip = rng.choice(len(bounds), size=B, p=w / w.sum())
    start = bounds[clip, 0] + (rng.random(B) * lengths[clip]).astype(np.int64)
    idx = start[:, None] + np.arange(T)
    return (data["rotations"][idx].astype(np.float64), data["positions"][idx].astype(np.float64),
            np.broadcast_to(known, (B,) + known.shape).copy(), gap)


# --- the model on a batch --------------------------------------------------------------------------------------


class Net:
    """The model's skeleton geometry (parents, offsets) for torch forward kinematics, and the batch plumbing."""

    def __init__(self, skeleton) -> None:
        from ..tasks.body_fill import BodyLayout

        self.layout = BodyLayout.of(skeleton)
        pos = {j: i for i, j in enumerate(self.layout.joints)}
        self.parents = [-1] + [pos[int(skeleton.parents[j])] for j in self.layout.joints[1:]]

    def truth(self, prep, rotations, positions):
        """Truth in the canonical model representation: local rotations (B, T, R, 4) (root: global) and root (cm)."""
        from ..core.rotations import quat_apply, quat_mul
        from ..tasks.body_fill import _fold

        g, x = _fold(self.layout, rotations, positions)
        yb = prep.yaw[:, None]
        rot = rotations[:, :, list(self.layout.joints)].copy()
        rot[:, :, 0] = quat_mul(yb, g)
        return rot, quat_apply(yb, x - prep.centre[:, None])

    def fk(self, mats, root_m, offsets_m):
        """Global rotation matrices and positions (metres) of the model joints."""
        import torch

        G, P = [mats[:, :, 0]], [root_m]
        for i in range(1, len(self.parents)):
            p = self.parents[i]
            G.append(G[p] @ mats[:, :, i])
            P.append(P[p] + (G[p] @ offsets_m[:, :, i, :, None])[..., 0])
        return torch.stack(G, 2), torch.stack(P, 2)


def batch_loss(model, net: Net, rotations, positions, known, gap: int, kind: str = "ratio"):
    """(loss to minimise, the plain L1 sum for the log). ``kind``: "ratio" (the L1 over the Bezier base's L1 on
    the same batch: every gap length and task counts by how much it improves on the animator's curve, as the
    benchmark's ratios do) or "length" (the L1 times longest gap / 10, the probe's weighting)."""
    import torch

    from ..core.rotations import quat_to_matrix
    from ..models.infill_body import assemble
    from ..tasks.body_fill import POS_SCALE, prepare

    prep = prepare(net.layout, rotations, positions, known)
    t_rot, t_root = net.truth(prep, rotations, positions)
    feats = torch.from_numpy(prep.features)
    kn = torch.from_numpy(prep.known)
    mats, _, root = assemble(feats, model(feats), kn)
    t_mats = torch.from_numpy(quat_to_matrix(t_rot)).float()
    t_root_m = torch.from_numpy(t_root * POS_SCALE).float()
    off = torch.from_numpy(positions[:, :, list(net.layout.joints)] * POS_SCALE).float()
    hole = torch.from_numpy(~prep.known.all(-1)).float()[..., None]  # (B, T, 1)
    n = hole.sum().clamp_min(1.0) * mats.shape[2]
    tG, tP = net.fk(t_mats, t_root_m, off)

    def l1(m, r):
        G, P = net.fk(m, r, off)
        return (((G - tG).abs().sum((-1, -2)) + (P - tP).abs().sum(-1)
                 + 0.5 * (m - t_mats).abs().sum((-1, -2))) * hole).sum() / n

    loss = l1(mats, root)
    if kind == "length":
        return loss * min(max(gap / 10.0, 0.1), 6.0), loss
    with torch.no_grad():
        zero = torch.zeros(feats.shape[:2] + (mats.shape[2] * 6 + 3,))
        bm, _, br = assemble(feats, zero, kn)
        base = l1(bm, br)
    return loss / base.clamp_min(1e-6), loss
