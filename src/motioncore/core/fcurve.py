"""Blender F-curve Bezier interpolation of keys, in numpy: what an animator's graph editor gives.

Keys use Blender's default for inserted keys: Bezier interpolation with Auto Clamped handles
(``HD_AUTO_ANIM``), constant extrapolation (so the first and last key's handles are flat), and the
F-curve's ``auto_smoothing``: ``"CONT_ACCEL"`` (Continuous Acceleration, the factory default of new
F-curves in Blender 5.0, checked in bpy 5.0.1) or ``"NONE"``. The handle rules follow Blender's
``calchandleNurb_intern`` (curve.cc), ``BKE_fcurve_handles_recalc`` (fcurve.cc) and, for
Continuous Acceleration, ``BKE_nurb_handle_smooth_fcurve`` (a tridiagonal system for second-derivative
continuity, solved with the clamping limits and the same lock / unlock iteration). A segment is evaluated
as Blender does: the parameter u at frame x is the root of the cubic x(u), then y(u).

Legend: C channels (independent curves sharing the key frames), K keys, F evaluated frames.
The key frames ``x`` (K,) are shared by all channels, so the handles' x coordinates are too (they depend
only on the key spacing); only y differs per channel.
"""
from __future__ import annotations

import numpy as np

SMOOTHING = ("CONT_ACCEL", "NONE")
_AUTO_LEN = 2.5614  # Blender's handle length constant for auto handles


