"""Fewest Bezier keys that hold a dense curve, and Blender's Bezier with explicit (FREE / ALIGNED) handles, in numpy.

A filled span of one channel (a value on every frame) becomes a few keys with ALIGNED handles an animator can grab:
keys on frames of the fill, each with the fill's value there and a slope; the handles of a key lie on its slope, a
third of the way to each neighbouring key. Handles a third of the way make x(u) linear in the Bezier parameter u,
so each segment is a cubic Hermite piece and the slopes that best hold the fill are a linear least squares
(`fit_slopes`). `fit_span` is greedy: the span's first and last frames first, then a key at the frame the curve
misses most until the curve is within the tolerance everywhere.

`bezier_evaluate` is Blender's ``fcurve.evaluate`` for Bezier keys with handles as given (no auto handles): a handle
longer in x than its segment is first shortened to it (``BKE_fcurve_correct_bezpart``), the parameter u at a frame
is the root of x(u) = frame, then y(u). It has a parity test against real Blender. Where a segment's two handles
still cross in x, x(u) is not monotonic and Blender takes the first root its cubic solver finds, which this
bisection need not; the add-on never writes such handles (a third of the segment each).

Legend: n frames of a span, K keys, F evaluated frames, C channels.
"""
from __future__ import annotations

import functools

import numpy as np

from .fcurve import bezier_parameter

EDGE, EDGE_WEIGHT = 2, 10.0   # the frames next to a span's ends weigh more in the fit (`edge_weights`)
SMOOTH = 1.0   # weight of the second-derivative jumps at inner keys (`fit_slopes`)
REG = 1e-6   # weight of the pull of each slope towards the fill's own (central difference): fixes keys no frame decides
JERK = 100.0   # weight of the third differences of the miss (the span's ends held: the frames beside it are not moved)


@functools.lru_cache(maxsize=64)
def _jerk_rows(n: int) -> np.ndarray:
    """(n + 3, n) the third differences of a span's miss with three unmoved frames either side (zeros): every window
    of four consecutive frames that overlaps the span, the way in and out included (read-only, cached)."""
    D = np.zeros((n + 6, n))
    D[3:n + 3] = np.eye(n)
    D = np.diff(D, 3, axis=0)
    D.flags.writeable = False
    return D


def correct_bezpart(x0: np.ndarray, hx1: np.ndarray, hy1: np.ndarray, hx2: np.ndarray, hy2: np.ndarray,
                    x3: np.ndarray, y0: np.ndarray, y3: np.ndarray) -> tuple[np.ndarray, ...]:
    """Blender's ``BKE_fcurve_correct_bezpart`` for segments (all broadcast): a handle that reaches further in x than
    the segment is long is scaled towards its key to the segment's length (each handle on its own). Returns
    (hx1, hy1, hx2, hy2)."""
    d1x, d1y = x0 - hx1, y0 - hy1
    d2x, d2y = x3 - hx2, y3 - hy2
    span = x3 - x0
    l1, l2 = np.abs(d1x), np.abs(d2x)
    f1 = np.where(l1 > span, span / np.where(l1 > 0, l1, 1.0), 1.0)
    f2 = np.where(l2 > span, span / np.where(l2 > 0, l2, 1.0), 1.0)
    return x0 - f1 * d1x, y0 - f1 * d1y, x3 - f2 * d2x, y3 - f2 * d2y


