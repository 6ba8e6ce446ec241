"""Root paths for the path-driven controllers: ``path.json`` parsing and validation, and the geometry a
controller needs at runtime (arc length, projection, walking along the path at a speed profile).

A path is a polyline on the ground (x, z) in **metres** with optional per-point speed (m/s), gait or
action name, and facing (degrees; 0 faces +Z, 90 faces +X, as `features.RootFrame` yaw). Format and
rules: docs/paths.md.

Legend: N path points, K query points, T frames, C label classes (gaits or actions).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

import numpy as np

from ..errors import MotioncoreError

FIELDS = ("points", "fps", "speed", "gait", "facing")  # the keys path.json may hold
TANGENT_HALF_WINDOW_M = 0.25  # tangent at s = direction from s - w to s + w along the path (smooths corners)
TIME_GRID_M = 0.02  # arc-length step of the time table used to walk along a varying speed profile
MIN_SPEED_MPS = 1e-3  # speeds are clamped to this when timing the walk (a speed of 0 stops the character there)


class PathError(MotioncoreError, ValueError):
    """A path (path.json or a `Path`) is malformed; the message names the field."""


# ----------------------------------------------------------------------------- the path
@dataclass(frozen=True, eq=False)
class Path:
    """A requested root path. Arrays are per point; None means "not given" (the controller fills in
    defaults: see docs/paths.md)."""

    points: np.ndarray  # (N, 2) x, z ground positions, metres
    fps: float | None = None  # output frame rate of the animation (None: the model's)
    speed: np.ndarray | None = None  # (N,) requested speed, m/s, >= 0
    gait: tuple[str, ...] | np.ndarray | None = None  # (N,) gait / action names, or (N, C) label values
    facing: np.ndarray | None = None  # (N,) facing angle, degrees (0: +Z, 90: +X)

    def __post_init__(self) -> None:
        pts = _array("points", self.points, 2)
        if pts.ndim != 2 or pts.shape[1] != 2:
            raise PathError(f"points: expected a list of [x, z] pairs, got an array of shape {pts.shape}")
        N = len(pts)
        if N < 2:
            raise PathError(f"points: expected at least 2 points, got {N}")
        if not np.isfinite(pts).all():
            raise PathError(f"points: point {int(np.argwhere(~np.isfinite(pts))[0, 0])} is not a finite number")
        if np.linalg.norm(np.diff(pts, axis=0), axis=1).sum() <= 1e-9:
            raise PathError("points: the path has zero length (all points coincide)")
        object.__setattr__(self, "points", pts)
        if self.fps is not None and not (_is_number(self.fps) and math.isfinite(self.fps) and self.fps > 0):
            raise PathError(f"fps: expected a positive number, got {self.fps!r}")
        if self.speed is not None:
            sp = _per_point("speed", self.speed, N)
            if (sp < 0).any():
                raise PathError(f"speed: point {int(np.argmax(sp < 0))} has a negative speed {sp[sp < 0][0]} m/s")
            object.__setattr__(self, "speed", sp)
        if self.facing is not None:
            object.__setattr__(self, "facing", _per_point("facing", self.facing, N))
        if self.gait is not None:
            object.__setattr__(self, "gait", _gait(self.gait, N))

    @property
    def num_points(self) -> int:
        return len(self.points)

    @property
    def length(self) -> float:
        """Total length in metres."""
        return float(np.linalg.norm(np.diff(self.points, axis=0), axis=1).sum())

    def to_dict(self) -> dict[str, Any]:
        """The path.json document (label arrays are written as their argmax names only if names)."""
        d: dict[str, Any] = {"points": self.points.tolist()}
        if self.fps is not None:
            d["fps"] = self.fps
        if self.speed is not None:
            d["speed"] = self.speed.tolist()
        if isinstance(self.gait, tuple):
            d["gait"] = list(self.gait)
        if self.facing is not None:
            d["facing"] = self.facing.tolist()
        return d


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _array(name: str, value: Any, width: int | None = None) -> np.ndarray:
    """``value`` as float64, with a PathError naming ``name`` for non-numbers (strings, nested junk)."""
    if isinstance(value, str | bytes | Mapping):
        raise PathError(f"{name}: expected numbers, got {type(value).__name__} {str(value)[:40]!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise PathError(f"{name}: expected {'a list of numbers' if width is None else f'a list of {width}-number lists'}"
                        f", got {str(value)[:60]!r} ({e})") from None
    return arr


def _per_point(name: str, value: Any, n: int) -> np.ndarray:
    """A number (broadcast) or a list of n finite numbers."""
    arr = _array(name, value)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise PathError(f"{name}: expected one number or a list of {n} numbers (one per point), got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if len(bad):
        raise PathError(f"{name}: point {int(bad[0])} is not a finite number ({arr[bad[0]]})")
    return arr


def _gait(value: Any, n: int) -> tuple[str, ...] | np.ndarray:
    """A name (broadcast), a list of n names, or an (n, C) array of label values."""
    if isinstance(value, str):
        return (value,) * n
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
        arr = value.astype(np.float64)
        if arr.ndim != 2 or len(arr) != n or not np.isfinite(arr).all():
            raise PathError(f"gait: expected ({n}, C) finite label values, got shape {arr.shape}")
        return arr
    if not isinstance(value, Sequence) or isinstance(value, bytes):
        raise PathError(f"gait: expected a name or a list of {n} names, got {type(value).__name__}")
    if len(value) != n:
        raise PathError(f"gait: expected one name or a list of {n} names (one per point), got {len(value)}")
    for i, g in enumerate(value):
        if not isinstance(g, str):
            raise PathError(f"gait: point {i} is {g!r}, expected a gait or action name (string)")
    return tuple(value)


# ----------------------------------------------------------------------------- path.json
def parse_path(doc: Any) -> Path:
    """A `Path` from a parsed path.json object; raises PathError naming the bad field."""
    if not isinstance(doc, Mapping):
        raise PathError(f"expected a JSON object with 'points', got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise PathError(f"unknown field(s) {unknown}; known: {list(FIELDS)}")
    if "points" not in doc:
        raise PathError("points: missing (a list of [x, z] pairs in metres)")
    pts = doc["points"]
    if not isinstance(pts, list) or any(not isinstance(p, list) or len(p) != 2 for p in pts):
        bad = next((i for i, p in enumerate(pts) if not isinstance(p, list) or len(p) != 2), None) \
            if isinstance(pts, list) else None
        where = f" (point {bad} is {pts[bad]!r})" if bad is not None else ""
        raise PathError(f"points: expected a list of [x, z] pairs in metres{where}")
    return Path(np.asarray(_array("points", pts, 2)), doc.get("fps"), doc.get("speed"), doc.get("gait"),
                doc.get("facing"))


def load_path(file: str | FilePath) -> Path:
    """Read and validate a path.json file."""
    p = FilePath(file)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PathError(f"{p}: cannot read the path file ({e.strerror or e})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PathError(f"{p}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    try:
        return parse_path(doc)
    except PathError as e:
        raise PathError(f"{p}: {e}") from None


def resolve_labels(gait: tuple[str, ...] | np.ndarray, labels: Sequence[str],
                   aliases: Mapping[str, str] | None = None) -> np.ndarray:
    """(N, C) label values in the order of ``labels`` from names (one-hot; ``aliases`` map other names
    onto labels) or from an (N, C) array (checked)."""
    labels = tuple(labels)
    if isinstance(gait, np.ndarray):
        if gait.shape[1] != len(labels):
            raise PathError(f"gait: expected {len(labels)} label values per point ({', '.join(labels)}), "
                            f"got {gait.shape[1]}")
        return gait
    aliases = aliases or {}
    out = np.zeros((len(gait), len(labels)))
    for i, g in enumerate(gait):
        name = aliases.get(g, g)
        if name not in labels:
            raise PathError(f"gait: point {i} is {g!r}; this model knows {list(labels)}"
                            + (f" (and aliases {sorted(aliases)})" if aliases else ""))
        out[i, labels.index(name)] = 1.0
    return out


# ----------------------------------------------------------------------------- geometry
def segment_projection(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest points of segments a->b (M, 2) to points p (K, 2): (u (K, M) in [0, 1], distance (K, M))."""
    ab = b - a  # (M, 2)
    l2 = np.maximum((ab * ab).sum(-1), 1e-18)  # (M,)
    u = np.clip(((p[:, None] - a[None]) * ab[None]).sum(-1) / l2, 0.0, 1.0)  # (K, M)
    closest = a[None] + u[..., None] * ab[None]  # (K, M, 2)
    return u, np.linalg.norm(p[:, None] - closest, axis=-1)


