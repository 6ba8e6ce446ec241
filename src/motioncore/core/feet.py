"""Feet on the ground: foot skate, GMD's skating ratio, contact labels and the contact height, from world
joint positions. One definition for the in-fill, its benchmarks, retargeting and the add-on (vendored).

API (positions are world joint positions ``(..., T, J, 3)``; ``feet`` the foot and toe joint indices, picked
by topology with ``retarget.topology.foot_joints`` or by name on the model's skeleton with
``core.kinematics.find_body_joints(sk).feet``; ``unit`` cm per position unit; ``up`` the up axis, 1 for Y-up,
2 for Z-up; ``frames`` a bool mask (T,) or frame indices: only pairs of consecutive frames both in it count):

- ``ground(positions, feet)`` (..., F): each joint's own ground, its ``GROUND_PERCENTILE`` (5th) percentile
  height over the frames. Take it from the CAPTURE (the reference) and pass it on when measuring a fill.
- ``skate(positions, fps, feet, ground=None, frames=None)`` cm/s: per pair of consecutive frames and joint, the
  horizontal speed v in cm/s at the clip's own rate, weighted by w = clip(2 - 2^(h/H), 0, 1), h the mean height
  of the two frames above that joint's ground, H = ``SKATE_H`` = 2.5 cm (w = 1 on the ground, 0 from H up);
  skate = sum(w v) / sum(w) (NaN when no foot is near the ground). ``skate_sums`` gives (sum w v, sum w) to
  pool windows; ``skate_pairs`` the per-pair (v, w).
- ``fill_span(known)`` (T,) bool: the frames skate is measured on for a fill: the filled frames and the key on
  either side of each run of them.
- ``compare(fill, capture, fps, feet, frames=None)`` {"skate", "skate_capture", "skate_ratio", "skating_ratio",
  "skating_ratio_capture"}: a fill against its capture on the same frames, on the capture's ground.
- ``skating_ratio(positions, fps, toes, ground=None, frames=None)``: GMD's skating ratio (Karunratanakul et al.,
  "Guided Motion Diffusion for Controllable Human Motion Synthesis", ICCV 2023, its calculate_skating_ratio;
  also used by CondMDI): the share of frame pairs where a toe (SMPL's foot joints 10, 11) is within
  ``GMD_HEIGHT`` (5 cm) of the ground in both frames and slides faster than ``GMD_SPEED`` (50 cm/s) both in
  that pair and on average over ``GMD_WINDOW_S`` (0.25 s: GMD's 5 frames at 20 fps; here as many frames at the
  clip's rate, odd, over the whole clip given, zeros past its ends as scipy's uniform_filter1d mode="constant"),
  counted on the pairs in ``frames``. GMD's floor is the clip's lowest foot point; ours is each toe's own ground
  as above.
- ``contacts(positions, fps, feet, ground=None)`` (..., T, F) bool: a joint is in contact on a frame when it is
  within ``CONTACT_HEIGHT`` (3 cm) of its ground and its horizontal speed (mean of the pairs either side) is
  under ``CONTACT_SPEED`` (40 cm/s); ``leg_contacts`` ORs a leg's joints into (..., T, legs). The labels the
  planting and ``retarget --contacts`` use. On Bandai's walk_active_005 (30 fps) a leg is down on 51% and 45%
  of frames and some foot on 95% (the rest: the instants of double support's hand-over); its run: 35%.
- ``cm_per_unit(ratio)``: a clip's unit from the ratio of a body's length in cm (a model's legs) to the same
  length in the clip's units: the nearest power of ten within 10^0.2 of it (BVH in cm: 1, a rig in metres: 100,
  whatever the actor's size), else the ratio itself (CMU's ASF units, 5.644 cm): the add-on's ``units_scale``.
- ``contact_height(positions, toes)``: the median over frames of the lowest toe's height (the height the feet
  stand at); ``retarget`` moves a clip by the difference to the target's.

Only stdlib and numpy (vendored into the add-on by scripts/build_addon.py). Legend: T frames, J joints, F feet
(the joints passed), P frame pairs.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SKATE_H", "GROUND_PERCENTILE", "CONTACT_HEIGHT", "CONTACT_SPEED", "GMD_HEIGHT", "GMD_SPEED",
           "GMD_WINDOW_S", "ground", "fill_span", "pair_mask", "skate_pairs", "skate_sums", "skate", "skating_ratio",
           "compare", "contacts", "leg_contacts", "contact_height", "cm_per_unit"]

SKATE_H = 2.5             # cm: the skate weight falls from 1 on the ground to 0 at this height
GROUND_PERCENTILE = 5.0   # a joint's ground: this percentile of its height over the capture
CONTACT_HEIGHT = 3.0      # cm above the joint's ground: a contact label's height limit
CONTACT_SPEED = 40.0      # cm/s: a contact label's horizontal speed limit
GMD_HEIGHT = 5.0          # cm: GMD's contact height (thresh_height 0.05 m)
GMD_SPEED = 50.0          # cm/s: GMD's skating speed (thresh_vel 0.50 m/s)
GMD_WINDOW_S = 0.25       # s: GMD's speed average, 5 frames at 20 fps


def _feet(positions: np.ndarray, feet: Sequence[int]) -> np.ndarray:
    p = np.asarray(positions, np.float64)
    if p.ndim < 3 or p.shape[-1] != 3:
        raise ValueError(f"positions: expected (..., T, J, 3), got {p.shape}")
    idx = [int(j) for j in feet]
    if not idx or min(idx) < -p.shape[-2] or max(idx) >= p.shape[-2]:
        raise ValueError(f"feet: need joint indices in [0, {p.shape[-2]}), got {list(feet)}")
    return p[..., idx, :]   # (..., T, F, 3)


def _horizontal(up: int) -> list[int]:
    if up not in (0, 1, 2):
        raise ValueError(f"up: expected axis 0, 1 or 2, got {up}")
    return [a for a in range(3) if a != up]


def ground(positions: np.ndarray, feet: Sequence[int], up: int = 1) -> np.ndarray:
    """(..., F) each joint's ground: the ``GROUND_PERCENTILE`` percentile of its height over the frames."""
    _horizontal(up)
    return np.percentile(_feet(positions, feet)[..., up], GROUND_PERCENTILE, axis=-2)


