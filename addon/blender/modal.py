"""The modal job machinery: a job runs on the add-on's worker thread, a ``bpy.app.timers`` callback drains
finished jobs, and the operator waiting for one writes its result from its own modal timer event (inside its
UNDO step). ``_ServerOperator`` is the base of every operator that talks to the server.

``invoke`` submits the job to the worker thread and polls it from a modal timer *event* (the write
then happens inside this UNDO operator, not in a timer callback). ``execute`` (scripts, and
``bpy.app.background`` where timers never fire) runs the request synchronously.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import bpy

from ..core import connect, requests
from ..core.jobs import JobResult, Worker, connection_path, run_sync
from .props import preferences, settings

_WORKER: Worker | None = None
# Results travel worker -> bpy.app.timers callback -> modal operator: the timer drains finished jobs into
# _READY; the operator waiting for one picks it up on its next window-manager timer event and writes the
# keys itself, so the write is inside its UNDO step (one Ctrl+Z), never inside the timer callback.
_PENDING: dict[tuple[int, int], Worker] = {}
_READY: dict[tuple[int, int], JobResult] = {}
DRAIN_S = 0.05


def drain_results() -> float | None:
    """The ``bpy.app.timers`` callback: move finished jobs' results (or a stopped worker's error) from the
    workers into _READY. Returns the next interval, or None to unregister when nothing is waiting."""
    for key, w in list(_PENDING.items()):
        res = w.poll(key[1]) if w.alive else JobResult(key[1], error=RuntimeError("the worker thread stopped"))
        if res is not None:
            _READY[key] = res
            del _PENDING[key]
    return DRAIN_S if _PENDING else None


def _await(worker: Worker, job_id: int) -> tuple[int, int]:
    key = (id(worker), job_id)
    _PENDING[key] = worker
    timers: Any = bpy.app.timers
    if not timers.is_registered(drain_results):
        timers.register(drain_results, first_interval=DRAIN_S)
    return key


def stop_draining() -> None:
    timers: Any = bpy.app.timers
    if timers.is_registered(drain_results):
        timers.unregister(drain_results)
    _PENDING.clear()
    _READY.clear()


def client_factory(context: bpy.types.Context) -> Callable[[], Any]:
    prefs = preferences(context)
    path = connection_path(prefs.connection_file, prefs.host, prefs.port, prefs.key)
    timeout = float(prefs.timeout)

    def make() -> Any:
        from ..vendor.client import Client  # vendored copy (scripts/build_addon.py)
        c = Client(path, timeout=timeout)
        try:   # never talk to a server whose connection file others could have written or read
            connect.check_connection_file(c.path)
        except ValueError:
            c.close()
            raise
        return c
    return make


def worker(context: bpy.types.Context, *, restart: bool = False) -> Worker:
    global _WORKER
    if _WORKER is not None and (restart or not _WORKER.alive):
        _WORKER.stop()
        _WORKER = None
    if _WORKER is None:
        _WORKER = Worker(client_factory(context))
    return _WORKER


def stop_worker() -> None:
    global _WORKER
    if _WORKER is not None:
        _WORKER.stop()
        _WORKER = None



class _ServerOperator(bpy.types.Operator):
    """Base: subclasses build a job in ``prepare`` and write its result in ``apply``."""

    bl_options = {"REGISTER", "UNDO"}
    label = "motioncore"
    # plain attributes only: Blender reads class annotations as property definitions
    _job_id = 0
    _key = (0, 0)   # (id of the worker, job id): the _READY slot to wait for
    _cancelling = False
    _timer = None
    _worker = None

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        raise NotImplementedError

    def make_worker(self, context: bpy.types.Context) -> Worker:
        return worker(context)

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        raise NotImplementedError

    def _prepare(self, context: bpy.types.Context) -> Callable[[Any], Any] | None:
        self._state: dict[str, Any] = {}
        try:
            return self.prepare(context)
        except ValueError as e:
            self.report({"ERROR"}, f"{self.label}: {e}")
            return None

    def _finish(self, context: bpy.types.Context, res: JobResult) -> set[str]:
        if getattr(res.error, "code", None) == "cancelled":
            self.report({"WARNING"}, f"{self.label}: cancelled; nothing written")
            return {"CANCELLED"}
        if res.error is not None:
            self.report({"ERROR"}, requests.describe_error(self.label, res.error))
            return {"CANCELLED"}
        try:
            msg = self.apply(context, res.value)
        except ValueError as e:
            self.report({"ERROR"}, f"{self.label}: {e}")
            return {"CANCELLED"}
        settings(context).last_report = f"{self.label}: {msg}"   # what scripts and tests read back
        self.report({"INFO"}, msg)
        return {"FINISHED"}

    def execute(self, context: bpy.types.Context) -> set[str]:  # type: ignore[override]
        job = self._prepare(context)
        if job is None:
            return {"CANCELLED"}
        self._state["sync"] = True   # nothing can change the keys between prepare and apply
        return self._finish(context, run_sync(client_factory(context), job))

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:  # type: ignore[override]
        if bpy.app.background:
            return self.execute(context)
        job = self._prepare(context)
        if job is None:
            return {"CANCELLED"}
        self._worker = self.make_worker(context)
        self._job_id = self._worker.submit(job)
        self._key = _await(self._worker, self._job_id)
        self._cancelling = False
        wm: Any = context.window_manager
        self._timer = wm.event_timer_add(0.05, window=context.window)
        wm.modal_handler_add(self)
        self._show(context, "waiting for the server... (Esc cancels)")
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:  # type: ignore[override]
        w = self._worker
        if event.type == "ESC" and event.value == "PRESS":
            if self._cancelling or w is None:   # a second Esc: stop waiting at once
                _PENDING.pop(self._key, None)
                self._end(context)
                self.report({"WARNING"}, f"{self.label}: stopped waiting; nothing written")
                return {"CANCELLED"}
            w.cancel(self._job_id)              # the server stops the job; its reply ends this operator
            self._cancelling = True
            self._show(context, "cancelling... (Esc again to stop waiting)")
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        res = _READY.pop(self._key, None)   # put there by drain_results (bpy.app.timers)
        if res is None and self._key not in _PENDING:
            res = JobResult(self._job_id, error=RuntimeError("the result was lost (add-on reloaded?)"))
        if res is None:
            ctl = w.control(self._job_id) if w is not None else None
            if ctl is not None and not self._cancelling:
                self._show(context, ctl.text())
            return {"PASS_THROUGH"}
        self._end(context)
        return self._finish(context, res)

    def _show(self, context: bpy.types.Context, text: str) -> None:
        """Progress in the status bar and the Motion panel."""
        line = f"motioncore {self.label}: {text}"
        ws: Any = context.workspace
        if ws is not None:
            ws.status_text_set(line)
        settings(context).progress = line
        for area in getattr(context.screen, "areas", ()):
            if area.type == "VIEW_3D":
                area.tag_redraw()

    def _end(self, context: bpy.types.Context) -> None:
        if self._timer is not None:
            wm: Any = context.window_manager
            wm.event_timer_remove(self._timer)
            self._timer = None
        ws: Any = context.workspace
        if ws is not None:
            ws.status_text_set(None)
        settings(context).progress = ""


# ------------------------------------------------------------------------------------------ helpers
