"""In-fill from arbitrary key frames: key-mask fills, the sparse-keys benchmark, and models on other skeletons.

A ``KeyFill`` takes windows (N, T, J, 4) / (N, T, J, 3) and ``known`` (N, T) bool key frames (unknown frames
may hold anything) and returns filled windows, keys unchanged. The LaFAN1 ``Fill`` of ``eval.baselines`` is
the case ``known = context + target``.

Sparse keys (``evaluate_keys``, ``motioncore eval infill --keys-every N``): on the 65-frame test windows one
pose every N frames is keyed (frames 0, N, 2N, ..., the last frame too) and nothing else, as an animator
blocking a shot; L2Q and L2P are taken over the frames between keys, NPSS over the whole window.

Models on another skeleton (``on_skeleton``): the windows are retargeted onto the model's skeleton
(``retarget.retarget``, world-space rest alignment, the model's twist convention), the model fills them
there, and its answer comes back as a *change*: for every mapped joint the world-space rotation from the
model-space Bezier of the same keys to the model's answer is applied to the window's own Bezier (quaternion
channels) of its keys, the root's path moves by the model's root change over the leg-length ratio, and the
unmapped joints keep their Bezier locals. A model that returns its Bezier returns the window's Bezier
exactly, so the mapping never adds error of its own, and the Interp and Bezier rows are scored on the data
as it is, whichever models are asked for.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from tqdm import tqdm

from motioncore.families.body.fill import bezier_fill, bezier_quats

from ..core import feet as foots
from ..core.kinematics import find_body_joints
from ..core.motion import Motion
from ..core.rotations import (
    euler_to_quat,
    quat_apply,
    quat_continuity,
    quat_inv,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_euler,
)
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from ..retarget import auto_map, own_convention, retarget
from ..retarget.core import _pairs_of, leg_scale
from .baselines import Fill
from .infill import Results, _Sums, results_of, skate_feet

__all__ = ["KeyFill", "KEY_BASELINES", "keys_every", "evaluate_keys", "keys_saved", "format_keys_saved", "on_skeleton", "lafan_fill", "key_fill"]

KeyFill = Callable[[Skeleton, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def keys_every(T: int, n: int) -> np.ndarray:
    """(T,) bool: frames 0, n, 2n, ... and the last frame."""
    k = np.zeros(T, bool)
    k[::n] = True
    k[-1] = True
    return k


def _bracket(known: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = np.flatnonzero(known)
    t = np.arange(len(known))
    nxt = idx[np.clip(np.searchsorted(idx, t), 0, idx.size - 1)]
    prv = idx[np.clip(np.searchsorted(idx, t, side="right") - 1, 0, idx.size - 1)]
    w = np.where(nxt > prv, (t - prv) / np.maximum(nxt - prv, 1), 0.0)
    return prv, nxt, w


def _shared(known: np.ndarray) -> np.ndarray:
    if not (known == known[:1]).all():
        raise MotioncoreError("these key-mask baselines need one key pattern for the whole batch")
    if not known[0].any():
        raise MotioncoreError("no key frame")
    return known[0]


def interp_keys(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
    """Interp: slerp between the keys around each frame, lerp for translations (held outside the keys)."""
    prv, nxt, w = _bracket(_shared(known))
    qq = quat_continuity(quat_normalize(np.where(known[..., None, None], q, q[:, :1])), axis=1)
    rot = quat_normalize(quat_slerp(qq[:, prv], qq[:, nxt], np.broadcast_to(w[None, :, None], qq.shape[:3])))
    pos = p[:, prv] + w[None, :, None, None] * (p[:, nxt] - p[:, prv])
    k = known[..., None, None]
    return np.where(k, q, rot), np.where(k, p, pos)


def _bezier_frames(values: np.ndarray, kf: np.ndarray) -> np.ndarray:
    """Blender's Bezier through values at the key frames, every frame: (N, T, ...) -> (N, T, ...)."""
    N, T = values.shape[:2]
    flat = values.reshape(N, T, -1)
    return bezier_fill(flat, np.broadcast_to(kf[None, :, None], flat.shape)).reshape(values.shape)


