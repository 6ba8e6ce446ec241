"""The motioncore wire protocol: signed multipart ZeroMQ messages of a JSON header plus raw array buffers.

Imports only the standard library, numpy and zmq, so the Blender add-on can ship this file as it is.
docs/protocol.md is the full specification (enough to write a client in another language).

Frames (``identity`` frames only on the server's ROUTER side)::

    [identity..., b"<MC|MSG>", signature, header JSON, buffer 0, buffer 1, ...]

``signature`` is the lowercase hex HMAC-SHA256, under the connection file's key, of the header bytes
followed by every buffer's bytes. The header is one UTF-8 JSON object::

    {"version": 1, "id": "...", "type": "health", "parent_id": null, "server_session": null,
     "content": {...scalar fields...}, "buffers": [{"name": "x", "dtype": "float32", "shape": [342]}]}

:meth:`Codec.decode` checks, in this order and before any buffer is read: (1) frame count, (2) sizes,
(3) signature and replay, (4) header schema and version, (5) dtype allow-list, (6) each buffer's length
against its shape. Each failure raises its own :class:`ProtocolError` subclass with a distinct ``code``.
Only then are the buffers wrapped with ``np.frombuffer`` (read-only views, no copy). Step (7), the
per-request checks, uses :func:`check_array` and :func:`check_field`. No pickle anywhere.
"""
from __future__ import annotations

import collections
import hashlib
import hmac
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import numpy as np

PROTOCOL_VERSION = 1
DELIMITER = b"<MC|MSG>"
SIGNATURE_SCHEME = "hmac-sha256"
SIGNATURE_BYTES = 64  # hex digits of a SHA-256 HMAC

# Wire dtype name -> numpy dtype. Always little-endian; nothing else (above all no object dtype) decodes.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"), "uint8": np.dtype("u1"), "bool": np.dtype("?"),
}
_DTYPE_NAMES = {dt: name for name, dt in DTYPES.items()}

# Server -> client message types. Every request gets exactly one final reply ("result" or "error"),
# possibly preceded by "progress" messages with the same parent_id.
RESULT, ERROR, PROGRESS = "result", "error", "progress"
FINAL_TYPES = frozenset({RESULT, ERROR})

# Requests a client may resend blindly after a timeout (cheap and free of side effects). Anything else
# (long jobs, cancel) is never resent: a timeout raises RequestTimeout instead.
IDEMPOTENT = frozenset({"hello", "health", "models", "pfnn.rollout", "mann.rollout", "retarget", "debug.echo"})

_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}\Z")
_TYPE_RE = re.compile(r"[a-z][a-z0-9_.]{0,63}\Z")


# --------------------------------------------------------------------------------------------- errors

