"""Step 7 of a request's checks (docs/protocol.md), done by its handler on an already decoded message:
each array's dtype, shape, finiteness and range, each field's JSON type and range, and the shared shapes of a
request's path, clip and object track (with their limits). A failure raises
``InvalidRequest`` naming the array or field and what it got."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from motioncore.wire.protocol import DTYPES, InvalidRequest

_DTYPE_NAMES = {dt: name for name, dt in DTYPES.items()}

MAX_ABS = 1e6   # default range of a float array element (check_array) and of a number field (check_field)

@overload
def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = ...,
                dtypes: Sequence[str] = ..., finite: bool = ..., required: Literal[True] = ...,
                max_size: int | None = ..., bound: float = ...) -> np.ndarray: ...


@overload
def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = ...,
                dtypes: Sequence[str] = ..., finite: bool = ..., required: bool,
                max_size: int | None = ..., bound: float = ...) -> np.ndarray | None: ...


def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = None,
                dtypes: Sequence[str] = ("float32",), finite: bool = True, required: bool = True,
                max_size: int | None = None, bound: float = MAX_ABS) -> np.ndarray | None:
    """Return ``arrays[name]`` after checking dtype, shape (None = any length), finiteness and range: with
    ``finite`` (the default) every float must be finite and within ``[-bound, bound]``, so a huge but
    finite input (1e308) cannot overflow inside a model.

    Raises InvalidRequest naming the array and what it got.
    """
    a = arrays.get(name)
    if a is None:
        if required:
            raise InvalidRequest(f"missing array {name!r}")
        return None
    wire = _DTYPE_NAMES.get(a.dtype, str(a.dtype))
    if wire not in dtypes:
        raise InvalidRequest(f"array {name!r} must have dtype {' or '.join(dtypes)}, got {wire}")
    if shape is not None:
        ok = len(shape) == a.ndim and all(s is None or s == n for s, n in zip(shape, a.shape, strict=True))
        if not ok:
            want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise InvalidRequest(f"array {name!r} must have shape {want}, got {tuple(a.shape)}")
    if max_size is not None and a.size > max_size:
        raise InvalidRequest(f"array {name!r} has {a.size} elements, limit {max_size}")
    if finite and a.dtype.kind == "f" and a.size and not (np.abs(a) <= bound).all():
        if not np.isfinite(a).all():
            raise InvalidRequest(f"array {name!r} holds NaN or infinity")
        raise InvalidRequest(f"array {name!r} holds values beyond +-{bound:g} (largest magnitude "
                             f"{float(np.abs(a).max()):g})")
    return a


_MISSING = object()


def check_field(content: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, default: Any = _MISSING,
                lo: float | None = None, hi: float | None = None, choices: Sequence[Any] | None = None) -> Any:
    """Return ``content[name]`` after checking its JSON type and range; ``default`` makes it optional."""
    if name not in content or content[name] is None:
        if default is _MISSING:
            raise InvalidRequest(f"missing field {name!r}")
        return default
    v = content[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and int not in kinds and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        raise InvalidRequest(f"field {name!r} must be {'/'.join(k.__name__ for k in kinds)}, got {v!r}"[:200])
    if isinstance(v, float) and not math.isfinite(v):
        raise InvalidRequest(f"field {name!r} must be finite, got {v!r}")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and lo is None and hi is None and abs(v) > MAX_ABS:
        raise InvalidRequest(f"field {name!r} must be within +-{MAX_ABS:g}, got {v!r}"[:200])
    if lo is not None and v < lo or hi is not None and v > hi:  # type: ignore[operator]
        raise InvalidRequest(f"field {name!r} must be in [{lo}, {hi}], got {v!r}")
    if choices is not None and v not in choices:
        raise InvalidRequest(f"field {name!r} must be one of {list(choices)}, got {v!r}"[:200])
    return v


# -------------------------------------------------------------------- the requests' own arrays and fields

FLOATS = ("float32", "float64")
MAX_ROLLOUT_FRAMES = 10_000   # frames one rollout request may ask for
MAX_CLIP_FRAMES = 100_000     # T of an infill / style / retarget clip
MAX_FEATURES = 8192           # D of a feature vector
MAX_JOINTS = 512
MAX_PATH_POINTS = 100_000     # N of a rollout request's path
PATH_ARRAYS = {"points", "speed", "facing", "gait"}
MAX_PATH_METRES = 1e4         # |coordinate| of a path point (10 km)
MAX_SPEED = 100.0             # m/s along a path
OBJECT_ARRAYS = ("object_rotations", "object_positions")


def only_arrays(arrays: Mapping[str, np.ndarray], names: set[str]) -> None:
    extra = sorted(set(arrays) - names)
    if extra:
        raise InvalidRequest(f"unexpected arrays {extra}; this request takes {sorted(names)}")


def check_path(req: Any) -> None:
    """The path form's arrays and fields (docs/protocol.md, pfnn.rollout path form)."""
    c, arrays = req.content, req.arrays
    check_field(c, "frames", int, default=None, lo=1, hi=MAX_ROLLOUT_FRAMES)
    pts = check_array(arrays, "points", shape=(None, 2), dtypes=FLOATS, bound=MAX_PATH_METRES)
    n = pts.shape[0]
    if not 2 <= n <= MAX_PATH_POINTS:
        raise InvalidRequest(f"array 'points' must have 2..{MAX_PATH_POINTS} points, got {n}")
    speed = check_array(arrays, "speed", shape=(n,), dtypes=FLOATS, required=False, bound=MAX_SPEED)
    if speed is not None and (speed < 0).any():
        raise InvalidRequest(f"array 'speed' must be >= 0 m/s, point {int(np.argmax(speed < 0))} is negative")
    check_array(arrays, "facing", shape=(n,), dtypes=FLOATS, required=False)
    gait_arr = check_array(arrays, "gait", shape=(n, None), dtypes=FLOATS, required=False)
    gait = c.get("gait")
    if gait is not None:
        if gait_arr is not None:
            raise InvalidRequest("field 'gait' and array 'gait' are both given; send one")
        if not (isinstance(gait, str) or (isinstance(gait, list) and len(gait) == n
                                          and all(isinstance(g, str) for g in gait))):
            raise InvalidRequest(f"field 'gait' must be a gait name or a list of {n} names (one per point)")


