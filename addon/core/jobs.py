"""The worker thread that owns the server connection, plus connection settings (no bpy import).

Blender's UI thread never blocks on the network: an operator submits a job (a function of the client);
a ``bpy.app.timers`` callback (``operators.drain_results``) drains finished results; the operator picks
its result up on a modal timer event and writes the keys itself (so the write happens inside an UNDO
operator, never in the timer callback). In background mode
(``bpy.app.background``, where timers never fire) operators call :func:`run_sync` instead.
The client is not thread-safe: only the worker thread touches it.
"""
from __future__ import annotations

import itertools
import json
import os
import queue
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_CONNECTION_FILE = "MOTIONCORE_CONNECTION_FILE"

Job = Callable[[Any], Any]            # receives the client, returns a result (runs on the worker thread)
ClientFactory = Callable[[], Any]     # builds a client (called on the worker thread)


class Control:
    """What the UI thread and a running job share: the server's progress and a cancel request."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.done, self.total, self.message = 0, 0, ""

    def set_progress(self, content: dict[str, Any]) -> None:
        """The ``progress`` callback of `Client.result`: ``{done, total, message?}``."""
        self.done, self.total = int(content.get("done", 0)), int(content.get("total", 0))
        self.message = str(content.get("message") or "")

    def text(self) -> str:
        if not self.total:
            return "waiting for the server..."
        return f"{self.done}/{self.total}" + (f" {self.message}" if self.message else "")


_current = threading.local()


def current() -> Control | None:
    """The Control of the job running on this thread (None outside a worker or run_sync job)."""
    return getattr(_current, "control", None)


@dataclass(frozen=True)
class JobResult:
    job_id: int
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def connection_path(connection_file: str = "", host: str = "", port: int = 0, key: str = "") -> Path | None:
    """Where to find the server: ``$MOTIONCORE_CONNECTION_FILE`` overrides everything, then the
    preference's connection file, then host/port/key (written to a private 0600 connection file).
    None means the client's default location."""
    env = os.environ.get(ENV_CONNECTION_FILE)
    if env:
        return Path(env)
    if connection_file:
        return Path(os.path.expanduser(connection_file))
    if host and port and key:
        return write_connection_file(host, int(port), key)
    return None


def write_connection_file(host: str, port: int, key: str, directory: str | None = None) -> Path:
    """A connection file (mode 0600) for a server given by host/port/key, in the format of docs/protocol.md."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be 1..65535, got {port}")
    d = Path(directory or tempfile.gettempdir())
    path = d / f"motioncore-blender-{os.getpid()}.json"
    info = {"transport": "tcp", "ip": host, "port": port, "key": key, "signature_scheme": "hmac-sha256",
            "server_session": "", "pid": 0}
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)
    return path


class Worker:
    """One daemon thread, one client, a job queue in and a result dict out."""

    def __init__(self, client_factory: ClientFactory):
        self._factory = client_factory
        self._jobs: queue.Queue[tuple[int, Job] | None] = queue.Queue()
        self._results: dict[int, JobResult] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, Callable[[], None]] = {}
        self._controls: dict[int, Control] = {}
        self._thread = threading.Thread(target=self._run, name="motioncore-worker", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> int:
        if not self._thread.is_alive():
            raise RuntimeError("the motioncore worker thread has stopped")
        jid = next(self._ids)
        with self._lock:
            self._controls[jid] = Control()
        self._jobs.put((jid, job))
        return jid

    def control(self, job_id: int) -> Control | None:
        """The job's progress and cancel switch (until its result is handed out)."""
        with self._lock:
            return self._controls.get(job_id)

    def cancel(self, job_id: int) -> None:
        """Ask the job to cancel its request on the server (its result then is a Cancelled error)."""
        ctl = self.control(job_id)
        if ctl is not None:
            ctl.cancelled.set()

    def poll(self, job_id: int) -> JobResult | None:
        """The job's result once finished (removed from the worker), else None."""
        with self._lock:
            res = self._results.pop(job_id, None)
            if res is not None:
                self._controls.pop(job_id, None)
            return res

    def wait(self, job_id: int, timeout: float) -> JobResult | None:
        """Block up to ``timeout`` seconds for a result (for scripts and tests; operators poll)."""
        done = threading.Event()
        with self._lock:
            res = self._results.pop(job_id, None)
            if res is not None:
                return res
            self._waiters[job_id] = done.set
        done.wait(timeout)
        with self._lock:
            self._waiters.pop(job_id, None)
            res = self._results.pop(job_id, None)
            if res is not None:
                self._controls.pop(job_id, None)
            return res

    def stop(self, timeout: float = 5.0) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        client = None
        try:
            while (item := self._jobs.get()) is not None:
                jid, job = item
                with self._lock:
                    _current.control = self._controls.get(jid)
                try:
                    if client is None:
                        client = self._factory()
                    res = JobResult(jid, value=job(client))
                except Exception as e:  # delivered to the operator, which reports it
                    res = JobResult(jid, error=e)
                finally:
                    _current.control = None
                with self._lock:
                    self._results[jid] = res
                    waiter = self._waiters.get(jid)
                if waiter is not None:
                    waiter()
        finally:
            if client is not None and hasattr(client, "close"):
                client.close()


def run_sync(client_factory: ClientFactory, job: Job) -> JobResult:
    """Run ``job`` on this thread with a fresh client (background mode, where timers never fire)."""
    client = None
    _current.control = Control()
    try:
        client = client_factory()
        return JobResult(0, value=job(client))
    except Exception as e:
        return JobResult(0, error=e)
    finally:
        _current.control = None
        if client is not None and hasattr(client, "close"):
            client.close()
