"""Deterministic hand in-fill (``infill-hands``): a smooth correction over Blender's Bezier of the finger keys.

The numpy side shared by training, evaluation, the server and the add-on's request. Self-contained (the
body's ``families.body.fill`` is its sibling; the two can be unified later).

Per *finger gap* (a run of frames where no finger joint is keyed, after a frame where they all are), the
fill is Blender's Auto Clamped Bezier of each finger channel's keys (``families.anyorder.evaluate_hands.bezier_channels``'
numpy copy, ``core.fcurve``) times a correction ``exp(delta(t))`` applied on the right (local frame):

    delta(t) = sum_k C[k] * b_k(s(t)),   s in (0, 1) over the gap,

with a low-order basis that is zero *with zero velocity* at both keys (``sin(pi s) sin(k pi s)``), or at the
left key only for a gap with no key after it (``sin(k pi s / 2)^2``). The correction cannot jitter (K smooth
curves per gap) and leaves the keys and their tangents as Blender has them. The coefficients C (K, 16 * 3)
come from ``gap_inputs``: the finger poses at the keys, the wrist's motion over the gap and, when given, the
object in the wrist frame at M points along the gap (against the wrist as Interp fills it between its keys,
so nothing between keys leaks); the map is ``families.hands.model``.

Legend: T frames, J = 17 joints (joint 0 the wrist, the root), F = 16 finger joints, K basis curves,
M sample points per gap, D gap inputs.
"""
from __future__ import annotations

import numpy as np

from motioncore.core.fcurve import keys_bezier
from motioncore.core.gaps import runs
from motioncore.core.rotations import (
    axis_angle_to_quat,
    quat_apply,
    quat_conj,
    quat_continuity,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_axis_angle,
    quat_to_rot6d,
)

__all__ = ["K_BASIS", "M_POINTS", "gap_basis", "finger_gaps", "interp_track", "gap_inputs", "input_dim",
           "gap_residual", "project", "object_in_wrist", "apply_correction", "bezier_fingers", "plan", "coefficients", "weight_for",
           "fill_hands"]

K_BASIS = 4   # basis curves per gap
M_POINTS = 6  # points along a gap where the wrist and the object are read
OBJ_DIM = 10  # per point: the object's rotation (6D) and position (m) in the wrist frame, and its distance


def gap_basis(n: int, closed: bool, k: int = K_BASIS) -> np.ndarray:
    """(n, k) basis over the n frames of a gap; closed: a key after it too (zero value and slope at both ends),
    open: only before it (zero value and slope at the start)."""
    if closed:
        s = np.arange(1, n + 1) / (n + 1.0)
        return np.stack([np.sin(np.pi * s) * np.sin((i + 1) * np.pi * s) for i in range(k)], 1)
    s = np.arange(1, n + 1) / float(n)
    return np.stack([np.sin((i + 1) * np.pi * s / 2.0) ** 2 for i in range(k)], 1)


def finger_gaps(finger_keys: np.ndarray, min_len: int = 2) -> list[tuple[int, int, bool]]:
    """[(a, b, closed)]: finger gaps [a, b) of a (T,) mask (a frame whose finger joints are all keyed) that
    follow a key (a gap before the first key is left to Bezier, which holds that key); closed when a key
    follows. Gaps shorter than ``min_len`` frames are left to Bezier."""
    k = np.asarray(finger_keys, bool)
    return [(a, b, b < k.size) for a, b in runs(~k) if a > 0 and b - a >= min_len]


