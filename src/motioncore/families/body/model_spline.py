"""The body in-fill's correction as one C2 curve per run of gaps (``basis="spline"``): cubic B-splines with knots
at the keys and every few frames between them, fitted by least squares to the network's per-frame residual.

Why: the older basis (``basis="sine"``, ``families.body.model.gap_basis``) gives each gap its own bump that meets
both keys with zero slope, so with a key every 8-20 frames (blocking) the correction stops at every key and the
filled motion keeps Blender's velocity there: jerk 2-2.6x the truth's on Bandai. Here the keys split a row's
frames into *segments*:

- an *anchor* is a keyed frame next to another keyed frame, or at the window's edge (dense context, a held
  pose): the correction is zero there **and flat** (zero slope), as in LaFAN1 windows;
- a *single key* (unkeyed frames on both sides) lies inside a segment: the correction is zero there, with a free
  slope that both neighbouring gaps share;
- a segment is a maximal run of frames that are not anchors: unkeyed frames and single keys. Its ends are flat at
  an anchor, or free at the window's first or last frame when that frame is unkeyed.

Per segment the curve is a clamped cubic B-spline (C2 at every knot) on knots at the segment's ends, its single
keys, and ``ceil(n / FRAMES_PER_KNOT) + 1`` equal pieces per gap of n frames (at least 2 between two keys, at
most ``MAX_PIECES``; a gap with a free end gets ``ceil(n / FRAMES_PER_KNOT)``). The constraints are eliminated
locally (a flat end fixes its two outer coefficients to zero; a single key eliminates the middle one of the
three B-splines that are non-zero on it), so the design matrix stays banded and the fit is a banded Cholesky
solve (``scipy.linalg.cho_solve_banded``) with a tiny ridge (``RIDGE``): nothing of size (T, T). A segment's
factorisation is cached by its key pattern; every row with that pattern is solved at once.

``fit_rows`` is the numpy fast path (and its transpose, for the gradient); ``smooth_spline`` the torch entry with
autograd. ``dense_reference`` is the slow, obvious reference the parity test holds the fast path to: the full
B-spline design matrix, the constraints' null space (SVD) and ``numpy.linalg.lstsq``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["FRAMES_PER_KNOT", "MAX_PIECES", "RIDGE", "segments", "segment_knots", "fit_rows", "smooth_spline",
           "dense_reference"]

FRAMES_PER_KNOT = 8  # about one knot piece per this many gap frames (the older basis: one curve per 8 frames)
MAX_PIECES = 9       # knot pieces per gap, at most (the older basis: at most 8 curves per gap)
RIDGE = 1e-10        # relative ridge on the normal equations: a gap with fewer frames than free coefficients


def segments(known: np.ndarray) -> list[tuple[int, int, bool, bool]]:
    """(s, e, flat_left, flat_right) per segment of a (T,) bool key mask: [s, e) the frames, flat_* whether the
    end meets an anchor (zero value and slope at frame s - 1 / e) or is the window's free first / last frame."""
    k = np.asarray(known, bool)
    T = k.shape[0]
    before = np.r_[True, k[:-1]]
    after = np.r_[k[1:], True]
    anchor = k & (before | after)
    d = np.diff(np.r_[0, (~anchor).astype(np.int8), 0])
    return [(int(s), int(e), bool(s > 0), bool(e < T))
            for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1))]


