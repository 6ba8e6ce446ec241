"""Worker pool, bounded queues and micro-batching. The socket loop never runs a model; these threads do.

Two lanes, each with a bounded queue (full -> ``busy`` at once): single-frame rollouts go to the
:class:`MicroBatcher` thread, which validates them and runs them in batches; everything else goes to
the :class:`WorkerPool`. (An earlier design validated rollouts in the pool and handed them on to the
batcher: the extra thread hop cost more than batching saved on a 2-core machine.)

Threads, not processes, because: the decoded request arrays are read-only views of the received ZeroMQ
frames and the loaded models are shared, so a thread hands both to torch with no copy and no
serialisation (a process pool would pickle or copy every array, and need a model copy -- and a CUDA
context -- per process); torch releases the GIL inside its kernels, so the socket loop keeps answering
``health`` while a job runs; and forking a process that has imported torch (or initialised CUDA) is
unsafe. The cost -- Python-level model code holds the GIL -- is small for these networks, whose time is
in matrix kernels. torch's intra-op pool is process-wide: every worker calls
``torch.set_num_threads(threads)`` explicitly, sized so that workers x threads stays within the cores
(torch's default of all cores oversubscribes a busy machine: 29 us becomes 14 ms in REFERENCES.md).

Replies travel from the workers to the socket loop over an inproc PUSH/PULL pair as
``[b"F" | b"P", request id, *message frames]`` (final or progress); only the loop touches the ROUTER.
"""
from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import zmq

from motioncore.wire.protocol import (
    PROGRESS,
    RESULT,
    Busy,
    Cancelled,
    Codec,
    InternalError,
    Message,
    ProtocolError,
)

from .handlers import Batched, Context, Handler, Result, ServerInfo

log = logging.getLogger("motioncore_server")
FINAL, PROG = b"F", b"P"
PROGRESS_MIN_INTERVAL_S = 0.02   # progress messages are coalesced to at most 50 per second per request


@dataclass
class Job:
    """One request handed to a worker. ``state``: queued -> running (-> batched) ; the loop owns replies."""

    request: Message
    handler: Handler
    identity: list[bytes]
    cancel_event: threading.Event = field(default_factory=threading.Event)
    cancel_error: type[ProtocolError] = Cancelled
    state: str = "queued"
    enqueued: float = field(default_factory=time.monotonic)
    last_progress: float = 0.0

    @property
    def id(self) -> str:
        return self.request.id

    def cancel(self, error: type[ProtocolError] = Cancelled) -> None:
        self.cancel_error = error
        self.cancel_event.set()


class Outbox:
    """A worker thread's PUSH socket to the loop (ZeroMQ sockets belong to one thread each)."""

    def __init__(self, zctx: zmq.Context, address: str):
        self.sock = zctx.socket(zmq.PUSH)
        self.sock.linger = 1000
        self.sock.sndtimeo = 5000   # never wedge a worker forever if the loop has gone
        self.sock.connect(address)

    def send(self, kind: bytes, job: Job, frames: list[Any]) -> None:
        try:
            self.sock.send_multipart([kind, job.id.encode(), *frames], copy=False)
        except zmq.Again:
            log.error("outbox full: reply dropped", extra={"fields": {"id": job.id}})

    def close(self) -> None:
        self.sock.close()


def check_finite(result: Result) -> None:
    """No NaN or infinity ever leaves as a result: a model that produced one answers ``internal``."""
    for name, a in result.arrays.items():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and a.size and not np.isfinite(a).all():
            raise InternalError(f"the model produced NaN or infinity in {name!r} (inputs out of its range?)")


def reply_frames(codec: Codec, job: Job, result: Result) -> list[Any]:
    """Encode a result; an encoding failure (e.g. a non-JSON or non-finite content value) or a non-finite
    array becomes an internal error."""
    try:
        check_finite(result)
        return codec.reply(job.request, RESULT, result.content, result.arrays)
    except (ProtocolError, TypeError, ValueError) as e:
        log.error("could not encode result", extra={"fields": {"id": job.id, "error": str(e)}})
        msg = e.message if isinstance(e, InternalError) else f"the server could not encode the result: {e}"
        return codec.error(InternalError(msg), job.id)