def bezier_evaluate(kx: np.ndarray, ky: np.ndarray, lx: np.ndarray, ly: np.ndarray, rx: np.ndarray, ry: np.ndarray,
                    frames: np.ndarray) -> np.ndarray:
    """One Bezier F-curve with the handles given, at ``frames`` (F,) -> (F,): keys (kx, ky) (K,), left handles
    (lx, ly), right handles (rx, ry). Frames outside the keys hold the end values (constant extrapolation)."""
    kx, ky, lx, ly, rx, ry = (np.asarray(a, np.float64) for a in (kx, ky, lx, ly, rx, ry))
    f = np.asarray(frames, np.float64)
    if kx.ndim != 1 or kx.size < 1 or not (np.diff(kx) > 0).all():
        raise ValueError(f"keys: need increasing frames (K>=1,), got {kx}")
    out = np.where(f <= kx[0], ky[0], ky[-1])
    if kx.size == 1:
        return out
    inside = (f > kx[0]) & (f < kx[-1])
    fi = f[inside]
    k = np.clip(np.searchsorted(kx, fi, side="right") - 1, 0, kx.size - 2)
    x0, x3, y0, y3 = kx[k], kx[k + 1], ky[k], ky[k + 1]
    hx1, hy1, hx2, hy2 = correct_bezpart(x0, rx[k], ry[k], lx[k + 1], ly[k + 1], x3, y0, y3)
    third = (np.abs(hx1 - (2 * x0 + x3) / 3) <= 1e-9 * (x3 - x0)) & (np.abs(hx2 - (x0 + 2 * x3) / 3) <= 1e-9 * (x3 - x0))
    u = (fi - x0) / (x3 - x0)   # handles at the thirds: x(u) is linear
    if not third.all():
        u = np.where(third, u, bezier_parameter(x0, hx1, hx2, x3, fi))
    v = 1.0 - u
    val = v**3 * y0 + 3.0 * v * v * u * hy1 + 3.0 * v * u * u * hy2 + u**3 * y3
    out[inside] = np.where(fi == x0, y0, val)
    return out


def third_handles(kx: np.ndarray, ky: np.ndarray, slopes: np.ndarray, before: float = 1.0, after: float = 1.0
                  ) -> tuple[np.ndarray, ...]:
    """ALIGNED handles on each key's slope, a third of the way to its neighbours: (lx, ly, rx, ry) (K,). The first
    key's left handle reaches a third of ``before`` frames, the last key's right one a third of ``after``."""
    kx, ky, m = (np.asarray(a, np.float64) for a in (kx, ky, slopes))
    d = np.diff(kx)
    left = np.concatenate([[before], d]) / 3.0
    right = np.concatenate([d, [after]]) / 3.0
    return kx - left, ky - m * left, kx + right, ky + m * right


