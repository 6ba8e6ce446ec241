"""The body in-fill at the clip's own rate (``infill-body`` on a clip at another rate than the checkpoint's 30 fps):
gap by gap, nothing resampled back.

For each gap, its window (the gap and ``core.gaps.context_frames`` of the scene's frames either side):

- the **base** is Blender's Bezier of the window's keys *at the clip's rate* (``prepare`` on the clip's own frames):
  what the animator's graph editor shows, so the correction's weight 0 gives it exactly;
- the network reads the window at its own rate (keys resampled, a model frame keyed where the clip frames around
  its time are) and answers at its frames;
- the **correction** is the answer minus the clip-rate base at the model frames' times, fitted per element
  (a joint's 6D, the root's position) onto the gap's smooth curves (``families.body.model.gap_basis``'s
  curves, K of them for the gap's length in model frames) with the *clip's* keys as the curves' ends, then
  **evaluated at the clip's own frames**. It vanishes at the clip's keys with zero slope: no pop at the gap's
  first and last frames, no kink every 4 frames at 120 fps.

The gate is fitted as at 30 fps (pseudo-gaps of the clip at the model's rate) and weighs the correction by the
gap's length in model frames. Frames outside the gaps come back as sent; the cost is the gaps' and the gate's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from motioncore.core.gaps import context_frames, runs
from motioncore.core.rotations import quat_continuity, quat_normalize, quat_slerp, quat_to_rot6d, rot6d_to_quat
from motioncore.core.skeleton import Skeleton
from motioncore.tasks.infill import Filled, _checked_window, at_model_rate, resample_frames

from .fill import ONE_PASS, POS_SCALE, BodyLayout, confidence, finish, prepare
from .gate import MAX_PSEUDO, Gate, bucket, fit_gate
from .model import FRAMES_PER_TERM, MAX_TERMS

__all__ = ["fill_clip_body_at_rate", "fill_body_at_rate", "gap_curves", "fit_at", "ClipGate"]


def gap_curves(s: np.ndarray, kind: str, K: int) -> np.ndarray:
    """(len(s), K) the gap curves at positions ``s`` in (0, 1]: ``closed`` (keys at s = 0 and 1)
    sin(pi s) sin(pi k s); ``open`` (a key at s = 0 only) 1 - cos(pi k s / 2)."""
    k = np.arange(1, K + 1)[None]
    s = np.asarray(s, np.float64)[:, None]
    if kind == "closed":
        return np.sin(np.pi * s) * np.sin(np.pi * k * s)
    return 1.0 - np.cos(np.pi * k * s / 2.0)


def fit_at(values: np.ndarray, at: np.ndarray, frames: np.ndarray, t0: float, t1: float, kind: str) -> np.ndarray:
    """Least squares of ``values`` (m, C) sampled at times ``at`` (m,) onto the gap curves between a key at ``t0``
    and ``t1`` (``kind`` closed; open: the curve grows from the key at t0 and t1 is the run's last frame; ``back``:
    it grows backwards from the key at t1, t0 the run's first frame), evaluated at ``frames`` (n,) -> (n, C).
    K = one curve per ``FRAMES_PER_TERM`` samples, at most ``MAX_TERMS``; no sample: zero."""
    m = len(at)
    if m == 0:
        return np.zeros((len(frames), values.shape[1]))
    K = min(m, MAX_TERMS, max(1, -(-m // FRAMES_PER_TERM)))
    if kind == "back":
        s_at, s_fr, kind = (t1 - at) / (t1 - t0), (t1 - frames) / (t1 - t0), "open"
    else:
        s_at, s_fr = (at - t0) / (t1 - t0), (frames - t0) / (t1 - t0)
    coef = np.linalg.pinv(gap_curves(s_at, kind, K)) @ values
    return gap_curves(s_fr, kind, K) @ coef


def _correction(target: np.ndarray, x: np.ndarray, known: np.ndarray, R: int) -> np.ndarray:
    """(Tc, R*6+3) the correction at the clip's frames: per element (``known`` (Tc, R + 1)) and run of its unkeyed
    clip frames, ``target`` (Tm, R*6+3) at model frames placed at clip positions ``x`` (Tm,) fitted by ``fit_at``."""
    Tc = known.shape[0]
    out = np.zeros((Tc, R * 6 + 3))
    for e in range(R + 1):
        cols = slice(e * 6, e * 6 + 6) if e < R else slice(R * 6, R * 6 + 3)
        k = known[:, e]
        if not k.any():
            continue
        for s, t in runs(~k):
            frames = np.arange(s, t, dtype=np.float64)
            if s > 0 and t < Tc:
                t0, t1, kind = s - 1.0, float(t), "closed"
                inside = (x > t0) & (x < t1)
            elif s > 0:
                t0, t1, kind = s - 1.0, t - 1.0, "open"
                inside = x > t0
            else:
                t0, t1, kind = 0.0, float(t), "back"
                inside = x < t1
            out[s:t, cols] = fit_at(target[inside, cols], x[inside], frames, t0, t1, kind)
    return out


class ClipGate(Gate):
    """The gate of a clip at its own rate: fitted at the model's, its summary also gives each bucket's gap length in
    the clip's frames (``frames``) and the clip's rate (``fps``), which the messages count in."""

    def __init__(self, fits: dict, frames: dict[int, int], fps: float) -> None:
        super().__init__(fits)
        self.frames, self.fps = frames, float(fps)

    def summary(self) -> list[dict]:
        out = super().summary()
        for (b, _), d in zip(sorted(self.fits.items()), out, strict=True):
            d.update(frames=self.frames.get(b, d["length"]), fps=self.fps)
        return out


def fill_clip_body_at_rate(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, fps: float,
                           fill: np.ndarray | None = None, n_samples: int = 1, residual: float = 1.0, gate: Any = True,
                           gate_limit: int | None = None, check: Callable[[], None] | None = None,
                           plant_feet: bool | str = True, curve: str | None = None, **_: Any) -> Filled:
    """``tasks.infill.fill_clip_at`` for ``infill-body`` at another rate than the checkpoint's (its ``fill_at`` hook
    in ``models.kinds``): the gate fitted on the clip at the model's rate (``gate`` True; a ``Gate``: those weights;
    False: none), then ``fill_body_at_rate``. One answer, repeated for every sample asked (temperature, order and
    seed do not apply); elements not filled come back bit-identical. ``plant_feet``: then the feet planted at the
    clip's rate (``families.body.fill_plant``) in the gaps whose length (in model frames) the gate, which judges it at
    the model's rate, keeps planting for; ``"judge"``: judged, not planted (a client that plants its own rig).
    ``curve``: the user's keys' interpolation, for the gate's blend from the user's curve (``fill_clip_body``)."""
    if residual == 0.0:   # weight 0 asks for the base itself: the clip-rate Bezier, unplanted
        plant_feet = False
    J = Skeleton.from_dict(meta["skeleton"]).num_joints
    q, r, keys, todo = _checked_window(rotations, root, known, fill, J)
    if gate is True:   # pseudo-gaps of the real gaps' lengths, at the model's rate
        mq, mr, mk = at_model_rate(meta, q, r, keys, fps)
        i0, i1, _ = resample_frames(len(q), fps, float(meta["fps"]))
        gate = fit_gate(model, meta, mq, mr, mk, (todo[i0] | todo[i1]) & ~mk, limit=gate_limit or MAX_PSEUDO,
                        plant=bool(plant_feet), curve=curve)
    fq, fr, bq, br, g = fill_body_at_rate(model, meta, q, r, keys, todo, fps, residual, gate, check)
    from .fill_plant import plant_filled, plant_strength

    planted = np.zeros(len(q), bool)   # the gaps whose length (in model frames) the gate plants
    strength = np.ones(len(q))   # ... and how far each plant holds there (``fill_plant.judge_plant``)
    for s, e in runs(todo.any(axis=1)):
        gap_m = max(1, int(round((e - s) * float(meta["fps"]) / fps)))
        planted[s:e] = bool(plant_feet) and (not isinstance(gate, Gate) or gate.plant(gap_m))
        strength[s:e] = plant_strength(gate if isinstance(gate, Gate) else None, gap_m)
    plant_info = None
    if planted.any() and plant_feet == "judge":   # judged only: the client plants its own rig where the gate says
        plant_info = {"frames": int(planted.sum()), "judged_only": True}
    elif planted.any():

        fq, fr, pl = plant_filled(meta, fq, fr, keys, todo & planted[:, None], fps, strength=strength)
        if pl is not None:
            plant_info = {"frames": int(planted.sum()), "contact_runs": len(pl.runs), "hips_moved": pl.hips_moved}
    keep = ~todo
    fq, bq = (np.where(keep[:, :J, None], rotations, a) for a in (fq, bq))
    fr, br = (np.where(keep[:, J:], root, a) for a in (fr, br))
    fq, fr, bq, br = (np.repeat(a[None], n_samples, 0) for a in (fq, fr, bq, br))
    return Filled(fq, fr, keys, todo, bq, br, g, plant_info)


def fill_body_at_rate(model, meta: dict, q: np.ndarray, r: np.ndarray, keys: np.ndarray, todo: np.ndarray,
                      fps: float, residual: float = 1.0, gate: Any = None, check: Callable[[], None] | None = None):
    """``q`` (T, J, 4), ``r`` (T, 3) the root joint's translation, ``keys`` and ``todo`` (T, J + 1) on the
    checkpoint's skeleton at ``fps`` (checked by the caller); ``gate`` fitted on the clip at the model's rate, or
    None -> (rotations, root, base rotations, base root, gate): each (T, ...), elements outside ``todo`` as sent."""
    import torch

    sk = Skeleton.from_dict(meta["skeleton"])
    layout = BodyLayout.of(sk)
    J, rj = sk.num_joints, int(meta.get("root_joint", layout.body.root))
    R = layout.num_model_joints
    mfps = float(meta["fps"])
    if not isinstance(gate, Gate):
        gate = None
    if gate is not None:   # its messages count the clip's own frames
        lens: dict[int, list[int]] = {}
        for s, e in runs(todo.any(axis=1)):
            lens.setdefault(bucket(max(1, int(round((e - s) * mfps / fps)))), []).append(e - s)
        gate = ClipGate(gate.fits, {b: int(np.median(v)) for b, v in lens.items()}, fps)
    out_q, out_r, base_q, base_r = q.copy(), r.copy(), q.copy(), r.copy()
    ctx = context_frames(fps)
    dev = next(model.parameters()).device
    wins: dict[int, list[dict]] = {}   # windows of one length go through prepare and the network together
    ratio = fps / mfps
    step = int(round(ratio)) if abs(ratio - round(ratio)) < 1e-6 else 0   # clip frames per model frame, if whole
    for s, e in runs(todo.any(axis=1)):
        a, b = max(0, s - ctx), min(len(q), e + ctx)
        if step > 1 and 1 < s and not keys[s - 2].all():   # a single key before the gap: on a model frame, or the
            # window at the model's rate would have no key there (dense keys survive resampling wherever it starts)
            a = max(0, (s - 1) - step * (-(-(s - 1 - a) // step)))
            if (s - 1 - a) % step:
                a = (s - 1) % step
        kw = keys[a:b].copy()
        tw = np.zeros_like(kw)
        tw[s - a:e - a] = todo[s:e]
        bare = ~kw.any(axis=0)   # a channel with no key in the window (sparse, staggered curves) stays as sent
        kw, tw = kw | bare, tw & ~bare
        if not tw.any():
            continue
        qw = quat_continuity(quat_normalize(q[a:b]), axis=0)
        pos = np.broadcast_to(sk.offsets, (b - a, J, 3)).copy()
        pos[:, rj] = r[a:b]
        i0, i1, w = resample_frames(b - a, fps, mfps)   # the window at the model's rate
        gap_m = int(round((e - s) * mfps / fps))
        wts = residual * np.asarray(gate.weights(max(1, gap_m)) if gate is not None else (1.0, 1.0), np.float64)
        wins.setdefault(b - a, []).append({
            "a": a, "b": b, "kw": kw, "tw": tw, "pos": pos, "i0": i0, "i1": i1, "w": w,
            "mq": quat_slerp(qw[i0], qw[i1], np.broadcast_to(w[:, None], (w.size, J))),
            "mpos": pos[i0] + w[:, None, None] * (pos[i1] - pos[i0]), "mk": kw[i0] & (kw[i1] | (w == 0)[:, None]),
            "wts": wts * 0.0 if gap_m > ONE_PASS else wts})
    for ws in wins.values():
        if check is not None:
            check()
        mq, mpos, mk = (np.stack([x[k] for x in ws]) for k in ("mq", "mpos", "mk"))
        wts = np.stack([x["wts"] for x in ws])   # (B, 2)
        if meta.get("safety") and wts.any():
            wts = wts * confidence(layout, meta["safety"], mq, mpos, mk)[:, None]
        prep_m = prepare(layout, mq, mpos, mk)
        cq = np.stack([q[x["a"]:x["b"]] for x in ws])
        cpos, kw = np.stack([x["pos"] for x in ws]), np.stack([x["kw"] for x in ws])
        prep_c = prepare(layout, cq, cpos, kw, frame=(prep_m.yaw, prep_m.centre))
        fq, fp = prep_c.rotations, prep_c.positions
        if wts.any():
            with torch.no_grad():
                res = model(torch.from_numpy(prep_m.features).to(dev)).double().cpu().numpy()
            B, Tc = cq.shape[:2]
            pred = np.concatenate([quat_to_rot6d(prep_m.base_rot).reshape(B, -1, R * 6),
                                   prep_m.base_root * POS_SCALE], axis=-1) + res
            base = np.concatenate([quat_to_rot6d(prep_c.base_rot).reshape(B, Tc, R * 6),
                                   prep_c.base_root * POS_SCALE], axis=-1)
            rot = np.empty(prep_c.base_rot.shape)
            root = np.empty(prep_c.base_root.shape)
            for i, x in enumerate(ws):
                i0, i1, w = x["i0"], x["i1"], x["w"]
                at_x = base[i, i0] + w[:, None] * (base[i, i1] - base[i, i0])
                corr = _correction(pred[i] - at_x, i0 + w, prep_c.known[i], R)   # model frames at clip times
                d6 = base[i, :, : R * 6] + wts[i, 0] * corr[:, : R * 6]
                root[i] = (base[i, :, R * 6:] + wts[i, 1] * corr[:, R * 6:]) / POS_SCALE
                rot[i] = np.where(prep_c.known[i][:, :R, None], prep_c.base_rot[i], rot6d_to_quat(d6.reshape(-1, R, 6)))
            fq, fp = finish(layout, prep_c, rot, root, cq, cpos, kw)
        for i, x in enumerate(ws):
            a, b, sel = x["a"], x["b"], x["tw"]
            out_q[a:b] = np.where(sel[:, :J, None], fq[i], out_q[a:b])
            out_r[a:b] = np.where(sel[:, J:], fp[i][:, rj], out_r[a:b])
            base_q[a:b] = np.where(sel[:, :J, None], prep_c.rotations[i], base_q[a:b])
            base_r[a:b] = np.where(sel[:, J:], prep_c.positions[i][:, rj], base_r[a:b])
            keep = ~todo[a:b, :J, None]
            for arr in (out_q, base_q):   # sign-continuous with the keys around, keys bit-identical
                arr[a:b] = np.where(keep, q[a:b], quat_continuity(np.where(keep, quat_normalize(q[a:b]), arr[a:b]), 0))
    return out_q, out_r, base_q, base_r, gate