def check_rotations(arrays: Mapping[str, np.ndarray], c: Mapping[str, Any], min_frames: int = 2
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The rotation form of a clip: rotations (T, J, 4) unit WXYZ, root (T, 3), optional ``joints`` names."""
    rot = check_array(arrays, "rotations", shape=(None, None, 4), dtypes=FLOATS)
    T, J = rot.shape[:2]
    joints = check_field(c, "joints", list, default=None)
    if joints is not None and (len(joints) != J or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in joints)
                               or len(set(joints)) != J):
        raise InvalidRequest(f"field 'joints' must list {J} distinct joint names (one per column of 'rotations')")
    if not min_frames <= T <= MAX_CLIP_FRAMES or not 1 <= J <= MAX_JOINTS:
        raise InvalidRequest(f"array 'rotations' must have {min_frames}..{MAX_CLIP_FRAMES} frames and "
                             f"1..{MAX_JOINTS} joints, got {(T, J)}")
    norms = np.linalg.norm(np.asarray(rot, np.float64), axis=-1)
    if np.abs(norms - 1.0).max() > 1e-3:
        raise InvalidRequest("array 'rotations' must hold unit quaternions WXYZ (|q| within 1e-3 of 1)")
    root = check_array(arrays, "root", shape=(T, 3), dtypes=FLOATS)
    return rot, root


def check_object(arrays: Mapping[str, np.ndarray], T: int) -> dict[str, np.ndarray]:
    """The optional object track of a hands in-fill: ``object_rotations`` (T, 4) unit WXYZ and
    ``object_positions`` (T, 3) in the root translation's space and units, both or neither."""
    have = [k for k in OBJECT_ARRAYS if k in arrays]
    if not have:
        return {}
    if len(have) == 1:
        raise InvalidRequest(f"array {have[0]!r} needs {[k for k in OBJECT_ARRAYS if k not in have][0]!r}: send the "
                             "object's rotations and positions together, or neither")
    oq = check_array(arrays, "object_rotations", shape=(T, 4), dtypes=FLOATS)
    op = check_array(arrays, "object_positions", shape=(T, 3), dtypes=FLOATS)
    if np.abs(np.linalg.norm(np.asarray(oq, np.float64), axis=-1) - 1.0).max() > 1e-3:
        raise InvalidRequest("array 'object_rotations' must hold unit quaternions WXYZ (|q| within 1e-3 of 1)")
    return {"object_rotations": np.asarray(oq, np.float64), "object_positions": np.asarray(op, np.float64)}
