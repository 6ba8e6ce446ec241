"""The motioncore wire protocol: signed multipart ZeroMQ messages of a JSON header plus raw array buffers.

Imports only the standard library, numpy and zmq, so the Blender add-on can ship this file as it is.
docs/protocol.md is the full specification (enough to write a client in another language).

Frames (``identity`` frames only on the server's ROUTER side)::

    [identity..., b"<MC|MSG>", signature, header JSON, buffer 0, buffer 1, ...]

``signature`` is the lowercase hex HMAC-SHA256, under the connection file's key, of the header bytes
followed by every buffer's bytes. The header is one UTF-8 JSON object::

    {"version": 2, "id": "...", "type": "health", "dir": "req", "session": "...", "seq": 7, "ts": 1.7e9,
     "parent_id": null, "server_session": null,
     "content": {...scalar fields...}, "buffers": [{"name": "x", "dtype": "float32", "shape": [342]}]}

``dir`` ("req" from a client, "rep" from a server), ``session`` (the sender's random nonce), ``seq`` (its
message counter) and ``ts`` (its clock) are signed, so a reply never passes as a request, a request is
accepted once per (session, seq) and only within ``window_s`` seconds of its ``ts``.

:meth:`Codec.decode` checks, in this order and before any buffer is read: (1) frame count, (2) sizes,
(3) signature, (4) header schema and version, (4b) direction, timestamp window and replay, (5) dtype
allow-list, (6) each buffer's shape (every dimension bounded) and length. Each failure raises its own
:class:`ProtocolError` subclass with a distinct ``code``.
Only then are the buffers wrapped with ``np.frombuffer`` (read-only views, no copy). Step (7), the
per-request checks, is the server's (``motioncore_server.checks``). No pickle anywhere.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import jsonwire
from .errors import (  # noqa: F401  (the typed errors are part of this module's interface)
    ERRORS,
    BufferSpecError,
    Busy,
    Cancelled,
    DtypeError,
    FrameError,
    HeaderError,
    InternalError,
    InvalidRequest,
    ModelUnavailable,
    ProtocolError,
    ReplayError,
    ShuttingDown,
    SignatureError,
    StaleMessage,
    TooLarge,
    UnknownType,
    VersionError,
    WholeFramesRequired,
    error_from_content,
)
from .replay import WINDOW_S, ReplayGuard, SignatureHistory

use_json = jsonwire.use_json   # select the JSON codec (msgspec or stdlib)
PROTOCOL_VERSION = 2
DELIMITER = b"<MC|MSG>"
SIGNATURE_SCHEME = "hmac-sha256"
SIGNATURE_BYTES = 64  # hex digits of a SHA-256 HMAC
REQUEST, REPLY = "req", "rep"   # the signed header's "dir": client -> server, server -> client
ZAP_USERNAME = b"motioncore"   # ZMTP PLAIN user name; the password is transport_token(key)

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


def transport_token(key: bytes | str) -> bytes:
    """The ZMTP PLAIN password derived from the HMAC key: the server's ZAP handler refuses a connection
    without it, so a peer that lacks the key never gets a message into the server (nor costs it memory)."""
    key = key.encode("ascii") if isinstance(key, str) else bytes(key)
    return hmac.digest(key, b"motioncore zap v2", "sha256").hex().encode("ascii")


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


class Codec:
    """Signs, encodes, verifies and decodes messages under one key.

    ``role`` is "client" (encodes requests, accepts replies) or "server" (the reverse); the direction is
    signed, so a captured reply is never accepted as a request. ``session`` is stamped as
    ``server_session`` on everything a server's codec encodes. Every codec has its own random sender
    ``nonce`` and counts its messages (``seq``). Encoding is thread-safe; decoding updates the replay
    state and belongs to one thread.
    """

    def __init__(self, key: bytes | str, limits: Limits = Limits(), *, session: str | None = None,
                 history: int = 1 << 15, role: str = "client", window_s: float = WINDOW_S):
        key = key.encode("ascii") if isinstance(key, str) else bytes(key)
        if not key:
            raise ValueError("a non-empty HMAC key is required")
        if role not in ("client", "server"):
            raise ValueError(f"role must be 'client' or 'server', got {role!r}")
        self.key, self.limits, self.session, self.role = key, limits, session, role
        self.send_dir, self.recv_dir = (REQUEST, REPLY) if role == "client" else (REPLY, REQUEST)
        self.nonce = session if (role == "server" and session) else new_id()
        self.history = SignatureHistory(history)       # replies: a signature is accepted once
        self.guard = ReplayGuard(window_s)             # requests: (session, seq) once, within the window
        self.window_s = window_s
        self._seq = itertools.count(1)                 # next() is atomic under the GIL
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    # -- signing
    def sign(self, header: Any, buffers: Sequence[Any]) -> bytes:
        if not buffers:
            return hmac.digest(self.key, header, "sha256").hex().encode("ascii")   # one C call
        h = self._mac.copy()
        h.update(header)
        for b in buffers:
            h.update(b)
        return h.hexdigest().encode("ascii")

    # -- encoding
    def encode(self, type: str, content: Mapping[str, Any] | None = None,
               arrays: Mapping[str, Any] | None = None, *, id: str | None = None,
               parent_id: str | None = None, anonymous: bool = False) -> list[Any]:
        """Frames ``[DELIMITER, signature, header, *buffers]`` (no identity). Buffers are zero-copy views."""
        descs, bufs = [], []
        for name, a in (arrays or {}).items():
            d, b = _wire_array(name, a)
            descs.append(d)
            bufs.append(b)
        anon = anonymous and self.role == "server"
        header = {"version": PROTOCOL_VERSION, "id": id or new_id(), "type": type, "dir": self.send_dir,
                  "session": None if anon else self.nonce, "seq": next(self._seq), "ts": time.time(),
                  "parent_id": parent_id, "server_session": None if anon else self.session,
                  "content": content if isinstance(content, dict) else dict(content or {}), "buffers": descs}
        try:
            hb = jsonwire.dumps(header)
        except (ValueError, TypeError) as e:
            raise InvalidRequest(f"content of {type!r} is not strict JSON ({e})") from e
        return [DELIMITER, self.sign(hb, bufs), hb, *bufs]

    def reply(self, request: Message, type: str, content: Mapping[str, Any] | None = None,
              arrays: Mapping[str, Any] | None = None) -> list[Any]:
        return self.encode(type, content, arrays, parent_id=request.id)

    def error(self, err: ProtocolError, parent_id: str | None = None, *, anonymous: bool = False) -> list[Any]:
        """An ``error`` message. ``anonymous`` (a server answering a message that failed steps 1-3): no
        ``session`` nor ``server_session``, so an unauthenticated peer learns nothing about the server."""
        return self.encode(ERROR, err.to_content(), parent_id=parent_id if parent_id is not None else err.parent_id,
                           anonymous=anonymous)

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
        h = _parse_header(header)                                                               # (4)
        self._check_fresh(h, sig_b)                                                             # (4b)
        descs = h["buffers"]
        arrays = _arrays(descs, bufs, self.limits, h["id"]) if descs or bufs else {}            # (5), (6)
        return Message(h["type"], h["id"], h["content"], arrays, h["parent_id"], h["server_session"], identity, total)

    def _check_fresh(self, h: dict[str, Any], sig: bytes) -> None:
        """Step 4b: the direction, the timestamp window and replay (per session and seq, or per signature)."""
        mid = h["id"]
        if h["dir"] != self.recv_dir:
            raise ReplayError(f"a {'reply' if h['dir'] == REPLY else 'request'} sent back to its sender "
                              f"(this side accepts dir {self.recv_dir!r} only)", parent_id=mid)
        if self.recv_dir == REQUEST:
            if h["session"] is None:
                raise HeaderError("a request must carry its sender's 'session'", parent_id=mid)
            self.guard.check(h["session"], h["seq"], h["ts"], mid)
            return
        if not abs(time.time() - h["ts"]) <= self.window_s:
            raise StaleMessage(f"reply timestamp {h['ts']:.3f} is outside the {self.window_s:g} s window", parent_id=mid)
        if not self.history.check_and_add(sig):
            raise ReplayError("message replayed (signature seen recently)", parent_id=mid)


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


def _arrays(descs: list[dict], bufs: list[Any], lim: Limits, msg_id: str) -> dict[str, np.ndarray]:
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
        shape = _check_shape(d["name"], d["shape"], lim, dt.itemsize, msg_id)
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
        h = jsonwire.loads(raw)
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
    if h.get("dir") not in (REQUEST, REPLY):
        raise HeaderError(f"header field 'dir' must be {REQUEST!r} or {REPLY!r}, got {h.get('dir')!r}"[:200],
                          parent_id=pid)
    seq, ts = h.get("seq"), h.get("ts")
    if type(seq) is not int or not 0 <= seq < 1 << 63:
        raise HeaderError(f"header field 'seq' must be an integer in [0, 2**63), got {seq!r}"[:200], parent_id=pid)
    if not (type(ts) is int or type(ts) is float) or not math.isfinite(ts):  # type: ignore[arg-type]
        raise HeaderError(f"header field 'ts' must be a finite number (seconds since 1970), got {ts!r}"[:200],
                          parent_id=pid)
    for k in ("parent_id", "server_session", "session"):
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


def _check_shape(name: str, shape: list, lim: Limits, itemsize: int, parent_id: str) -> tuple[int, ...]:
    """Every dimension an int in [0, max_buffer_bytes // itemsize], and the product of the dimensions
    (zeros counted as one, so ``[0, 2**63]`` cannot hide behind a zero) within the same bound: numpy can
    then always build the view. Computed step by step on Python ints (no overflow)."""
    if len(shape) > lim.max_ndim:
        raise BufferSpecError(f"buffer {name!r} has {len(shape)} dimensions, limit {lim.max_ndim}", parent_id=parent_id)
    bound = lim.max_buffer_bytes // itemsize
    span = 1
    for s in shape:
        if type(s) is not int or s < 0:
            raise BufferSpecError(f"buffer {name!r}: shape entries must be non-negative integers, got {s!r}"[:200],
                                  parent_id=parent_id)
        span *= max(s, 1)
        if s > bound or span > bound:
            raise BufferSpecError(f"buffer {name!r}: shape {shape} spans more than {bound} elements of "
                                  f"{itemsize} bytes (limit {lim.max_buffer_bytes} bytes)"[:200], parent_id=parent_id)
    return tuple(shape)


def message_nbytes(arrays: Mapping[str, Any] | None) -> tuple[int, int]:
    """(total, largest) buffer bytes of ``arrays`` as they would go on the wire (for client-side limit checks)."""
    sizes = [np.asarray(a).nbytes for a in (arrays or {}).values()]
    return sum(sizes), max(sizes, default=0)
