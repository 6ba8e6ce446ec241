"""The ``report.json`` of a batch job: written atomically, marked running before any work (so a killed run
never leaves the previous run's report behind), finished or interrupted at the end, and the stale
temporaries of a killed run removed."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..io.atomic import atomic_write_text
from .errors import BatchError, ReportError

__all__ = ["REPORT_NAME", "clean_stale", "finish_report", "start_report", "write_report"]

REPORT_NAME = "report.json"
_TMP_GLOBS = (".*.bvh.*.tmp", ".*.tmp.fbx", ".*.tmp.blend",   # temporaries (left only by a killed process)
              f".{REPORT_NAME}.*.tmp", ".motioncore-probe-*")


def write_report(out_dir: Path, report: Mapping[str, Any]) -> Path:
    """Write ``out_dir/report.json`` atomically (temp file + rename)."""
    path = Path(out_dir) / REPORT_NAME
    atomic_write_text(path, json.dumps(report, indent=2) + "\n")
    return path


def clean_stale(out: Path) -> None:
    """Remove the temporaries a killed run left in ``out`` (outputs, reports, write probes)."""
    for stale in (f for g in _TMP_GLOBS for f in out.glob(g)):
        with contextlib.suppress(OSError):
            stale.unlink()


def start_report(out: Path, meta: Mapping[str, Any]) -> Path:
    """Before any work: create ``out``, remove stale temporaries, and replace any earlier run's report with
    this run's settings marked ``"status": "running"`` (so a killed run never leaves the previous run's
    report behind). Raises ``BatchError`` when that fails (then no report is left)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        clean_stale(out)
        return write_report(out, {**meta, "status": "running", "finished": None, "interrupted": False})
    except OSError as e:
        with contextlib.suppress(OSError):
            (out / REPORT_NAME).unlink()
        raise BatchError(f"--out {out}: cannot write {REPORT_NAME} ({e.strerror or e}); nothing was processed") from None


def finish_report(out: Path, report: dict[str, Any]) -> Path:
    """Write the final report (``status`` finished or interrupted). On a full disk the running report is
    removed first to free its space and the write tried again; if that fails too, ``ReportError`` says so
    and no report is left (never a stale one)."""
    report["status"] = "interrupted" if report.get("interrupted") else "finished"
    try:
        return write_report(out, report)
    except OSError:
        with contextlib.suppress(OSError):
            (out / REPORT_NAME).unlink()
    try:
        return write_report(out, report)
    except OSError as e:
        c = report.get("counts", {})
        raise ReportError(f"{out / REPORT_NAME}: could not be written ({e.strerror or e}); this run: {c.get('ok')} "
                          f"written, {c.get('failed')} failed, {c.get('not_run')} not run; no report is left") from None
