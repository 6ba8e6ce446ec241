"""Step 7 of a request's checks (docs/protocol.md), done by its handler on an already decoded message:
each array's dtype, shape, finiteness and range, each field's JSON type and range. A failure raises
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
