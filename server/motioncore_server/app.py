"""The socket loop: one thread owns the ROUTER socket, decodes and routes requests, forwards replies.

Per incoming message: decode (protocol steps 1-6; a failure is answered with its typed error), look the
type up in the handler table (unknown -> ``unknown_type``), then either run it here (cheap control
requests: hello, health, models, cancel) or queue it for the worker pool (a full queue -> ``busy`` at
once). The loop tracks every queued or running request in ``inflight``; a final reply leaves that table
exactly once (a late final for a cancelled request is dropped), so every request gets exactly one.

Sends are non-blocking with ROUTER_MANDATORY. A vanished client (EHOSTUNREACH) costs a counted, dropped
reply. A slow client whose queue is full (EAGAIN at the high-water mark, SEND_HWM messages) never blocks
anyone else and loses nothing: its replies are held, in order, and sent as it reads; while HOLD_MAX are
held for it, its new requests are answered ``busy`` (held too). Only past HOLD_HARD held messages -- a
peer that sends without ever reading -- are replies dropped, counted and logged.

Hardening (issue 18): a ZAP handler on this loop admits only connections that present the ZMTP PLAIN
token derived from the key, so a peer without the key never gets a message in (libzmq would otherwise
buffer a whole multipart message of any frame count before the loop sees it). Messages are read frame
by frame with caps on frame count and total size; the rest of an oversize message is discarded as it is
read. Any unexpected exception while handling one message becomes an ``internal`` error reply and a log
line; the loop goes on.
"""
from __future__ import annotations

import collections
import hmac
import ipaddress
import logging
import os
import platform
import signal
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zmq

import motioncore
from motioncore.wire.protocol import (
    RESULT,
    ZAP_USERNAME,
    Busy,
    Codec,
    FrameError,
    InternalError,
    InvalidRequest,
    Limits,
    Message,
    ProtocolError,
    ShuttingDown,
    SignatureError,
    TooLarge,
    UnknownType,
    transport_token,
)

from . import connection
from .handlers import Batched, Context, Handler, ServerInfo, handler_table
from .models import bundled_checkpoints  # also registers the controller loaders (pfnn, phase-mlp, mann)
from .registry import Registry, debug_mlp
from .workers import FINAL, Job, MicroBatcher, WorkerPool