def bezier_keys(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
    """Bezier on Euler channels in each joint's BVH order, unwrapped over the keys (``eval.baselines.bezier``)."""
    kf = _shared(known)
    x = np.flatnonzero(kf)
    rot, pos = q.copy(), _bezier_frames(p, kf)
    for j in range(skeleton.num_joints):
        order = skeleton.rotation_order(j)
        eul = np.zeros(q.shape[:2] + (3,))
        eul[:, x] = np.unwrap(quat_to_euler(quat_normalize(q[:, x, j]), order), axis=1)
        qj = euler_to_quat(_bezier_frames(eul, kf), order)
        ref = quat_continuity(quat_normalize(np.where(kf[None, :, None], q[:, :, j], qj)), axis=1)
        rot[:, :, j] = np.where(np.sum(qj * ref, -1, keepdims=True) < 0, -qj, qj)
    k = known[..., None, None]
    return np.where(k, q, rot), np.where(k, p, pos)


def bezier_quat_keys(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
    """Bezier on W, X, Y, Z (sign-continuous over the keys), normalised (``eval.baselines.bezier_quat``)."""
    _shared(known)
    J = q.shape[2]
    rot = bezier_quats(np.asarray(q, np.float64), np.repeat(known[..., None], J, axis=-1))
    pos = _bezier_frames(p, known[0])
    k = known[..., None, None]
    return np.where(k, q, rot), np.where(k, p, pos)


KEY_BASELINES: dict[str, KeyFill] = {"interp": interp_keys, "bezier": bezier_keys, "bezier-quat": bezier_quat_keys}


def lafan_fill(fill: KeyFill) -> Fill:
    """A ``KeyFill`` as a LaFAN1 ``Fill`` (keys: the context and the target frame)."""
    def run(skeleton, q, p, n_past, n_trans):
        known = np.zeros(q.shape[:2], bool)
        known[:, :n_past] = True
        known[:, n_past + n_trans:] = True
        return fill(skeleton, np.nan_to_num(q), np.nan_to_num(p), known)

    return run


def key_fill(fill: Fill) -> KeyFill:
    """A LaFAN1 ``Fill`` as a ``KeyFill`` for masks of that shape (a run of context keys, one gap, keys after)."""
    def run(skeleton, q, p, known):
        k = _shared(known)
        holes = np.flatnonzero(~k)
        if holes.size == 0 or not k[:holes[0]].any() or (~k[holes[0]:holes[-1] + 1]).sum() != holes.size:
            raise MotioncoreError("this model fills one gap between context frames and a target; "
                                  "it cannot take sparse keys")
        n_past, n_trans = int(holes[0]), int(holes.size)
        qq, pp = q.copy(), p.copy()
        qq[:, n_past:n_past + n_trans] = np.nan
        pp[:, n_past:n_past + n_trans] = np.nan
        T = n_past + n_trans + 1
        oq, op = fill(skeleton, qq[:, :T], pp[:, :T], n_past, n_trans)
        out_q, out_p = q.copy(), p.copy()
        out_q[:, :T], out_p[:, :T] = oq, op
        return out_q, out_p

    return run


def on_skeleton(fill: KeyFill, model_skeleton: Skeleton, convention: np.ndarray | None = None,
                joint_map=None) -> KeyFill:
    """``fill`` (a model on ``model_skeleton``) for windows on any body skeleton (see the module doc);
    ``joint_map`` (model joint -> window joint; default ``retarget.auto_map``). Windows on a rig with the model's
    joints go to the model directly only when the rig is in its own convention (``retarget.own_convention``:
    the same rest and bone rolls, so the alignment is the identity), judged once per rig on the keys of the
    first windows it sees; a rig with other rest frames or rolls (a re-export) goes through the same rest
    alignment as any mapped rig."""
    own: list[tuple[Skeleton, bool]] = []   # (rig, in the model's own convention), decided on its first windows

    def run(skeleton, q, p, known):
        if skeleton.same_topology(model_skeleton):
            seen = next((o for s, o in own if s is skeleton), None)
            if seen is None:
                seen = own_convention(skeleton, model_skeleton, convention, np.asarray(q)[np.asarray(known, bool)])
                own.append((skeleton, seen))
            if seen:
                return fill(skeleton, q, p, known)
        return _transfer(fill, model_skeleton, convention, skeleton, q, p, known, joint_map)

    return run


def pairs_by_name(joint_map) -> dict[str, str]:
    return joint_map.pairs if hasattr(joint_map, "pairs") else dict(joint_map)


def _transfer(fill: KeyFill, msk: Skeleton, conv, sk: Skeleton, q, p, known, joint_map=None):
    bq, bp = bezier_quat_keys(sk, q, p, known)  # the window's own Bezier
    if joint_map is None:   # the body read from the windows' frames (`retarget.topology`), not the rest pose
        flat_q, flat_p = bq.reshape(-1, *bq.shape[-2:]), bp.reshape(-1, *bp.shape[-2:])
        idx = np.unique(np.linspace(0, len(flat_q) - 1, min(64, len(flat_q))).astype(np.int64))
        joint_map = auto_map(sk, msk, source_poses=sk.forward_kinematics(flat_q[idx], flat_p[idx])[1])
    jm = joint_map
    pairs = _pairs_of(jm, sk, msk)  # model joint -> window joint
    k = leg_scale(sk, msk, jm)
    hips = getattr(jm, "roles", {}).get("hips")
    if hips in pairs_by_name(jm):   # the body's hips, whatever their name
        sroot, mroot = sk.index(pairs_by_name(jm)[hips]), msk.index(hips)
    else:
        sroot, mroot = find_body_joints(sk).root, find_body_joints(msk).root
    N, T = q.shape[:2]  # every frame is retargeted on its own: the windows go through as one clip
    m = retarget(Motion(sk, bq.reshape(N * T, *bq.shape[2:]), bp.reshape(N * T, *bp.shape[2:]), 30.0, ""), msk, jm,
                 convention=conv)
    mq = m.rotations.reshape(N, T, *m.rotations.shape[1:])
    mp = m.positions.reshape(N, T, *m.positions.shape[1:])
    base_q, base_p = bezier_quat_keys(msk, mq, mp, known)  # what the model returns untrained
    out_q, out_p = fill(msk, mq, mp, known)
    cols = np.flatnonzero((~np.asarray(known, bool)).any(0))   # the frames filled in some window: the change is
    if cols.size < T:   # per frame, so a long clip with a few gaps carries it over those frames only
        sub = _transfer_frames(base_q[:, cols], base_p[:, cols], out_q[:, cols], out_p[:, cols], bq[:, cols],
                               bp[:, cols], msk, sk, pairs, k, sroot, mroot)
        rq, rp = np.array(q, np.float64, copy=True), np.array(p, np.float64, copy=True)
        kk = known[:, cols, None, None]
        rq[:, cols] = np.where(kk, q[:, cols], sub[0])
        rp[:, cols] = np.where(kk, p[:, cols], sub[1])
        return rq, rp
    loc, pos = _transfer_frames(base_q, base_p, out_q, out_p, bq, bp, msk, sk, pairs, k, sroot, mroot)
    kk = known[..., None, None]
    return np.where(kk, q, loc), np.where(kk, p, pos)


def _transfer_frames(base_q, base_p, out_q, out_p, bq, bp, msk: Skeleton, sk: Skeleton, pairs, k, sroot: int,
                     mroot: int):
    """The model's change (answer over its Bezier base) carried onto the window's own Bezier, frame by frame."""
    gb, pb = msk.forward_kinematics(base_q, base_p)
    go, po = msk.forward_kinematics(out_q, out_p)
    gs, _ = sk.forward_kinematics(bq, bp)
    delta = {pairs[j]: quat_mul(go[:, :, j], quat_inv(gb[:, :, j])) for j in pairs}
    g = np.empty_like(gs)
    loc = bq.copy()
    for i in range(sk.num_joints):
        par = int(sk.parents[i])
        if i in delta:
            g[:, :, i] = quat_mul(delta[i], gs[:, :, i])
            loc[:, :, i] = g[:, :, i] if par < 0 else quat_mul(quat_inv(g[:, :, par]), g[:, :, i])
        else:
            g[:, :, i] = bq[:, :, i] if par < 0 else quat_mul(g[:, :, par], bq[:, :, i])
    loc = quat_normalize(loc)
    loc = np.where(np.sum(loc * bq, -1, keepdims=True) < 0, -loc, loc)
    move = (po[:, :, mroot] - pb[:, :, mroot]) / k  # world change of the root's path
    pos = bp.copy()
    par = int(sk.parents[sroot])
    if par >= 0:
        gpar, _ = sk.forward_kinematics(loc, pos)
        move = quat_apply(quat_inv(gpar[:, :, par]), move)
    pos[:, :, sroot] = bp[:, :, sroot] + move
    return loc, pos


def evaluate_keys(models: Mapping[str, KeyFill], skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray,
                  x_mean: np.ndarray, x_std: np.ndarray, every: Iterable[int] = (8, 16), progress: bool = True,
                  batch_size: int = 128, fps: float = 30.0, feet: list[int] | None = None) -> Results:
    """Sparse-keys benchmark: ``{model: {"L2Q" | "L2P" | "NPSS": {str(N): value}}}`` (the layout of
    ``evaluate_infill``, keyed by N instead of the gap length); jerk and foot skate ("Skate", over the truth's
    on each window's own ground, ``feet`` as ``evaluate_infill``) over the whole window."""
    rotations = quat_continuity(np.asarray(rotations, np.float64), axis=1)
    positions = np.asarray(positions, np.float64)
    N, T = rotations.shape[:2]
    every = tuple(int(n) for n in every)
    if min(every) < 2 or max(every) >= T:
        raise MotioncoreError(f"--keys-every: expected 2 <= N < {T}, got {every}")
    sums = {(m, n): _Sums() for m in models for n in every}
    starts = range(0, N, batch_size)
    feet = skate_feet(skeleton, rotations, positions) if feet is None else list(feet)
    with tqdm(total=len(every) * len(starts), desc="sparse keys", unit="batch", disable=not progress) as bar:
        for n in every:
            kf = keys_every(T, n)
            for s in starts:
                q, p = rotations[s:s + batch_size], positions[s:s + batch_size]
                known = np.broadcast_to(kf, q.shape[:2]).copy()
                gq, gp = skeleton.forward_kinematics(q, p)
                for name, fill in models.items():
                    oq, op = fill(skeleton, q, p, known)
                    ws = getattr(fill, "weights", None)
                    if ws:  # the body model's correction weights per window
                        w = np.concatenate(ws)
                        ws.clear()
                        sums[name, n].weight += float(w.sum())
                        sums[name, n].weighted += int(w.size)
                    if not (np.isfinite(oq).all() and np.isfinite(op).all()):
                        raise MotioncoreError(f"model {name!r} returned non-finite values")
                    pq, pp = skeleton.forward_kinematics(np.asarray(oq, np.float64), np.asarray(op, np.float64))
                    h = ~kf   # L2Q and L2P between the keys, NPSS over the whole window
                    sums[name, n].add(pq[:, h], gq[:, h], pp[:, h], gp[:, h], x_mean, x_std, npss_on=(pq, gq))
                    sums[name, n].add_jerk(pp, gp)  # the whole window: every gap with its keys either side
                    if feet:
                        g = foots.ground(gp, feet)
                        sums[name, n].add_skate(pp, gp, g, fps, feet)
                        toes = feet[1::2] if len(feet) == 4 else feet
                        sums[name, n].add_gmd(pp, gp, np.arange(T), g[:, [feet.index(j) for j in toes]], fps, toes)
                bar.update(1)
    return results_of(models, sums)


def keys_saved(results: Results, reference: str = "bezier", at: int = 8) -> dict[str, dict]:
    """How many fewer keys each model needs for the reference's quality: per model, the sparsest spacing N among
    those measured whose L2Q is at or below ``reference``'s with a key every ``at`` frames: {"every": N,
    "fewer_keys": N / at, "l2q": its L2Q, "reference_l2q": the reference's}; N is None when even the densest
    spacing measured is worse. Empty when the reference or spacing ``at`` was not measured."""
    ref = results.get(reference, {}).get("L2Q", {}).get(str(at))
    if ref is None:
        return {}
    out = {}
    for name, per in results.items():
        l2q = per.get("L2Q", {})
        ok = [int(n) for n, v in l2q.items() if v <= ref]
        n = max(ok, default=None)
        out[name] = {"every": n, "fewer_keys": None if n is None else n / at,
                     "l2q": None if n is None else l2q[str(n)], "reference_l2q": ref}
    return out


def format_keys_saved(saved: dict[str, dict], reference: str = "bezier", at: int = 8) -> str:
    """One line per model: the keys it saves against the reference keyed every ``at`` frames."""
    if not saved:
        return (f"keys saved: not measured (needs --model {reference} and --keys-every {at})")
    lines = []
    for name, s in saved.items():
        if name == reference:
            continue
        if s["every"] is None:
            lines.append(f"keys saved: {name} never reaches {reference}'s L2Q with a key every {at} frames "
                         f"({s['reference_l2q']:.3f}) at the spacings measured")
        else:
            lines.append(f"keys saved: {name} with a key every {s['every']} frames (L2Q {s['l2q']:.3f}) is at or "
                         f"below {reference} with a key every {at} ({s['reference_l2q']:.3f}): "
                         f"{s['fewer_keys']:.2f}x fewer keys")
    return "\n".join(lines)