def _neighbour_deltas(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """(dx_a, dx_b) (K,) and (dy_a, dy_b) (C, K): steps from the previous key and to the next one.
    The first key mirrors its next step, the last its previous one, as Blender does without a neighbour."""
    dx = np.diff(x)  # (K-1,)
    dy = np.diff(y, axis=-1)  # (C, K-1)
    dx_a = np.concatenate([dx[:1], dx])
    dx_b = np.concatenate([dx, dx[-1:]])
    dy_a = np.concatenate([dy[:, :1], dy], axis=-1)
    dy_b = np.concatenate([dy, dy[:, -1:]], axis=-1)
    return dx_a, dx_b, dy_a, dy_b


def _auto_handles(x: np.ndarray, y: np.ndarray, smoothing: str) -> tuple[np.ndarray, ...]:
    """First pass, per key (``calchandleNurb_intern`` for Auto Clamped F-curve keys, then flat end keys).
    Returns left_x, right_x (K,), left_y, right_y (C, K) and ``locked`` (C, K): ends and extrema."""
    dx_a, dx_b, dy_a, dy_b = _neighbour_deltas(x, y)
    len_a = np.where(dx_a == 0, 1.0, dx_a)
    len_b = np.where(dx_b == 0, 1.0, dx_b)
    tx = dx_b / len_b + dx_a / len_a  # (K,)
    ty = dy_b / len_b + dy_a / len_a  # (C, K)
    if smoothing == "CONT_ACCEL":
        length = 6.0  # handles at 1/3 of each interval: x(u) is linear in u
    else:
        length = tx * _AUTO_LEN
        len_a = np.minimum(len_a, 5.0 * len_b)
        len_b = np.minimum(len_b, 5.0 * len_a)
    fa, fb = len_a / length, len_b / length  # (K,)
    left_x, right_x = x - tx * fa, x + tx * fb
    left_y, right_y = y - ty * fa, y + ty * fb
    inner = np.zeros(x.shape, bool)
    inner[1:-1] = True
    ydiff1, ydiff2 = -dy_a, dy_b  # prev - y, next - y
    extremum = inner & (((ydiff1 <= 0) & (ydiff2 <= 0)) | ((ydiff1 >= 0) & (ydiff2 >= 0)))
    prev_y, next_y = y - dy_a, y + dy_b
    rising = ydiff1 <= 0
    lviol = inner & ~extremum & np.where(rising, prev_y > left_y, prev_y < left_y)
    left_y = np.where(lviol, prev_y, left_y)
    rviol = inner & ~extremum & np.where(rising, next_y < right_y, next_y > right_y)
    right_y = np.where(rviol, next_y, right_y)
    h1x, h2x = left_x - x, x - right_x
    with np.errstate(divide="ignore", invalid="ignore"):
        new_right = y + (y - left_y) / h1x * h2x
        new_left = y + (y - right_y) / h2x * h1x
    right_y = np.where(lviol, new_right, right_y)
    left_y = np.where(~lviol & rviol, new_left, left_y)
    locked = extremum | ~inner
    left_y = np.where(locked, y, left_y)  # extrema and (constant extrapolation) end keys: flat
    right_y = np.where(locked, y, right_y)
    return left_x, right_x, left_y, right_y, locked


def _thomas(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Solve tridiagonal systems a[i] h[i-1] + b[i] h[i] + c[i] h[i+1] = d[i]; all (C, K) -> h (C, K)."""
    K = a.shape[-1]
    cp, dp = np.empty_like(c), np.empty_like(d)
    cp[:, 0], dp[:, 0] = c[:, 0] / b[:, 0], d[:, 0] / b[:, 0]
    for i in range(1, K):
        den = b[:, i] - a[:, i] * cp[:, i - 1]
        cp[:, i] = c[:, i] / den
        dp[:, i] = (d[:, i] - a[:, i] * dp[:, i - 1]) / den
    h = np.empty_like(d)
    h[:, -1] = dp[:, -1]
    for i in range(K - 2, -1, -1):
        h[:, i] = dp[:, i] - cp[:, i] * h[:, i + 1]
    return h


def _smooth_system(x: np.ndarray, y: np.ndarray, locked: np.ndarray) -> tuple[np.ndarray, ...]:
    """Equations (a, b, c, d) and limits (hmin, hmax), all (C, K), of Continuous Acceleration for the
    right-handle y offsets h. Locked keys (flat, h = 0) split the curve into the independent runs that
    Blender solves one by one; a lock row ``h = 0`` decouples them in one system per channel."""
    C, K = y.shape
    dx = np.concatenate([[np.nan], np.diff(x)])  # dx[i] = x[i] - x[i-1]
    dy = np.concatenate([np.zeros((C, 1)), np.diff(y, axis=-1)], axis=-1)
    lk = np.ones(K)
    lk[1:-1] = dx[2:] / dx[1:-1]  # l[i] = dx[i+1] / dx[i]
    l_next = np.concatenate([lk[1:], [1.0]])
    a = np.broadcast_to(lk**2, (C, K)).copy()
    b = np.broadcast_to(2.0 * (lk + 1.0), (C, K)).copy()
    c = np.broadcast_to(1.0 / l_next, (C, K)).copy()
    d = dy * lk**2 + np.concatenate([dy[:, 1:], np.zeros((C, 1))], axis=-1)
    a[locked], b[locked], c[locked], d[locked] = 0.0, 1.0, 0.0, 0.0
    s1, s2 = dy * lk, np.concatenate([dy[:, 1:], np.zeros((C, 1))], axis=-1)  # this side, next side
    hmax = np.where(s1 > 0, np.minimum(s1, s2), 0.0)  # free keys: s1 and s2 share a strict sign
    hmin = np.where(s1 < 0, np.maximum(s1, s2), 0.0)
    return a, b, c, d, np.where(locked, 0.0, hmin), np.where(locked, 0.0, hmax)


def _per_run(flag: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Any ``flag`` (C, K) within each key's run ``run`` (C, K, run indices in [0, K)) -> (C, K). Linear in the
    keys (a (C, K, K) one-hot asked 40 GB of a 20,000-frame capture's 124 quaternion channels)."""
    C, K = run.shape
    cell = np.arange(C)[:, None] * K + run  # (C, K) each key's (channel, run) cell
    hit = np.zeros(C * K, bool)
    hit[cell[flag]] = True
    return hit[cell]


def _solve_with_limits(a, b, c, d, hmin, hmax, run: np.ndarray) -> np.ndarray:
    """Blender's ``tridiagonal_solve_with_limits``, per run: solve, lock keys whose h leaves [hmin, hmax]
    (first those with a non-zero target), else release locked keys that pull inwards (twice at most)."""
    a0, b0, c0, d0 = a.copy(), b.copy(), c.copy(), d.copy()
    is_locked = np.zeros(a.shape, bool)
    unlocks = np.zeros(a.shape, int)
    for _ in range(4 * a.shape[-1] + 8):
        h = _thomas(a, b, c, d)
        out = (h < hmin) | (h > hmax)
        target = np.where(h > hmax, hmax, hmin)
        first = out & (target != 0.0)
        any_first = _per_run(first, run)
        lock = first | (out & ~any_first)  # second pass: lock all overshooting ones of that run
        overshoot = _per_run(out, run)
        is_locked |= lock
        a[lock], b[lock], c[lock], d[lock] = 0.0, 1.0, 0.0, target[lock]
        hp = np.concatenate([h[:, :1], h[:, :-1]], axis=-1)
        hn = np.concatenate([h[:, 1:], h[:, -1:]], axis=-1)
        relax = -(a0 * hp + b0 * h + c0 * hn - d0) * b0
        free = (relax > 0) & (h < hmax) | (relax < 0) & (h > hmin)
        release = ~overshoot & is_locked & (unlocks < 2) & free
        a[release], b[release], c[release], d[release] = a0[release], b0[release], c0[release], d0[release]
        is_locked &= ~release
        unlocks += release
        if not (overshoot.any() or release.any()):
            return h
    raise RuntimeError("F-curve handle smoothing did not converge")  # internal invariant


def fcurve_handles(x: np.ndarray, y: np.ndarray, smoothing: str = "CONT_ACCEL") -> tuple[np.ndarray, ...]:
    """Handles of Auto Clamped Bezier keys as Blender computes them (``fcurve.update()``).

    Parameters
    ----------
    x : (K,) strictly increasing key frames, shared by all channels (K >= 2).
    y : (C, K) key values.
    smoothing : the F-curve's ``auto_smoothing``, "CONT_ACCEL" or "NONE".

    Returns
    -------
    left_x, right_x : (K,) handle frames; left_y, right_y : (C, K) handle values.
    """
    x, y = np.asarray(x, np.float64), np.atleast_2d(np.asarray(y, np.float64))
    if smoothing not in SMOOTHING:
        raise ValueError(f"smoothing: expected one of {SMOOTHING}, got {smoothing!r}")
    if x.ndim != 1 or x.shape[0] < 2 or y.shape[-1] != x.shape[0] or not (np.diff(x) > 0).all():
        raise ValueError(f"keys: need x (K>=2,) increasing and y (C, K); got {x.shape} and {y.shape}")
    left_x, right_x, left_y, right_y, locked = _auto_handles(x, y, smoothing)
    if smoothing == "CONT_ACCEL" and x.shape[0] > 2:
        a, b, c, d, hmin, hmax = _smooth_system(x, y, locked)
        run = np.cumsum(locked, axis=-1) - 1  # run index of each key (a free key lies after its run's start)
        h = _solve_with_limits(a, b, c, d, hmin, hmax, run)
        lk = np.ones(x.shape)
        lk[1:-1] = np.diff(x)[1:] / np.diff(x)[:-1]
        right_y = np.where(locked, right_y, y + h)
        left_y = np.where(locked, left_y, y - h / lk)
    return left_x, right_x, left_y, right_y


def bezier_parameter(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, x3: np.ndarray, f: np.ndarray,
                     iters: int = 60) -> np.ndarray:
    """The u in [0, 1] with x(u) = f on the cubic Bezier with control x's x0..x3 (all broadcast, x(u)
    increasing as for F-curve handles that stay within their segment): bisection to machine precision."""
    lo, hi = np.zeros(np.broadcast(x0, f).shape), np.ones(np.broadcast(x0, f).shape)
    for _ in range(iters):
        u = 0.5 * (lo + hi)
        v = 1.0 - u
        xu = v**3 * x0 + 3.0 * v * v * u * x1 + 3.0 * v * u * u * x2 + u**3 * x3
        below = xu < f
        lo, hi = np.where(below, u, lo), np.where(below, hi, u)
    return 0.5 * (lo + hi)


def _needed_keys(x: np.ndarray, y: np.ndarray, frames: np.ndarray, smoothing: str) -> np.ndarray | None:
    """The key indices whose handles decide the curve at ``frames`` (None: all of them): the segments that hold
    an evaluated frame between keys, widened on every channel to the locked keys (ends and extrema, which split
    Continuous Acceleration into independent runs) before and after them, plus one key either side so that
    every key kept sees its own neighbours. A long clip with a few gaps solves a few short runs, not the clip."""
    K = x.shape[0]
    if K <= 64 or smoothing != "CONT_ACCEL":
        return None if K <= 64 else _segment_keys(x, frames, K, 1)
    dy = np.diff(y, axis=-1)   # locked keys, per channel (C, K): the ends and the extrema (``_auto_handles``)
    lk = np.ones(y.shape, bool)
    lk[:, 1:-1] = ((dy[:, :-1] >= 0) & (dy[:, 1:] <= 0)) | ((dy[:, :-1] <= 0) & (dy[:, 1:] >= 0))
    seg = np.unique(np.clip(np.searchsorted(x, frames, side="right") - 1, 0, K - 2))
    idx = np.arange(K)
    prev_lock = np.maximum.accumulate(np.where(lk, idx, 0), axis=1)              # (C, K) last locked key <= k
    next_lock = np.minimum.accumulate(np.where(lk, idx, K - 1)[:, ::-1], axis=1)[:, ::-1]   # first locked >= k
    lo = np.maximum(prev_lock[:, seg].min(axis=0) - 1, 0)
    hi = np.minimum(next_lock[:, seg + 1].max(axis=0) + 1, K - 1)
    keep = np.zeros(K + 1, np.int64)
    np.add.at(keep, lo, 1)
    np.add.at(keep, hi + 1, -1)
    return np.flatnonzero(np.cumsum(keep)[:K] > 0)


def _segment_keys(x: np.ndarray, frames: np.ndarray, K: int, pad: int) -> np.ndarray:
    seg = np.unique(np.clip(np.searchsorted(x, frames, side="right") - 1, 0, K - 2))
    keep = np.zeros(K, bool)
    for d in range(-pad, pad + 2):
        keep[np.clip(seg + d, 0, K - 1)] = True
    return np.flatnonzero(keep)


def fcurve_evaluate(x: np.ndarray, y: np.ndarray, frames: np.ndarray, smoothing: str = "CONT_ACCEL") -> np.ndarray:
    """``fcurve.evaluate(frame)`` of Auto Clamped Bezier keys (x (K,), y (C, K)) at ``frames`` (F,) within
    [x[0], x[-1]] -> (C, F). Keys are hit exactly; a segment is evaluated by solving x(u) = frame. Only the
    runs of keys that decide the evaluated segments are solved (``_needed_keys``): the same handles, exactly."""
    x, y = np.asarray(x, np.float64), np.atleast_2d(np.asarray(y, np.float64))
    frames = np.asarray(frames, np.float64)
    if frames.ndim != 1 or (frames < x[0]).any() or (frames > x[-1]).any():
        raise ValueError(f"frames: expected (F,) within the keys [{x[0]}, {x[-1]}], got {frames}")
    out = np.empty((y.shape[0], frames.shape[0]))
    at = np.searchsorted(x, frames).clip(0, x.shape[0] - 1)
    on_key = x[at] == frames
    out[:, on_key] = y[:, at[on_key]]
    between = ~on_key
    if not between.any():
        return out
    need = _needed_keys(x, y, frames[between], smoothing) if smoothing in SMOOTHING else None
    if need is None:
        out[:, between] = _evaluate(x, y, frames[between], smoothing)
        return out
    # the kept keys fall into runs of consecutive indices: each is a curve of its own, exactly the whole one's there
    brk = np.flatnonzero(np.diff(need) > 1) + 1
    fb = frames[between]
    res = np.empty((y.shape[0], fb.shape[0]))
    for part in np.split(need, brk):
        sel = (fb > x[part[0]]) & (fb < x[part[-1]])
        if sel.any():
            res[:, sel] = _evaluate(x[part], y[:, part], fb[sel], smoothing)
    out[:, between] = res
    return out


def _evaluate(x: np.ndarray, y: np.ndarray, frames: np.ndarray, smoothing: str) -> np.ndarray:
    lx, rx, ly, ry = fcurve_handles(x, y, smoothing)
    k = np.clip(np.searchsorted(x, frames, side="right") - 1, 0, x.shape[0] - 2)  # (F,) segment index
    x0, x1, x2, x3 = x[k], rx[k], lx[k + 1], x[k + 1]
    u = bezier_parameter(x0, x1, x2, x3, frames)  # (F,): shared x handles, so one u per frame
    y0, y1, y2, y3 = y[:, k], ry[:, k], ly[:, k + 1], y[:, k + 1]  # (C, F)
    v = 1.0 - u
    out = v**3 * y0 + 3.0 * v * v * u * y1 + 3.0 * v * u * u * y2 + u**3 * y3
    at_key = frames == x[k]
    return np.where(at_key, y0, out)


def keys_bezier(x: np.ndarray, y: np.ndarray, frames: int | np.ndarray, smoothing: str = "CONT_ACCEL"
                ) -> np.ndarray:
    """Blender's Bezier of keys at frames ``x`` (K,) with values ``y`` (C, K) at ``frames`` (F,) (an int n: every
    frame 0 .. n - 1) -> (C, F): ``fcurve_evaluate`` between the first and the last key, held before the first and
    after the last (constant extrapolation; a single key: held everywhere). The one Bezier of the keys of the
    library's fills and baselines and of the add-on's curves (vendored)."""
    x, y = np.asarray(x, np.float64), np.atleast_2d(np.asarray(y, np.float64))
    t = np.arange(frames, dtype=np.float64) if np.ndim(frames) == 0 else np.asarray(frames, np.float64)
    out = np.empty((y.shape[0], t.size))
    if x.size == 1:
        out[:] = y[:, :1]
        return out
    inside = (t >= x[0]) & (t <= x[-1])
    if inside.any():
        out[:, inside] = fcurve_evaluate(x, y, t[inside], smoothing)
    out[:, t < x[0]] = y[:, :1]
    out[:, t > x[-1]] = y[:, -1:]
    return out