def interp_track(q: np.ndarray, p: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The wrist as Interp fills it: slerp / lerp between its keyed frames (T,) bool, held outside."""
    q = quat_continuity(quat_normalize(np.asarray(q, np.float64)), axis=0)
    p = np.asarray(p, np.float64)
    idx = np.flatnonzero(keys)
    if idx.size == 0:
        raise ValueError("interp_track: the wrist has no key")
    t = np.arange(q.shape[0])
    nxt = idx[np.clip(np.searchsorted(idx, t), 0, idx.size - 1)]
    prv = idx[np.clip(np.searchsorted(idx, t, side="right") - 1, 0, idx.size - 1)]
    w = np.where(nxt > prv, (t - prv) / np.maximum(nxt - prv, 1), 0.0)
    return quat_slerp(q[prv], q[nxt], w), p[prv] + w[:, None] * (p[nxt] - p[prv])


def input_dim(num_fingers: int = 16) -> int:
    return 2 * num_fingers * 3 + M_POINTS * (6 + OBJ_DIM + 1) + 3


def _points(a: int, b: int, closed: bool) -> np.ndarray:
    """M frame indices along a gap [a, b) (from the last key before it to its end or next key)."""
    return np.round(np.linspace(a, b if closed else b - 1, M_POINTS)).astype(np.int64)


def object_in_wrist(wrist_q: np.ndarray, wrist_p: np.ndarray, obj: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """(T, OBJ_DIM) the object's rotation (6D), position (dm) and distance (dm) in the wrist frame, per frame."""
    inv = quat_conj(wrist_q)
    rel = quat_apply(inv, obj[1] - wrist_p)
    return np.concatenate([quat_to_rot6d(quat_mul(inv, quat_normalize(obj[0]))), rel * 10.0,
                           np.linalg.norm(rel, axis=-1, keepdims=True) * 10.0], -1)


def gap_inputs(fingers: np.ndarray, wrist_q: np.ndarray, wrist_p: np.ndarray, gap: tuple[int, int, bool],
               obj: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(D,) float32 inputs of one gap: fingers (T, F, 4) keyed at a - 1 (and at b when closed), the wrist's
    world rotation and position (T, 4), (T, 3) as Interp fills them, and the object's (T, 4), (T, 3) or None."""
    a, b, closed = gap
    left = quat_to_axis_angle(fingers[a - 1]).reshape(-1)
    right = quat_to_axis_angle(fingers[b if closed else a - 1]).reshape(-1)
    pts = _points(a, b, closed)
    inv0 = quat_conj(wrist_q[a - 1])
    wr = quat_to_axis_angle(quat_mul(inv0[None], wrist_q[pts]))  # (M, 3) the wrist's turn since the key
    wp = quat_apply(inv0[None], wrist_p[pts] - wrist_p[a - 1]) * 10.0  # (M, 3) its move, in decimetres
    if obj is None:
        o = np.zeros((M_POINTS, OBJ_DIM + 1))
    else:
        o = np.concatenate([object_in_wrist(wrist_q[pts], wrist_p[pts], (obj[0][pts], obj[1][pts])),
                            np.ones((M_POINTS, 1))], -1)
    tail = np.array([(b - a) / 30.0, float(closed), 1.0])
    return np.concatenate([left, right, wr.reshape(-1), wp.reshape(-1), o.reshape(-1), tail]).astype(np.float32)


def gap_residual(bez: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """(n, F * 3) the truth's rotation from the Bezier fill in the joint's local frame, axis-angle."""
    return quat_to_axis_angle(quat_mul(quat_conj(bez), truth)).reshape(bez.shape[0], -1)


def project(residual: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(K, F * 3) least-squares coefficients of a gap's residual (n, F * 3) on its basis (n, K)."""
    return np.linalg.lstsq(basis, residual, rcond=None)[0]


def apply_correction(bez: np.ndarray, basis: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """(n, F, 4): the Bezier fill (n, F, 4) times exp(basis @ coef) on the right."""
    delta = (basis @ coef).reshape(bez.shape[0], -1, 3)
    return quat_normalize(quat_mul(bez, axis_angle_to_quat(delta)))


def bezier_fingers(q: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Blender's Bezier of each channel's keys (``families.anyorder.evaluate_hands.bezier_channels``' numpy copy of Blender's Auto
    Clamped F-curves), for one clip: q (T, J, 4), keys (T, J) -> (T, J, 4)."""
    q = np.asarray(q, np.float64)
    T, J = q.shape[:2]
    out = q.copy()
    groups: dict[tuple[int, ...], list[int]] = {}   # channels sharing their key frames: one evaluation
    for j in range(J):
        xs = tuple(np.flatnonzero(keys[:, j]).tolist())
        if xs:
            groups.setdefault(xs, []).append(j)
    for x, js in groups.items():
        xs = np.asarray(x)
        y = quat_continuity(quat_normalize(q[xs][:, js]), axis=0)  # (K, G, 4)
        if xs.size == 1:
            out[:, js] = y[0]
            continue
        col = keys_bezier(xs, y.reshape(xs.size, -1).T, T).T   # (T, G * 4)
        out[:, js] = quat_normalize(col.reshape(T, len(js), 4))
    return out


def _bezier_root(root: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Blender's Bezier of the root translation's keys (T,) per axis, constant outside them."""
    r = np.asarray(root, np.float64).copy()
    xs = np.flatnonzero(keys)
    if xs.size < 2:
        return np.repeat(r[xs[:1]], r.shape[0], 0) if xs.size else r
    return keys_bezier(xs, r[xs].T, r.shape[0]).T


def plan(q: np.ndarray, root: np.ndarray, keys: np.ndarray, obj: tuple[np.ndarray, np.ndarray] | None = None,
         max_gap: int = 0, min_gap: int = 2) -> dict:
    """Bezier of every channel's keys and each finger gap's basis and inputs, for one clip on the model's
    skeleton at its rate: q (T, J, 4), root (T, 3) the wrist's translation (joint 0 is the wrist, a root),
    keys (T, J + 1) bool. Returns {"bezier": (T, J, 4), "root": (T, 3), "gaps": [(a, b, closed)],
    "basis": [(n, K)], "inputs": (G, D) float32}. Gaps longer than ``max_gap`` (0: no limit) or shorter than
    ``min_gap`` frames stay Bezier."""
    q = np.asarray(q, np.float64)
    T, J = q.shape[:2]
    bez = bezier_fingers(q, keys[:, :J])
    wrist_keys = keys[:, 0] & keys[:, J]
    if not wrist_keys.any():
        wrist_keys = keys[:, 0]
    if wrist_keys.any():
        wq, wp = interp_track(q[:, 0], root, wrist_keys)
    else:  # no wrist key at all: the model reads a still wrist
        wq, wp = np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (T, 1)), np.zeros((T, 3))
    gaps = [g for g in finger_gaps(keys[:, 1:J].all(1), max(2, min_gap)) if not max_gap or g[1] - g[0] <= max_gap]
    inputs = np.stack([gap_inputs(bez[:, 1:], wq, wp, g, obj) for g in gaps]) if gaps else \
        np.zeros((0, input_dim(J - 1)), np.float32)
    return {"bezier": bez, "root": _bezier_root(root, keys[:, J]), "gaps": gaps, "inputs": inputs,
            "basis": [gap_basis(b - a, c) for a, b, c in gaps]}


def coefficients(model, inputs: np.ndarray) -> np.ndarray:
    """(G, K, F * 3) float64 correction coefficients of the gaps' inputs (G, D) from the ``infill-hands`` map."""
    import torch

    if not len(inputs):
        return np.zeros((0, model.cfg.basis, model.cfg.num_fingers * 3))
    p = next(model.parameters())
    with torch.no_grad():
        return model(torch.as_tensor(inputs, dtype=p.dtype, device=p.device)).double().cpu().numpy()


def weight_for(residual, n: int) -> float:
    """The correction's weight for a gap of n frames: ``residual`` a number, or {gap length: weight} (the
    gate; the nearest length's weight)."""
    if isinstance(residual, dict):
        if not residual:
            return 1.0
        near = min(residual, key=lambda L: (abs(int(L) - n), int(L)))
        return float(residual[near])
    return float(residual)


def fill_hands(model, meta: dict, q: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
               obj: tuple[np.ndarray, np.ndarray] | None = None, residual=1.0) -> tuple[np.ndarray, np.ndarray]:
    """The deterministic hand in-fill of one clip (model's skeleton and rate): Bezier of every channel's keys,
    then each finger gap's correction times ``residual`` (a weight, or the gate's {gap length: weight}; 0: the
    Bezier base). Elements not in ``todo`` (T, J + 1) come back as sent. Returns (T, J, 4), (T, 3)."""
    q = np.asarray(q, np.float64)
    J = q.shape[1]
    p = plan(q, root, keys, obj, int(meta.get("max_gap") or 0), int(meta.get("min_gap") or 2))
    out = p["bezier"].copy()
    coef = coefficients(model, p["inputs"])
    for (a, b, _), B, c in zip(p["gaps"], p["basis"], coef, strict=True):
        w = weight_for(residual, b - a)
        if w:
            out[a:b, 1:] = apply_correction(out[a:b, 1:], B, w * c)
    out = np.where(todo[:, :J, None], out, q)
    r = np.where(todo[:, J:], p["root"], np.asarray(root, np.float64))
    return out, r
