"""The typed errors of the wire protocol (docs/protocol.md): each has the ``code`` its error reply carries.
Vendored into the Blender add-on with protocol.py (stdlib only)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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


class StaleMessage(ProtocolError):
    """Step 4b: the header's timestamp is outside the receiver's window (an old capture, or clock skew)."""
    code = "stale"


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


class WholeFramesRequired(InvalidRequest):
    """Step 7, ``infill``: the model fills whole frames and the keys cover part of a frame (key every joint
    and the root on a keyed frame, or send whole frames)."""
    code = "whole_frames"


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
    FrameError, TooLarge, SignatureError, ReplayError, StaleMessage, HeaderError, VersionError, DtypeError,
    BufferSpecError, InvalidRequest, WholeFramesRequired, UnknownType, Busy, Cancelled, ShuttingDown, ModelUnavailable,
    InternalError)}


def error_from_content(content: Mapping[str, Any], parent_id: str | None = None) -> ProtocolError:
    """The typed exception for an ``error`` reply's content (unknown codes give a plain ProtocolError)."""
    code = str(content.get("code", "protocol_error"))
    cls = ERRORS.get(code, ProtocolError)
    err = cls(str(content.get("message", "")), parent_id=parent_id, details=content.get("details") or {})
    if cls is ProtocolError:
        err.code = code
    return err
