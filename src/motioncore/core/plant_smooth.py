"""The smoothing parts of ``core.plant``: blends flat at the keys, the floor lift, and the per-frame turn cap (plain
numpy; vendored into the add-on with ``core.plant``).

- ``hermite5``: the quintic Hermite a swing between two plants follows (matched slopes, no acceleration at either
  end: C2 where a plant holds still). ``ease_from_keys`` / ``ease_lift``: the quintic smoothstep weight that eases
  planting (and each lift) in from the keys, in seconds, so the blend is flat at any frame rate.
- ``floor_lift``: how far to raise an ankle's goal so neither ankle nor toe goes under the keys' floor.
- ``cap_turns``: each leg joint's planting correction turning per frame no faster than the keyed legs near the gap
  (at their ``TOP_PCT`` percentile, at least ``TURN_MIN`` degrees): slew-limited forward and back, zero at the keys.

Legend: T frames, J joints; quaternions WXYZ.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .gaps import runs
from .quat_np import quat_apply, quat_between_many, quat_conj, quat_mul

SOFT = 0.97  # the leg's reach softens from this fraction of its length (or the fill's own, if longer) to full
SOFT_TOP = 0.999  # the softened reach approaches this fraction of the length, never straight

__all__ = ["hermite5", "smoother01", "ease_from_keys", "ease_lift", "floor_lift", "cap_turns", "EASE_S", "NEAR_S"]

EASE_S = 0.3  # s: planting eases in from each key over this long, or over ``1 / EASE_PART`` of a shorter gap
EASE_PART = 4.0  # (see EASE_S)
FLOOR_SPREAD = 1 / 30  # s: a floor lift spreads this far either side (twice)
TURN_MIN = 1.0  # degrees: a joint's allowed per-frame turn (the keyed legs' own largest) is at least this
NEAR_S = 0.1  # s: the keyed frames either side of a gap that give its legs' largest turn
SLACK = 0.1  # where the fill itself turns that fast, its correction may still turn this share of it per frame
TOP_PCT = 95.0  # the keyed legs' turns near a gap are taken at this percentile (a capture's glitch is no limit)


def hermite5(o0, m0, o1, m1, n: int) -> np.ndarray:
    """Quintic Hermite from (o0, slope m0, no acceleration) at 0 to (o1, m1, no acceleration) at n (per frame):
    values at 1 .. n - 1, (n - 1, D). C2 where it meets a plant that holds still."""
    s = (np.arange(1, n) / n)[:, None]
    s3, s4, s5 = s ** 3, s ** 4, s ** 5
    h0, h1 = 1 - 10 * s3 + 15 * s4 - 6 * s5, s - 6 * s3 + 8 * s4 - 3 * s5
    h4, h5 = -4 * s3 + 7 * s4 - 3 * s5, 10 * s3 - 15 * s4 + 6 * s5
    return h0 * o0 + h1 * n * m0 + h5 * o1 + h4 * n * m1


def smoother01(x: np.ndarray) -> np.ndarray:
    """The quintic smoothstep 6x^5 - 15x^4 + 10x^3 on [0, 1]: flat to the second derivative at both ends."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * x * (x * (6.0 * x - 15.0) + 10.0)


def ease_from_keys(todo: np.ndarray, fps: float, held: np.ndarray | None = None, seconds: float | None = None
                   ) -> np.ndarray:
    """(T,) the weight of the planting offsets: 1 inside runs of ``todo``, easing from 0 at the keys either side
    over ``EASE_S`` seconds (at most ``1 / EASE_PART`` of the run) with the quintic smoothstep; an end of the clip
    is no key, nor is a key in ``held`` (T,) (a foot that stands still on the key and goes on standing there: its
    offset starts from 0 with the fill's slip, which planting cancels, so the result is as still as the key)."""
    todo = np.asarray(todo, bool)
    held = np.zeros(len(todo), bool) if held is None else np.asarray(held, bool)
    T = len(todo)
    w = np.zeros(T)
    nb = max(2.0, (EASE_S if seconds is None else seconds) * fps)
    for s, e in runs(todo):
        t = np.arange(s, e, dtype=np.float64)
        d = np.full(e - s, np.inf)
        ln = min(nb, (e - s + 1) / EASE_PART)
        if s > 0 and not held[s - 1]:
            d = np.minimum(d, t - (s - 1))
        if e < T and not held[e]:
            d = np.minimum(d, e - t)
        w[s:e] = smoother01(d / ln) if np.isfinite(d).any() else 1.0
    return w