def _basis(n: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For frames 0..n-1 and keys at ``idx`` (sorted, idx[0] = 0, idx[-1] = n-1): each frame's segment k, and the
    Hermite weights of y[k], y[k+1], m[k], m[k+1] (third-handles: u = (f - x_k) / h)."""
    f = np.arange(n, dtype=np.float64)
    k = np.clip(np.searchsorted(idx, f, side="right") - 1, 0, idx.size - 2)
    x0, h = idx[k].astype(np.float64), np.diff(idx)[k].astype(np.float64)
    u = (f - x0) / h
    v = 1.0 - u
    b0, b1, b2, b3 = v**3, 3 * v * v * u, 3 * v * u * u, u**3
    return k, np.stack([b0 + b1, b2 + b3], 1), b1 * h / 3.0, -b2 * h / 3.0


def edge_weights(n: int) -> np.ndarray:
    """(n,) least-squares weights of a span's frames: ``EDGE_WEIGHT`` on the ``EDGE`` frames inside either end, 1
    elsewhere. The fill meets the animator's keys there: a curve that misses it next to a key turns sharply."""
    w = np.ones(n)
    w[1:1 + EDGE] = EDGE_WEIGHT
    w[max(n - 1 - EDGE, 1):n - 1] = EDGE_WEIGHT
    return w


def fit_slopes(values: np.ndarray, idx: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Least-squares slopes (K,) at the keys ``idx`` (frames of ``values`` (n,), idx[0] = 0, idx[-1] = n - 1) so
    that the third-handle Bezier through the keys' values holds ``values`` on every frame (``weights`` (n,) per
    frame, default `edge_weights`); each slope pulled weakly (``REG``) towards the fill's central difference (keys
    without frames between them)."""
    return _fit(np.asarray(values, np.float64), idx, weights)[0]


def _fit(y: np.ndarray, idx: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(slopes (K,), the fitted curve (n,)) of `fit_slopes`, the Hermite basis computed once for both."""
    n, K = y.size, idx.size
    w = edge_weights(n) if weights is None else np.asarray(weights, np.float64)
    k, wy, wm0, wm1 = _basis(n, idx)
    base = wy[:, 0] * y[idx[k]] + wy[:, 1] * y[idx[k + 1]]
    r = (y - base) * w
    d0 = np.bincount(k, wm0 * wm0 * w, K) + np.bincount(k + 1, wm1 * wm1 * w, K)
    off = np.bincount(k, wm0 * wm1 * w, K - 1)
    A = np.diag(d0) + np.diag(off, 1) + np.diag(off, -1)
    b = np.bincount(k, wm0 * r, K) + np.bincount(k + 1, wm1 * r, K)
    if K > 2 and SMOOTH > 0:   # second-derivative jumps at the inner keys: C2 where the fill allows
        h = np.diff(idx).astype(np.float64)
        ha, hb = h[:-1], h[1:]
        j = np.arange(1, K - 1)
        R = np.zeros((K - 2, K))   # jump = y''_start(j) - y''_end(j-1) = R m + c
        R[j - 1, j - 1] = -2.0 / ha
        R[j - 1, j] = -4.0 / ha - 4.0 / hb
        R[j - 1, j + 1] = -2.0 / hb
        yk = y[idx]
        c = 6.0 * (yk[2:] - yk[1:-1]) / hb**2 + 6.0 * (yk[1:-1] - yk[:-2]) / ha**2
        wj = SMOOTH * (0.5 * (ha + hb)) ** 4   # a jump d of y'' weighs as a miss of d h^2 on one frame
        A += (R * wj[:, None]).T @ R
        b -= R.T @ (wj * c)
    if JERK > 0:   # the miss's third differences: the curve as smooth as the fill
        P = np.zeros((n, K))
        P[np.arange(n), k] = wm0
        P[np.arange(n), k + 1] += wm1
        DP = _jerk_rows(n) @ P
        A += JERK * DP.T @ DP
        b += JERK * DP.T @ (_jerk_rows(n) @ (y - base))
    g = np.empty(n)   # the fill's own slope: central differences, one-sided at the ends
    g[1:-1] = 0.5 * (y[2:] - y[:-2])
    g[0], g[-1] = y[1] - y[0], y[-1] - y[-2]
    scale = max(float(np.trace(A)) / K, 1.0) * REG
    A[np.diag_indices(K)] += scale
    b += scale * g[idx]
    m = np.linalg.solve(A, b)
    return m, base + wm0 * m[k] + wm1 * m[k + 1]


def hermite_values(values: np.ndarray, idx: np.ndarray, slopes: np.ndarray) -> np.ndarray:
    """(n,) the third-handle Bezier through keys ``idx`` (values from ``values``) with ``slopes``, on frames 0..n-1:
    exactly `bezier_evaluate` of its keys and `third_handles` (x(u) is linear there)."""
    y = np.asarray(values, np.float64)
    if idx.size == y.size:
        return y.copy()
    k, wy, wm0, wm1 = _basis(y.size, idx)
    return wy[:, 0] * y[idx[k]] + wy[:, 1] * y[idx[k + 1]] + wm0 * slopes[k] + wm1 * slopes[k + 1]


