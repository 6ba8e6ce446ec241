"""What a handler gets and returns (``handlers``): ``ServerInfo`` (what it may know about the server), ``Context``
(per request: progress, cancellation, the server), ``Result`` or ``Batched`` (one row for ``model.step``), and the
``Handler`` record of the table."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from motioncore.wire.protocol import Cancelled, Limits, Message

from .registry import Registry, ServedModel

__all__ = ["ServerInfo", "Result", "Batched", "Context", "Fn", "Handler"]


@dataclass
class ServerInfo:
    """What handlers may know about the server (filled in by app.Server)."""

    session: str
    device: str
    limits: Limits
    registry: Registry
    versions: dict[str, str]
    config: dict[str, Any]                           # workers, threads, queue, batching ...
    stats: Callable[[], dict[str, Any]]              # live counters for `health`
    cancel: Callable[[str], dict[str, Any]]          # cancel an in-flight request by id
    types: Callable[[], list[str]] = list
    inflight: Callable[[], int] = int                # requests queued or running (0 without a server)
    started: float = field(default_factory=time.time)


@dataclass
class Result:
    content: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Batched:
    """One single-frame request for ``model.step``; ``finish`` turns its output rows into the Result."""

    model: ServedModel
    inputs: dict[str, np.ndarray]                                  # this request's inputs, no batch axis
    finish: Callable[[dict[str, np.ndarray]], Result]

    @property
    def key(self) -> tuple:
        """Requests batch together when model, input names, shapes and dtypes all agree."""
        return (self.model.name, *((k, v.shape, v.dtype.str) for k, v in sorted(self.inputs.items())))


class Context:
    """Per-request view of the server for a handler: progress, cancellation, server info."""

    def __init__(self, server: ServerInfo, request: Message,
                 progress: Callable[[int, int, str | None], None] | None = None,
                 cancel_event: threading.Event | None = None, cancel_error: Callable[[], type] | None = None):
        self.server, self.request = server, request
        self._progress, self._cancel = progress, cancel_event
        self._cancel_error = cancel_error or (lambda: Cancelled)

    def progress(self, done: int, total: int, message: str | None = None) -> None:
        """Send a ``progress`` message (rate-limited by the worker pool)."""
        if self._progress is not None:
            self._progress(done, total, message)

    def cancelled(self) -> bool:
        return self._cancel is not None and self._cancel.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` or until cancelled; True when cancelled."""
        if self._cancel is None:
            time.sleep(seconds)
            return False
        return self._cancel.wait(seconds)

    def check_cancelled(self) -> None:
        if self.cancelled():
            raise self._cancel_error()(f"request {self.request.id} was cancelled", parent_id=self.request.id)


Fn = Callable[[Message, Context], "Result | Batched"]


@dataclass(frozen=True)
class Handler:
    fn: Fn
    inline: bool = False      # run on the socket loop (control requests only)
    batchable: bool = False   # single-frame requests (content frames == 1) go to the micro-batching lane
