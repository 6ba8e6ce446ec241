"""The body in-fill's training loss (``infill-body``): the model on a batch of windows (``Net``: the skeleton's
forward kinematics in torch) and ``batch_loss``. Shared by the recipe (``families.body.train``) and Learn This
Action (``families.body.adapt``), so a user's clip is learnt exactly as the training data was."""
from __future__ import annotations

__all__ = ["Net", "batch_loss", "JERK_WEIGHT"]


# --- the model on a batch --------------------------------------------------------------------------------------


class Net:
    """The model's skeleton geometry (parents, offsets) for torch forward kinematics, and the batch plumbing."""

    def __init__(self, skeleton) -> None:
        from motioncore.families.body.fill import BodyLayout

        self.layout = BodyLayout.of(skeleton)
        pos = {j: i for i, j in enumerate(self.layout.joints)}
        self.parents = [-1] + [pos[int(skeleton.parents[j])] for j in self.layout.joints[1:]]

    def truth(self, prep, rotations, positions):
        """Truth in the canonical model representation: local rotations (B, T, R, 4) (root: global) and root (cm)."""
        from motioncore.core.rotations import quat_apply, quat_mul
        from motioncore.families.body.fill import _fold

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


JERK_WEIGHT = 10.0  # the jerk term's weight against the position term (both metres): about a fifth of the loss


def batch_loss(model, net: Net, rotations, positions, known, gap: int, kind: str = "ratio",
               jerk_weight: float = JERK_WEIGHT):
    """(loss to minimise, the plain L1 sum for the log). The L1 includes the third difference (jerk) of the
    global position error, weighted by ``jerk_weight``. ``kind``: "ratio" (the L1 over the Bezier base's L1 on
    the same batch: every gap length and task counts by how much it improves on the animator's curve, as the
    benchmark's ratios do) or "length" (the L1 times longest gap / 10, the probe's weighting)."""
    import torch

    from motioncore.core.rotations import quat_to_matrix
    from motioncore.families.body.fill import POS_SCALE, prepare
    from motioncore.families.body.model import assemble

    prep = prepare(net.layout, rotations, positions, known)
    t_rot, t_root = net.truth(prep, rotations, positions)
    dev = next(model.parameters()).device  # the batch goes where the model is (CPU, or a lent GPU)
    feats = torch.from_numpy(prep.features).to(dev)
    kn = torch.from_numpy(prep.known).to(dev)
    mats, _, root = assemble(feats, model(feats), kn)
    t_mats = torch.from_numpy(quat_to_matrix(t_rot)).float().to(dev)
    t_root_m = torch.from_numpy(t_root * POS_SCALE).float().to(dev)
    off = torch.from_numpy(positions[:, :, list(net.layout.joints)] * POS_SCALE).float().to(dev)
    hole = torch.from_numpy(~prep.known.all(-1)).float().to(dev)[..., None]  # (B, T, 1)
    n = hole.sum().clamp_min(1.0) * mats.shape[2]
    tG, tP = net.fk(t_mats, t_root_m, off)

    def l1(m, r):
        G, P = net.fk(m, r, off)
        # the third difference of the position error: zero wherever its 4-frame stencil is all keys, so it
        # weighs the gap and its edges, where Bezier's kinks at the keys are the jitter an animator sees
        jerk = torch.diff(P - tP, n=3, dim=1).abs().sum() * jerk_weight
        return ((((G - tG).abs().sum((-1, -2)) + (P - tP).abs().sum(-1)
                 + 0.5 * (m - t_mats).abs().sum((-1, -2))) * hole).sum() + jerk) / n

    loss = l1(mats, root)
    if kind == "length":
        return loss * min(max(gap / 10.0, 0.1), 6.0), loss
    with torch.no_grad():
        zero = torch.zeros(feats.shape[:2] + (mats.shape[2] * 6 + 3,), device=dev)
        bm, _, br = assemble(feats, zero, kn)
        base = l1(bm, br)
    return loss / base.clamp_min(1e-6), loss
