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

__all__ = ["REPORT_NAME", "carried", "clean_stale", "finish_report", "out_mtime_ns", "previous_entries",
           "start_report", "write_report", "written"]

REPORT_NAME = "report.json"
_TMP_GLOBS = (".*.bvh.*.tmp", ".*.tmp.fbx", ".*.tmp.blend",   # temporaries (left only by a killed process)
              f".{REPORT_NAME}.*.tmp", ".motioncore-probe-*")


def write_report(out_dir: Path, report: Mapping[str, Any]) -> Path:
    """Write ``out_dir/report.json`` atomically (temp file + rename)."""
    path = Path(out_dir) / REPORT_NAME
    atomic_write_text(path, json.dumps(report, indent=2) + "\n")
    return path


def previous_entries(out: Path) -> dict[str, dict[str, Any]]:
    """The per-file entries of the last report in ``out``, read before this run replaces it: {output file name:
    entry} (outputs are flat, so the name is the file's identity in ``out`` however SRC and --out were spelled),
    each with ``written``: when that output was written (the entry's own, else that report's ``finished``). Empty
    when there is none or it cannot be read. A run killed before its end (SIGKILL) leaves its running report, which
    holds the entries it found (``earlier_files``), so they survive it too."""
    try:
        old = json.loads((Path(out) / REPORT_NAME).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    files = old.get("files", old.get("earlier_files")) if isinstance(old, dict) else None
    if not isinstance(files, list):
        return {}
    done = old.get("finished")
    entries: dict[str, dict[str, Any]] = {}
    for e in files:
        o = e.get("out", e.get("output")) if isinstance(e, dict) else None
        if isinstance(o, str) and e.get("status") in ("ok", "skipped"):
            entries[Path(o).name] = {**e, "written": e.get("written") or done}
    return entries


def carried(previous: Mapping[str, Mapping[str, Any]], entry: dict[str, Any], now: str) -> dict[str, Any]:
    """A skipped file's entry: the last run's entry for its output (gate, skate, planting, timings...: what was
    written) when ``previous`` has one and the output is still the file it describes (its ``out_mtime_ns``, when
    recorded, is the output's), marked ``"status": "skipped"`` with ``skipped`` (now) and ``written`` (when the
    output was written), its paths as this run names them; else ``entry`` itself, marked the same way (``written``
    null: not known; e.g. the output was rewritten by a run that was killed)."""
    out = entry.get("out", entry.get("output"))
    old = previous.get(Path(out).name) if isinstance(out, str) else None
    if old is not None and old.get("out_mtime_ns") is not None and old["out_mtime_ns"] != out_mtime_ns(out):
        old = None   # another output under that name since: the entry describes a file that is gone
    if old is None:
        return {**entry, "status": "skipped", "skipped": now, "written": None}
    paths = {"file": entry["file"], "output" if "output" in old else "out": out}
    return {**old, **paths, "status": "skipped", "skipped": now, "written": old.get("written")}


def out_mtime_ns(path: str | Path) -> int | None:
    """The output's modification time (ns), recorded with ``written``: how a later run knows an entry still
    describes the file there."""
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return None


def written(entry: dict[str, Any], now: str) -> dict[str, Any]:
    """A file written by this run: its entry with ``written`` (now) and ``out_mtime_ns``."""
    entry["written"] = now
    entry["out_mtime_ns"] = out_mtime_ns(entry.get("out", entry.get("output")) or "")
    return entry


def clean_stale(out: Path) -> None:
    """Remove the temporaries a killed run left in ``out`` (outputs, reports, write probes)."""
    for stale in (f for g in _TMP_GLOBS for f in out.glob(g)):
        with contextlib.suppress(OSError):
            stale.unlink()


def start_report(out: Path, meta: Mapping[str, Any], earlier: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Before any work: create ``out``, remove stale temporaries, and replace any earlier run's report with
    this run's settings marked ``"status": "running"`` (so a killed run never leaves the previous run's
    report behind) and ``earlier_files``: the earlier entries (`previous_entries`) the next run keeps if this
    one is killed. Raises ``BatchError`` when that fails (then no report is left)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        clean_stale(out)
        return write_report(out, {**meta, "status": "running", "finished": None, "interrupted": False,
                                  "earlier_files": list((earlier or {}).values())})
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