def fit_span(values: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """The fewest keys (greedy) that hold one channel's span ``values`` (n,) within ``tol`` on every frame:
    (key frame indices (K,) into the span, always its first and last frame; slopes (K,)). A span of one or two
    frames is keyed on every frame.

    Keys are added where the curve misses most, kept within the middle half of that segment (the worst frame of a
    long segment often lies next to its keys, and a key there leaves the segment as long as it was); then each
    inner key is tried once for dropping, the least needed first, and dropped where the curve still holds."""
    y = np.asarray(values, np.float64)
    n = y.size
    if n <= 2:
        return np.arange(n), (np.gradient(y) if n == 2 else np.zeros(n))
    idx = np.array([0, n - 1])
    while True:
        m, fitted = _fit(y, idx)
        err = np.abs(fitted - y)
        worst = int(np.argmax(err))
        if err[worst] <= tol or idx.size == n:
            break
        s = int(np.searchsorted(idx, worst, side="right")) - 1
        a, b = int(idx[s]), int(idx[min(s + 1, idx.size - 1)])
        q = max((b - a) // 4, 1)
        at = int(np.clip(worst, a + q, b - q)) if b - a >= 2 else worst
        if at in idx:
            at = next(f for f in range(n) if f not in idx)
        idx = np.insert(idx, np.searchsorted(idx, at), at)
    return _prune(y, idx, tol)


def _prune(y: np.ndarray, idx: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Drop inner keys of ``idx`` while the fit of ``y`` stays within ``tol``: each inner key is tried once, those
    whose removal alone leaves the smallest worst miss first."""
    def worst(j: np.ndarray) -> tuple[float, np.ndarray]:
        m, fitted = _fit(y, j)
        return float(np.abs(fitted - y).max()), m

    miss = [worst(np.delete(idx, i))[0] for i in range(1, idx.size - 1)]
    for f in [int(idx[i + 1]) for i in np.argsort(miss, kind="stable")]:
        j = idx[idx != f]
        if worst(j)[0] <= tol:
            idx = j
    return idx, fit_slopes(y, idx)


def fit_channels(values: np.ndarray, tol: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """`fit_span` of each channel of ``values`` (n, C) within its ``tol`` (C,)."""
    v = np.asarray(values, np.float64)
    t = np.broadcast_to(np.asarray(tol, np.float64), (v.shape[1],))
    return [fit_span(v[:, c], float(t[c])) for c in range(v.shape[1])]


# --- Batched: the spans of one length (channels and gaps of one shape) fitted together ----------------------------
# `fit_spans` takes the same decisions as `fit_span` on each column (tests/core/test_keyfit.py holds them to it).
# A step assembles every span's normal equations in their bands, O(n) a span (no dense design or jerk matrix), and
# solves them in a few batches of similar key counts (`_buckets`), the smaller sets padded with unit rows.

BAND = 5   # the normal matrix's lower bands: a third difference covers four frames, so five slopes at most


def _buckets(size: np.ndarray) -> list[np.ndarray]:
    """The rows of key counts ``size`` (G,) grouped by their count's power of two (a padded solve costs at most 8x)."""
    b = np.ceil(np.log2(np.maximum(size, 2))).astype(int)
    return [np.flatnonzero(b == v) for v in np.unique(b).tolist()]


def _scatter(G: int, K: int, at: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """(G, K): ``vals`` (G, N) summed at slopes ``at`` (G, N) of their span (an index past K - 1 carries 0)."""
    flat = (np.arange(G)[:, None] * K + np.minimum(at, K - 1)).ravel()
    return np.bincount(flat, vals.ravel(), G * K).reshape(G, K)


def _fit_keys(y: np.ndarray, keys: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_fit` of G spans at once: values ``y`` (G, n), key masks ``keys`` (G, n) (each with its first and last
    frame), weights ``w`` (n,). Returns (slopes (G, Kmax), zero past each span's count; the fitted curves (G, n);
    the key frames (G, Kmax), padded with n - 1)."""
    G, n = y.shape
    gi = np.arange(G)[:, None]
    size = keys.sum(1)
    K = int(size.max())
    rank = np.cumsum(keys, axis=1) - 1   # (G, n) the keys at or before each frame, less one
    pos = np.full((G, K), n - 1)
    rows, cols = np.nonzero(keys)
    pos[rows, rank[rows, cols]] = cols
    k = np.minimum(rank, (size - 2)[:, None])   # (G, n) each frame's segment
    hk = np.diff(pos, axis=1).astype(np.float64)   # (G, K-1); 0 past the span's last segment
    x0 = pos[gi, k].astype(np.float64)
    h = hk[gi, k]
    u = (np.arange(n) - x0) / h
    v = 1.0 - u
    b0, b1, b2, b3 = v**3, 3 * v * v * u, 3 * v * u * u, u**3
    wm0, wm1 = b1 * h / 3.0, -b2 * h / 3.0
    yk = y[gi, pos]   # (G, K)
    base = (b0 + b1) * yk[gi, k] + (b2 + b3) * yk[gi, k + 1]
    r = (y - base) * w
    L = np.zeros((G, BAND, K))   # L[:, d, a] = A[a + d, a]
    L[:, 0] = _scatter(G, K, k, wm0 * wm0 * w) + _scatter(G, K, k + 1, wm1 * wm1 * w)
    L[:, 1] = _scatter(G, K, k, wm0 * wm1 * w)
    b = _scatter(G, K, k, wm0 * r) + _scatter(G, K, k + 1, wm1 * r)
    if K > 2 and SMOOTH > 0:   # `_fit`'s R: row j joins slopes j, j+1, j+2 (inner key j+1 of the span's own)
        ok = np.arange(K - 2) < (size - 2)[:, None]
        ha, hb = np.where(ok, hk[:, :-1], 1.0), np.where(ok, hk[:, 1:], 1.0)
        e = (-2.0 / ha, -4.0 / ha - 4.0 / hb, -2.0 / hb)
        c = 6.0 * (yk[:, 2:] - yk[:, 1:-1]) / hb**2 + 6.0 * (yk[:, 1:-1] - yk[:, :-2]) / ha**2
        wj = np.where(ok, SMOOTH * (0.5 * (ha + hb)) ** 4, 0.0)
        for s in range(3):
            for d in range(3 - s):
                L[:, d, s:K - 2 + s] += wj * e[s] * e[s + d]
            b[:, s:K - 2 + s] -= e[s] * wj * c
    if JERK > 0:   # `_jerk_rows`: third difference r covers frames r-3 .. r, three unmoved frames either side
        R = n + 3
        kb = k[:, np.maximum(np.arange(R) - 3, 0)]   # (G, R) the first slope row r touches
        V = np.zeros((G, R, BAND))   # row r's weights of slopes kb .. kb + 4
        for t, ct in enumerate((-1.0, 3.0, -3.0, 1.0)):
            rr = np.arange(n) + 3 - t   # the row frame f enters at place t
            s = k - kb[:, rr]
            V[gi, rr, s] += ct * wm0
            V[gi, rr, s + 1] += ct * wm1
        miss = np.zeros((G, n + 6))
        miss[:, 3:n + 3] = y - base
        jr = np.diff(miss, 3, axis=1)   # (G, R)
        for s in range(BAND):
            for d in range(BAND - s):
                L[:, d] += JERK * _scatter(G, K, kb + s, V[:, :, s] * V[:, :, s + d])
            b += JERK * _scatter(G, K, kb + s, V[:, :, s] * jr)
    g = np.empty((G, n))
    g[:, 1:-1] = 0.5 * (y[:, 2:] - y[:, :-2])
    g[:, 0], g[:, -1] = y[:, 1] - y[:, 0], y[:, -1] - y[:, -2]
    real = np.arange(K) < size[:, None]
    scale = np.maximum(L[:, 0].sum(1) / size, 1.0) * REG
    L[:, 0] += np.where(real, scale[:, None], 1.0)   # padding: unit rows, zero slopes
    b = np.where(real, b + scale[:, None] * g[gi, pos], 0.0)
    m = _solve_bands(L, b)
    fitted = base + wm0 * m[gi, k] + wm1 * m[gi, k + 1]
    return m, fitted, pos


def _solve_bands(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(G, K) the solutions of G symmetric positive definite systems given by their lower bands ``L`` (G, BAND, K)
    (``L[:, d, a] = A[a + d, a]``) and right-hand sides ``b`` (G, K): as dense matrices, in chunks (LAPACK)."""
    G, P, K = L.shape
    out = np.empty((G, K))
    step = max(1, (1 << 21) // (K * K))
    a = np.arange(K)
    for s in range(0, G, step):
        Lc = L[s:s + step]
        A = np.zeros((Lc.shape[0], K, K))
        for d in range(min(P, K)):
            A[:, a[d:], a[:K - d]] = Lc[:, d, :K - d]
            A[:, a[:K - d], a[d:]] = Lc[:, d, :K - d]
        out[s:s + step] = np.linalg.solve(A, b[s:s + step, :, None])[..., 0]
    return out


def _fit_masks(y: np.ndarray, keys: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """`_fit_keys` of spans with key sets of any size, ``keys`` (G, n) bool, in `_buckets` of similar counts.
    Returns (each span's worst miss (G,), each span's slopes (list of (K,)))."""
    G = y.shape[0]
    worst = np.zeros(G)
    slopes: list[np.ndarray] = [np.zeros(0)] * G
    size = keys.sum(1)
    for sel in _buckets(size):
        m, fitted, _ = _fit_keys(y[sel], keys[sel], w)
        worst[sel] = np.abs(fitted - y[sel]).max(1)
        for i, s in enumerate(sel.tolist()):
            slopes[s] = m[i, :size[s]]
    return worst, slopes


def fit_spans(values: np.ndarray, tol: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """`fit_span` of each column of ``values`` (n, G) (spans of one length: the channels and gaps of one shape)
    within its ``tol`` (G,), all at once: the same greedy keys and pruning, each step a few batched solves
    (`_fit_masks`). Returns (key frame indices, slopes) per column."""
    Y = np.ascontiguousarray(np.asarray(values, np.float64).T)   # (G, n)
    G, n = Y.shape
    t = np.broadcast_to(np.asarray(tol, np.float64), (G,)).copy()
    if n <= 2:
        return [fit_span(Y[i], float(t[i])) for i in range(G)]
    w = edge_weights(n)
    keys = np.zeros((G, n), bool)
    keys[:, [0, n - 1]] = True
    active = np.ones(G, bool)
    while active.any():   # greedy: a key where the curve misses most, in the middle half of its segment
        size = keys.sum(1)
        for sel in _buckets(size[active]):
            sel = np.flatnonzero(active)[sel]
            _, fitted, pos = _fit_keys(Y[sel], keys[sel], w)
            err = np.abs(fitted - Y[sel])
            worst = err.argmax(1)
            done = (err[np.arange(sel.size), worst] <= t[sel]) | (size[sel] == n)
            active[sel[done]] = False
            go = ~done
            if not go.any():
                continue
            sg, pos, worst, K = sel[go], pos[go], worst[go], size[sel[go]]
            s = (pos[:, 1:] <= worst[:, None]).sum(1)   # searchsorted(idx, worst, "right") - 1 (padding: n - 1)
            s = np.minimum(s, K - 1)
            a = pos[np.arange(sg.size), s]
            b = pos[np.arange(sg.size), np.minimum(s + 1, K - 1)]
            q = np.maximum((b - a) // 4, 1)
            at = np.where(b - a >= 2, np.clip(worst, a + q, b - q), worst)
            taken = keys[sg, at]
            if taken.any():   # the first frame without a key (as `fit_span`)
                at[taken] = (~keys[sg[taken]]).argmax(1)
            keys[sg, at] = True
    # prune: each inner key tried once, those whose removal alone leaves the smallest worst miss first
    inner = [np.flatnonzero(keys[i])[1:-1] for i in range(G)]
    order: list[list[int]] = [[] for _ in range(G)]
    gi = np.repeat(np.arange(G), [x.size for x in inner])
    if gi.size:
        fr = np.concatenate(inner)
        trial = keys[gi]
        trial[np.arange(gi.size), fr] = False
        miss, _ = _fit_masks(Y[gi], trial, w)
        at = 0
        for i in range(G):
            m_i = miss[at:at + inner[i].size]
            order[i] = [int(inner[i][j]) for j in np.argsort(m_i, kind="stable")]
            at += inner[i].size
    for step in range(max((len(o) for o in order), default=0)):
        rows = np.array([i for i in range(G) if step < len(order[i])])
        cand = np.array([order[i][step] for i in rows.tolist()])
        trial = keys[rows]
        trial[np.arange(rows.size), cand] = False
        miss, _ = _fit_masks(Y[rows], trial, w)
        ok = miss <= t[rows]
        keys[rows[ok], cand[ok]] = False
    _, slopes = _fit_masks(Y, keys, w)
    f = np.arange(n)
    return [(f[keys[i]], slopes[i]) for i in range(G)]


# --- No jerkier than the fill -------------------------------------------------------------------------------------


def no_jerkier(ext: np.ndarray, idx: np.ndarray, m: np.ndarray, max_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys ``idx`` (slopes ``m``) of a span, with up to ``max_keys`` keys added while the curve's mean |third
    difference| over the span and the three frames either side is above the fill's. ``ext`` (n + 6,): the fill with
    the three frames either side (the curve the span meets). Each key goes to the frame that misses the fill most
    in the window of four where the keys change the third difference most; the slopes are fitted again."""
    return no_jerkier_spans(np.asarray(ext, np.float64)[None], [(idx, m)], max_keys, batched=False)[0]


def no_jerkier_spans(ext: np.ndarray, fits: list[tuple[np.ndarray, np.ndarray]], max_keys: int,
                     batched: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """`no_jerkier` of G spans of one length at once: ``ext`` (G, n + 6), ``fits`` each span's (keys, slopes);
    ``batched=False`` refits each span alone (`fit_slopes`)."""
    ext = np.asarray(ext, np.float64)
    G, n = ext.shape[0], ext.shape[1] - 6
    y = np.ascontiguousarray(ext[:, 3:n + 3])
    keys = np.zeros((G, n), bool)
    for i, (idx, _) in enumerate(fits):
        keys[i, idx] = True
    slopes = [m for _, m in fits]
    want = np.abs(np.diff(ext, 3, axis=1)).mean(1)
    d3d = np.diff(ext, 3, axis=1)
    w = edge_weights(n) if n > 2 else None
    changed = np.zeros(G, bool)
    for _ in range(max_keys if n > 2 else 0):
        active = np.flatnonzero(keys.sum(1) < n)
        if not active.size:
            break
        red = ext[active].copy()
        red[:, 3:n + 3] = hermite_spans(y[active], [(np.flatnonzero(keys[i]), slopes[i]) for i in active.tolist()])
        d3r = np.diff(red, 3, axis=1)
        over = np.abs(d3r).mean(1) > want[active]
        if not over.any():
            break
        rows = active[over]
        r = np.abs(d3r[over] - d3d[rows]).argmax(1)   # the window of ext frames r .. r + 3
        miss = np.abs(red[over] - ext[rows])[:, 3:n + 3]
        for j, i in enumerate(rows.tolist()):
            cand = [f - 3 for f in range(r[j], r[j] + 4) if 0 <= f - 3 < n and not keys[i, f - 3]]
            if not cand:
                cand = np.flatnonzero(~keys[i]).tolist()
            keys[i, max(cand, key=lambda f: miss[j, f])] = True
        changed[rows] = True
        if batched:
            _, new = _fit_masks(y[rows], keys[rows], w)
            for j, i in enumerate(rows.tolist()):
                slopes[i] = new[j]
        else:
            for i in rows.tolist():
                slopes[i] = fit_slopes(y[i], np.flatnonzero(keys[i]))
    return [(np.flatnonzero(keys[i]), slopes[i]) if changed[i] else fits[i] for i in range(G)]


def hermite_spans(values: np.ndarray, fits: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """`hermite_values` of G spans of one length at once: ``values`` (G, n), ``fits`` each span's (keys, slopes) ->
    (G, n), grouped by key count."""
    y = np.asarray(values, np.float64)
    G, n = y.shape
    out = y.copy()
    size = np.array([len(k) for k, _ in fits])
    for K in np.unique(size).tolist():
        if K >= n or K < 2:
            continue
        sel = np.flatnonzero(size == K)
        idx = np.stack([fits[i][0] for i in sel.tolist()])
        m = np.stack([fits[i][1] for i in sel.tolist()])
        f = np.arange(n, dtype=np.float64)
        mask = np.zeros((sel.size, n), bool)
        mask[np.arange(sel.size)[:, None], idx] = True
        k = np.minimum(np.cumsum(mask, axis=1) - 1, K - 2)
        x0 = np.take_along_axis(idx, k, 1).astype(np.float64)
        h = np.take_along_axis(np.diff(idx, axis=1).astype(np.float64), k, 1)
        u = (f - x0) / h
        v = 1.0 - u
        b0, b1, b2, b3 = v**3, 3 * v * v * u, 3 * v * u * u, u**3
        yk = np.take_along_axis(y[sel], idx, 1)
        out[sel] = ((b0 + b1) * np.take_along_axis(yk, k, 1) + (b2 + b3) * np.take_along_axis(yk, k + 1, 1)
                    + b1 * h / 3.0 * np.take_along_axis(m, k, 1) - b2 * h / 3.0 * np.take_along_axis(m, k + 1, 1))
    return out