def error_frames(codec: Codec, job: Job, err: BaseException) -> list[Any]:
    if not isinstance(err, ProtocolError):
        log.error("handler raised", exc_info=err, extra={"fields": {"id": job.id, "type": job.request.type}})
        err = InternalError(f"{job.request.type}: {type(err).__name__}: {err}")
    return codec.error(err, job.id)


def _thread_setup(threads: int) -> None:
    torch.set_num_threads(threads)
    if hasattr(signal, "pthread_sigmask"):   # SIGINT/SIGTERM belong to the socket loop's thread
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def execute(job: Job, info: ServerInfo, codec: Codec, out: Outbox) -> Batched | None:
    """Run ``job``'s handler in this thread and send its final reply -- unless it returns a Batched
    item, which is returned for the caller to run. Any exception becomes the job's error reply."""
    job.state = "running"
    ctx = Context(info, job.request, progress_sender(job, codec, out), job.cancel_event, lambda: job.cancel_error)
    try:
        result = job.handler.fn(job.request, ctx)
        if isinstance(result, Batched):
            return result
        frames = reply_frames(codec, job, result)
    except Exception as e:
        frames = error_frames(codec, job, e)
    out.send(FINAL, job, frames)
    return None


def progress_sender(job: Job, codec: Codec, out: Outbox) -> Callable[[int, int, str | None], None]:
    def send(done: int, total: int, message: str | None = None) -> None:
        now = time.monotonic()
        if job.last_progress and done < total and now - job.last_progress < PROGRESS_MIN_INTERVAL_S:
            return
        job.last_progress = now
        content: dict[str, Any] = {"done": int(done), "total": int(total)}
        if message is not None:
            content["message"] = str(message)
        out.send(PROG, job, codec.reply(job.request, PROGRESS, content))
    return send


def run_batch(items: list[tuple[Job, Batched]], codec: Codec, out: Outbox) -> None:
    """One ``model.step`` call for requests with the same batch key; split the rows into their replies."""
    B = len(items)
    model = items[0][1].model
    assert model.step is not None   # handlers return Batched only for models with a step
    try:
        stacked = {k: np.stack([it.inputs[k] for _, it in items]) for k in items[0][1].inputs}  # (B, ...)
        outputs = model.step(stacked)
        for k, v in outputs.items():
            if len(v) != B:
                raise RuntimeError(f"model {model.name!r} step returned {k!r} with {len(v)} rows for batch {B}")
    except Exception as e:  # one failure answers every request of the batch
        for job, _ in items:
            out.send(FINAL, job, error_frames(codec, job, e))
        return
    for i, (job, item) in enumerate(items):
        try:
            frames = reply_frames(codec, job, item.finish({k: v[i] for k, v in outputs.items()}))
        except Exception as e:
            frames = error_frames(codec, job, e)
        out.send(FINAL, job, frames)