class ProtocolError(Exception):
    """Root of every typed error on the wire. ``code`` is the string sent in an error reply."""

    code = "protocol_error"

    def __init__(self, message: str, *, parent_id: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message, self.parent_id, self.details = message, parent_id, details or {}

    def to_content(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


class FrameError(ProtocolError):
    """Step 1: no delimiter, too many identity frames, or too few / too many frames after it."""
    code = "bad_frames"


class TooLarge(ProtocolError):
    """Step 2: a frame or the whole message exceeds the limits (also raised by clients before sending)."""
    code = "too_large"


class SignatureError(ProtocolError):
    """Step 3: the HMAC does not match (wrong key or altered message)."""
    code = "bad_signature"


class ReplayError(ProtocolError):
    """Step 3: a signature seen recently (a replayed message)."""
    code = "replayed"


class HeaderError(ProtocolError):
    """Step 4: the header is not UTF-8 JSON or does not match the schema."""
    code = "bad_header"


class VersionError(ProtocolError):
    """Step 4: the header's protocol version is not this one."""
    code = "bad_version"


class DtypeError(ProtocolError):
    """Step 5: a buffer's dtype is not in the allow-list."""
    code = "bad_dtype"


class BufferSpecError(ProtocolError):
    """Step 6: a buffer's shape is malformed or its byte length is not prod(shape) * itemsize."""
    code = "bad_buffer"


class InvalidRequest(ProtocolError):
    """Step 7: the request is well formed but its fields or arrays are wrong for its type."""
    code = "invalid_request"


class UnknownType(ProtocolError):
    """No handler for this message type."""
    code = "unknown_type"


class Busy(ProtocolError):
    """The server's queue is full; try again later."""
    code = "busy"


class Cancelled(ProtocolError):
    """The request was cancelled by a ``cancel`` request."""
    code = "cancelled"


class ShuttingDown(ProtocolError):
    """The server is shutting down and will not finish this request."""
    code = "shutting_down"


class ModelUnavailable(ProtocolError):
    """No loaded or loadable model serves this request (or the named one failed to load)."""
    code = "model_unavailable"


class InternalError(ProtocolError):
    """The handler raised an unexpected exception; the server stays up."""
    code = "internal"


ERRORS: dict[str, type[ProtocolError]] = {c.code: c for c in (
    FrameError, TooLarge, SignatureError, ReplayError, HeaderError, VersionError, DtypeError,
    BufferSpecError, InvalidRequest, UnknownType, Busy, Cancelled, ShuttingDown, ModelUnavailable,
    InternalError)}


def error_from_content(content: Mapping[str, Any], parent_id: str | None = None) -> ProtocolError:
    """The typed exception for an ``error`` reply's content (unknown codes give a plain ProtocolError)."""
    code = str(content.get("code", "protocol_error"))
    cls = ERRORS.get(code, ProtocolError)
    err = cls(str(content.get("message", "")), parent_id=parent_id, details=content.get("details") or {})
    if cls is ProtocolError:
        err.code = code
    return err


# --------------------------------------------------------------------------------------------- limits

@dataclass(frozen=True)
class Limits:
    """Size limits checked at decode step 2 (and step 6 for ndim). The server reports its own in ``hello``."""

    max_message_bytes: int = 64 << 20   # header + all buffers
    max_buffer_bytes: int = 32 << 20    # one buffer frame (also the socket's zmq.MAXMSGSIZE, per frame)
    max_header_bytes: int = 64 << 10    # the header JSON frame
    max_buffers: int = 16               # buffer frames after the header
    max_ndim: int = 6                   # dimensions of one buffer
    max_identities: int = 4             # routing frames before the delimiter (ROUTER side)

    def __post_init__(self) -> None:
        for k, v in self.as_dict().items():
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"Limits.{k} must be a positive int, got {v!r}")

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def socket_max_frame(self) -> int:
        """Value for ``zmq.MAXMSGSIZE``, which libzmq applies to each frame."""
        return max(self.max_buffer_bytes, self.max_header_bytes) + 1024


CLIENT_LIMITS = Limits(max_message_bytes=1 << 31, max_buffer_bytes=1 << 31, max_buffers=256)


# -------------------------------------------------------------------------------------------- message

@dataclass
class Message:
    """A decoded (or to-be-encoded) message. ``arrays`` maps buffer names to read-only numpy views."""

    type: str
    id: str
    content: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    parent_id: str | None = None
    server_session: str | None = None
    identity: list[bytes] = field(default_factory=list)
    nbytes: int = 0   # wire size of header + buffers

    @property
    def is_final(self) -> bool:
        return self.type in FINAL_TYPES


def new_id() -> str:
    """A fresh message id (32 lowercase hex digits, 128 random bits)."""
    return os.urandom(16).hex()


def _view(frame: Any) -> memoryview:
    """A byte view of a frame given as bytes, bytearray, memoryview or zmq.Frame (no copy)."""
    buf = getattr(frame, "buffer", None)  # zmq.Frame
    mv = memoryview(buf if buf is not None else frame)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"content value of type {type(o).__name__} is not JSON serialisable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Built once: json.dumps/loads with options build a new encoder/decoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_json_default)
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _wire_array(name: str, a: Any) -> tuple[dict[str, Any], np.ndarray]:
    arr = np.asarray(a)
    if arr.dtype.kind in "fiub" and arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    wire = _DTYPE_NAMES.get(arr.dtype)
    if wire is None:
        raise DtypeError(f"array {name!r} has dtype {arr.dtype}; the wire allows {sorted(DTYPES)}")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    flat = arr.reshape(-1).view(np.uint8)  # (nbytes,) view, no copy
    return {"name": name, "dtype": wire, "shape": list(arr.shape)}, flat


class SignatureHistory:
    """Bounded set of recently seen signatures (oldest forgotten first), as Jupyter's digest history."""

    def __init__(self, size: int = 1 << 15):
        self.size = size
        self._order: collections.deque[bytes] = collections.deque()
        self._seen: set[bytes] = set()

    def check_and_add(self, sig: bytes) -> bool:
        """False if ``sig`` was seen (a replay); otherwise remember it and return True."""
        if sig in self._seen:
            return False
        self._seen.add(sig)
        self._order.append(sig)
        if len(self._order) > self.size:
            self._seen.discard(self._order.popleft())
        return True

    def __len__(self) -> int:
        return len(self._order)


class Codec:
    """Signs, encodes, verifies and decodes messages under one key.

    ``session`` is stamped as ``server_session`` on everything this codec encodes (servers set it;
    clients leave it None). Encoding is thread-safe; decoding updates the replay history and belongs
    to one thread.
    """

    def __init__(self, key: bytes | str, limits: Limits = Limits(), *, session: str | None = None,
                 history: int = 1 << 15):
        key = key.encode("ascii") if isinstance(key, str) else bytes(key)
        if not key:
            raise ValueError("a non-empty HMAC key is required")
        self.key, self.limits, self.session = key, limits, session
        self.history = SignatureHistory(history)
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    # -- signing
    def sign(self, header: Any, buffers: Sequence[Any]) -> bytes:
        h = self._mac.copy()
        h.update(header)
        for b in buffers:
            h.update(b)
        return h.hexdigest().encode("ascii")

    # -- encoding
    def encode(self, type: str, content: Mapping[str, Any] | None = None,
               arrays: Mapping[str, Any] | None = None, *, id: str | None = None,
               parent_id: str | None = None) -> list[Any]:
        """Frames ``[DELIMITER, signature, header, *buffers]`` (no identity). Buffers are zero-copy views."""
        descs, bufs = [], []
        for name, a in (arrays or {}).items():
            d, b = _wire_array(name, a)
            descs.append(d)
            bufs.append(b)
        header = {"version": PROTOCOL_VERSION, "id": id or new_id(), "type": type, "parent_id": parent_id,
                  "server_session": self.session, "content": content if isinstance(content, dict) else dict(content or {}),
                  "buffers": descs}
        try:
            hb = _ENCODER.encode(header).encode()
        except ValueError as e:
            raise InvalidRequest(f"content of {type!r} is not strict JSON ({e})") from e
        return [DELIMITER, self.sign(hb, bufs), hb, *bufs]

    def reply(self, request: Message, type: str, content: Mapping[str, Any] | None = None,
              arrays: Mapping[str, Any] | None = None) -> list[Any]:
        return self.encode(type, content, arrays, parent_id=request.id)

    def error(self, err: ProtocolError, parent_id: str | None = None) -> list[Any]:
        return self.encode(ERROR, err.to_content(), parent_id=parent_id if parent_id is not None else err.parent_id)

    # -- decoding
    def decode(self, frames: Sequence[Any]) -> Message:
        """Validate ``frames`` (steps 1-6, in order) and return the message. Raises a ProtocolError subclass.

        Frames may be bytes (``recv_multipart()``, used as they are: the fast path for small messages),
        zmq.Frame, bytearray or memoryview."""
        fr = [f if type(f) is bytes else _view(f) for f in frames]
        identity, sig, header, bufs = _split_frames(fr, self.limits)                            # (1)
        total = _check_sizes(header, bufs, self.limits)                                         # (2)
        sig_b = bytes(sig) if len(sig) == SIGNATURE_BYTES else b""                              # (3)
        if not hmac.compare_digest(sig_b, self.sign(header, bufs)):
            raise SignatureError("signature does not match (wrong key or altered message)")
        if not self.history.check_and_add(sig_b):
            raise ReplayError("message replayed (signature seen recently)")
        h = _parse_header(header)                                                               # (4)
        descs = h["buffers"]
        arrays = _arrays(descs, bufs, self.limits.max_ndim, h["id"]) if descs or bufs else {}   # (5), (6)
        return Message(h["type"], h["id"], h["content"], arrays, h["parent_id"], h["server_session"], identity, total)


def _split_frames(views: list[Any], lim: Limits) -> tuple[list[bytes], Any, Any, list[Any]]:
    """Step 1: (identity frames, signature, header, buffers), found around the delimiter."""
    n_id = None
    for i in range(min(len(views), lim.max_identities + 1)):
        if views[i] == DELIMITER:
            n_id = i
            break
    if n_id is None:
        raise FrameError(f"no {DELIMITER.decode()} delimiter within the first {lim.max_identities + 1} frames")
    n_after = len(views) - n_id - 1
    if not 2 <= n_after <= 2 + lim.max_buffers:
        raise FrameError(f"expected signature, header and at most {lim.max_buffers} buffers after the "
                         f"delimiter, got {n_after} frames")
    return [bytes(v) for v in views[:n_id]], views[n_id + 1], views[n_id + 2], views[n_id + 3:]


def _check_sizes(header: Any, bufs: list[Any], lim: Limits) -> int:
    """Step 2: header, each buffer and the total within the limits; returns the total."""
    if len(header) > lim.max_header_bytes:
        raise TooLarge(f"header is {len(header)} bytes, limit {lim.max_header_bytes}")
    for i, b in enumerate(bufs):
        if len(b) > lim.max_buffer_bytes:
            raise TooLarge(f"buffer {i} is {len(b)} bytes, limit {lim.max_buffer_bytes}")
    total = len(header) + sum(len(b) for b in bufs)
    if total > lim.max_message_bytes:
        raise TooLarge(f"message is {total} bytes, limit {lim.max_message_bytes}")
    return total


def _arrays(descs: list[dict], bufs: list[Any], max_ndim: int, msg_id: str) -> dict[str, np.ndarray]:
    """Steps 5 (dtypes) and 6 (count, shapes, lengths by arithmetic), then read-only views of the frames."""
    dtypes = []
    for d in descs:
        dt = DTYPES.get(d["dtype"])
        if dt is None:
            raise DtypeError(f"buffer {d['name']!r} has dtype {d['dtype']!r}; allowed: {sorted(DTYPES)}",
                             parent_id=msg_id)
        dtypes.append(dt)
    if len(descs) != len(bufs):
        raise BufferSpecError(f"header describes {len(descs)} buffers, message has {len(bufs)}", parent_id=msg_id)
    shapes = []
    for d, dt, b in zip(descs, dtypes, bufs, strict=True):
        shape = _check_shape(d["name"], d["shape"], max_ndim, msg_id)
        want = math.prod(shape) * dt.itemsize
        if want != len(b):
            raise BufferSpecError(f"buffer {d['name']!r}: shape {shape} x {dt.itemsize} bytes = {want}, "
                                  f"frame has {len(b)}", parent_id=msg_id)
        shapes.append(shape)
    arrays = {}   # only now is any buffer read
    for d, dt, shape, b in zip(descs, dtypes, shapes, bufs, strict=True):
        a = np.frombuffer(b, dtype=dt).reshape(shape)
        if dt.kind == "b" and a.size and a.view(np.uint8).max() > 1:
            raise BufferSpecError(f"bool buffer {d['name']!r} holds bytes other than 0 and 1", parent_id=msg_id)
        arrays[d["name"]] = a
    return arrays


def _parse_header(raw: Any) -> dict[str, Any]:
    try:
        text = bytes(raw).decode("utf-8")
        start = len(text) - len(text.lstrip(" \t\n\r")) if text[:1] in " \t\n\r" else 0
        h, end = _DECODER.raw_decode(text, start)   # what JSONDecoder.decode does, less its regex calls
        if end != len(text) and text[end:].strip(" \t\n\r"):
            raise ValueError(f"extra data at character {end}")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise HeaderError(f"header is not UTF-8 JSON ({str(e)[:120]})") from None
    if type(h) is not dict:
        raise HeaderError(f"header must be a JSON object, got {type(h).__name__}")
    v = h.get("version")
    if type(v) is not int:
        raise HeaderError(f"header field 'version' must be an integer, got {v!r}"[:200])
    mid = h.get("id")
    pid = mid if isinstance(mid, str) and _ID_RE.match(mid) else None
    if v != PROTOCOL_VERSION:
        raise VersionError(f"protocol version {v} is not supported (this side speaks {PROTOCOL_VERSION})",
                           parent_id=pid)
    if pid is None:
        raise HeaderError(f"header field 'id' must be 1-64 characters of [A-Za-z0-9._:-], got {mid!r}"[:200])
    t = h.get("type")
    if not isinstance(t, str) or not _TYPE_RE.match(t):
        raise HeaderError(f"header field 'type' must match [a-z][a-z0-9_.]{{0,63}}, got {t!r}"[:200], parent_id=pid)
    for k in ("parent_id", "server_session"):
        val = h.setdefault(k, None)
        if val is not None and not (isinstance(val, str) and _ID_RE.match(val)):
            raise HeaderError(f"header field {k!r} must be null or an id string, got {val!r}"[:200], parent_id=pid)
    if not isinstance(h.get("content", None), dict):
        raise HeaderError("header field 'content' must be a JSON object", parent_id=pid)
    bufs = h.get("buffers", None)
    if not isinstance(bufs, list):
        raise HeaderError("header field 'buffers' must be a list", parent_id=pid)
    names = set()
    for i, d in enumerate(bufs):
        if not (isinstance(d, dict) and isinstance(d.get("dtype"), str) and isinstance(d.get("shape"), list)
                and isinstance(d.get("name"), str) and _ID_RE.match(d["name"])):
            raise HeaderError(f"buffers[{i}] must be {{name: id string, dtype: string, shape: list}}", parent_id=pid)
        if d["name"] in names:
            raise HeaderError(f"buffers[{i}] repeats the name {d['name']!r}", parent_id=pid)
        names.add(d["name"])
    return h


def _check_shape(name: str, shape: list, max_ndim: int, parent_id: str) -> tuple[int, ...]:
    if len(shape) > max_ndim:
        raise BufferSpecError(f"buffer {name!r} has {len(shape)} dimensions, limit {max_ndim}", parent_id=parent_id)
    for s in shape:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise BufferSpecError(f"buffer {name!r}: shape entries must be non-negative integers, got {s!r}"[:200],
                                  parent_id=parent_id)
    return tuple(shape)


def message_nbytes(arrays: Mapping[str, Any] | None) -> tuple[int, int]:
    """(total, largest) buffer bytes of ``arrays`` as they would go on the wire (for client-side limit checks)."""
    sizes = [np.asarray(a).nbytes for a in (arrays or {}).values()]
    return sum(sizes), max(sizes, default=0)


# ------------------------------------------------------------------------ step 7: per-request checks

@overload
def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = ...,
                dtypes: Sequence[str] = ..., finite: bool = ..., required: Literal[True] = ...,
                max_size: int | None = ...) -> np.ndarray: ...


@overload
def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = ...,
                dtypes: Sequence[str] = ..., finite: bool = ..., required: bool,
                max_size: int | None = ...) -> np.ndarray | None: ...


def check_array(arrays: Mapping[str, np.ndarray], name: str, *, shape: Sequence[int | None] | None = None,
                dtypes: Sequence[str] = ("float32",), finite: bool = True, required: bool = True,
                max_size: int | None = None) -> np.ndarray | None:
    """Return ``arrays[name]`` after checking dtype, shape (None = any length) and finiteness.

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
    if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
        raise InvalidRequest(f"array {name!r} holds NaN or infinity")
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
    if lo is not None and v < lo or hi is not None and v > hi:  # type: ignore[operator]
        raise InvalidRequest(f"field {name!r} must be in [{lo}, {hi}], got {v!r}")
    if choices is not None and v not in choices:
        raise InvalidRequest(f"field {name!r} must be one of {list(choices)}, got {v!r}"[:200])
    return v
