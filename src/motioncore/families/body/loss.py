"""The body in-fill's training loss (``infill-body``): the model on a batch of windows (``Net``: the skeleton's
forward kinematics in torch) and ``batch_loss``. Shared by the recipe (``families.body.train``) and Learn This
Action (``families.body.adapt``), so a user's clip is learnt exactly as the training data was."""
from __future__ import annotations

import numpy as np

__all__ = ["Net", "batch_loss", "JERK_WEIGHT", "FOOT_WEIGHT", "CONTACT_WEIGHT"]


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
FOOT_WEIGHT = 4.0   # the feet's velocity error (metres per frame) on frames where the capture's foot is down
CONTACT_WEIGHT = 0.05  # the contact output's binary cross-entropy, added to the ratio loss


def batch_loss(model, net: Net, rotations, positions, known, gap: int, kind: str = "ratio",
               jerk_weight: float = JERK_WEIGHT, contacts=None, foot_weight: float = FOOT_WEIGHT):
    """(loss to minimise, the plain L1 sum for the log). The L1 includes the third difference (jerk) of the
    global position error, weighted by ``jerk_weight``. ``kind``: "ratio" (the L1 over the Bezier base's L1 on
    the same batch: every gap length and task counts by how much it improves on the animator's curve, as the
    benchmark's ratios do) or "length" (the L1 times longest gap / 10, the probe's weighting).
    ``contacts`` (B, T, F) bool, the capture's contact labels of the skeleton's feet (``core.feet.contacts``):
    the feet's velocity error where a foot is down (Qin et al. 2022's foot-velocity term, ``FOOT_WEIGHT``) joins
    the L1, and a model with a contact output learns the labels (binary cross-entropy, ``CONTACT_WEIGHT``)."""
    import torch

    from motioncore.core.rotations import quat_to_matrix
    from motioncore.families.body.fill import POS_SCALE, prepare
    from motioncore.families.body.model import assemble, basis_of

    prep = prepare(net.layout, rotations, positions, known)
    t_rot, t_root = net.truth(prep, rotations, positions)
    dev = next(model.parameters()).device  # the batch goes where the model is (CPU, or a lent GPU)
    feats = torch.from_numpy(prep.features).to(dev)
    kn = torch.from_numpy(prep.known).to(dev)
    basis = basis_of(model)
    logits = None
    if contacts is not None and getattr(model.cfg, "contacts", 0):
        residual, logits = model(feats, contacts=True)
    else:
        residual = model(feats)
    mats, _, root = assemble(feats, residual, kn, basis=basis)
    t_mats = torch.from_numpy(quat_to_matrix(t_rot)).float().to(dev)
    t_root_m = torch.from_numpy(t_root * POS_SCALE).float().to(dev)
    off = torch.from_numpy(positions[:, :, list(net.layout.joints)] * POS_SCALE).float().to(dev)
    hole = torch.from_numpy(~prep.known.all(-1)).float().to(dev)[..., None]  # (B, T, 1)
    n = hole.sum().clamp_min(1.0) * mats.shape[2]
    tG, tP = net.fk(t_mats, t_root_m, off)
    feet = [net.layout.joints.index(j) for j in net.layout.body.feet] if contacts is not None else []
    if feet:
        down = torch.from_numpy(np.asarray(contacts, bool)).float().to(dev)  # (B, T, F)
        pair = down[:, 1:] * down[:, :-1] * torch.maximum(hole[:, 1:], hole[:, :-1])  # foot down, a frame filled

    def l1(m, r):
        G, P = net.fk(m, r, off)
        # the third difference of the position error: zero wherever its 4-frame stencil is all keys, so it
        # weighs the gap and its edges, where Bezier's kinks at the keys are the jitter an animator sees
        jerk = torch.diff(P - tP, n=3, dim=1).abs().sum() * jerk_weight
        out = (((G - tG).abs().sum((-1, -2)) + (P - tP).abs().sum(-1)
                + 0.5 * (m - t_mats).abs().sum((-1, -2))) * hole).sum() + jerk
        if feet:  # the feet's velocity where the capture's are down: the slide an animator sees as skate
            dv = torch.diff(P[:, :, feet] - tP[:, :, feet], dim=1).abs().sum(-1)  # (B, T-1, F)
            out = out + (dv * pair).sum() * foot_weight
        return out / n

    loss = l1(mats, root)
    extra = 0.0
    if logits is not None:
        lab = torch.from_numpy(np.asarray(contacts, np.float32)).to(dev)
        extra = torch.nn.functional.binary_cross_entropy_with_logits(logits, lab) * CONTACT_WEIGHT
    if kind == "length":
        return loss * min(max(gap / 10.0, 0.1), 6.0) + extra, loss
    with torch.no_grad():
        zero = torch.zeros(feats.shape[:2] + (mats.shape[2] * 6 + 3,), device=dev)
        bm, _, br = assemble(feats, zero, kn, basis=basis)
        base = l1(bm, br)
    return loss / base.clamp_min(1e-6) + extra, loss