class MicroBatcher:
    """The lane for single-frame rollouts: one thread validates them and runs them in batches.

    It takes a request, then everything already queued, then -- while the batch is smaller than the
    previous one (a sign of concurrent clients) -- waits up to ``window_s`` for more, up to
    ``max_batch``. A lone client therefore never waits. Requests for the same model and input shapes
    become one ``model.step`` call. With ``enabled=False`` every request runs alone, at once.
    """

    def __init__(self, info: ServerInfo, codec: Codec, zctx: zmq.Context, outbox_address: str, *,
                 enabled: bool = True, max_batch: int = 32, window_s: float = 0.001, queue_size: int = 256,
                 threads: int = 1):
        self.info, self.codec, self.zctx, self.address = info, codec, zctx, outbox_address
        self.enabled, self.max_batch, self.window_s, self.threads = enabled, max(1, max_batch), window_s, threads
        self.q: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self.batches = self.requests = self.largest = 0
        self._last = 1
        self._thread = threading.Thread(target=self._main, name="mc-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        try:
            self.q.put_nowait(job)
        except queue.Full:
            raise Busy(f"server busy: {self.q.maxsize} rollout requests already queued", parent_id=job.id) from None

    @property
    def queued(self) -> int:
        return self.q.qsize()

    def stop(self, timeout: float = 5.0) -> bool:
        try:
            self.q.put(None, timeout=timeout)
        except queue.Full:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _take(self, job: Job, batch: list[tuple[Job, Batched]], out: Outbox) -> None:
        if job.cancel_event.is_set():
            return  # cancelled while queued: the loop has already replied
        item = execute(job, self.info, self.codec, out)   # validation; errors are answered here
        if item is not None:
            batch.append((job, item))

    def _collect(self, first: Job, out: Outbox) -> tuple[list[tuple[Job, Batched]], bool]:
        batch: list[tuple[Job, Batched]] = []
        self._take(first, batch, out)
        if not self.enabled:
            return batch, False
        target, deadline = min(self.max_batch, self._last), time.monotonic() + self.window_s
        while len(batch) < self.max_batch:
            try:
                nxt = self.q.get_nowait()
            except queue.Empty:
                left = deadline - time.monotonic()
                if len(batch) >= target or left <= 0:
                    break
                try:
                    nxt = self.q.get(timeout=left)
                except queue.Empty:
                    break
            if nxt is None:
                return batch, True
            self._take(nxt, batch, out)
        return batch, False

    def _main(self) -> None:
        _thread_setup(self.threads)
        out = Outbox(self.zctx, self.address)
        try:
            while (first := self.q.get()) is not None:
                batch, stop = self._collect(first, out)
                if batch:
                    self._last = len(batch)
                groups: dict[tuple, list[tuple[Job, Batched]]] = {}
                for job, item in batch:
                    if not job.cancel_event.is_set():
                        groups.setdefault(item.key, []).append((job, item))
                for group in groups.values():
                    B = len(group)
                    self.batches, self.requests, self.largest = self.batches + 1, self.requests + B, max(self.largest, B)
                    run_batch(group, self.codec, out)
                if stop:
                    break
        finally:
            out.close()


class WorkerPool:
    """``workers`` threads taking jobs from one bounded queue; a full queue answers ``busy`` at once."""

    def __init__(self, info: ServerInfo, codec: Codec, zctx: zmq.Context, outbox_address: str, *,
                 workers: int = 2, threads: int = 1, queue_size: int = 64):
        self.info, self.codec, self.zctx, self.address, self.threads = info, codec, zctx, outbox_address, threads
        self.q: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self.running = 0
        self._threads = [threading.Thread(target=self._main, name=f"mc-worker-{i}", daemon=True)
                         for i in range(workers)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def submit(self, job: Job) -> None:
        try:
            self.q.put_nowait(job)
        except queue.Full:
            raise Busy(f"server busy: {self.q.maxsize} requests already queued", parent_id=job.id) from None

    @property
    def queued(self) -> int:
        return self.q.qsize()

    def stop(self, timeout: float = 5.0) -> bool:
        """Ask every worker to exit; True if all ended within ``timeout``."""
        end = time.monotonic() + timeout
        for _ in self._threads:
            try:
                self.q.put(None, timeout=max(0.01, end - time.monotonic()))
            except queue.Full:
                return False
        for t in self._threads:
            t.join(max(0.01, end - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _main(self) -> None:
        _thread_setup(self.threads)
        out = Outbox(self.zctx, self.address)
        try:
            while (job := self.q.get()) is not None:
                if job.cancel_event.is_set():
                    continue  # cancelled while queued: the loop has already replied
                self.running += 1
                try:
                    item = execute(job, self.info, self.codec, out)
                    if item is not None:   # a Batched result that reached the pool: run it alone
                        run_batch([(job, item)], self.codec, out)
                finally:
                    self.running -= 1
        finally:
            out.close()