def distance_to_polyline(points: np.ndarray, polyline: np.ndarray, chunk: int = 256) -> np.ndarray:
    """(K,) distance of each point (K, 2) to the polyline (N, 2) (N >= 2; any units)."""
    pts, line = np.asarray(points, np.float64), np.asarray(polyline, np.float64)
    if line.ndim != 2 or line.shape[1] != 2 or len(line) < 2 or pts.ndim != 2 or pts.shape[1] != 2:
        raise PathError(f"expected points (K, 2) and a polyline (N >= 2, 2), got {pts.shape} and {line.shape}")
    out = np.empty(len(pts))
    for i in range(0, len(pts), chunk):  # (chunk, N - 1) distances at a time
        out[i:i + chunk] = segment_projection(pts[i:i + chunk], line[:-1], line[1:])[1].min(1)
    return out


class PathTrack:
    """A path in a model's units, ready for the runtime: arc length ``s`` from 0 to ``length``, positions,
    smoothed tangents, per-point speed / label values / facing interpolated linearly in ``s``, windowed
    projection, and walking along the path in time at the speed profile.

    ``scale`` converts metres to the model's units (100 for cm); ``labels`` (N, C) and ``speed`` (N,) m/s
    are already resolved (see `resolve_labels`); ``facing`` (N,) degrees or None (then the tangent)."""

    def __init__(self, points: np.ndarray, speed: np.ndarray, labels: np.ndarray, facing: np.ndarray | None,
                 scale: float):
        pts = np.asarray(points, np.float64) * scale
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        keep = np.r_[True, seg > 1e-9 * max(scale, 1.0)]  # drop repeated points (zero-length segments)
        self.xz = pts[keep]  # (N, 2)
        self.s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(self.xz, axis=0), axis=1))]  # (N,)
        self.length = float(self.s[-1])
        self.speed = np.asarray(speed, np.float64)[keep] * scale  # (N,) units/s
        self.labels = np.asarray(labels, np.float64)[keep]  # (N, C)
        self.facing = None if facing is None else np.radians(np.asarray(facing, np.float64)[keep])
        self.scale = float(scale)
        grid = np.union1d(self.s, np.linspace(0.0, self.length, max(2, int(self.length / (TIME_GRID_M * scale)) + 1)))
        v = np.maximum(np.interp(grid, self.s, self.speed), MIN_SPEED_MPS * scale)
        dt = np.diff(grid) * 2.0 / (v[:-1] + v[1:])  # time per grid step at the mean speed
        self._grid_s, self._grid_t = grid, np.r_[0.0, np.cumsum(dt)]  # time to reach s, seconds

    @property
    def duration(self) -> float:
        """Seconds to walk the whole path at its speed profile (huge where a speed is 0)."""
        return float(self._grid_t[-1])

    def position(self, s: np.ndarray) -> np.ndarray:
        """(..., 2) ground positions at arc lengths s (...), clamped to the path."""
        s = np.clip(s, 0.0, self.length)
        return np.stack([np.interp(s, self.s, self.xz[:, 0]), np.interp(s, self.s, self.xz[:, 1])], -1)

    def tangent(self, s: np.ndarray) -> np.ndarray:
        """(..., 2) unit tangents: the direction from s - w to s + w (w = TANGENT_HALF_WINDOW_M)."""
        w = TANGENT_HALF_WINDOW_M * self.scale
        d = self.position(np.asarray(s) + w) - self.position(np.asarray(s) - w)
        n = np.linalg.norm(d, axis=-1, keepdims=True)
        return np.where(n > 1e-12, d / np.maximum(n, 1e-12), self.xz[-1] - self.xz[-2])

    def yaw(self, s: np.ndarray) -> np.ndarray:
        """(...) facing angle (radians, RootFrame convention) at s: the given facing, else the tangent's."""
        if self.facing is not None:
            sn = np.interp(s, self.s, np.sin(self.facing))
            cs = np.interp(s, self.s, np.cos(self.facing))
            return np.arctan2(sn, cs)
        t = self.tangent(s)
        return np.arctan2(t[..., 0], t[..., 1])

    def speed_at(self, s: np.ndarray) -> np.ndarray:
        return np.interp(s, self.s, self.speed)

    def labels_at(self, s: np.ndarray) -> np.ndarray:
        """(..., C) label values at s."""
        s = np.asarray(s, np.float64)
        return np.stack([np.interp(s, self.s, self.labels[:, c]) for c in range(self.labels.shape[1])], -1)

    def walk(self, s0: float, seconds: np.ndarray) -> np.ndarray:
        """Arc lengths reached from s0 after ``seconds`` (K,) at the speed profile (clamped at the end)."""
        t0 = np.interp(s0, self._grid_s, self._grid_t)
        return np.interp(t0 + np.asarray(seconds, np.float64), self._grid_t, self._grid_s)

    def project(self, p: np.ndarray, s_prev: float, back: float = 0.5, ahead: float = 1.5) -> float:
        """Arc length of the closest path point to ``p`` (2,), searched only on segments overlapping
        [s_prev - back, s_prev + ahead] metres, so that a path crossing itself is followed in order."""
        lo, hi = s_prev - back * self.scale, s_prev + ahead * self.scale
        last = len(self.s) - 1  # segments are i -> i + 1 for i < last
        i0 = min(max(0, int(np.searchsorted(self.s, lo, side="right")) - 1), last - 1)
        i1 = max(min(last, int(np.searchsorted(self.s, hi, side="left")) + 1), i0 + 1)
        a, b = self.xz[i0:i1], self.xz[i0 + 1:i1 + 1]
        u, d = segment_projection(np.asarray(p, np.float64)[None], a, b)  # (1, M) each
        m = int(np.argmin(d[0]))
        return float(self.s[i0 + m] + u[0, m] * (self.s[i0 + m + 1] - self.s[i0 + m]))

    def distance(self, points: np.ndarray) -> np.ndarray:
        """(K,) distance of ground points (K, 2) (model units) to the whole path."""
        return distance_to_polyline(points, self.xz)