def fill_span(known: np.ndarray) -> np.ndarray:
    """(T,) bool: the frames not ``known`` and the key on either side of each run of them."""
    known = np.asarray(known, bool)
    span = ~known
    span[:-1] |= ~known[1:]
    span[1:] |= ~known[:-1]
    return span


def pair_mask(T: int, frames: np.ndarray | Sequence[int] | None) -> np.ndarray:
    """(T - 1,) bool: the pairs (t, t + 1) with both frames in ``frames`` (a (T,) bool mask or indices;
    None: every pair)."""
    if frames is None:
        return np.ones(max(T - 1, 0), bool)
    f = np.asarray(frames)
    if f.dtype == bool:
        if f.shape != (T,):
            raise ValueError(f"frames: a mask of shape ({T},) expected, got {f.shape}")
        m = f
    else:
        m = np.zeros(T, bool)
        idx = f.astype(np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= T):
            raise ValueError(f"frames: indices in [0, {T}) expected, got {idx.min()}..{idx.max()}")
        m[idx] = True
    return m[:-1] & m[1:]


def skate_pairs(positions: np.ndarray, fps: float, feet: Sequence[int], ground: np.ndarray | None = None,
                unit: float = 1.0, up: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(v, w), each (..., T - 1, F): per pair of consecutive frames and joint, the horizontal speed in cm/s and
    the skate weight clip(2 - 2^(h/H), 0, 1), h the pair's mean height above the joint's ``ground`` in cm
    (default: the joints' own ground in ``positions``)."""
    hor = _horizontal(up)
    p = _feet(positions, feet)
    g = _ground_of(p, ground, up)
    v = np.linalg.norm(np.diff(p[..., hor], axis=-3), axis=-1) * (float(fps) * unit)
    h = ((p[..., 1:, :, up] + p[..., :-1, :, up]) / 2 - g[..., None, :]) * unit
    w = np.clip(2.0 - np.exp2(h / SKATE_H), 0.0, 1.0)
    return v, w


def _ground_of(p: np.ndarray, ground: np.ndarray | None, up: int) -> np.ndarray:
    if ground is None:
        return np.percentile(p[..., up], GROUND_PERCENTILE, axis=-2)
    g = np.asarray(ground, np.float64)
    if g.shape != p.shape[:-3] + p.shape[-2:-1]:
        raise ValueError(f"ground: expected {p.shape[:-3] + p.shape[-2:-1]}, got {g.shape}")
    return g


def skate_sums(positions: np.ndarray, fps: float, feet: Sequence[int], ground: np.ndarray | None = None,
               frames: np.ndarray | Sequence[int] | None = None, unit: float = 1.0, up: int = 1
               ) -> tuple[float, float]:
    """(sum w v, sum w) over the pairs in ``frames`` (and every leading dimension): pool these over windows or
    clips, then skate = first / second."""
    v, w = skate_pairs(positions, fps, feet, ground, unit, up)
    w = w * pair_mask(v.shape[-2] + 1, frames)[:, None]
    return float(np.sum(w * v)), float(np.sum(w))


def skate(positions: np.ndarray, fps: float, feet: Sequence[int], ground: np.ndarray | None = None,
          frames: np.ndarray | Sequence[int] | None = None, unit: float = 1.0, up: int = 1) -> float:
    """Weighted foot skate in cm/s (module doc); NaN when no foot comes near its ground on those frames."""
    wv, w = skate_sums(positions, fps, feet, ground, frames, unit, up)
    return wv / w if w > 0 else float("nan")


def _box_mean(x: np.ndarray, size: int) -> np.ndarray:
    """Centred running mean of ``size`` (odd) along axis -2 with zeros past both ends."""
    r = size // 2
    pad = [(0, 0)] * x.ndim
    pad[-2] = (r + 1, r)
    c = np.cumsum(np.pad(x, pad), axis=-2)
    return (c[..., size:, :] - c[..., :-size, :]) / size


def skating_ratio(positions: np.ndarray, fps: float, toes: Sequence[int], ground: np.ndarray | None = None,
                  frames: np.ndarray | Sequence[int] | None = None, unit: float = 1.0, up: int = 1) -> float:
    """GMD's skating ratio (module doc) over the pairs in ``frames``, pooled over leading dimensions; NaN
    without pairs."""
    hor = _horizontal(up)
    p = _feet(positions, toes)
    g = _ground_of(p, ground, up)
    sel = pair_mask(p.shape[-3], frames)
    if not sel.any():
        return float("nan")
    v = np.linalg.norm(np.diff(p[..., hor], axis=-3), axis=-1) * (float(fps) * unit)   # (..., P, F)
    size = max(1, int(round(GMD_WINDOW_S * fps)) // 2 * 2 + 1)
    avg = _box_mean(v, size)
    h = (p[..., up] - g[..., None, :]) * unit
    low = (h[..., :-1, :] < GMD_HEIGHT) & (h[..., 1:, :] < GMD_HEIGHT)
    skating = (low & (v > GMD_SPEED) & (avg > GMD_SPEED)).any(axis=-1)   # (..., P): either foot
    return float(skating[..., sel].mean())


def compare(fill: np.ndarray, capture: np.ndarray, fps: float, feet: Sequence[int],
            frames: np.ndarray | Sequence[int] | None = None, toes: Sequence[int] | None = None,
            unit: float = 1.0, up: int = 1) -> dict[str, float]:
    """A fill's skate against its capture's on the same frames, both on the capture's ground (taken over the
    whole capture given): {"skate", "skate_capture", "skate_ratio", "skating_ratio", "skating_ratio_capture"}.
    ``toes`` (default ``feet``) for GMD's ratio. JSON-ready floats (NaN where undefined)."""
    if np.shape(fill) != np.shape(capture):
        raise ValueError(f"fill {np.shape(fill)} and capture {np.shape(capture)} differ")
    toes = list(feet) if toes is None else list(toes)
    g, gt = ground(capture, feet, up), ground(capture, toes, up)
    s, sc = (skate(x, fps, feet, g, frames, unit, up) for x in (fill, capture))
    return {"skate": s, "skate_capture": sc, "skate_ratio": s / sc if sc > 0 else float("nan"),
            "skating_ratio": skating_ratio(fill, fps, toes, gt, frames, unit, up),
            "skating_ratio_capture": skating_ratio(capture, fps, toes, gt, frames, unit, up)}


def contacts(positions: np.ndarray, fps: float, feet: Sequence[int], ground: np.ndarray | None = None,
             unit: float = 1.0, up: int = 1, height: float = CONTACT_HEIGHT, speed: float = CONTACT_SPEED
             ) -> np.ndarray:
    """(..., T, F) bool: each joint within ``height`` cm of its ground and slower than ``speed`` cm/s
    horizontally (the mean of the pairs before and after the frame; one pair at the ends)."""
    hor = _horizontal(up)
    p = _feet(positions, feet)
    g = _ground_of(p, ground, up)
    v = np.linalg.norm(np.diff(p[..., hor], axis=-3), axis=-1) * (float(fps) * unit)   # (..., T - 1, F)
    if v.shape[-2] == 0:
        sp = np.zeros(p.shape[:-1])
    else:
        first, last = v[..., :1, :], v[..., -1:, :]
        sp = (np.concatenate([first, v], -2) + np.concatenate([v, last], -2)) / 2
    return ((p[..., up] - g[..., None, :]) * unit < height) & (sp < speed)


def leg_contacts(positions: np.ndarray, fps: float, legs: Sequence[Sequence[int]],
                 ground: Sequence[np.ndarray] | None = None, unit: float = 1.0, up: int = 1) -> np.ndarray:
    """(..., T, len(legs)) bool: a leg is in contact when any of its joints (e.g. ankle and toe) is (``contacts``);
    ``ground`` one array per leg, or None."""
    out = [contacts(positions, fps, leg, None if ground is None else ground[i], unit, up).any(axis=-1)
           for i, leg in enumerate(legs)]
    return np.stack(out, axis=-1)


def contact_height(positions: np.ndarray, toes: Sequence[int], up: int = 1) -> float:
    """The height the feet stand at: the median over frames of the lowest of ``toes`` (position units)."""
    p = _feet(positions, toes)[..., up]   # (..., T, F)
    return float(np.median(p.min(axis=-1)))


def cm_per_unit(ratio: float) -> float:
    """cm per clip unit from (a body length in cm) / (the same length in clip units) (module doc)."""
    r = float(ratio)
    if not np.isfinite(r) or r <= 0:
        raise ValueError(f"ratio: expected a positive length ratio, got {ratio}")
    e = np.log10(r)
    return float(10.0 ** np.round(e)) if abs(e - np.round(e)) <= 0.2 else r
