"""How a filled clip moves where it was filled, against its capture (the deleted truth) and Blender's curve: pops,
feet under the ground, skate and jerk (issue 46's targets for planting). Plain numpy on one clip.

- **pops**: per gap and joint, the largest one-frame turn of the joint's local rotation over the gap's frame pairs
  (the filled frames and the two pairs meeting the keys either side), over the capture's largest on the same pairs
  (taken as at least ``POP_FLOOR`` degrees). Target: <= 1.5x.
- **under**: per foot joint, how far (cm) it goes under the capture's ground (``core.feet.ground`` over the
  capture's keyed frames) on the filled frames; the capture's own on the same frames beside it. Target: <= 2 cm.
- **skate**: ``core.feet.skate`` on the filled frames and their keys, on the capture's ground, over the capture's.
- **jerk**: ``eval.infill.jerk_sum`` over each gap and ``JERK_PAD`` keyed frames either side, over the capture's
  (and Bezier's, when given). Target: <= 1.25x the capture's, or Bezier's where that is higher.

Legend: T frames, J joints, G gaps, F feet; quaternions WXYZ.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from motioncore.core import feet as F
from motioncore.core.gaps import runs
from motioncore.eval.infill import JERK_PAD, jerk_sum

__all__ = ["POP_FLOOR", "turns", "pops", "under_ground", "fill_quality"]

POP_FLOOR = 1.0  # degrees: the capture's largest turn over a gap is taken as at least this


def turns(rotations: np.ndarray) -> np.ndarray:
    """(T - 1, J) degrees: each joint's local rotation's turn from frame t to t + 1 (``rotations`` (T, J, 4))."""
    q = np.asarray(rotations, np.float64)
    dot = np.abs(np.sum(q[1:] * q[:-1], -1)) / np.maximum(
        np.linalg.norm(q[1:], axis=-1) * np.linalg.norm(q[:-1], axis=-1), 1e-12)
    return np.degrees(2.0 * np.arccos(np.clip(dot, 0.0, 1.0)))


def _gaps(known: np.ndarray) -> list[tuple[int, int]]:
    """The runs of filled frames with a key on both sides (s, e): frames s .. e - 1 filled."""
    T = len(known)
    return [(s, e) for s, e in runs(~np.asarray(known, bool)) if s > 0 and e < T]


def pops(rotations: np.ndarray, capture: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ratio (G, J), the fill's largest turn (G, J) in degrees) per gap and joint (module doc)."""
    a, b = turns(rotations), turns(capture)
    ratio, top = [], []
    for s, e in _gaps(known):   # pairs (s - 1, s) .. (e - 1, e): indices s - 1 .. e - 1 of the turns
        mine, cap = a[s - 1:e].max(0), b[s - 1:e].max(0)
        ratio.append(mine / np.maximum(cap, POP_FLOOR))
        top.append(mine)
    J = np.shape(rotations)[1]
    return np.array(ratio).reshape(-1, J), np.array(top).reshape(-1, J)


def under_ground(positions: np.ndarray, capture: np.ndarray, known: np.ndarray, feet: Sequence[int],
                 unit: float = 1.0, up: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(fill's, capture's) (F,) cm: how far each foot joint goes under the capture's ground (its keyed frames) on
    the filled frames (0 when never under). ``positions`` / ``capture`` global (T, J, 3)."""
    known = np.asarray(known, bool)
    g = F.ground(np.asarray(capture)[known], feet, up)
    out = []
    for x in (positions, capture):
        h = np.asarray(x, np.float64)[~known][:, list(feet), up] - g
        out.append(np.maximum(0.0, -h.min(0)) * unit if len(h) else np.zeros(len(feet)))
    return out[0], out[1]


def fill_quality(rotations: np.ndarray, positions: np.ndarray, capture_rotations: np.ndarray,
                 capture_positions: np.ndarray, known: np.ndarray, fps: float, feet: Sequence[int],
                 bezier_positions: np.ndarray | None = None, unit: float = 1.0, up: int = 1) -> dict:
    """A filled clip (local ``rotations`` (T, J, 4), global ``positions`` (T, J, 3)) against its capture (the same,
    keys identical) on the frames not ``known``: {"pops_max", "pops_median" (over gaps of the worst joint's ratio;
    "pops_gaps" each gap's), "skate_sums" and "jerk_sums" (to pool clips),
    "pops_worst": (gap start, joint, fill's degrees, capture's degrees), "under", "under_capture" (cm, the deepest
    foot), "skate_ratio", "jerk_ratio", "jerk_bezier_ratio" (Bezier's jerk over the capture's; NaN without)}."""
    known = np.asarray(known, bool)
    ratio, top = pops(rotations, capture_rotations, known)
    gaps = _gaps(known)
    out: dict = {"gaps": len(gaps)}
    if len(ratio):
        worst = ratio.max(1)
        g, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        s, e = gaps[g]
        cap = turns(capture_rotations)[s - 1:e, j].max()
        out.update(pops_max=float(worst.max()), pops_median=float(np.median(worst)), pops_gaps=worst.tolist(),
                   pops_worst=(int(s), int(j), float(top[g, j]), float(cap)))
    u, uc = under_ground(positions, capture_positions, known, feet, unit, up)
    out.update(under=float(u.max()), under_capture=float(uc.max()))
    g = F.ground(np.asarray(capture_positions)[known], feet, up)
    span = F.fill_span(known)
    sums = [F.skate_sums(x, fps, feet, g, span, unit, up) for x in (positions, capture_positions)]
    s_fill, s_cap = (wv / w if w > 0 else float("nan") for wv, w in sums)
    out["skate_ratio"] = s_fill / s_cap if s_cap > 0 else float("nan")
    out["skate_sums"] = [sums[0][0], sums[0][1], sums[1][0], sums[1][1]]   # pool clips: (fill w v, w, capture's)
    jk = []
    for x in (positions, capture_positions, bezier_positions):
        if x is None:
            jk.append(float("nan"))
            continue
        jk.append(sum(jerk_sum(np.asarray(x)[max(0, s - JERK_PAD):min(len(known), e + JERK_PAD)]) for s, e in gaps))
    out["jerk_ratio"] = jk[0] / jk[1] if jk[1] > 0 else float("nan")
    out["jerk_bezier_ratio"] = jk[2] / jk[1] if jk[1] > 0 else float("nan")
    out["jerk_sums"] = jk   # pool clips: fill's, capture's, Bezier's
    return out
