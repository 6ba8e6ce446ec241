"""Deterministic body in-fill (``infill-body``): the numpy side shared by training, evaluation, the server
and batch jobs. The network (``families.body.model``) corrects Blender's own Bezier in-fill of the keys; this
module builds that Bezier, the canonical frame and the network's inputs, and puts the answer back.

Representation (one skeleton, the checkpoint's; Legend: B windows, T frames, J joints, R = J - A model
joints where A is the number of ancestors of the body root, e.g. Bandai's ``joint_Root`` above ``Hips``):

- the root's ancestors are *folded* into it: the root's global rotation and position stand for the chain
  (exact both ways; the ancestors keep their own values, from their keys);
- every frame is moved rigidly so the root at the reference frame (the last frame of the first run of keys)
  stands at the origin of the ground plane and faces +Z (``core.kinematics.reframe``; exact inverse);
- per frame the network reads, for each model joint, the 6D of the *Bezier-filled* local rotation and a
  keyed flag, then the root position in metres and its keyed flag (``R * 7 + 4`` values).

The base is what Blender gives an animator for the same keys: per channel an Auto Clamped Bezier F-curve
(``core.fcurve``, Continuous Acceleration) through that channel's own keys, constant before the first key
and after the last; quaternion channels sign-continuous over the keys and renormalised. The network's output
layer is zero-initialised, so an untrained model *is* the Bezier in-fill. Keyed elements come back exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motioncore.core.fcurve import keys_bezier
from motioncore.core.gaps import longest_run
from motioncore.core.kinematics import BodyJoints, find_body_joints, yaw_quat
from motioncore.core.rotations import quat_apply, quat_conj, quat_continuity, quat_mul, quat_normalize, quat_to_rot6d
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError, ShapeError

__all__ = ["BodyLayout", "bezier_fill", "bezier_quats", "prepare", "finish", "reference_frame", "POS_SCALE",
           "run_model", "fill_body", "MAX_GAP", "ONE_PASS", "safety_limits", "confidence"]

MAX_GAP = 60  # the longest gap trained and measured (frames at 30 fps)
ONE_PASS = 100  # gaps up to this many frames go through the network in one pass; longer ones stay the Bezier

POS_SCALE = 0.01  # cm -> m for the network's root input and the position loss


@dataclass(frozen=True)
class BodyLayout:
    """How a skeleton maps to the network: ``chain`` the root's ancestors then the root (folded into one
    model joint), ``joints`` the model joints (the root first, then every joint below it, skeleton order)."""

    skeleton: Skeleton
    body: BodyJoints
    chain: tuple[int, ...]
    joints: tuple[int, ...]

    @classmethod
    def of(cls, skeleton: Skeleton, body: BodyJoints | None = None) -> BodyLayout:
        body = body or find_body_joints(skeleton)
        chain, j = [], body.root
        while j >= 0:
            chain.append(j)
            j = int(skeleton.parents[j])
        chain = chain[::-1]
        joints = [body.root] + [j for j in range(skeleton.num_joints) if j not in chain]
        for j in joints[1:]:
            if not _below(skeleton, j, body.root):
                raise MotioncoreError(f"joint {skeleton.names[j]!r} is not below the body root "
                                      f"{skeleton.names[body.root]!r}: not a body skeleton")
        return cls(skeleton, body, tuple(chain), tuple(joints))

    @property
    def num_model_joints(self) -> int:
        return len(self.joints)

    @property
    def feature_dim(self) -> int:
        return self.num_model_joints * 7 + 4


def _below(sk: Skeleton, j: int, root: int) -> bool:
    while j >= 0:
        if j == root:
            return True
        j = int(sk.parents[j])
    return False


# --- Blender's Bezier through each channel's own keys ---------------------------------------------------


def _unique_rows(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(mask, axis=0, return_inverse=True)`` for a (N, T) bool mask, through packed bytes (a 1-D
    sort instead of a lexicographic one: 5x faster on training batches)."""
    packed = np.ascontiguousarray(np.packbits(mask, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return mask[first], inverse.reshape(-1)


def bezier_fill(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Per channel, Blender's Auto Clamped Bezier through the channel's keyed frames (constant outside them).
    ``values`` (B, T, C), ``known`` (B, T, C) bool; channels with the same key frames are evaluated together.
    A channel with one key is held; a channel with no key raises. Returns (B, T, C), keys exact."""
    B, T, C = values.shape
    v = np.moveaxis(values, 1, -1).reshape(-1, T)  # (B*C, T)
    k = np.moveaxis(known, 1, -1).reshape(-1, T)
    out = v.copy()
    if not k.any(axis=1).all():
        raise MotioncoreError("a channel has no key to in-fill from")
    patterns, inverse = _unique_rows(k)
    for i, pat in enumerate(patterns):
        rows = np.flatnonzero(inverse.reshape(-1) == i)
        x = np.flatnonzero(pat)
        if x.size == T:
            continue
        out[rows] = keys_bezier(x, v[np.ix_(rows, x)], T)
    return np.moveaxis(out.reshape(B, C, T), -1, 1)


def bezier_quats(q: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Quaternion F-curves (W, X, Y, Z of each joint, sign-continuous over its keys) through each joint's keys:
    ``q`` (B, T, J, 4), ``known`` (B, T, J) -> (B, T, J, 4) unit, keys exact (sign included)."""
    B, T, J, _ = q.shape
    flat = np.moveaxis(q, 2, 1).reshape(B * J, T, 4)
    kf = np.moveaxis(known, 2, 1).reshape(B * J, T)
    cont = flat.copy()
    patterns, inverse = _unique_rows(kf)
    for i, pat in enumerate(patterns):  # sign continuity over each channel's own keys, one key pattern at a time
        idx = np.flatnonzero(pat)
        if idx.size > 1:
            rows = np.flatnonzero(inverse.reshape(-1) == i)
            cont[np.ix_(rows, idx)] = quat_continuity(flat[np.ix_(rows, idx)], axis=1)
    cont = np.moveaxis(cont.reshape(B, J, T, 4), 1, 2)
    filled = bezier_fill(cont.reshape(B, T, J * 4), np.repeat(known, 4, axis=-1)).reshape(B, T, J, 4)
    out = quat_normalize(filled)
    return np.where(known[..., None], q, out)


# --- canonical frame --------------------------------------------------------------------------------------


def reference_frame(frame_known: np.ndarray) -> int:
    """The last frame of the first run of fully keyed frames (the last context frame in LaFAN1 windows)."""
    idx = np.flatnonzero(frame_known)
    if idx.size == 0:
        raise MotioncoreError("no fully keyed frame: in-fill needs at least one key pose")
    r = idx[0]
    while r + 1 < len(frame_known) and frame_known[r + 1]:
        r += 1
    return int(r)


def _fold(layout: BodyLayout, q: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global rotation and position of the root through its ancestors: (B, T, 4), (B, T, 3)."""
    g, x = q[..., layout.chain[0], :], p[..., layout.chain[0], :]
    for j in layout.chain[1:]:
        x = x + quat_apply(g, p[..., j, :])
        g = quat_mul(g, q[..., j, :])
    return g, x


def _unfold(layout: BodyLayout, q: np.ndarray, p: np.ndarray, g: np.ndarray, x: np.ndarray) -> None:
    """Inverse of ``_fold``: the root's local rotation and translation (in place) under its ancestors' values."""
    pg, px = np.zeros(g.shape), np.zeros(x.shape)
    pg[..., 0] = 1.0
    for j in layout.chain[:-1]:
        px = px + quat_apply(pg, p[..., j, :])
        pg = quat_mul(pg, q[..., j, :])
    r = layout.chain[-1]
    inv = quat_conj(pg)
    q[..., r, :] = quat_mul(inv, g)
    p[..., r, :] = quat_apply(inv, x - px)


@dataclass
class Prepared:
    """A batch ready for the network, and what ``finish`` needs to put the answer back."""

    features: np.ndarray  # (B, T, R*7 + 4) float32
    base_rot: np.ndarray  # (B, T, R, 4) canonical base local rotations (the root's: global)
    base_root: np.ndarray  # (B, T, 3) canonical base root position (cm)
    known: np.ndarray  # (B, T, R + 1) bool, per model joint and the root position
    yaw: np.ndarray  # (B, 4) the canonical turn
    centre: np.ndarray  # (B, 3) ground point moved to the origin (cm)
    rotations: np.ndarray  # (B, T, J, 4) Bezier-filled locals on the skeleton (keys exact)
    positions: np.ndarray  # (B, T, J, 3) likewise for translations
    exact: np.ndarray | None = None  # (B, T, R*7 + 4) float64: ``features`` before rounding (the base, assembled)


def prepare(layout: BodyLayout, rotations: np.ndarray, positions: np.ndarray, known: np.ndarray,
            frame: tuple[np.ndarray, np.ndarray] | None = None) -> Prepared:
    """``rotations`` (B, T, J, 4), ``positions`` (B, T, J, 3) local, ``known`` (B, T, J + 1) bool per joint
    rotation and (channel J) the root's translation; unknown values are never read. Joints above the root
    share the root's flag for their translation; every other joint's translation is its rest offset as given.
    ``frame`` (yaw (B, 4), centre (B, 3)): this canonical frame instead of the windows' own (another window's:
    the same motion at another rate)."""
    sk = layout.skeleton
    B, T, J = rotations.shape[:3]
    if J != sk.num_joints or positions.shape != (B, T, J, 3) or known.shape != (B, T, J + 1):
        raise ShapeError(f"expected rotations (B, T, {sk.num_joints}, 4), positions (B, T, {sk.num_joints}, 3) and "
                         f"known (B, T, {sk.num_joints + 1}); got {rotations.shape}, {positions.shape}, "
                         f"{known.shape}")
    known = known.astype(bool)
    q = np.where(known[..., :J, None], rotations, np.array([1.0, 0.0, 0.0, 0.0]))
    q = bezier_quats(np.asarray(q, np.float64), known[..., :J])
    p = np.asarray(positions, np.float64).copy()
    chain = list(layout.chain)
    first = np.argmax(known[..., :J].all(-1), axis=1)  # (B,) a fully keyed frame: the rest offsets as given
    rest = [j for j in range(J) if j not in chain]
    p[:, :, rest] = p[np.arange(B), first][:, None, rest]  # unknown frames' translations are never read
    pk = np.repeat(known[..., J:], len(chain), axis=-1)  # (B, T, A+1)
    p_chain = np.where(pk[..., None], p[:, :, chain], 0.0).reshape(B, T, -1)
    p[:, :, chain] = bezier_fill(p_chain, np.repeat(pk, 3, axis=-1)).reshape(B, T, len(chain), 3)
    g, x = _fold(layout, q, p)
    full = known.all(axis=-1)
    yaw, centre = np.empty((B, 4)), np.empty((B, 3))
    gq, gp = sk.forward_kinematics(q, p)
    for b in range(B):
        ref = reference_frame(full[b]) if full[b].any() else int(np.flatnonzero(known[b, :, :J].all(-1))[0]) \
            if known[b, :, :J].all(-1).any() else 0
        fwd = _facing(gp[b, ref], layout.body)
        yaw[b] = yaw_quat(np.array(-np.arctan2(fwd[0], fwd[2])))
        centre[b] = x[b, ref] * np.array([1.0, 0.0, 1.0])
    if frame is not None:
        yaw, centre = np.asarray(frame[0], np.float64).copy(), np.asarray(frame[1], np.float64).copy()
    yb = yaw[:, None]
    g = quat_mul(yb, g)
    x = quat_apply(yb, x - centre[:, None])
    base_rot = q[:, :, list(layout.joints)].copy()
    base_rot[:, :, 0] = g
    kj = np.concatenate([known[..., list(layout.joints)], known[..., J:]], axis=-1)
    kj[..., 0] &= known[..., chain].all(-1)  # the folded root is keyed where its whole chain is
    feats = np.concatenate([quat_to_rot6d(base_rot).reshape(B, T, -1), kj[..., :-1].astype(np.float64),
                            x * POS_SCALE, kj[..., -1:].astype(np.float64)], axis=-1)
    return Prepared(feats.astype(np.float32), base_rot, x, kj, yaw, centre, q, p, feats)


def _facing(gp: np.ndarray, body: BodyJoints) -> np.ndarray:
    across = gp[body.hips[0]] - gp[body.hips[1]]
    if body.shoulders is not None:
        across = across + gp[body.shoulders[0]] - gp[body.shoulders[1]]
    fwd = np.cross(across, np.array([0.0, 1.0, 0.0]))
    fwd[1] = 0.0
    n = np.linalg.norm(fwd)
    return fwd / n if n > 1e-9 else np.array([0.0, 0.0, 1.0])


def finish(layout: BodyLayout, prep: Prepared, rot: np.ndarray, root: np.ndarray,
           rotations: np.ndarray, positions: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The network's canonical answer (``rot`` (B, T, R, 4), ``root`` (B, T, 3) cm) back on the skeleton:
    un-turned, unfolded, and every keyed element replaced by the caller's own value (bit-exact)."""
    J = layout.skeleton.num_joints
    yb = quat_conj(prep.yaw)[:, None]
    g = quat_mul(yb, rot[:, :, 0])
    x = quat_apply(yb, root) + prep.centre[:, None]
    q, p = prep.rotations.copy(), prep.positions.copy()
    q[:, :, list(layout.joints[1:])] = rot[:, :, 1:]
    _unfold(layout, q, p, g, x)
    q = quat_normalize(q)
    q = np.where(np.sum(q * prep.rotations, -1, keepdims=True) < 0, -q, q)  # the Bezier base's sign: continuous
    known = known.astype(bool)
    q = np.where(known[..., :J, None], rotations, q)
    chain = list(layout.chain)
    pk = known[..., J:, None]  # (B, T, 1, 1) against (B, T, A+1, 3)
    p[:, :, chain] = np.where(pk, np.asarray(positions)[:, :, chain], p[:, :, chain])
    return q, p


# --- safety off the training data -----------------------------------------------------------------------------
# The network is trusted as far as the keys look like its training data. Two measured limits, stored in the
# checkpoint (``meta["safety"]``): per joint the 99.9th percentile of the angle between its local rotation and
# its mean over the training frames, and the 99.9th percentile of the root's ground speed (cm per frame at 30
# fps). A window's novelty is how far its keys go past them (0 inside; 0.5 = half as far again as the training
# extreme), and the network's residual is scaled by ``confidence = 1 - novelty / FADE`` clipped to [0, 1]:
# unlike anything trained on, the answer slides to Blender's Bezier of the same keys.
FADE = 0.5


def safety_limits(layout: BodyLayout, rotations: np.ndarray, positions: np.ndarray, bounds: np.ndarray,
                  mean: np.ndarray) -> dict:
    """The limits from training frames (N, J, 4) / (N, J, 3) with clip ``bounds`` (C, 2) and mean local rotations."""
    from motioncore.core.rotations import quat_angle

    joints = list(layout.joints[1:])
    sub = np.asarray(rotations[::7, joints], np.float64)
    ang = quat_angle(sub, np.asarray(mean, np.float64)[joints][None])
    limits = np.percentile(ang, 99.9, axis=0)
    root = np.asarray(positions[:, layout.body.root], np.float64)
    v = np.linalg.norm(np.diff(root[:, [0, 2]], axis=0), axis=-1)
    inside = np.ones(len(v), bool)
    inside[np.asarray(bounds)[:, 1][:-1] - 1] = False  # steps across clip boundaries
    return {"joints": [layout.skeleton.names[j] for j in joints], "angle_limits": limits.round(6).tolist(),
            "mean": np.asarray(mean, np.float64)[joints].round(9).tolist(),
            "speed_limit": float(np.percentile(v[inside], 99.9)), "fade": FADE,
            "note": "99.9th percentiles over the training frames: angle (rad) from the mean local rotation per "
                    "joint, root ground speed (cm per frame at 30 fps)"}


def confidence(layout: BodyLayout, safety: dict, rotations: np.ndarray, positions: np.ndarray,
               known: np.ndarray) -> np.ndarray:
    """(B,) the network's weight for windows (see ``safety_limits``): 1 inside the training range, down to 0."""
    from motioncore.core.rotations import quat_angle

    sk = layout.skeleton
    idx = [sk.index(n) for n in safety["joints"]]
    lim = np.maximum(np.asarray(safety["angle_limits"]), 1e-3)
    ang = quat_angle(np.asarray(rotations, np.float64)[:, :, idx], np.asarray(safety["mean"])[None, None])
    over = np.where(known[:, :, idx], ang / lim - 1.0, 0.0).max(axis=(1, 2))
    _, x = _fold(layout, np.asarray(rotations, np.float64), np.asarray(positions, np.float64))
    J = sk.num_joints
    speed = np.zeros(len(x))
    for b in range(len(x)):
        f = np.flatnonzero(known[b, :, J])
        if f.size > 1:
            d = np.linalg.norm(np.diff(x[b, f][:, [0, 2]], axis=0), axis=-1) / np.diff(f)
            speed[b] = d.max()
    over = np.maximum(over, speed / max(float(safety["speed_limit"]), 1e-6) - 1.0)
    return np.clip(1.0 - np.maximum(over, 0.0) / float(safety.get("fade", FADE)), 0.0, 1.0)


def run_model(model, layout: BodyLayout, rotations: np.ndarray, positions: np.ndarray, known: np.ndarray,
              batch: int = 64, confidence: np.ndarray | None = None, base: bool = False,
              contacts: list | None = None):
    """The network on windows (B, T, J, 4) / (B, T, J, 3) with ``known`` (B, T, J + 1): filled locals, keys
    exact. ``confidence`` (B,) or (B, 2) in [0, 1] scales the network's correction (the rotations' and the
    root's; 0: Blender's Bezier exactly). ``base``: also return the Bezier base the network corrected (the same
    pass: (q, p, base_q, base_p)). ``contacts``: a list that receives the model's contact probabilities (B, T, F)
    for ``layout.body.feet`` (a model without a contact output appends nothing)."""
    import torch

    from motioncore.families.body.model import assemble, basis_of

    qs, ps, bqs, bps = [], [], [], []
    for s in range(0, len(rotations), batch):
        r, p, k = rotations[s:s + batch], positions[s:s + batch], known[s:s + batch]
        prep = prepare(layout, r, p, k)
        dev = next(model.parameters()).device
        w = None
        if confidence is not None:
            c = np.asarray(confidence, np.float64)[s:s + batch]
            w = torch.as_tensor(np.stack([c, c], 1) if c.ndim == 1 else c, dtype=torch.float32, device=dev)
        with torch.no_grad():
            feats = torch.from_numpy(prep.features).to(dev)
            R6 = prep.known.shape[-1] * 6 - 3
            if w is not None and not bool(w.any()):   # weight 0 everywhere: the Bezier base, no network pass (a
                res = torch.zeros(feats.shape[:2] + (R6,), dtype=torch.float64, device=dev)  # longer gap than it takes)
            elif contacts is not None and getattr(getattr(model, "cfg", None), "contacts", 0):
                res, logits = model(feats, contacts=True)
                contacts.append(torch.sigmoid(logits).double().cpu().numpy())
            else:
                res = model(feats)
            res = res.double()   # the base assembled in float64:
            _, quats, root = assemble(torch.from_numpy(prep.exact).to(dev), res,  # weight 0 is the Bezier exactly
                                      torch.from_numpy(prep.known).to(dev), weights=w, basis=basis_of(model))
        q, pp = finish(layout, prep, quats.double().cpu().numpy(), root.double().cpu().numpy() / POS_SCALE, r, p, k)
        qs.append(q)
        ps.append(pp)
        bqs.append(prep.rotations)  # the Bezier base on the skeleton, keys exact
        bps.append(prep.positions)
    if base:
        return np.concatenate(qs), np.concatenate(ps), np.concatenate(bqs), np.concatenate(bps)
    return np.concatenate(qs), np.concatenate(ps)


def fill_body(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray,
              fill: np.ndarray | None = None, residual: float | tuple[float, float] = 1.0, base: bool = False,
              contacts: list | None = None):
    """One window on the checkpoint's skeleton, as ``infill.fill`` hands it: ``rotations`` (T, J, 4),
    ``root`` (T, 3) the local translation of ``meta["root_joint"]``, ``known`` (T, J + 1) bool. Returns the
    filled (T, J, 4), (T, 3); elements not in ``fill`` (default: every unknown one) come back as given.
    A gap longer than ``ONE_PASS`` frames is left to the Bezier (the network is not run on it). ``residual``
    scales the network's correction, one weight or (rotations, root) (0: the Bezier base itself), times the
    checkpoint's safety confidence. ``base``: also return the Bezier base (T, J, 4), (T, 3) from the same pass.
    ``contacts``: a list that receives the model's contact probabilities (T, F) of the skeleton's feet
    (``find_body_joints(...).feet``), when the model has a contact output."""
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton.from_dict(meta["skeleton"])
    layout = BodyLayout.of(sk)
    J, rj = sk.num_joints, int(meta.get("root_joint", layout.body.root))
    T = rotations.shape[0]
    pos = np.broadcast_to(sk.offsets, (T, J, 3)).copy()
    pos[:, rj] = root
    k = known.astype(bool)
    longest = longest_run(~k.all(1))
    w = np.broadcast_to(np.asarray(residual, np.float64), (2,))
    conf = np.zeros((1, 2)) if longest > ONE_PASS else w[None].copy()
    if meta.get("safety"):
        conf = conf * confidence(layout, meta["safety"], np.asarray(rotations, np.float64)[None], pos[None],
                                 k[None])[:, None]
    out: list = []
    q, p, bq, bp = run_model(model, layout, np.asarray(rotations, np.float64)[None], pos[None], k[None],
                             confidence=conf, base=True, contacts=out)
    if contacts is not None and out:
        contacts.append(out[0][0])
    q, r, bq, br = q[0], p[0, :, rj], bq[0], bp[0, :, rj]
    if fill is not None:
        keep = ~fill.astype(bool)
        q, bq = (np.where(keep[:, :J, None], rotations, a) for a in (q, bq))
        r, br = (np.where(keep[:, J:], root, a) for a in (r, br))
    return (q, r, bq, br) if base else (q, r)