def floor_lift(h: np.ndarray, o_up: np.ndarray, todo: np.ndarray, fps: float, slack: float = 0.0) -> np.ndarray:
    """(T,) how far to raise a leg's ankle goal so neither ankle nor toe (heights ``h`` (T, 2) above their grounds
    from the keys, toe NaN when none; ``o_up`` the offsets' own rise) goes under its ground: the shortfall,
    spread over its neighbours (widened, then smoothed, so it stays at least the shortfall), on ``todo`` only."""
    need = np.maximum(0.0, -np.nanmin(h + o_up[:, None], axis=1) - slack)
    need = np.where(todo, need, 0.0)
    if not need.any():
        return need
    k = int(round(FLOOR_SPREAD * fps))
    if k < 1:   # the shortfall itself: continuous (zero where it starts), no foot raised that was not under
        return need
    pad = np.pad(need, 2 * k)
    need = np.max([pad[j:j + len(need)] for j in range(4 * k + 1)], 0)
    for _ in range(2):
        pad = np.pad(need, k, mode="edge")
        need = np.mean([pad[j:j + len(need)] for j in range(2 * k + 1)], 0)
    return np.where(todo, need, 0.0)


def ease_lift(lift: np.ndarray, todo: np.ndarray, rate: float) -> np.ndarray:
    """(T,) a leg's lift eased in from each key with the quintic smoothstep over as many frames as it takes to rise
    (from the key, to its value there) at ``rate`` per frame on average (at least two)."""
    out = lift.copy()
    T = len(lift)
    for s, e in runs(todo):
        t = np.arange(e - s, dtype=np.float64)
        w = np.ones(e - s)
        if s > 0:
            n = max(2.0, abs(float(lift[s])) / rate)
            w = np.minimum(w, smoother01((t + 1) / n))
        if e < T:
            n = max(2.0, abs(float(lift[e - 1])) / rate)
            w = np.minimum(w, smoother01((e - s - t) / n))
        out[s:e] *= w
    return out


def _rotvec(q: np.ndarray) -> np.ndarray:
    """(..., 3) rotation vectors (radians) of unit WXYZ quaternions (..., 4), the short way round."""
    q = np.where(q[..., :1] < 0, -q, q)
    n = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    ang = 2.0 * np.arctan2(n, q[..., :1])
    return q[..., 1:] * np.where(n > 1e-12, ang / np.maximum(n, 1e-12), 2.0)


def _from_rotvec(r: np.ndarray) -> np.ndarray:
    a = np.linalg.norm(r, axis=-1, keepdims=True)
    return np.concatenate([np.cos(a / 2), np.where(a > 1e-12, np.sin(a / 2) / np.maximum(a, 1e-12), 0.5) * r], -1)


def _turn(q: np.ndarray) -> np.ndarray:
    """(T - 1, ...) radians: the turn of each rotation (T, ..., 4) from one frame to the next."""
    d = np.abs(np.sum(q[1:] * q[:-1], -1))
    return 2.0 * np.arccos(np.clip(d, 0.0, 1.0))


def _slew(r: np.ndarray, lim: np.ndarray, fixed: tuple[bool, bool]) -> np.ndarray:
    """A correction's rotation vectors (n, 3) changed by at most ``lim`` (n - 1,) radians per frame pair, zero at a
    fixed end (a key): a forward pass from the first frame, then a backward pass from the last, each step clamped
    toward the wanted value."""
    y = r.copy()
    n = len(y)
    if fixed[0]:
        y[0] = 0.0
    for t in range(1, n):
        d = r[t] - y[t - 1]
        m = float(np.linalg.norm(d))
        y[t] = y[t - 1] + (d * (lim[t - 1] / m) if m > lim[t - 1] else d)
    z = y.copy()
    if fixed[1]:
        z[-1] = 0.0
    for t in range(n - 2, -1, -1):
        d = y[t] - z[t + 1]
        m = float(np.linalg.norm(d))
        z[t] = z[t + 1] + (d * (lim[t] / m) if m > lim[t] else d)
    if fixed[0]:
        z[0] = 0.0
    return z


