"""Client for the motion server (torch-free: imports only stdlib, numpy, zmq and .protocol).

    with Client() as c:                       # finds the server through its connection file
        print(c.hello()["device"])
        y = c.call("pfnn.rollout", {"frames": 1}, {"x": x, "phase": np.float32(0.0)}).arrays["y"]

Every call has a timeout (the longest silence accepted: each ``progress`` message restarts it). On a
timeout the client cancels the request on the server (so nothing it gave up on runs later), closes and
reopens the socket (Lazy Pirate) and probes the server with ``health``: a server that answers is *busy*
and the call raises :class:`RequestTimeout` with ``busy=True`` at once (resending would only queue more
copies); a server that does not answer is *down*, and idempotent requests (protocol.IDEMPOTENT) are
resent under a fresh id until the retries run out. A changed ``server_session`` in a reply means the
server restarted: the client says hello again and carries on, with no caller action.

The connection file is trusted only if it belongs to this user and nobody else may read or write it
(mode 0600), as the key in it is the only credential. IPv6 addresses and host names (``localhost``) work.
Error replies raise the typed exceptions of :mod:`motioncore.wire.protocol` (``Busy``, ``ModelUnavailable``...).
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from . import protocol as P

ENV_CONNECTION_FILE = "MOTIONCORE_CONNECTION_FILE"
CONNECTION_FIELDS = ("transport", "ip", "port", "key", "signature_scheme", "server_session", "pid")


class ConnectionFileError(P.ProtocolError):
    """The connection file is missing, unreadable or incomplete."""
    code = "connection_file"


_STOPPED = object()   # Client._wait: the caller asked to stop waiting (see result(cancel_when=...))


class RequestTimeout(P.ProtocolError, TimeoutError):
    """No reply within the timeout (after the allowed retries, or at once for non-idempotent requests).

    ``busy`` is True when the server answered ``health`` right after (it is up, but did not get to the
    request in time; the request was cancelled), False when it did not (down or unreachable)."""
    code = "timeout"

    def __init__(self, message: str, *, busy: bool = False, **kw: Any):
        super().__init__(message, **kw)
        self.busy = busy


# ------------------------------------------------------------------------------- connection files

def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/motioncore``, else ``<tmp>/motioncore-<uid>`` (created 0700 by the server)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        return Path(base) / "motioncore"
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"motioncore-{uid}"


def default_connection_file() -> Path:
    """``$MOTIONCORE_CONNECTION_FILE`` if set, else ``runtime_dir()/server.json``."""
    env = os.environ.get(ENV_CONNECTION_FILE)
    return Path(env) if env else runtime_dir() / "server.json"


def check_private_file(path: str | os.PathLike, uid: int | None = None) -> None:
    """Raise ConnectionFileError unless ``path`` belongs to ``uid`` (default: this user) and its mode gives
    group and others nothing (0600 or stricter). A key others can read is not secret; a file others can
    write (or planted by another user, e.g. in a shared /tmp folder) can point us at their server."""
    if not hasattr(os, "getuid"):
        return   # Windows: the file lives in the user's own profile folder
    uid = os.getuid() if uid is None else uid
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != uid:
        raise ConnectionFileError(f"connection file {path} belongs to uid {st.st_uid}, not to this user ({uid}): "
                                  f"refusing to trust its key. Remove it (rm {path}) and start the server again, "
                                  f"or pass a connection file in a folder only you can write")
    if mode & 0o077:
        raise ConnectionFileError(f"connection file {path} has mode {mode:04o}, so other users can read or change "
                                  f"its key: refusing to use it. Fix it with `chmod 600 {path}` (and check who could "
                                  f"have read it), or remove it and restart the server for a fresh key")


def read_connection_file(path: str | os.PathLike, *, trust_check: bool = True) -> dict[str, Any]:
    """The connection file's fields, checked for presence and type (and, by default, check_private_file)."""
    p = Path(path)
    try:
        if trust_check:
            check_private_file(p)
        info = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConnectionFileError(f"connection file {p} not found: is the server running "
                                  f"(motioncore serve)?") from None
    except (OSError, ValueError) as e:
        raise ConnectionFileError(f"connection file {p}: {e}") from None
    if not isinstance(info, dict) or any(k not in info for k in CONNECTION_FIELDS):
        raise ConnectionFileError(f"connection file {p} must hold the fields {list(CONNECTION_FIELDS)}")
    if info["signature_scheme"] != P.SIGNATURE_SCHEME or info["transport"] != "tcp":
        raise ConnectionFileError(f"connection file {p}: unsupported transport {info['transport']!r} or "
                                  f"signature scheme {info['signature_scheme']!r}")
    if not isinstance(info["port"], int) or not isinstance(info["key"], str) or not info["key"]:
        raise ConnectionFileError(f"connection file {p}: 'port' must be an int and 'key' a non-empty string")
    return info


