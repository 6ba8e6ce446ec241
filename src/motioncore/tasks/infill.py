"""In-fill a clip around keys with an in-filling checkpoint (the body and hands in-fill models, ``infill-body`` and
``infill-hands``, through their family's ``fill`` hook; an any-order checkpoint here): the call behind the
server's ``infill``, the batch in-fill job and the Blender add-on.

``fill_clip(model, meta, rotations, root, known)`` takes a clip on the checkpoint's skeleton:

- ``rotations`` (T, J, 4) local unit quaternions WXYZ, ``root`` (T, 3) the local translation of the
  checkpoint's ``root_joint`` (Hips for the Bandai body, the wrist for hands); every other joint keeps
  its rest offset;
- ``known`` (T,) bool whole-frame keys, or (T, J + 1) bool per element (channel J is the root
  translation). Unknown values are never read (they may be anything finite).

and returns ``n_samples`` completions ``(S, T, J, 4)`` and ``(S, T, 3)``. Known elements come back
bit-identical to the input.

``object_track=(rotations (T, 4), positions (T, 3))`` (optional; hands): the manipulated object's pose at
every frame, in the space of the root joint's translation (the wrist's parent space). A checkpoint
trained with the object (``cfg.cond_dim``) sees it in the wrist frame (``data.hand_object``; where the
wrist is not keyed, its provisional per-channel interpolation is used); without it, or for other
checkpoints, it is ignored and the model fills as with no object.

The model was trained on LaFAN1-style windows (facing +Z at the last context frame, centred on the mean
ground position of the root). The clip is moved the same way before sampling and back after: the yaw
comes from the last frame of the first run of frames with the root and the facing joints' ancestors keyed
(a fully keyed frame, or for missing joints any frame), and the centre from the mean of a
provisional per-channel interpolation of the root (the unknown frames' own values are never used).
The move is rigid and applied to joint 0, so keys are unchanged by the round trip.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.gaps import gap_windows, is_whole_frames
from ..core.rotations import quat_apply, quat_conj, quat_continuity, quat_mul, quat_normalize, quat_slerp
from ..errors import MotioncoreError, ShapeError, WholeFramesError
from ..models.kinds import hook, spec

__all__ = ["fill_clip", "fill_clip_at", "at_model_rate", "fill_joints", "Filled", "interp_channels", "mirror_x", "resample_frames"]


def _bracket(known: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a (T,) key mask: previous key, next key and the blend weight per frame (held outside)."""
    T = len(known)
    idx = np.flatnonzero(known)
    if idx.size == 0:
        raise MotioncoreError("a channel has no key to interpolate from")
    t = np.arange(T)
    nxt = idx[np.clip(np.searchsorted(idx, t), 0, idx.size - 1)]
    prv = idx[np.clip(np.searchsorted(idx, t, side="right") - 1, 0, idx.size - 1)]
    prv = np.where(prv > t, nxt, prv)
    nxt = np.where(nxt < t, prv, nxt)
    w = np.where(nxt > prv, (t - prv) / np.maximum(nxt - prv, 1), 0.0)
    return prv, nxt, w


