"""The socket loop: one thread owns the ROUTER socket, decodes and routes requests, forwards replies.

Per incoming message: decode (protocol steps 1-6; a failure is answered with its typed error), look the
type up in the handler table (unknown -> ``unknown_type``), then either run it here (cheap control
requests: hello, health, models, cancel) or queue it for the worker pool (a full queue -> ``busy`` at
once). The loop tracks every queued or running request in ``inflight``; a final reply leaves that table
exactly once (a late final for a cancelled request is dropped), so every request gets exactly one.

What happens on the socket below routing -- ZAP admission, bounded reads, replies held for a slow
peer -- is ``transport``; the settings are ``config.ServerConfig``. Any unexpected exception while
handling one message becomes an ``internal`` error reply and a log line; the loop goes on.
"""
from __future__ import annotations

import logging
import platform
import signal
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zmq

import motioncore
from motioncore.wire.protocol import (
    RESULT,
    Busy,
    Codec,
    FrameError,
    InternalError,
    InvalidRequest,
    Message,
    ProtocolError,
    ShuttingDown,
    SignatureError,
    TooLarge,
    UnknownType,
    transport_token,
)

from . import connection
from .config import SEND_HWM, ServerConfig, is_loopback, resolve_device
from .handlers import Batched, Context, Handler, ServerInfo, handler_table
from .models import bundled_checkpoints  # also registers the controller loaders (pfnn, phase-mlp, mann)
from .registry import Registry, debug_mlp
from .transport import DRAIN, HOLD_MAX, ZAP_ENDPOINT, Replies, recv_bounded, serve_zap
from .workers import FINAL, Job, MicroBatcher, WorkerPool

log = logging.getLogger("motioncore_server")
PRE_AUTH = (FrameError, TooLarge, SignatureError)   # decode failures before the signature is known good


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
        self.replies = Replies(self.router, self.counts)
        self.port = bound
        self.outbox_address = f"inproc://mc-outbox-{self.session}"
        self.outbox = self.zctx.socket(zmq.PULL)
        self.outbox.bind(self.outbox_address)
        self.info = ServerInfo(self.session, str(self.device), cfg.limits, self.registry, self._versions(),
                               self.config.public(), self.stats, self.cancel, types=lambda: sorted(self.handlers),
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
        if not is_loopback(cfg.ip):
            log.warning("listening on a non-loopback interface", extra={"fields": {
                "ip": cfg.ip, "warning": "messages are signed, not encrypted: anyone on the network can read them; "
                                         "only key holders can connect"}})
        log.info("listening", extra={"fields": {"endpoint": self.endpoint, "connection_file": str(self.connection_file),
                                                "server_session": self.session, "device": str(self.device),
                                                "models": self.registry.names(), **self.config.public()}})

    def _bind(self, port: int) -> tuple[zmq.Socket, int]:
        cfg = self.config
        s = self.zctx.socket(zmq.ROUTER)
        s.setsockopt(zmq.ROUTER_MANDATORY, 1)
        s.setsockopt(zmq.SNDHWM, cfg.send_hwm)   # per peer; beyond it replies are held (transport.Replies)
        s.setsockopt(zmq.RCVHWM, SEND_HWM)
        s.setsockopt(zmq.PLAIN_SERVER, 1)        # every connection is vetted by the ZAP handler (serve_zap)
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
                "held": sum(len(q) for q in self.replies.held.values()), "held_total": self.counts["held"],
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
                if self.replies.held:   # replies wait for a slow peer: look again soon
                    timeout = 5 if timeout is None else min(timeout, 5)
                events = dict(poller.poll(timeout))
                try:
                    if self._wake_r.fileno() in events:
                        self._wake_r.recv(4096)
                    if self._stop and not self._stopping:
                        self._begin_shutdown()
                    if self.zap in events:
                        serve_zap(self.zap, self._token, self.counts)
                    if self.replies.held:
                        self.replies.flush()
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

    def _drain_router(self) -> None:
        # EVENTS costs less than the zmq.Again exception that a blind recv ends on.
        router = self.router
        for _ in range(DRAIN):
            if not router.get(zmq.EVENTS) & zmq.POLLIN:
                return
            self._handle(recv_bounded(router, self.config.limits))

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
                self.replies.send(job.identity, frames[2:])

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
        if len(frames) == 2 and isinstance(frames[1], ProtocolError):   # capped by recv_bounded
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
        held = self.replies.held.get(tuple(msg.identity)) if self.replies.held else None
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
        self.replies.send(identity, frames)

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
        if self.replies.held:   # a last chance for replies still held for slow peers
            self.replies.flush()
            self.counts["unsent_at_exit"] = sum(len(q) for q in self.replies.held.values())
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