def endpoint(info: Mapping[str, Any]) -> str:
    ip = info["ip"]
    return f"tcp://[{ip}]:{info['port']}" if ":" in ip else f"tcp://{ip}:{info['port']}"


def secure_socket(sock: zmq.Socket, key: str | bytes) -> zmq.Socket:
    """Set what a socket needs to reach the server: IPv6 on (IPv4 still works) and the ZMTP PLAIN
    credentials derived from the key (the server's ZAP handler drops connections without them)."""
    sock.setsockopt(zmq.IPV6, 1)
    sock.setsockopt(zmq.PLAIN_USERNAME, P.ZAP_USERNAME)
    sock.setsockopt(zmq.PLAIN_PASSWORD, P.transport_token(key))
    return sock


# ------------------------------------------------------------------------------------------ client

HELLO_TIMEOUT = 2.0  # seconds per hello attempt (see Client.hello)


class Client:
    """A synchronous client. Not thread-safe: use one per thread."""

    def __init__(self, connection_file: str | os.PathLike | None = None, *, timeout: float = 10.0,
                 retries: int = 2, heartbeat_ms: int = 1000):
        self.path = Path(connection_file) if connection_file is not None else default_connection_file()
        self.timeout, self.retries, self.heartbeat_ms = float(timeout), int(retries), int(heartbeat_ms)
        self.server: dict[str, Any] | None = None   # the last hello reply's content
        self.restarts = 0                            # server restarts noticed (changed server_session)
        self.resets = 0                              # sockets closed and reopened after a timeout
        self._sock: zmq.Socket | None = None
        self._info: dict[str, Any] = {}
        self._stamp: tuple | None = None
        self._codec: P.Codec = None  # type: ignore[assignment]  # set by _load_connection_file
        self._outstanding: set[str] = set()          # submitted, final reply not yet returned
        self._stash: dict[str, P.Message] = {}       # final replies that arrived while waiting for another
        self._load_connection_file()      # first: a missing file raises before any socket exists
        self._ctx = zmq.Context()

    # -- lifecycle
    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        if not self._ctx.closed:
            self._ctx.term()

    def _load_connection_file(self) -> None:
        st = self.path.stat() if self.path.exists() else None
        info = read_connection_file(self.path)
        self._info, self._stamp = info, (st.st_mtime_ns, st.st_ino, st.st_size) if st else None
        self._codec = P.Codec(info["key"], P.CLIENT_LIMITS)

    def _socket(self) -> zmq.Socket:
        if self._sock is None:
            s = self._ctx.socket(zmq.DEALER)
            s.linger = 0
            s.setsockopt(zmq.HEARTBEAT_IVL, self.heartbeat_ms)
            s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * self.heartbeat_ms)
            s.setsockopt(zmq.HEARTBEAT_TTL, 3 * self.heartbeat_ms)
            s.setsockopt(zmq.RECONNECT_IVL, 50)
            s.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
            secure_socket(s, self._info["key"])
            s.connect(endpoint(self._info))
            self._sock = s
        return self._sock

    def _reset(self) -> None:
        """Lazy Pirate: drop the socket (and anything queued on it); re-read a changed connection file."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        self.resets += 1
        self._outstanding.clear()   # their replies would arrive on the old socket: lost
        self._stash.clear()
        try:
            st = self.path.stat()
            if (st.st_mtime_ns, st.st_ino, st.st_size) != self._stamp:
                self._load_connection_file()
        except (OSError, ConnectionFileError):
            pass  # keep the last good settings; the next timeout tries again

    # -- requests
    def call(self, type: str, content: Mapping[str, Any] | None = None, arrays: Mapping[str, Any] | None = None,
             *, timeout: float | None = None, progress: Callable[[dict[str, Any]], None] | None = None,
             cancel_when: Callable[[], bool] | None = None, idempotent: bool | None = None) -> P.Message:
        """Send one request and return its ``result`` message; an ``error`` reply raises its typed exception.
        ``progress`` gets the server's progress messages; ``cancel_when`` is polled about every 50 ms and,
        once true, cancels the request on the server (its final reply, ``Cancelled`` or the result if it
        finished first, is raised or returned as usual)."""
        timeout = self.timeout if timeout is None else timeout
        idem = type in P.IDEMPOTENT if idempotent is None else idempotent
        tries = 1 + (self.retries if idem else 0)
        for _ in range(tries):
            rid = self.submit(type, content, arrays)
            reply = self._wait(rid, timeout, progress, cancel_when)
            if reply is _STOPPED:
                reply = self._stop(rid)
            self._outstanding.discard(rid)
            if reply is not None:
                return self._finish(reply, type)
            state = self._give_up(rid, timeout)
            if state == "busy":
                raise RequestTimeout(f"no reply to {type!r} within {timeout} s: the server is up but busy "
                                     f"(it answers health); the request was cancelled. Retry later or raise "
                                     f"the timeout", busy=True)
            if not idem:
                raise RequestTimeout(f"no reply to {type!r} within {timeout} s and the server does not answer "
                                     f"health; not resent because {type!r} is not idempotent")
        raise RequestTimeout(f"no reply to {type!r} after {tries} attempts of {timeout} s and no answer to "
                             f"health: is the server at {endpoint(self._info)} running? Does the key in "
                             f"{self.path} belong to it?")

    def _give_up(self, request_id: str, timeout: float) -> str:
        """After a timeout: reset the socket, cancel ``request_id`` on the server (fire and forget) and
        probe with ``health``. Returns "busy" (same server answered), "restarted" or "down"."""
        self._reset()
        known = (self.server or {}).get("server_session")
        try:
            self._send(self._codec.encode("cancel", {"id": request_id}))
            probe = P.new_id()
            self._send(self._codec.encode("health", id=probe))
        except P.ProtocolError:
            return "down"
        reply = self._wait(probe, min(timeout, HELLO_TIMEOUT), None)
        if reply is None:
            self._reset()
            return "down"
        return "busy" if reply.server_session == known else "restarted"

    def submit(self, type: str, content: Mapping[str, Any] | None = None,
               arrays: Mapping[str, Any] | None = None) -> str:
        """Send a request without waiting; returns its id for :meth:`result` or :meth:`cancel`."""
        if type != "hello" and self.server is None:
            self.hello()
        self._check_size(arrays)
        rid = P.new_id()
        frames = self._codec.encode(type, content, arrays, id=rid)
        limit = (self.server or {}).get("limits", {}).get("max_header_bytes")
        if limit is not None and len(frames[2]) > limit:
            raise P.TooLarge(f"request header (content) is {len(frames[2])} bytes; the server accepts {limit}")
        self._send(frames)
        self._outstanding.add(rid)
        return rid

    def result(self, request_id: str, *, timeout: float | None = None,
               progress: Callable[[dict[str, Any]], None] | None = None,
               cancel_when: Callable[[], bool] | None = None) -> P.Message:
        """Wait for the final reply to a submitted request (never resent: a timeout raises RequestTimeout).

        ``cancel_when`` is polled about every 50 ms while waiting (from this thread): once it returns
        True the request is cancelled on the server and its final reply, a ``Cancelled`` error (or the
        result, if it finished first), is returned or raised as usual."""
        reply = self._stash.pop(request_id, None)
        if reply is None:
            reply = self._wait(request_id, self.timeout if timeout is None else timeout, progress, cancel_when)
            if reply is _STOPPED:
                reply = self._stop(request_id)
        self._outstanding.discard(request_id)
        if reply is None:
            state = self._give_up(request_id, self.timeout if timeout is None else timeout)
            raise RequestTimeout(f"no reply to request {request_id} within {timeout or self.timeout} s "
                                 f"({'the server is busy; the request was cancelled' if state == 'busy' else state})",
                                 busy=state == "busy")
        return self._finish(reply, "")

    def _stop(self, request_id: str) -> Any:
        """Cancel ``request_id`` on the server and return its final reply (None if none came)."""
        self.cancel(request_id)   # its final reply comes first and is stashed
        return self._stash.pop(request_id, None) or self._wait(request_id, HELLO_TIMEOUT, None)

    def _finish(self, reply: P.Message, type: str) -> P.Message:
        self._note_session(reply, type)
        if reply.type == P.ERROR:
            raise P.error_from_content(reply.content, reply.parent_id)
        return reply

    def _send(self, frames: list[Any]) -> None:
        sock = self._socket()
        try:
            sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            pass  # nothing connected or the queue is full: the wait times out and Lazy Pirate takes over

    def _wait(self, msg_id: str, timeout: float, progress: Callable | None,
              stop: Callable[[], bool] | None = None) -> Any:
        """The final reply to ``msg_id``, None on timeout, or _STOPPED once ``stop()`` is true. Finals of
        other outstanding requests are kept."""
        sock = self._socket()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if stop is not None and stop():
                return _STOPPED
            wait_ms = max(1, int(left * 1000)) if stop is None else max(1, min(50, int(left * 1000)))
            if not sock.poll(wait_ms, zmq.POLLIN):
                continue
            frames = sock.recv_multipart()   # bytes: cheaper than zmq.Frame objects for small frames
            try:
                msg = self._codec.decode(frames)
            except P.SignatureError as e:
                raise P.SignatureError(f"a reply failed the signature check ({e.message}): does the key in "
                                       f"{self.path} match the server's?") from None
            except P.ProtocolError:
                continue  # not a message we can trust or parse: ignore it
            if msg.parent_id != msg_id:
                if msg.is_final and msg.parent_id in self._outstanding:
                    self._stash[msg.parent_id] = msg   # for a later result(id)
                continue  # otherwise a late reply to an abandoned request
            if msg.type == P.PROGRESS:
                deadline = time.monotonic() + timeout
                if progress is not None:
                    progress(msg.content)
                continue
            if msg.is_final:
                return msg
        return None

    def _note_session(self, reply: P.Message, type: str) -> None:
        known = self.server.get("server_session") if self.server else None
        if known is None or reply.server_session == known:
            return
        self.restarts += 1   # the server restarted: refresh limits and models before going on
        self.server = None
        if type != "hello":
            self.hello()

    def _check_size(self, arrays: Mapping[str, Any] | None) -> None:
        if not arrays or self.server is None:
            return
        lim = self.server.get("limits", {})
        total, largest = P.message_nbytes(arrays)
        if total > lim.get("max_message_bytes", total) or largest > lim.get("max_buffer_bytes", largest):
            raise P.TooLarge(f"request buffers total {total} bytes (largest {largest}); the server accepts "
                             f"{lim.get('max_message_bytes')} in all and {lim.get('max_buffer_bytes')} per buffer")
        if len(arrays) > lim.get("max_buffers", len(arrays)):
            raise P.TooLarge(f"{len(arrays)} buffers; the server accepts {lim.get('max_buffers')}")

    # -- typed helpers
    def hello(self) -> dict[str, Any]:
        """Protocol and package versions, server_session, device, models and limits. The server's socket
        loop answers hello itself (never behind a model), so its timeout is short (HELLO_TIMEOUT): a server
        that is down is reported in seconds, not after the long timeout meant for model requests."""
        self.server = self.call("hello", timeout=min(self.timeout, HELLO_TIMEOUT)).content
        return self.server

    def health(self, timeout: float | None = None, stats: bool = False) -> dict[str, Any]:
        """``{status, uptime_s, inflight}``; ``stats=True`` adds the server's counters (queues, replies,
        rejections by code, send failures, batches)."""
        return self.call("health", {"stats": True} if stats else None, timeout=timeout).content

    def models(self) -> list[dict[str, Any]]:
        return self.call("models").content["models"]

    def cancel(self, request_id: str) -> dict[str, Any]:
        return self.call("cancel", {"id": request_id}).content

    def pfnn_rollout(self, x: np.ndarray, phase: float, frames: int = 1, model: str | None = None,
                     **kw: Any) -> P.Message:
        return self.call("pfnn.rollout", _drop_none({"frames": frames, "model": model}),
                         {"x": np.asarray(x, np.float32), "phase": np.asarray(phase, np.float32)}, **kw)

    def mann_rollout(self, x: np.ndarray, frames: int = 1, model: str | None = None, **kw: Any) -> P.Message:
        return self.call("mann.rollout", _drop_none({"frames": frames, "model": model}),
                         {"x": np.asarray(x, np.float32)}, **kw)

    def infill(self, motion: np.ndarray, known: np.ndarray, model: str | None = None, seed: int | None = None,
               **kw: Any) -> P.Message:
        return self.call("infill", _drop_none({"model": model, "seed": seed}),
                         {"motion": np.asarray(motion, np.float32), "known": np.asarray(known, bool)}, **kw)

    def infill_rotations(self, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, model: str | None = None,
                         seed: int | None = None, temperature: float | None = None, order: str | None = None,
                         samples: int | None = None, object_track: tuple[np.ndarray, np.ndarray] | None = None,
                         joints: list[str] | None = None, fps: float | None = None, mirror: bool | None = None,
                         gate: bool | None = None, learn: float | None = None, plant_feet: bool | str | None = None,
                         curve: str | None = None, rate: str | None = None, **kw: Any) -> P.Message:
        """The rotation form of ``infill`` (any-order checkpoints): rotations (T, J, 4) WXYZ, root (T, 3),
        known (T,) or (T, J + 1) bool -> buffers rotations (S, T, J, 4), root (S, T, 3). ``object_track``
        (hands, a checkpoint with ``object_cond``): the object's (T, 4) WXYZ rotations and (T, 3) positions in
        the root's space. ``joints``: the columns' model joint names; ``fps``: the clip's rate (resampled to
        the model's); ``mirror``: fill the clip's mirror image (a left hand on a right-hand model); ``gate``
        (``infill-body``, default true): fit the correction's weights on pseudo-gaps cut from this request's keyed
        frames (the reply's ``gate`` says what was fitted); ``plant_feet`` (``infill-body``, default true): plant
        the feet in contact by IK on the legs (the gate keeps it off for a gap length where it costs error; the
        reply's ``plant`` and ``gate`` say so; ``"judge"``: judged, not planted, for a client that plants its own
        rig); ``curve`` (``infill-body``): the user's keys' interpolation ("bezier", "linear", "constant"), so the
        gate also weighs the fill against the curve the user has (each reply ``gate`` entry's ``blend``); ``rate``
        (``infill-body``): "best" fills at the common rate that test gaps cut from the keys say fills them closer
        than ``fps`` (the reply's ``rate``, with ``filled_at``; the keys stay on their frames), "scene" (default) at ``fps``;
        ``learn`` (``infill-hands``): seconds of learning on
        the clip's fully keyed frames (0: the gate alone; the body learns through ``adapt``)."""
        arrays = {"rotations": np.asarray(rotations, np.float32), "root": np.asarray(root, np.float32),
                  "known": np.asarray(known, bool)}
        if object_track is not None:
            arrays.update(object_rotations=np.asarray(object_track[0], np.float32),
                          object_positions=np.asarray(object_track[1], np.float32))
        return self.call("infill", _drop_none({"model": model, "seed": seed, "temperature": temperature,
                                                "order": order, "samples": samples, "joints": joints, "fps": fps,
                                                "mirror": mirror, "gate": gate, "learn": learn,
                                                "plant_feet": plant_feet, "curve": curve,
                                                "rate": rate}), arrays, **kw)

    def adapt(self, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, model: str | None = None,
              seconds: float | None = None, joints: list[str] | None = None, fps: float | None = None,
              again: bool | None = None, steps: int | None = None, **kw: Any) -> P.Message:
        """Learn This Action (``infill-body``): fine-tune a copy of the model on this clip's keyed frames for
        ``seconds`` (default 20) or ``steps`` learning steps (the same result on any machine), with progress; later ``infill_rotations`` calls with the same keys use it. The
        reply's ``adapted`` gives the held-out pseudo-gap error (cm) before and after. The arrays are those of
        ``infill_rotations``."""
        arrays = {"rotations": np.asarray(rotations, np.float32), "root": np.asarray(root, np.float32),
                  "known": np.asarray(known, bool)}
        return self.call("adapt", _drop_none({"model": model, "seconds": seconds, "joints": joints, "fps": fps,
                                              "again": again, "steps": steps}), arrays, **kw)

    def walk(self, task: str, points: np.ndarray, *, gait: str | None = None, speed: np.ndarray | None = None,
             frames: int | None = None, model: str | None = None, **kw: Any) -> P.Message:
        """The path form of ``pfnn.rollout`` / ``mann.rollout`` (``task``): walk the root path ``points``
        (N, 2) in metres, at ``speed`` (N,) m/s (default: the gait's), for ``frames`` (default: the path's
        length plus a second to settle)."""
        if task not in ("pfnn.rollout", "mann.rollout"):
            raise ValueError(f"walk: task must be 'pfnn.rollout' or 'mann.rollout', not {task!r}")
        arrays: dict[str, Any] = {"points": np.asarray(points, np.float32)}
        if speed is not None:
            arrays["speed"] = np.asarray(speed, np.float32)
        return self.call(task, _drop_none({"gait": gait, "frames": frames, "model": model}), arrays, **kw)

    def style_adapt(self, points: np.ndarray, *, rotations: np.ndarray | None = None, root: np.ndarray | None = None,
                    joints: list[str] | None = None, fps: float | None = None, root_space: str | None = None,
                    z: np.ndarray | None = None,
                    speed: np.ndarray | None = None, gait: str | list[str] | None = None, frames: int | None = None,
                    model: str | None = None, **kw: Any) -> P.Message:
        """Walk the root path ``points`` (N, 2) in metres in the style of an exemplar clip (rotation form:
        ``rotations`` (T, J, 4) WXYZ, ``root`` (T, 3) cm, optional ``joints`` names, ``fps`` and ``root_space``
        "ground" when ``root`` is the ground projection) or of a style code
        ``z`` from an earlier reply. Reply buffers: the rollout (as pfnn.rollout's path form) plus ``z``."""
        arrays: dict[str, Any] = {"points": np.asarray(points, np.float32)}
        if rotations is not None:
            arrays.update(rotations=np.asarray(rotations, np.float32), root=np.asarray(root, np.float32))
        if z is not None:
            arrays["z"] = np.asarray(z, np.float32)
        if speed is not None:
            arrays["speed"] = np.asarray(speed, np.float32)
        return self.call("style.adapt", _drop_none({"joints": joints, "fps": fps, "root_space": root_space, "gait": gait,
                                                    "frames": frames, "model": model}),
                         arrays, **kw)

    def retarget(self, rotations: np.ndarray, root: np.ndarray, source: Mapping, target: Mapping,
                 model: str | None = None, **kw: Any) -> P.Message:
        return self.call("retarget", _drop_none({"source": dict(source), "target": dict(target), "model": model}),
                         {"rotations": np.asarray(rotations, np.float32), "root": np.asarray(root, np.float32)},
                         **kw)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
