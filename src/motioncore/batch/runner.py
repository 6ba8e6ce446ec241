"""Running a batch job's per-file function over many files, in this process or as Ray tasks of a chunk of
files each (`run_files`), and the shared body of the model jobs (`run_job`: skip finished outputs, a
progress bar, the report). Ray is imported only when asked for (`import_ray`)."""
from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import BatchError
from .files import output_path
from .report import carried, finish_report, previous_entries, start_report, written

__all__ = ["default_chunk", "import_ray", "run_chunk", "run_files", "run_job"]


def default_chunk(n_files: int, workers: int) -> int:
    """Files per Ray task: about 4 tasks per worker for load balance, at least 4 files per task so the
    ~2 ms task round trip stays small next to ~10-50 ms of work per file, at most 64."""
    return max(4, min(64, math.ceil(n_files / max(1, 4 * workers))))


def run_chunk(fn: Callable[..., dict[str, Any]], paths: Sequence[str], out_dir: str,
              kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``fn(path, out_dir, **kwargs)`` over several files: one Ray task (any batch job's per-file function)."""
    return [fn(p, out_dir, **kwargs) for p in paths]


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BatchError("--ray / --ray-address need Ray, which is not installed; install the 'scale' extra: "
                         "pip install -e '.[scale]'") from None
    return ray


def _warm_worker(module: str, torch_threads: int | None, hold_s: float) -> int:
    """Import the per-file function's module (and set torch's threads) and hold the CPU briefly, so each
    worker process starts and pays its imports during start-up instead of during the first files."""
    import importlib

    importlib.import_module(module)
    if torch_threads is not None:
        import torch

        torch.set_num_threads(torch_threads)   # one per worker: on a busy node more threads only contend
    time.sleep(hold_s)
    return os.getpid()


def run_files(fn: Callable[..., dict[str, Any]], todo: list[str], out_dir: str, kwargs: Mapping[str, Any],
              on_result: Callable[[dict[str, Any]], None], meta: dict[str, Any], *, use_ray: bool = False,
              address: str | None = None, workers: int = 1, chunk: int | None = None,
              torch_threads: int | None = None) -> None:
    """Run the top-level per-file function ``fn(path, out_dir, **kwargs) -> result dict`` over ``todo``:
    in this process, or as Ray tasks of ``chunk`` files each (``use_ray`` / ``address``). The same
    function either way, so outputs and reports match file for file. Ray is imported only here."""
    if not (use_ray or address):
        for p in todo:
            on_result(fn(p, out_dir, **kwargs))
        return
    ray = import_ray()
    t0 = time.perf_counter()
    started_here = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=True, logging_level="ERROR")
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=True, logging_level="ERROR")
        started_here = True
    try:
        n_workers = workers if not address else max(1, int(ray.cluster_resources().get("CPU", workers)))
        warm = ray.remote(num_cpus=1, max_retries=0)(_warm_worker)
        meta["ray_workers_started"] = len(set(ray.get([warm.remote(fn.__module__, torch_threads, 0.3)
                                                        for _ in range(n_workers)])))
        meta["ray_init_s"] = round(time.perf_counter() - t0, 3)   # cluster and worker start-up
        size = chunk or default_chunk(len(todo), n_workers)
        meta["chunk"] = size
        # tasks, never actors: each claims one CPU and is released when the chunk is done
        remote = ray.remote(num_cpus=1, max_retries=0)(run_chunk)
        kw_ref = ray.put(dict(kwargs))
        pending = [remote.remote(fn, todo[i:i + size], out_dir, kw_ref) for i in range(0, len(todo), size)]
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    for res in ray.get(r):
                        on_result(res)
        except BaseException:
            for r in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(r, force=True)
            raise
    finally:
        if started_here:
            ray.shutdown()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_job(fn: Callable[..., dict[str, Any]], files: Sequence[Path], out: Path, fmt: str,
            kwargs: Mapping[str, Any], meta: dict[str, Any], *, desc: str, unit: str, progress: bool = True,
            use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
            chunk: int | None = None, totals: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
            torch_threads: int | None = 1, refused: Mapping[Path, str] | None = None) -> dict[str, Any]:
    """The shared body of the model batch jobs (``batch infill``, ``batch generate``): skip finished
    outputs, run ``fn`` over the rest with a progress bar (`run_files`: in-process or Ray), and write
    ``out/report.json`` (settings, counts, wall time, ``totals(results)``, per-file results, errors),
    also when interrupted. ``refused`` ({file: one line}, checked before any work) are failed at stage map
    and not run. A skipped file keeps the last report's entry for it (`report.carried`: marked skipped now, with
    when it was written); a file written now gets ``written``. Returns the report."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    previous = previous_entries(out)   # before this run's report replaces the last one
    start_report(out, meta, previous)
    results: list[dict[str, Any]] = []
    todo = []
    for f in files:
        o = output_path(f, out, fmt)
        if o.exists():
            results.append(carried(previous, {"file": str(f), "out": str(o), "seconds": 0.0}, _now()))
        elif refused and f in refused:
            results.append({"file": str(f), "out": str(o), "status": "failed", "stage": "map", "error": refused[f],
                            "seconds": 0.0})
        else:
            todo.append(str(f))
    bar = tqdm(total=len(files), initial=len(results), desc=desc, unit=unit, disable=not progress)

    def record(r: dict[str, Any]) -> None:
        if r["status"] == "ok":
            written(r, _now())
        elif r["status"] == "skipped":   # written by another run since this one was planned
            r = carried(previous, r, _now())
        results.append(r)
        bar.update(1)

    interrupted = False
    try:
        run_files(fn, todo, str(out), kwargs, record, meta, use_ray=use_ray, address=ray_address,
                  workers=workers or os.cpu_count() or 1, chunk=chunk, torch_threads=torch_threads)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        bar.close()
        counts = {s: sum(r["status"] == s for r in results) for s in ("ok", "skipped", "failed")}
        report = {**meta, "finished": _now(), "interrupted": interrupted,
                  "counts": {"total": len(files), **counts, "not_run": len(files) - len(results)},
                  "wall_s": round(time.perf_counter() - t0, 3), **(totals(results) if totals else {}),
                  "files": results,
                  "errors": [{"file": r["file"], "error": r["error"], "stage": r["stage"]}
                             for r in results if r["status"] == "failed"]}
        finish_report(out, report)
    return report
