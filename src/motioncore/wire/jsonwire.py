"""The JSON of message headers: msgspec's C codec when installed (the add-on ships its wheels), else the
standard library; both write the same strict JSON (no NaN or infinity) and read it the same way. ``dumps`` and
``loads`` are the codec in use (`use_json`). Vendored into the Blender add-on with protocol.py."""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

try:   # a C JSON codec when installed (pip dependency; the add-on ships its wheels), else the standard library
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - exercised by test_protocol's stdlib-fallback tests via use_json()
    _msgspec = None


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"content value of type {type(o).__name__} is not JSON serialisable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_finite(obj: Any, depth: int = 0) -> None:
    """ValueError on NaN or infinity anywhere in ``obj`` (the C codec would write them as null)."""
    t = type(obj)
    if t is float or isinstance(obj, (float, np.floating)):
        if not math.isfinite(obj):
            raise ValueError(f"out of range float value {obj!r}")
    elif t is dict:
        if depth > 64:
            raise ValueError("nested too deeply")
        for v in obj.values():
            if type(v) not in _SCALARS:
                _check_finite(v, depth + 1)
    elif t is list or t is tuple:
        if depth > 64:
            raise ValueError("nested too deeply")
        for v in obj:
            if type(v) not in _SCALARS:
                _check_finite(v, depth + 1)


_SCALARS = frozenset({str, int, bool, type(None)})

# Built once: json.dumps/loads with options build a new encoder/decoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_json_default)
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _std_dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode()


def _std_loads(raw: Any) -> Any:
    text = bytes(raw).decode("utf-8")
    start = len(text) - len(text.lstrip(" \t\n\r")) if text[:1] in " \t\n\r" else 0
    h, end = _DECODER.raw_decode(text, start)   # what JSONDecoder.decode does, less its regex calls
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise ValueError(f"extra data at character {end}")
    return h


def _ms_hook(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, str):   # subclasses (e.g. torch's TorchVersion), as the stdlib encoder takes them
        return str(o)
    if isinstance(o, float):
        return float(o)
    if isinstance(o, int):
        return int(o)
    if isinstance(o, dict):
        return dict(o)
    if isinstance(o, (list, tuple)):
        return list(o)
    raise TypeError(f"content value of type {type(o).__name__} is not JSON serialisable")


def use_json(backend: str | None = None) -> str:
    """Select the JSON codec: "msgspec" (C, the default when installed) or "stdlib"; returns the one in use.

    Both write the same strict JSON (no NaN or infinity: ValueError) and read it the same way."""
    global dumps, loads, JSON_BACKEND
    if backend is None:
        backend = "msgspec" if _msgspec is not None else "stdlib"
    if backend == "msgspec":
        if _msgspec is None:
            raise ValueError("msgspec is not installed")
        enc, dec = _msgspec.json.Encoder(enc_hook=_ms_hook), _msgspec.json.Decoder()
        encode, decode = enc.encode, dec.decode

        def dumps(obj: Any) -> bytes:
            _check_finite(obj)
            return encode(obj)

        def loads(raw: Any) -> Any:
            return decode(raw)
    elif backend == "stdlib":
        dumps, loads = _std_dumps, _std_loads
    else:
        raise ValueError(f"unknown JSON backend {backend!r}")
    JSON_BACKEND = backend
    return backend


JSON_BACKEND = ""
dumps, loads = _std_dumps, _std_loads
use_json()