log = logging.getLogger("motioncore_server")
SEND_HWM = 1000   # messages queued per peer and direction in libzmq (docs/protocol.md: the one send limit)
HOLD_MAX = 1000   # replies held for one slow peer beyond SEND_HWM before its new requests are answered busy
HOLD_HARD = 100_000   # held replies for one peer beyond which replies are dropped (counted, logged)
COPY = False
DRAIN = 256   # messages taken from one socket per loop turn, so neither direction starves the other
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def resolve_ip(host: str) -> tuple[str, bool]:
    """(IP literal to bind, whether every address of ``host`` is loopback). Host names such as
    ``localhost`` are resolved (IPv4 preferred)."""
    try:
        return str(ipaddress.ip_address(host)), _is_loopback(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as e:
        raise ValueError(f"cannot resolve --ip {host!r}: {e}") from None
    addrs = sorted({i[4][0] for i in infos}, key=lambda a: ":" in a)
    if not addrs:
        raise ValueError(f"--ip {host!r} resolves to no address")
    return addrs[0], all(_is_loopback(a) for a in addrs)


class TooManyFrames(FrameError):
    def __init__(self, n: int):
        super().__init__(f"message has {n} frames or more; the rest was discarded")


PRE_AUTH = (FrameError, TooLarge, SignatureError)   # decode failures before the signature is known good


@dataclass
class ServerConfig:
    ip: str = "127.0.0.1"                 # interface to bind; anything but loopback needs allow_remote
    port: int | None = None               # None: the connection file's port if it has one, else random
    allow_remote: bool = False            # permit a non-loopback ip (messages are signed, not encrypted)
    connection_file: Path | None = None   # None: motioncore.wire.client.default_connection_file()
    device: str = "auto"                  # auto | cpu | cuda | cuda:N
    models: list[Path] = field(default_factory=list)        # extra checkpoints
    models_dirs: list[Path] = field(default_factory=list)   # folders of checkpoints
    workers: int = 2                      # worker threads (concurrent jobs)
    threads: int | None = None            # torch intra-op threads; None: cores // (workers + 1), at least 1
    queue: int = 64                       # queued jobs before `busy`
    batching: bool = True                 # micro-batch concurrent single-frame rollouts
    batch_max: int = 32                   # largest batch
    batch_window_ms: float = 1.0          # how long a batch waits for company
    limits: Limits = field(default_factory=Limits)
    grace_s: float = 2.0                  # on shutdown, how long running jobs may finish
    heartbeat_ms: int = 1000              # ZMTP heartbeat interval (timeout is 3x)
    debug: bool = False                   # add the debug.* request types and the debug.mlp model
    debug_hidden: int = 512               # hidden width of debug.mlp (benchmarks vary the compute)
    bundled: bool = False                 # register motioncore's bundled checkpoints (lazily); the CLI turns it on
    key: str | None = None                # HMAC key; None: a fresh random one on every start
    send_hwm: int = SEND_HWM              # per-peer libzmq queue (tests lower it to exercise held replies)

    def __post_init__(self) -> None:
        ip, loopback = resolve_ip(self.ip)
        if not loopback and not self.allow_remote:
            raise ValueError(f"refusing to bind {self.ip!r}: only loopback is allowed without --allow-remote")
        self.ip = ip
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        if self.key is not None and not self.key:
            raise ValueError("an explicit key must not be empty")
        for k in ("workers", "queue", "batch_max", "heartbeat_ms", "send_hwm"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.threads is None:
            self.threads = max(1, (os.cpu_count() or 2) // (self.workers + 1))


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: only {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}")
    return dev


class Server:
    """``start()`` binds and writes the connection file; ``serve()`` runs the loop until ``request_stop()``."""

    def __init__(self, config: ServerConfig, handlers: dict[str, Handler] | None = None,
                 registry: Registry | None = None):
        self.config = config
        self.handlers = handlers if handlers is not None else handler_table(config.debug)
        self.device = resolve_device(config.device)
        self.registry = registry if registry is not None else Registry(self.device)
        self.session = connection.new_session()
        self.inflight: dict[str, Job] = {}
        self.counts: Counter[str] = Counter()
        self.held: dict[tuple[bytes, ...], collections.deque] = {}   # peer -> replies waiting for room
        self.port: int | None = None
        self.connection_file = Path(config.connection_file or connection.default_connection_file())
        self._stop = False   # a plain flag: request_stop() runs inside signal handlers
        self._force = False
        self._stopping = False
        self._deadline = 0.0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._started = False
        self._signals = False

    # ------------------------------------------------------------------------------------- set-up
    def start(self) -> None:
        cfg = self.config
        threads = int(cfg.threads or 1)
        if cfg.bundled:
            for p in bundled_checkpoints():   # metadata only; tensors load on first use
                self.registry.add_checkpoint(p)
        for p in cfg.models:
            self.registry.add_checkpoint(p)
        for d in cfg.models_dirs:
            self.registry.add_dir(d)
        if cfg.debug:
            self.registry.add_model(debug_mlp(self.device, d_hidden=cfg.debug_hidden))
        try:
            prev = connection.previous(self.connection_file)   # refuses a file others could read or write
            if prev is not None and connection.is_live(prev):
                raise OSError(f"connection file {self.connection_file} names a live server (pid {prev['pid']}, "
                              f"{prev['ip']}:{prev['port']}): stop it first, or pass another --connection-file")
        except Exception:
            self._wake_r.close()
            self._wake_w.close()
            raise
        key = cfg.key or connection.new_key()     # fresh on every start: captured messages die with the server
        port = cfg.port if cfg.port is not None else (prev["port"] if prev and prev["ip"] == cfg.ip else 0)
        self.codec = Codec(key, cfg.limits, session=self.session, role="server")
        self._token = transport_token(key)
        self.zctx = zmq.Context()
        self.zap = self.zctx.socket(zmq.REP)      # ZAP handler: bound before the ROUTER can take connections
        self.zap.linger = 0
        self.zap.bind(ZAP_ENDPOINT)
        self.router, bound = self._bind(port)
        self.port = bound
        self.outbox_address = f"inproc://mc-outbox-{self.session}"
        self.outbox = self.zctx.socket(zmq.PULL)
        self.outbox.bind(self.outbox_address)
        self.info = ServerInfo(self.session, str(self.device), cfg.limits, self.registry, self._versions(),
                               self._public_config(), self.stats, self.cancel, types=lambda: sorted(self.handlers),
                               inflight=self.inflight.__len__)
        self.batcher = MicroBatcher(self.info, self.codec, self.zctx, self.outbox_address, enabled=cfg.batching,
                                    max_batch=cfg.batch_max, window_s=cfg.batch_window_ms / 1000,
                                    queue_size=max(cfg.queue, cfg.batch_max), threads=threads)
        self.pool = WorkerPool(self.info, self.codec, self.zctx, self.outbox_address,
                               workers=cfg.workers, threads=threads, queue_size=cfg.queue)
        try:
            connection.write(self.connection_file, ip=cfg.ip, port=bound, key=key, server_session=self.session)
        except Exception:
            self.router.close(linger=0)
            self.outbox.close(linger=0)
            self.zap.close(linger=0)
            self.zctx.term()
            raise
        torch.set_num_threads(threads)
        self.pool.start()
        self.batcher.start()
        self._started = True
        if not _is_loopback(cfg.ip):
            log.warning("listening on a non-loopback interface", extra={"fields": {
                "ip": cfg.ip, "warning": "messages are signed, not encrypted: anyone on the network can read them; "
                                         "only key holders can connect"}})
        log.info("listening", extra={"fields": {"endpoint": self.endpoint, "connection_file": str(self.connection_file),
                                                "server_session": self.session, "device": str(self.device),
                                                "models": self.registry.names(), **self._public_config()}})

    def _bind(self, port: int) -> tuple[zmq.Socket, int]:
        cfg = self.config
        s = self.zctx.socket(zmq.ROUTER)
        s.setsockopt(zmq.ROUTER_MANDATORY, 1)
        s.setsockopt(zmq.SNDHWM, cfg.send_hwm)   # per peer; beyond it replies are held (see _send)
        s.setsockopt(zmq.RCVHWM, SEND_HWM)
        s.setsockopt(zmq.PLAIN_SERVER, 1)        # every connection is vetted by the ZAP handler (_serve_zap)
        s.setsockopt(zmq.ZAP_DOMAIN, b"motioncore")
        s.setsockopt(zmq.MAXMSGSIZE, cfg.limits.socket_max_frame)
        s.setsockopt(zmq.HEARTBEAT_IVL, cfg.heartbeat_ms)
        s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * cfg.heartbeat_ms)
        s.setsockopt(zmq.HEARTBEAT_TTL, 3 * cfg.heartbeat_ms)
        s.linger = 1000
        host = cfg.ip
        if ":" in host:
            s.ipv6 = True
            host = f"[{host}]"
        try:
            s.bind(f"tcp://{host}:{port or '*'}")
        except zmq.ZMQError as e:
            s.close(linger=0)
            self.zap.close(linger=0)
            self.zctx.term()
            raise OSError(f"cannot bind tcp://{host}:{port} ({e}); is another server using "
                          f"{self.connection_file}? Use --port 0 or another --connection-file") from None
        return s, int(s.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])

    @property
    def endpoint(self) -> str:
        host = f"[{self.config.ip}]" if ":" in self.config.ip else self.config.ip
        return f"tcp://{host}:{self.port}"

    def _versions(self) -> dict[str, str]:
        return {"motioncore": motioncore.__version__, "python": platform.python_version(), "numpy": np.__version__,
                "torch": torch.__version__, "pyzmq": zmq.__version__, "libzmq": zmq.zmq_version()}

    def _public_config(self) -> dict[str, Any]:
        c = self.config
        return {"workers": c.workers, "threads": c.threads, "queue": c.queue, "batching": c.batching,
                "batch_max": c.batch_max, "batch_window_ms": c.batch_window_ms, "heartbeat_ms": c.heartbeat_ms,
                "debug": c.debug}

    # ------------------------------------------------------------------------------ state for handlers
    def stats(self) -> dict[str, Any]:
        b = self.batcher
        return {"inflight": len(self.inflight), "queued": self.pool.queued + b.queued, "queue_capacity": self.config.queue,
                "running": self.pool.running, "workers": self.config.workers,
                "received": self.counts["received"], "replied": self.counts["replied"],
                "progress_sent": self.counts["progress"], "dropped_late": self.counts["dropped_late"],
                "rejected": {k[4:]: v for k, v in self.counts.items() if k.startswith("rej:")},
                "send_failures": {"unroutable": self.counts["unroutable"], "full": self.counts["full"],
                                  "dropped_overflow": self.counts["dropped_overflow"]},
                "held": sum(len(q) for q in self.held.values()), "held_total": self.counts["held"],
                "connections_refused": self.counts["zap_refused"],
                "batches": b.batches, "batched_requests": b.requests, "largest_batch": b.largest}

    def cancel(self, target: str) -> dict[str, Any]:
        """Cancel an in-flight request: its final reply is a ``cancelled`` error, sent now."""
        job = self.inflight.pop(target, None)
        if job is None:
            return {"id": target, "cancelled": False, "state": "unknown"}
        state = job.state
        job.cancel()
        self._final(job.identity, self.codec.error(job.cancel_error(f"request {target} cancelled", parent_id=target)))
        return {"id": target, "cancelled": True, "state": state}

    # ------------------------------------------------------------------------------------------- loop
    def install_signal_handlers(self) -> None:
        """SIGINT/SIGTERM begin a clean shutdown; a second one skips the grace period. Main thread only.

        A signal may land on any thread; ``signal.set_wakeup_fd`` makes the interpreter write a byte to
        the loop's wake-up socket, so the poll returns and the handler runs at once."""
        def on_signal(signum: int, frame: object) -> None:
            self.request_stop(force=self._stop)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        self._signals = True

    def request_stop(self, force: bool = False) -> None:
        """Begin a clean shutdown (thread- and signal-safe). ``force`` skips the grace period."""
        self._force = self._force or force
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def serve(self) -> None:
        if not self._started:
            self.start()
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.outbox, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        poller.register(self.zap, zmq.POLLIN)
        try:
            while True:
                timeout = None if not self._stopping else max(0, int((self._deadline - time.monotonic()) * 1000))
                if self.held:   # replies wait for a slow peer: look again soon
                    timeout = 5 if timeout is None else min(timeout, 5)
                events = dict(poller.poll(timeout))
                try:
                    if self._wake_r.fileno() in events:
                        self._wake_r.recv(4096)
                    if self._stop and not self._stopping:
                        self._begin_shutdown()
                    if self.zap in events:
                        self._serve_zap()
                    if self.held:
                        self._flush_held()
                    if self.outbox in events:
                        self._drain_outbox()
                    if self.router in events:
                        self._drain_router()
                except Exception as e:   # the loop never dies; _handle already guards each message
                    self.counts["loop_errors"] += 1
                    log.error("socket loop error", exc_info=e)
                if self._stopping and (not self.inflight or self._force or time.monotonic() >= self._deadline):
                    break
        finally:
            self._finish_shutdown()

    def run(self) -> None:
        self.start()
        self.serve()

    def _serve_zap(self) -> None:
        """ZAP (RFC 27): admit a connection only with the PLAIN user name and the token derived from the key."""
        for _ in range(DRAIN):
            try:
                req = self.zap.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            rid = req[1] if len(req) > 1 else b""
            ok = (len(req) == 8 and req[5] == b"PLAIN" and hmac.compare_digest(req[6], ZAP_USERNAME)
                  and hmac.compare_digest(req[7], self._token))
            if not ok:
                self.counts["zap_refused"] += 1
            self.zap.send_multipart([b"1.0", rid, b"200" if ok else b"400", b"OK" if ok else b"bad credentials",
                                     b"", b""])

    def _drain_router(self) -> None:
        # EVENTS costs less than the zmq.Again exception that a blind recv ends on.
        router = self.router
        for _ in range(DRAIN):
            if not router.get(zmq.EVENTS) & zmq.POLLIN:
                return
            self._handle(self._recv_bounded())

    def _recv_bounded(self) -> list[Any]:
        """One message, frame by frame (bytes: cheaper than zmq.Frame for the small frames of most requests).
        Past the frame-count or total-size cap the rest is read and discarded, and a placeholder is
        returned that decodes to ``bad_frames`` / ``too_large``: what one message costs us stays bounded."""
        router, lim = self.router, self.config.limits
        max_frames = lim.max_identities + 3 + lim.max_buffers
        max_total = lim.max_message_bytes + 2 * lim.max_header_bytes
        frames = [router.recv(zmq.NOBLOCK)]
        total, n = len(frames[0]), 1
        while router.get(zmq.RCVMORE):
            keep = total <= max_total and n < max_frames
            f = router.recv(copy=keep)
            n += 1
            if not keep or n > max_frames:
                continue    # discarded (a zmq.Frame, freed at once)
            frames.append(f)
            total += len(f)
        if n > max_frames:
            return [frames[0], TooManyFrames(n)]
        if total > max_total:
            return [frames[0], TooLarge(f"message is over {max_total} bytes; the rest was discarded")]
        return frames

    def _drain_outbox(self) -> None:
        for _ in range(DRAIN):
            try:
                frames = self.outbox.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            kind, rid = frames[0].bytes, frames[1].bytes.decode()
            job = self.inflight.get(rid)
            if job is None:
                self.counts["dropped_late"] += 1   # cancelled or answered at shutdown already
                continue
            if kind == FINAL:
                del self.inflight[rid]
                self._final(job.identity, frames[2:])
            else:
                self.counts["progress"] += 1
                self._send(job.identity, frames[2:])

    def _handle(self, frames: list[Any]) -> None:
        """Decode, route and answer one message; any unexpected exception becomes an ``internal`` reply."""
        self.counts["received"] += 1
        try:
            self._route(frames)
        except Exception as e:
            self.counts["rej:internal"] += 1
            log.error("unexpected error handling a message", exc_info=e)
            try:
                self._final([frames[0]], self.codec.error(InternalError(f"{type(e).__name__} while handling the "
                                                                        f"message"), anonymous=True))
            except Exception as e2:   # even the reply failed (the peer's identity frame is odd): log only
                log.error("could not answer", exc_info=e2)

    def _route(self, frames: list[Any]) -> None:
        if len(frames) == 2 and isinstance(frames[1], ProtocolError):   # capped by _recv_bounded
            err = frames[1]
            self.counts["rej:" + err.code] += 1
            self._final([frames[0]], self.codec.error(err, anonymous=True))
            return
        try:
            msg = self.codec.decode(frames)
        except ProtocolError as e:
            self.counts["rej:" + e.code] += 1
            # ROUTER put the peer's identity first; answer it. Before the signature holds (steps 1-3)
            # the answer is anonymous: no session, nothing about this server.
            self._final([frames[0]], self.codec.error(e, anonymous=isinstance(e, PRE_AUTH)))
            return
        handler = self.handlers.get(msg.type)
        if handler is None:
            return self._reject(msg, UnknownType(f"unknown message type {msg.type!r}; this server handles "
                                                 f"{sorted(self.handlers)}"))
        if self._stopping:
            return self._reject(msg, ShuttingDown("the server is shutting down"))
        if msg.id in self.inflight:
            return self._reject(msg, InvalidRequest(f"a request with id {msg.id!r} is already in flight"))
        held = self.held.get(tuple(msg.identity)) if self.held else None
        if held is not None and len(held) >= HOLD_MAX and msg.type != "cancel":
            return self._reject(msg, Busy(f"{len(held)} replies are waiting for this client to read them"))
        if handler.inline:
            return self._final(msg.identity, self._run_inline(handler, msg))
        job = Job(msg, handler, msg.identity)
        self.inflight[msg.id] = job
        single_frame = handler.batchable and msg.content.get("frames", 1) == 1 and "points" not in msg.arrays
        try:
            (self.batcher if single_frame else self.pool).submit(job)
        except ProtocolError as e:
            del self.inflight[msg.id]
            self._reject(msg, e)

    def _reject(self, msg: Message, err: ProtocolError) -> None:
        self.counts["rej:" + err.code] += 1
        self._final(msg.identity, self.codec.error(err, msg.id))

    def _run_inline(self, handler: Handler, msg: Message) -> list[Any]:
        try:
            result = handler.fn(msg, Context(self.info, msg))
            if isinstance(result, Batched):
                raise TypeError("inline handlers may not return Batched")
            return self.codec.reply(msg, RESULT, result.content, result.arrays)
        except ProtocolError as e:
            return self.codec.error(e, msg.id)
        except Exception as e:
            log.error("inline handler raised", exc_info=e, extra={"fields": {"id": msg.id, "type": msg.type}})
            return self.codec.error(InternalError(f"{msg.type}: {type(e).__name__}: {e}"), msg.id)

    def _final(self, identity: list[bytes], frames: list[Any]) -> None:
        self.counts["replied"] += 1
        self._send(identity, frames)

    def _send(self, identity: list[bytes], frames: list[Any]) -> bool:
        """Send now, or hold (in order) while the peer's queue is full; False when the peer has gone."""
        peer = tuple(identity)
        held = self.held.get(peer) if self.held else None
        if held is not None:
            return self._hold(held, frames)
        try:
            self.router.send_multipart([*identity, *frames], flags=zmq.NOBLOCK, copy=COPY)
            return True
        except zmq.Again:
            self.counts["full"] += 1          # the peer's queue is at the high-water mark: hold
            held = self.held[peer] = collections.deque()
            return self._hold(held, frames)
        except zmq.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            self.counts["unroutable"] += 1    # the peer has gone
        return False

    def _hold(self, held: collections.deque, frames: list[Any]) -> bool:
        if len(held) >= HOLD_HARD:
            self.counts["dropped_overflow"] += 1
            if self.counts["dropped_overflow"] % 1000 == 1:
                log.warning("reply dropped: a client sends without reading", extra={"fields": {
                    "held": len(held), "dropped_overflow": self.counts["dropped_overflow"]}})
            return False
        held.append(frames)
        self.counts["held"] += 1
        return True

    def _flush_held(self) -> None:
        """Send held replies, oldest first, while each peer has room; forget peers that have gone."""
        for peer, held in list(self.held.items()):
            try:
                while held:
                    self.router.send_multipart([*peer, *held[0]], flags=zmq.NOBLOCK, copy=COPY)
                    held.popleft()
            except zmq.Again:
                continue
            except zmq.ZMQError as e:
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self.counts["unroutable"] += len(held)
                held.clear()
            del self.held[peer]

    # -------------------------------------------------------------------------------------- shutdown
    def _begin_shutdown(self) -> None:
        self._stopping = True
        self._deadline = time.monotonic() + (0.0 if self._force else self.config.grace_s)
        queued = [j for j in self.inflight.values() if j.state == "queued"]
        for job in queued:   # never started: answer now
            job.cancel(ShuttingDown)
            self.inflight.pop(job.id, None)
            self._final(job.identity, self.codec.error(ShuttingDown("the server is shutting down"), job.id))
        log.info("shutting down", extra={"fields": {"cancelled_queued": len(queued), "running": len(self.inflight),
                                                    "grace_s": self.config.grace_s}})

    def _finish_shutdown(self) -> None:
        for job in list(self.inflight.values()):   # still running after the grace period: cancel them
            job.cancel(ShuttingDown)
            self._final(job.identity, self.codec.error(ShuttingDown("the server shut down before finishing"), job.id))
        self.inflight.clear()
        removed = connection.remove_if_ours(self.connection_file, self.session)
        joined = self.pool.stop(timeout=max(1.0, self.config.grace_s))
        joined = self.batcher.stop(timeout=max(1.0, self.config.grace_s)) and joined
        if self.held:   # a last chance for replies still held for slow peers
            self._flush_held()
            self.counts["unsent_at_exit"] = sum(len(q) for q in self.held.values())
        self.outbox.close(linger=0)
        self.zap.close(linger=0)
        self.router.close(linger=1000)    # let the last replies flush
        if self._signals:
            signal.set_wakeup_fd(-1)
        self._wake_r.close()
        self._wake_w.close()
        if joined:
            self.zctx.term()
        log.info("stopped", extra={"fields": {"connection_file_removed": removed, "workers_joined": joined,
                                              **{k: v for k, v in self.counts.items() if not k.startswith("rej:")}}})