def _pieces(n: int, closed: bool) -> int:
    if closed:
        return int(min(MAX_PIECES, max(2, -(-n // FRAMES_PER_KNOT) + 1)))
    return int(min(MAX_PIECES - 1, max(1, -(-n // FRAMES_PER_KNOT))))


def segment_knots(mask: np.ndarray, flat_left: bool, flat_right: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(knot vector t (clamped, cubic), the single keys' positions, x_left, x_right) for a segment whose frames
    0..L-1 carry key mask ``mask`` (L,), positions relative to the segment's first frame."""
    L = len(mask)
    xl = -1.0 if flat_left else 0.0
    xr = float(L) if flat_right else float(L - 1)
    keys = np.flatnonzero(mask).astype(np.float64)
    breaks = np.r_[xl, keys, xr]
    inner: list[float] = []
    for i in range(len(breaks) - 1):
        p, q = breaks[i], breaks[i + 1]
        left_key = i > 0 or flat_left
        right_key = i < len(breaks) - 2 or flat_right
        closed = left_key and right_key
        n = int(round(q - p)) - 1 if closed else int(round(q - p))
        m = _pieces(max(n, 1), closed)
        inner.extend(np.linspace(p, q, m + 1)[1:].tolist())
    inner = inner[:-1]  # the last break is the right end, clamped below
    t = np.r_[[xl] * 4, inner, [xr] * 4]
    return t, keys, xl, xr


@dataclass(frozen=True)
class _Segment:
    A: np.ndarray          # (L, F) the constrained basis at the segment's frames (zero at its keys)
    Au: np.ndarray         # (U, F) its rows at the unkeyed frames
    unkeyed: np.ndarray    # (U,) frame indices in the segment
    chol: np.ndarray       # banded Cholesky factor of Au^T Au + ridge (upper form)
    bands: int


def _design(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(len(x), len(t) - 4) cubic B-spline values (dense; a segment is at most a window long)."""
    from scipy.interpolate import BSpline

    n = len(t) - 4
    x = np.clip(np.asarray(x, np.float64), t[3], t[n])
    return BSpline.design_matrix(x, t, 3).toarray()


def _null_map(t: np.ndarray, keys: np.ndarray, flat_left: bool, flat_right: bool) -> np.ndarray:
    """(n_coef, F) the coefficients from the free ones: flat ends fix two coefficients, each single key eliminates
    the middle one of its three non-zero B-splines (local: every column has at most three entries)."""
    n = len(t) - 4
    fixed = np.zeros(n, bool)
    if flat_left:
        fixed[:2] = True
    if flat_right:
        fixed[-2:] = True
    elim: dict[int, tuple[int, float, int, float]] = {}
    if keys.size:
        vals = _design(t, keys)
        for row in vals:
            nz = np.flatnonzero(np.abs(row) > 1e-12)
            a, m, b = int(nz[0]), int(nz[1]), int(nz[-1])
            if len(nz) != 3 or m in elim or fixed[m]:
                raise AssertionError(f"knot layout: a single key touches B-splines {nz.tolist()}")
            elim[m] = (a, -row[a] / row[m], b, -row[b] / row[m])
    free = [i for i in range(n) if not fixed[i] and i not in elim]
    col = {c: j for j, c in enumerate(free)}
    N = np.zeros((n, len(free)))
    for c, j in col.items():
        N[c, j] = 1.0
    for m, (a, wa, b, wb) in elim.items():
        for c, w in ((a, wa), (b, wb)):
            if c in col:
                N[m, col[c]] += w
    return N


def _banded_upper(G: np.ndarray) -> tuple[np.ndarray, int]:
    F = G.shape[0]
    nz = np.argwhere(np.abs(G) > 0)
    u = int(np.abs(nz[:, 0] - nz[:, 1]).max(initial=0))
    ab = np.zeros((u + 1, F))
    for d in range(u + 1):
        ab[u - d, d:] = np.diagonal(G, d)
    return ab, u


@lru_cache(maxsize=4096)
def _segment(mask_bytes: bytes, L: int, flat_left: bool, flat_right: bool) -> _Segment:
    from scipy.linalg import cholesky_banded

    mask = np.frombuffer(mask_bytes, bool)[:L]
    t, keys, _, _ = segment_knots(mask, flat_left, flat_right)
    N = _null_map(t, keys, flat_left, flat_right)
    A = _design(t, np.arange(L, dtype=np.float64)) @ N
    A[mask] = 0.0  # exactly zero at the keys (the constraint holds to rounding; here exactly)
    unkeyed = np.flatnonzero(~mask)
    Au = A[unkeyed]
    G = Au.T @ Au
    G += np.eye(len(G)) * (RIDGE * max(float(np.trace(G)) / max(len(G), 1), 1e-12))
    ab, u = _banded_upper(G)
    return _Segment(A, Au, unkeyed, cholesky_banded(ab), u)


def _rows_by_pattern(known: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(pattern (T,), rows)] for a (N, T) bool mask."""
    packed = np.ascontiguousarray(np.packbits(known, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(known[f], np.flatnonzero(inverse == i)) for i, f in enumerate(first)]


def fit_rows(x: np.ndarray, known: np.ndarray, transpose: bool = False) -> np.ndarray:
    """Per row of ``x`` (N, T, C) and its key mask ``known`` (N, T): the least-squares spline of each segment
    through the row's unkeyed values, evaluated at every frame (zero at keyed frames; a row with no key passes
    through unchanged). ``transpose``: the adjoint map (the gradient of a loss on the output, back to ``x``)."""
    from scipy.linalg import cho_solve_banded

    x = np.asarray(x, np.float64)
    N, T, C = x.shape
    out = np.zeros_like(x)
    for pat, rows in _rows_by_pattern(np.asarray(known, bool)):
        if not pat.any():
            out[rows] = x[rows]
            continue
        for s, e, fl, fr in segments(pat):
            L = e - s
            seg = _segment(np.ascontiguousarray(pat[s:e]).tobytes(), L, fl, fr)
            v = x[rows, s:e]                       # (M, L, C)
            v = np.moveaxis(v, 1, 0).reshape(L, -1)  # (L, M*C)
            if not transpose:
                coef = cho_solve_banded((seg.chol, False), seg.Au.T @ v[seg.unkeyed])
                y = seg.A @ coef
            else:
                coef = cho_solve_banded((seg.chol, False), seg.A.T @ v)
                y = np.zeros_like(v)
                y[seg.unkeyed] = seg.Au @ coef
            out[rows, s:e] = np.moveaxis(y.reshape(L, len(rows), C), 0, 1)
    return out


def smooth_spline(x, known: np.ndarray):
    """``fit_rows`` on a torch tensor ``x`` (N, T, C) with autograd (its gradient is the adjoint map)."""
    import torch

    class _Fit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp):  # type: ignore[override]
            y = fit_rows(inp.detach().cpu().double().numpy(), known)
            return torch.as_tensor(y, dtype=inp.dtype, device=inp.device)

        @staticmethod
        def backward(ctx, grad):  # type: ignore[override]
            g = fit_rows(grad.detach().cpu().double().numpy(), known, transpose=True)
            return torch.as_tensor(g, dtype=grad.dtype, device=grad.device)

    return _Fit.apply(x)


def dense_reference(x: np.ndarray, known: np.ndarray) -> np.ndarray:
    """The slow, obvious reference for ``fit_rows`` on one row ``x`` (T, C), ``known`` (T,): per segment, the full
    B-spline design matrix, the null space of its constraints (value zero at each key and, at a flat end, the
    first derivative zero too) by SVD, and ``numpy.linalg.lstsq`` on the unkeyed frames."""
    from scipy.interpolate import BSpline
    from scipy.linalg import null_space

    x = np.asarray(x, np.float64)
    known = np.asarray(known, bool)
    out = np.zeros_like(x)
    if not known.any():
        return x.copy()
    for s, e, fl, fr in segments(known):
        mask = known[s:e]
        L = e - s
        t, keys, xl, xr = segment_knots(mask, fl, fr)
        n = len(t) - 4
        cons = []
        eye = np.eye(n)
        for xk in list(keys) + ([xl] if fl else []) + ([xr] if fr else []):
            cons.append([BSpline(t, eye[i], 3)(xk) for i in range(n)])
        for xk, on in ((xl, fl), (xr, fr)):
            if on:
                cons.append([BSpline(t, eye[i], 3).derivative()(xk) for i in range(n)])
        Z = null_space(np.asarray(cons)) if cons else np.eye(n)
        B = np.stack([[BSpline(t, eye[i], 3)(f) for i in range(n)] for f in range(L)])
        A = B @ Z
        u = ~mask
        coef = np.linalg.lstsq(A[u], x[s:e][u], rcond=None)[0]
        y = A @ coef
        y[mask] = 0.0
        out[s:e] = y
    return out