def interp_channels(q: np.ndarray, root: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Interp for per-channel keys: q (N, T, J, 4), root (N, T, 3), keys (T, J + 1) -> filled copies."""
    q, root = q.copy(), root.copy()
    J = q.shape[2]
    for j in range(J + 1):
        prv, nxt, w = _bracket(keys[:, j])
        if j < J:
            q[:, :, j] = quat_slerp(q[:, prv, j], q[:, nxt, j], np.broadcast_to(w, q.shape[:2]))
        else:
            root[:] = root[:, prv] + w[None, :, None] * (root[:, nxt] - root[:, prv])
    return q, root


@dataclass(frozen=True)
class Filled:
    rotations: np.ndarray  # (S, T, J, 4) local unit quaternions WXYZ
    root: np.ndarray  # (S, T, 3) local translation of the checkpoint's root joint
    known: np.ndarray  # (T, J + 1) the keys used
    filled: np.ndarray  # (T, J + 1) the elements filled
    base_rotations: np.ndarray | None = None  # (S, T, J, 4) infill-body: the Bezier base it corrected
    base_root: np.ndarray | None = None  # (S, T, 3)
    gate: Any = None  # infill-body: the request-time gate (``families.body.gate.Gate``) or None
    plant: dict | None = None  # infill-body: what planting the feet did (``families.body.fill_plant``), None when off


def _known_mask(known: np.ndarray, T: int, J: int) -> np.ndarray:
    known = np.asarray(known)
    if known.dtype != bool:
        raise ShapeError(f"known: expected a bool mask, got dtype {known.dtype}")
    if known.shape == (T,):
        return np.repeat(known[:, None], J + 1, 1)
    if known.shape == (T, J + 1):
        return known.copy()
    raise ShapeError(f"known: expected ({T},) or ({T}, {J + 1}), got {known.shape}")


def fill_clip(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray,
              order: str = "bisection", temperature: float = 0.0, n_samples: int = 1, seed: int = 0,
              k: int | None = None, check: Callable[[], None] | None = None,
              fill: np.ndarray | None = None, window: int | None = 80,
              object_track: tuple[np.ndarray, np.ndarray] | None = None, residual: float = 1.0,
              gate: Any = True, gate_limit: int | None = None, learn: float | None = None,
              plant_feet: bool | str = True, curve: str | None = None, donor: bool = False) -> Filled:
    """See the module docstring. ``residual`` (deterministic ``infill-body`` and ``infill-hands`` only; for hands
    also the gate's {gap length: weight}): the weight of the network's correction; 0 gives its base, Blender's
    Bezier of the keys, exactly as the model sees them. ``gate`` (``infill-body`` only): True fits the
    correction's weights on pseudo-gaps cut from this clip's own keys (``families.body.gate``; on up to
    ``gate_limit`` pseudo-gaps per length), a ``Gate`` uses those weights, False uses the network as trained.
    ``plant_feet`` (``infill-body`` only): plant the feet in contact by IK on the legs (``families.body.fill_plant``; the
    gate turns it off for a gap length where its pseudo-gaps say it costs error); ``"judge"``: the gate judges it
    but the feet are left as filled (a client that plants its own rig, as the add-on). ``curve`` (``infill-body``
    only): the user's keys' interpolation, for the gate's blend from the curve they have
    (``families.body.gate_curve``). ``donor`` (``infill-body`` only): the clip's own keyed motion offered per gap
    beside the network, the gate choosing (``families.body.donor``). ``learn`` (``infill-hands``
    only): seconds of learning on pseudo-gaps from the clip's fully keyed frames (0:
    the request-time gate alone; ``families.hands.gate.learn_and_fill``). ``fill`` (T,) or (T, J + 1) bool: the
    elements to fill (default every
    unknown one; others keep their input values); ``k`` elements per decoding step (default one frame's
    worth: 1 for a grouped-frame model, J + 1 otherwise); ``check`` is called between samples
    (cancellation). A clip longer than ``window`` frames is filled gap by gap, each gap in its own window
    with up to CONTEXT frames on either side, moved like a training window: the model never sees a root
    metres away from its training windows' (None: one window, whatever the length)."""
    q = np.asarray(rotations, np.float64)
    T = q.shape[0] if q.ndim == 3 else 0
    kind = spec(meta)
    if kind is not None and kind.fill is not None:  # a deterministic family fills the whole clip its own way
        return hook(kind.fill)(model, meta, rotations, root, known, n_samples=n_samples, fill=fill,
                               residual=residual, gate=gate, gate_limit=gate_limit, check=check,
                               object_track=object_track, learn=learn, plant_feet=plant_feet,
                               **({"curve": curve} if curve else {}), **({"donor": True} if donor else {}))
    if window is None or T <= window or q.ndim != 3:
        return _fill_window(model, meta, rotations, root, known, order, temperature, n_samples, seed, k, check, fill,
                            object_track, residual)
    J = q.shape[1]
    keys = _known_mask(known, T, J)
    todo = ~keys if fill is None else _known_mask(fill, T, J)
    frames = todo.any(1)
    if not frames.any():
        raise MotioncoreError("fill: nothing to fill")
    r = np.asarray(root, np.float64)
    out_q = np.repeat(q[None], n_samples, 0)
    out_r = np.repeat(r[None], n_samples, 0)
    for i, (s, e, a, b) in enumerate(gap_windows(frames)):  # each gap in its own window (core.gaps)
        sel = np.zeros((b - a, J + 1), bool)
        sel[s - a:e - a] = todo[s:e]
        ot = None if object_track is None else (np.asarray(object_track[0])[a:b], np.asarray(object_track[1])[a:b])
        w = _fill_window(model, meta, q[a:b], r[a:b], keys[a:b], order, temperature, n_samples, seed + 7919 * i, k,
                         check, sel, ot, residual)
        out_q[:, a:b] = np.where(sel[None, :, :J, None], w.rotations, out_q[:, a:b])
        out_r[:, a:b] = np.where(sel[None, :, J:], w.root, out_r[:, a:b])
    out_q = quat_continuity(np.where(~todo[None, :, :J, None], quat_normalize(q)[None], out_q), axis=1)
    out_q = np.where(~todo[None, :, :J, None], q[None], out_q)  # untouched elements bit-identical
    return Filled(out_q, out_r, keys, todo)


def resample_frames(n_frames: int, fps_from: float, fps_to: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames at ``fps_to`` covering a clip of ``n_frames`` at ``fps_from``: (i0, i1, w) per new frame, the
    clip frames around its time and the blend weight (w = 0 exactly on a clip frame). The last new frame
    reaches the clip's end (held there when the durations do not divide)."""
    if n_frames < 1 or fps_from <= 0 or fps_to <= 0:
        raise MotioncoreError(f"resampling needs frames and positive rates, got {n_frames}, {fps_from}, {fps_to}")
    dur = (n_frames - 1) / fps_from
    m = int(np.ceil(dur * fps_to - 1e-6)) + 1
    x = np.minimum(np.arange(m) * (fps_from / fps_to), n_frames - 1)   # new frame times in clip frames
    i0 = np.minimum(np.floor(x + 1e-6).astype(np.int64), n_frames - 1)
    w = np.where(np.abs(x - i0) < 1e-6, 0.0, x - i0)
    return i0, np.minimum(i0 + 1, n_frames - 1), w


def mirror_x(rotations: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mirror image across the YZ plane (x -> -x) of local rotations (..., 4) WXYZ and translations
    (..., 3), joints unchanged (``kinematics.mirror`` without the left/right swap): a ManipNet left hand is the
    exact mirror image of the right one (same joint names, offsets with x negated). Its own inverse, exactly
    (sign flips only)."""
    return (np.asarray(rotations, np.float64) * np.array([1.0, 1.0, -1.0, -1.0]),
            np.asarray(positions, np.float64) * np.array([-1.0, 1.0, 1.0]))


def fill_clip_at(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray,
                 fps: float | None, fill: np.ndarray | None = None, mirror: bool = False, **kw) -> Filled:
    """:func:`fill_clip` for a clip at ``fps`` frames per second (None: the checkpoint's rate). The clip goes
    to the checkpoint's rate (``meta["fps"]``) and back: a model frame is known where the clip's frames
    around its time are both known (its value interpolated between them: slerp, lerp for the root), the
    model fills the rest, and each clip element to fill is interpolated between the model frames around its
    time. Elements not filled come back bit-identical, so the motion is the same in seconds whatever the
    scene's rate. A family with a ``fill_at`` hook (``models.kinds``; ``infill-body``: ``families.body.fill_rate``)
    fills a clip faster than the checkpoint (60, 120 fps) at its own rate instead: nothing is resampled back. A
    slower one (a 24 fps scene) still goes through the model's rate: its gate is fitted there, and the own-rate
    fill it did not judge was worse than Blender's curve on short gaps (docs/infill.md).

    ``mirror``: the clip is the mirror image of the checkpoint's skeleton (a left hand for the right-hand
    ``anyorder-hands``): it is mirrored (:func:`mirror_x`, the ``object_track`` too) before the model and the
    result mirrored back, so the keys still come back bit-identical."""
    if mirror:
        q_m, r_m = mirror_x(rotations, root)
        if kw.get("object_track") is not None:
            kw["object_track"] = mirror_x(*kw["object_track"])
        out = fill_clip_at(model, meta, q_m, r_m, known, fps, fill=fill, **kw)
        fq, fr = mirror_x(out.rotations, out.root)
        bq, br = (None, None) if out.base_rotations is None else mirror_x(out.base_rotations, out.base_root)
        return Filled(fq, fr, out.known, out.filled, bq, br, out.gate, out.plant)
    q_in = np.asarray(rotations, np.float64)
    mfps = float(meta.get("fps") or 0.0)
    if fps is None or not mfps or abs(float(fps) - mfps) < 1e-9 or q_in.ndim != 3:
        return fill_clip(model, meta, rotations, root, known, fill=fill, **kw)
    kind = spec(meta)
    T, J = q_in.shape[:2]
    r_in = np.asarray(root, np.float64)
    keys = _known_mask(known, T, J)
    todo = ~keys if fill is None else _known_mask(fill, T, J)
    blocked = float(fps) > mfps and blocked_on_model_frames(keys, todo, float(fps), mfps)
    if kind is not None and kind.fill_at is not None and float(fps) > mfps and not blocked:
        # a family that fills at the clip's own rate (blocking whose keys fall on the model's frames is filled at the
        # model's rate, where runs of gaps share one curve, and its change brought back smoothly)
        return hook(kind.fill_at)(model, meta, rotations, root, known, float(fps), fill=fill, **kw)
    q = quat_continuity(quat_normalize(q_in), axis=0)
    mq, mr, mk = at_model_rate(meta, q_in, r_in, keys, fps)
    i0, i1, w = resample_frames(T, float(fps), mfps)
    mfill = ~mk if fill is None else (todo[i0] | todo[i1]) & ~mk
    if kw.get("object_track") is not None:  # the object at the model's rate too
        oq = quat_continuity(quat_normalize(np.asarray(kw["object_track"][0], np.float64)), axis=0)
        op = np.asarray(kw["object_track"][1], np.float64)
        kw["object_track"] = (quat_slerp(oq[i0], oq[i1], w), op[i0] + w[:, None] * (op[i1] - op[i0]))
    out = fill_clip(model, meta, mq, mr, mk, fill=None if fill is None else mfill, **kw)
    S = out.rotations.shape[0]
    b0, b1, v = resample_frames(mq.shape[0], mfps, float(fps))    # back: clip frames from model frames
    b0, b1, v = b0[:T], b1[:T], np.pad(v, (0, max(0, T - v.size)))[:T]
    if b0.size < T:   # the model's frames end before the clip's last frame: hold the last one
        b0, b1 = np.pad(b0, (0, T - b0.size), mode="edge"), np.pad(b1, (0, T - b1.size), mode="edge")

    def back(rots: np.ndarray, root: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fq = quat_slerp(rots[:, b0], rots[:, b1], np.broadcast_to(v[None, :, None], (S, T, J)))
        fr = root[:, b0] + v[None, :, None] * (root[:, b1] - root[:, b0])
        fq = quat_continuity(np.where(~todo[None, :, :J, None], q[None], fq), axis=1)
        fq = np.where(~todo[None, :, :J, None], q_in[None], fq)
        return fq, np.where(~todo[None, :, J:], r_in[None], fr)

    if blocked and out.base_rotations is not None and out.base_root is not None:
        fq, fr, bq, br = _smooth_back(meta, q_in, r_in, keys, todo, out, float(fps), mfps)
        return Filled(fq, fr, keys, todo, bq, br, out.gate, out.plant)
    fq, fr = back(out.rotations, out.root)
    bq = br = None
    if out.base_rotations is not None and out.base_root is not None:
        bq, br = back(out.base_rotations, out.base_root)
    return Filled(fq, fr, keys, todo, bq, br, out.gate, out.plant)


def blocked_on_model_frames(keys: np.ndarray, todo: np.ndarray, fps: float, mfps: float) -> bool:
    """Whether a clip faster than the model (``fps`` a whole multiple of ``mfps``) is blocked: it has single keys
    (a keyed frame with a filled one on either side) and every one of them falls on a model frame, so the keys
    survive the model's rate exactly."""
    ratio = fps / mfps
    step = int(round(ratio))
    if step < 2 or abs(ratio - step) > 1e-6:
        return False
    k = np.asarray(keys, bool).all(axis=1)
    t = np.asarray(todo, bool).any(axis=1)
    before, after = np.r_[False, t[:-1]], np.r_[t[1:], False]
    single = np.flatnonzero(k & before & after)
    return bool(single.size) and bool(np.all(single % step == 0))


def _smooth_back(meta: dict, q_in: np.ndarray, r_in: np.ndarray, keys: np.ndarray, todo: np.ndarray, out: Filled,
                 fps: float, mfps: float) -> tuple[np.ndarray, ...]:
    """A fill made at the model's rate brought back to the clip's: the model's change over its Bezier base (per joint
    ``answer * base^-1`` as a rotation vector, the root's offset) is a smooth curve through zero at the keys;
    it is carried to the clip's frames by a cubic spline and applied to the clip-rate Bezier of the same keys
    (Blender's curve is the same in seconds at either rate). Keys come back bit-identical."""
    from scipy.interpolate import CubicSpline
    from scipy.spatial.transform import Rotation

    from ..families.body.fill import bezier_fill, bezier_quats

    T, J = q_in.shape[:2]
    k = np.asarray(keys, bool)
    q = quat_continuity(quat_normalize(q_in), axis=0)
    bq = bezier_quats(q[None], k[None, :, :J])[0]
    br = bezier_fill(r_in[None], np.repeat(k[None, :, J:], 3, axis=-1))[0]
    S, Tm = out.rotations.shape[:2]
    tm = np.arange(Tm) * (fps / mfps)   # model frames in clip frames
    tc = np.arange(T, dtype=np.float64)

    def xyzw(a):
        return np.concatenate([a[..., 1:], a[..., :1]], -1)

    outs_q, outs_r = [], []
    for i in range(S):
        d = quat_mul(out.rotations[i], quat_conj(out.base_rotations[i]))   # (Tm, J, 4)
        rv = Rotation.from_quat(xyzw(quat_normalize(d)).reshape(-1, 4)).as_rotvec().reshape(Tm, J, 3)
        rv_c = CubicSpline(tm, rv, axis=0)(np.clip(tc, 0, tm[-1]))
        dq = Rotation.from_rotvec(rv_c.reshape(-1, 3)).as_quat().reshape(T, J, 4)
        dq = np.concatenate([dq[..., 3:], dq[..., :3]], -1)
        fq = quat_normalize(quat_mul(dq, bq))
        dr = CubicSpline(tm, out.root[i] - out.base_root[i], axis=0)(np.clip(tc, 0, tm[-1]))
        fr = br + dr
        fq = quat_continuity(np.where(~todo[:, :J, None], q, fq), axis=0)
        outs_q.append(np.where(~todo[:, :J, None], q_in, fq))
        outs_r.append(np.where(~todo[:, J:], r_in, fr))
    base_q = np.where(~todo[:, :J, None], q_in, quat_continuity(np.where(~todo[:, :J, None], q, bq), axis=0))
    base_r = np.where(~todo[:, J:], r_in, br)
    return (np.stack(outs_q), np.stack(outs_r), np.repeat(base_q[None], S, 0), np.repeat(base_r[None], S, 0))


def at_model_rate(meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, fps: float | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A clip at ``fps`` on the checkpoint's skeleton, at the checkpoint's rate (``fill_clip_at``'s first half):
    rotations (slerp), root (lerp) and keys (T', J + 1) (a model frame is keyed where the clip frames around it
    both are)."""
    q = quat_continuity(quat_normalize(np.asarray(rotations, np.float64)), axis=0)
    r = np.asarray(root, np.float64)
    T, J = q.shape[:2]
    keys = _known_mask(np.asarray(keys), T, J)
    mfps = float(meta.get("fps") or 0.0)
    if fps is None or not mfps or abs(float(fps) - mfps) < 1e-9:
        return q, r, keys
    i0, i1, w = resample_frames(T, float(fps), mfps)
    mq = quat_slerp(q[i0], q[i1], np.broadcast_to(w[:, None], (w.size, J)))
    return mq, r[i0] + w[:, None] * (r[i1] - r[i0]), keys[i0] & (keys[i1] | (w == 0)[:, None])


def fill_joints(model, meta: dict, rotations: np.ndarray, root: np.ndarray, missing: np.ndarray,
                window: int = 30, overlap: int = 6, check: Callable[[], None] | None = None) -> np.ndarray:
    """(T, J, 4) ``rotations`` with the joints marked in ``missing`` (J,) filled on every frame from the
    other joints (a capture or a retarget that lacks them), by a per-element checkpoint. The clip is
    filled in windows of ``window`` frames (the training length), left to right; each window after the
    first also keeps its first ``overlap`` frames of the missing joints from the window before as keys,
    so the joints move on continuously. Other joints and the root come back bit-identical."""
    if getattr(model.cfg, "group_frames", False):
        raise MotioncoreError("missing joints need a per-element checkpoint (such as anyorder-hands); this one "
                              "fills whole frames (group_frames)")
    q = np.asarray(rotations, np.float64).copy()
    T, J = q.shape[:2]
    miss = np.asarray(missing, bool)
    if miss.shape != (J,) or not miss.any() or miss.all():
        raise ShapeError(f"missing: expected ({J},) bool with some but not all joints, got {miss.shape}")
    if window <= overlap or overlap < 0:
        raise MotioncoreError(f"window ({window}) must exceed overlap ({overlap}) >= 0")
    start = 0
    while start < T:
        a, b = max(0, start - overlap), min(T, start + window - overlap)
        if b - a < 2:
            a = max(0, b - 2)
        known = np.ones((b - a, J + 1), bool)
        known[start - a:, :J][:, miss] = False          # the overlap frames (before start) are keys
        if known.all():
            break
        if check is not None:
            check()
        f = _fill_window(model, meta, q[a:b], root[a:b], known, "bisection", 0.0, 1, 0, None, None, None)
        q[start:b, miss] = f.rotations[0][start - a:][:, miss]
        start = b
    return q


def _fill_window(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, order: str,
                 temperature: float, n_samples: int, seed: int, k: int | None, check: Callable[[], None] | None,
                 fill: np.ndarray | None, object_track: tuple[np.ndarray, np.ndarray] | None = None,
                 residual: float = 1.0) -> Filled:
    """fill_clip on one window (the whole clip as given), for a sampling model."""
    import torch

    from motioncore.families.anyorder.model_elements import (
        body_joints,
        elements_to_motion,
        group_channels,
        to_elements,
        ungroup_channels,
    )
    from motioncore.families.anyorder.model_sampling import sample

    from ..core.kinematics import facing_directions, yaw_quat
    from ..core.skeleton import Skeleton

    sk = Skeleton.from_dict(meta["skeleton"])
    J, rj = sk.num_joints, int(meta["root_joint"])
    cfg = model.cfg
    q, r, keys, todo = _checked_window(rotations, root, known, fill, J)
    T = q.shape[0]
    if not todo.any():
        raise MotioncoreError("fill: nothing to fill")
    if cfg.group_frames and not is_whole_frames(keys, todo):
        raise WholeFramesError("this checkpoint fills whole frames (group_frames): key every joint and the root "
                              "on a keyed frame, or use a per-element checkpoint for partial keys")
    body = body_joints(sk)
    needed: set[int] = set()   # the rotations the placement reads: the facing joints' ancestors (a joint's
    for j in (body.root, *body.hips):   # position depends on its ancestors' rotations, not its own)
        j = int(sk.parents[j])
        while j >= 0 and j not in needed:
            needed.add(j)
            j = int(sk.parents[j])
    placed = keys[:, sorted(needed)].all(1) & keys[:, J]
    if not placed.any():
        raise MotioncoreError("known: at least one frame with the root and the joints that give the facing "
                              f"({', '.join(sk.names[j] for j in sorted(needed))}) keyed is needed to place "
                              "the character")
    q_in, q = q, quat_normalize(q)
    # provisional per-channel interpolation (channels without keys keep their input) for the centre
    have = keys.any(0)
    pq, pr = q[None].copy(), r[None].copy()
    if have.all():
        pq, pr = interp_channels(pq, pr, keys)
    elif have[J]:
        _, pr = interp_channels(pq[:, :, :1], pr, np.stack([keys[:, J], keys[:, J]], 1))
    pos = np.broadcast_to(np.asarray(sk.offsets, np.float64), (1, T, J, 3)).copy()
    pos[0, :, rj] = pr[0]
    first = int(np.argmax(placed))
    face = first + int(np.argmin(placed[first:])) - 1 if not placed[first:].all() else T - 1  # last of the run
    _, gp = sk.forward_kinematics(pq, pos)
    fwd = facing_directions(gp[:, face], body)
    yaw = yaw_quat(-np.arctan2(fwd[:, 0], fwd[:, 2]))[0]  # (4,)
    centre = (gp[0, :, body.root] * np.array([1.0, 0.0, 1.0])).mean(0)
    # move joint 0 like kinematics.reframe: rotation yaw * q0, translation yaw (p0 - centre)
    mq = q.copy()
    mq[:, 0] = quat_mul(yaw, q[:, 0])
    mpos = np.broadcast_to(np.asarray(sk.offsets, np.float64), (T, J, 3)).copy()
    mpos[:, rj] = r
    mpos[:, 0] = quat_apply(yaw, mpos[:, 0] - centre)
    grid = to_elements(mq[None], mpos[None], meta["root_norm"], rj)[0]  # (T, J + 1, 6) float32
    mask, to_fill = torch.as_tensor(keys), torch.as_tensor(todo)
    if cfg.group_frames:
        grid = group_channels(cfg, grid[None])[0]
        mask, to_fill = mask.all(1, keepdim=True), to_fill.all(1, keepdim=True)
    param = next(model.parameters())
    step = int(k) if k else cfg.grid_channels
    frame_cond = None
    if object_track is not None and getattr(cfg, "cond_dim", 0) and "cond" in meta and rj == 0:
        from ..data.hand_object import normalise_cond, object_features

        oq, op = (np.asarray(a, np.float64) for a in object_track)
        if oq.shape != (T, 4) or op.shape != (T, 3) or not (np.isfinite(oq).all() and np.isfinite(op).all()):
            raise ShapeError(f"object_track: expected finite ({T}, 4) rotations and ({T}, 3) positions, got "
                             f"{oq.shape} and {op.shape}")
        wq = np.where(keys[:, :1], q[:, 0], pq[0, :, 0]) if have[0] else q[:, 0]  # the wrist (joint 0, no parent)
        wp = np.where(keys[:, J:], r, pr[0]) if have[J] else r
        frame_cond = torch.as_tensor(normalise_cond(object_features(wq, wp, oq, op), meta["cond"]["norm"]))
    outs = []
    for s in range(n_samples):  # one sample per call keeps the cancellation check responsive
        if check is not None:
            check()
        outs.append(sample(model, grid.to(param.dtype), mask, positions_to_fill=to_fill, order=order,
                           temperature=temperature, n_samples=1, seed=seed + s, k=step, frame_cond=frame_cond)[0])
    out = torch.stack(outs).to(torch.float64).cpu()
    if cfg.group_frames:
        out = ungroup_channels(cfg, out)
    fq, fr = elements_to_motion(out)  # (S, T, J, 4), (S, T, 3)
    fq, fr = fq.numpy(), fr.numpy() * np.asarray(meta["root_norm"]["std"]) + np.asarray(meta["root_norm"]["mean"])
    inv = quat_conj(yaw)
    fq[:, :, 0] = quat_mul(inv, fq[:, :, 0])
    if rj == 0:  # the root translation is joint 0's: undo the move
        fr = quat_apply(inv, fr) + centre
    keep = ~todo  # keys and elements left alone come back as sent
    fq = quat_continuity(np.where(keep[None, :, :J, None], q[None], fq), axis=1)
    fq = np.where(keep[None, :, :J, None], q_in[None], fq)  # bit-identical (continuity may flip signs)
    fr = np.where(keep[None, :, J:], r[None], fr)
    return Filled(fq, fr, keys, todo)



def _checked_window(rotations: np.ndarray, root: np.ndarray, known: np.ndarray, fill: np.ndarray | None, J: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One window's arrays checked against a J-joint checkpoint: (rotations, root, keys, todo) (T, J + 1 masks)."""
    q, r = np.asarray(rotations, np.float64), np.asarray(root, np.float64)
    if q.ndim != 3 or q.shape[1:] != (J, 4):
        raise ShapeError(f"rotations: expected (T, {J}, 4) for this checkpoint's {J}-joint skeleton, got {q.shape}")
    T = q.shape[0]
    if r.shape != (T, 3):
        raise ShapeError(f"root: expected ({T}, 3), got {r.shape}")
    if not (np.isfinite(q).all() and np.isfinite(r).all()):
        raise ShapeError("rotations and root must be finite (unknown values too)")
    keys = _known_mask(known, T, J)
    if not keys.any():
        raise MotioncoreError("known: no key given")
    if keys.all():
        raise MotioncoreError("known: every element is keyed; nothing to fill")
    todo = ~keys if fill is None else _known_mask(fill, T, J)
    if (todo & keys).any():
        raise MotioncoreError("fill: marks keyed elements; the elements to fill must be unknown")
    return q, r, keys, todo