def cap_turns(q: np.ndarray, fill: np.ndarray, joints: Sequence[int], keys: np.ndarray, todo: np.ndarray,
               fps: float) -> np.ndarray:
    """``q`` (T, J, 4) with each of ``joints``' planting correction (its change from ``fill``) turning per frame by
    at most what that joint turns on its own there, up to its largest turn over the keyed frames within
    ``NEAR_S`` seconds of the gap (or over the fill of the gap where larger), at least ``TURN_MIN`` degrees."""
    T = len(q)
    tf = _turn(fill[:, joints])  # (T - 1, n) the fill's own turns
    keyed = keys[1:] & keys[:-1]
    near = max(1, int(round(NEAR_S * fps)))
    out = q.copy()
    for s, e in runs(todo):
        a, b = max(s - 1, 0), min(e, T - 1)
        lo, hi = max(0, a - near), min(T - 1, b + near)
        kk = keyed[lo:hi]
        top = np.percentile(tf[lo:hi][kk], TOP_PCT, axis=0) if kk.any() else np.zeros(len(joints))
        top = np.maximum(np.maximum(top, tf[a:b].max(0) if b > a else 0.0), np.radians(TURN_MIN))
        for c, j in enumerate(joints):
            corr = _rotvec(quat_mul(q[a:b + 1, j], quat_conj(fill[a:b + 1, j])))
            lim = np.maximum(top[c] - tf[a:b, c], SLACK * top[c])
            steps = np.linalg.norm(np.diff(corr, axis=0), axis=-1)
            if (steps <= lim + 1e-9).all():
                continue
            corr = _slew(corr, lim, (s > 0, e < T))
            out[s:e, j] = quat_mul(_from_rotvec(corr[s - a:e - a]), fill[s:e, j])   # keys stay as they are
    return out


# --- the two-bone IK with its softened reach (core.plant plants the legs with it) ------------------------------
def _soft_distance(dist: np.ndarray, own: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The goal's distance from the hip, softened near full reach: unchanged up to ``SOFT`` of the leg's length (or
    the fill's own distance, if longer), then approaching ``SOFT_TOP`` of it smoothly (C1) instead of snapping
    straight, so a plant the leg cannot reach gives way and the knee does not snap."""
    top = SOFT_TOP * length
    start = np.maximum(SOFT * length, own)
    room = np.maximum(top - start, 1e-12)
    over = np.maximum(dist - start, 0.0)
    soft = start + room * (1.0 - np.exp(-over / room))
    return np.where((dist > start) & (start < top), soft, dist)   # a fill straighter than that: as it is


def two_bone_ik(H, K, A, D, gq_hip, gq_knee, gq_ankle, soft: bool = False):
    """Per frame, the world rotations of thigh, shin and foot that put the ankle on D (the knee in its plane,
    lengths kept, the goal clamped to the reach; the foot keeps its world rotation). ``soft``: the reach softens
    near full extension (``_soft_distance``): the ankle falls short of a goal near or beyond reach, smoothly."""
    l1 = np.linalg.norm(K - H, axis=-1)
    l2 = np.linalg.norm(A - K, axis=-1)
    dist = np.linalg.norm(D - H, axis=-1)
    if soft:
        dist = _soft_distance(dist, np.linalg.norm(A - H, axis=-1), l1 + l2)
    dist = np.clip(dist, np.abs(l1 - l2) + 1e-6, l1 + l2 - 1e-6)
    u, v = H - K, A - K
    nrm = np.cross(u, v)
    nn = np.linalg.norm(nrm, axis=-1, keepdims=True)
    fallback = quat_apply(gq_hip, np.array([1.0, 0.0, 0.0]))
    nrm = np.where(nn > 1e-8, nrm / np.maximum(nn, 1e-12), fallback)
    cur = np.arccos(np.clip(np.sum(u * v, -1) / np.maximum(l1 * l2, 1e-12), -1.0, 1.0))
    want = np.arccos(np.clip((l1 ** 2 + l2 ** 2 - dist ** 2) / np.maximum(2 * l1 * l2, 1e-12), -1.0, 1.0))
    half = 0.5 * (want - cur)
    bend = np.concatenate([np.cos(half)[:, None], np.sin(half)[:, None] * nrm], axis=-1)
    gk = quat_mul(bend, gq_knee)
    A1 = K + quat_apply(bend, v)
    swing = quat_between_many(A1 - H, D - H)
    return quat_mul(swing, gq_hip), quat_mul(swing, gk), gq_ankle
