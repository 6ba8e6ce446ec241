"""Batch retargeting: many BVH files onto one target skeleton, in-process or as Ray tasks.

``process_file`` is a plain top-level function over (path, out_dir, target skeleton dict, overrides,
scale, contacts) returning a small JSON-ready dict, so the very same code runs in this process or inside
Ray workers: ``run_files`` runs any such per-file function (retarget, ``batch_infill.fill_file``,
``batch_generate.generate_file``) in-process or as Ray tasks of a chunk of files each. ``run_batch`` plans the work (finds
inputs, skips outputs that already exist), runs it, and writes ``<out>/report.json`` atomically,
also when interrupted. Ray is imported only when ``use_ray`` or ``ray_address`` is given.
See docs/batch.md.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MotioncoreError
from ..io.atomic import atomic_write_text, check_output_dir
from ..io.files import check_suffix, files_with_suffix

__all__ = ["BatchError", "ReportError", "check_output_dir", "check_suffix", "clean_stale", "finish_report", "start_report", "discover", "output_path", "parse_scale", "process_file", "run_batch",
           "run_chunk", "run_files", "run_job", "write_report", "STAGES", "REPORT_NAME"]

REPORT_NAME = "report.json"
MAP_NAME = "bone_map.json"   # the --map of the last run into a folder, reused by the next one without --map
STAGES = ("plan", "read", "map", "retarget", "write")  # where a file can fail
_TMP_GLOBS = (".*.bvh.*.tmp", ".*.tmp.fbx", ".*.tmp.blend",   # temporaries (left only by a killed process)
              f".{REPORT_NAME}.*.tmp", ".motioncore-probe-*")


class BatchError(MotioncoreError):
    """A batch cannot start (no inputs, unreadable target, output folder = source folder, no Ray...)."""


class ReportError(BatchError):
    """The work ran but ``report.json`` could not be written (e.g. the disk is full); no report is left."""

    exit_code = 1


# ----------------------------------------------------------------------------------------------
# planning
# ----------------------------------------------------------------------------------------------
def discover(src: str | os.PathLike[str], exclude: Path | None = None,
             suffix: str | Sequence[str] = ".bvh", arg: str = "SRC") -> list[Path]:
    """Input files, sorted: a folder is searched recursively for ``*<suffix>`` in any case (BVH by default;
    several suffixes may be given); a glob (``**`` recursive) keeps the matches with such a suffix; a single
    file must have one (`check_suffix`, else `UsageError` naming ``arg``). Files under ``exclude`` (the output
    folder) are left out."""
    suffixes = (suffix,) if isinstance(suffix, str) else tuple(suffix)
    p = Path(src)
    if p.is_dir():
        files = [f for s in suffixes for f in files_with_suffix(p, s)]
    elif p.is_file():
        files = [check_suffix(p, suffixes, arg)]
    else:
        files = [Path(f) for f in glob.glob(str(src), recursive=True)
                 if Path(f).is_file() and Path(f).suffix.lower() in suffixes]
    files = [f for f in files if not f.name.startswith(".")]  # temporaries of an interrupted write
    if exclude is not None:
        ex = exclude.resolve()
        files = [f for f in files if ex not in f.resolve().parents]
    return sorted(set(files))


def output_path(path: str | os.PathLike[str], out_dir: str | os.PathLike[str], fmt: str = "bvh") -> Path:
    """``out_dir / <input base name>.<fmt>``."""
    return Path(out_dir) / (Path(path).stem + "." + fmt)


CLIP_SUFFIXES = (".bvh", ".fbx", ".blend")   # .fbx and .blend through bpy (the `blender` extra)


def read_motion(path: str | os.PathLike[str]) -> Any:
    """A clip from .bvh (motioncore.io.bvh) or .fbx / .blend (motioncore.io.blender, needs bpy)."""
    if Path(path).suffix.lower() in (".fbx", ".blend"):
        from ..io.blender import read_blender

        return read_blender(path)
    from ..io.bvh import read_bvh

    return read_bvh(path)


def write_motion(path: str | os.PathLike[str], motion: Any) -> None:
    """Write atomically as .bvh, .fbx or .blend by the suffix."""
    if Path(path).suffix.lower() in (".fbx", ".blend"):
        from ..io.blender import write_blender

        write_blender(path, motion)
        return
    from ..io.bvh import write_bvh

    write_bvh(path, motion)


def parse_scale(value: str | float | None) -> str | float | None:
    """``--scale``: "legs", "none" (-> None, i.e. 1.0) or a positive number."""
    if value is None or isinstance(value, float | int):
        return value
    v = value.strip().lower()
    if v == "legs":
        return "legs"
    if v in ("none", "1"):
        return None if v == "none" else 1.0
    try:
        f = float(v)
    except ValueError:
        raise BatchError(f"--scale: expected legs, none or a positive number, got {value!r}") from None
    if not (math.isfinite(f) and f > 0):
        raise BatchError(f"--scale: expected a positive number, got {value!r}")
    return f


# ----------------------------------------------------------------------------------------------
# the per-file job (runs in-process or in a Ray worker)
# ----------------------------------------------------------------------------------------------
_CACHE: dict[str, Any] = {}  # per process: target skeletons and joint maps (or the error building one)
_CACHE_MAX = 256


def _key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _cached(key: str, build: Callable[[], Any]) -> Any:
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        try:
            _CACHE[key] = (True, build())
        except MotioncoreError as e:
            _CACHE[key] = (False, e)
    ok, value = _CACHE[key]
    if not ok:
        raise value
    return value


def error_text(e: BaseException) -> str:
    """A per-file error for report.json: our own errors as they are, others with their type."""
    return str(e) if isinstance(e, MotioncoreError) else f"{type(e).__name__}: {e}"


def start_result(path: str, out_dir: str, fmt: str) -> tuple[Path, dict[str, Any]]:
    """The output path of ``path`` and the result dict a per-file job returns: status "skipped" when
    the output already exists (resumable runs), else "failed" until the job sets "ok"."""
    out = output_path(path, out_dir, fmt)
    return out, {"file": str(path), "out": str(out), "status": "skipped" if out.exists() else "failed",
                 "stage": None, "error": None, "frames": 0, "seconds": 0.0}


def process_file(path: str, out_dir: str, target: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                 scale: str | float | None = "legs", contacts: bool = False, missing: str = "rest",
                 infill_model: str | None = None, fmt: str = "bvh", convention: Any = None) -> dict[str, Any]:
    """Retarget one clip (.bvh, or .fbx / .blend with bpy) onto ``target`` (a ``Skeleton.to_dict()``) and
    write ``out_dir/<base name>.<fmt>`` atomically. Never raises for a bad file: returns
    ``{"file", "out", "status": "ok"|"skipped"|"failed", "stage", "error", "frames", "seconds"}``.
    The joint map is built once per distinct source skeleton (cached in this process)."""
    from ..core.skeleton import Skeleton
    from ..retarget import auto_map, check_map, retarget

    t0 = time.perf_counter()
    out, res = start_result(path, out_dir, fmt)
    if res["status"] == "skipped":
        return res
    stage = "read"
    try:
        motion = read_motion(path)
        res["frames"] = motion.num_frames
        stage = "map"
        tkey = _key("target", target)
        tgt = _cached(tkey, lambda: Skeleton.from_dict(dict(target)))
        src_d = motion.skeleton.to_dict()
        jm = _cached(_key("map", src_d, tkey, overrides),
                     lambda: check_map(auto_map(motion.skeleton, tgt, overrides=overrides), motion.skeleton, tgt,
                                       Path(path).name))
        stage = "retarget"
        moved = retarget(motion, tgt, jm, scale=scale, contacts=contacts, missing=missing, infill_model=infill_model,
                         convention=None if convention is None else np.asarray(convention, np.float64))
        stage = "write"
        write_motion(out, moved)
        res["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a bad file must never stop the batch
        res.update(stage=stage, error=error_text(e))
    res["seconds"] = time.perf_counter() - t0
    return res


def check_skeletons(files: Sequence[Path], target: Any, overrides: Mapping[str, Any] | None) -> dict[Path, str]:
    """Before any work: {file: one-line refusal} for the BVH inputs whose skeleton cannot be mapped onto
    ``target`` (`retarget.check_map`; each distinct skeleton checked once). Only the hierarchy is read;
    unreadable files and .fbx / .blend are left to the per-file job."""
    from ..io.bvh import read_bvh_header
    from ..retarget import RetargetError, auto_map, check_map

    verdicts: dict[str, str | None] = {}
    refused: dict[Path, str] = {}
    for f in files:
        if f.suffix.lower() != ".bvh":
            continue
        try:
            sk = read_bvh_header(f)[0]
        except (MotioncoreError, OSError):
            continue
        k = _key(sk.to_dict())
        if k not in verdicts:
            try:
                check_map(auto_map(sk, target, overrides=overrides), sk, target, "{file}")
                verdicts[k] = None
            except RetargetError as e:   # a dog onto a biped; a --map naming joints this rig lacks
                verdicts[k] = str(e)
        if verdicts[k] is not None:
            refused[f] = verdicts[k].replace("{file}", f.name, 1)
    return refused


# ----------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------
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


def _build_report(meta: dict[str, Any], results: Iterable[dict[str, Any]], total: int, wall: float,
                  interrupted: bool) -> dict[str, Any]:
    results = list(results)
    counts = {s: sum(r["status"] == s for r in results) for s in ("ok", "skipped", "failed")}
    counts = {"total": total, **counts, "not_run": total - len(results)}
    done = [r for r in results if r["status"] != "skipped"]
    work = sum(r["seconds"] for r in done)
    startup = meta.get("ray_init_s") or 0.0
    run_wall = max(wall - startup, 1e-9)
    timings = {"wall_s": round(wall, 4), "ray_init_s": meta.get("ray_init_s"),
               "work_s": round(work, 4), "mean_file_s": round(work / len(done), 5) if done else None,
               "files_per_s": round(len(done) / run_wall, 3) if done else None}
    errors = [{"file": r["file"], "error": r["error"], "stage": r["stage"]} for r in results if r["status"] == "failed"]
    return {**{k: v for k, v in meta.items() if k != "ray_init_s"}, "finished": datetime.now(UTC).isoformat(),
            "interrupted": interrupted, "counts": counts, "timings": timings, "errors": errors}


# ----------------------------------------------------------------------------------------------
# runners
# ----------------------------------------------------------------------------------------------
def default_chunk(n_files: int, workers: int) -> int:
    """Files per Ray task: about 4 tasks per worker for load balance, at least 4 files per task so the
    ~2 ms task round trip stays small next to ~10-50 ms of work per file, at most 64."""
    return max(4, min(64, math.ceil(n_files / max(1, 4 * workers))))


def run_chunk(fn: Callable[..., dict[str, Any]], paths: Sequence[str], out_dir: str,
              kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``fn(path, out_dir, **kwargs)`` over several files: one Ray task (any batch job's per-file function)."""
    return [fn(p, out_dir, **kwargs) for p in paths]


def _import_ray() -> Any:
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
    ray = _import_ray()
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


def run_job(fn: Callable[..., dict[str, Any]], files: Sequence[Path], out: Path, fmt: str,
            kwargs: Mapping[str, Any], meta: dict[str, Any], *, desc: str, unit: str, progress: bool = True,
            use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
            chunk: int | None = None, totals: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
            torch_threads: int | None = 1, refused: Mapping[Path, str] | None = None) -> dict[str, Any]:
    """The shared body of the model batch jobs (``batch infill``, ``batch generate``): skip finished
    outputs, run ``fn`` over the rest with a progress bar (`run_files`: in-process or Ray), and write
    ``out/report.json`` (settings, counts, wall time, ``totals(results)``, per-file results, errors),
    also when interrupted. ``refused`` ({file: one line}, checked before any work) are failed at stage map
    and not run. Returns the report."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    start_report(out, meta)
    results: list[dict[str, Any]] = []
    todo = []
    for f in files:
        o = output_path(f, out, fmt)
        if o.exists():
            results.append({"file": str(f), "out": str(o), "status": "skipped", "seconds": 0.0})
        elif refused and f in refused:
            results.append({"file": str(f), "out": str(o), "status": "failed", "stage": "map", "error": refused[f],
                            "seconds": 0.0})
        else:
            todo.append(str(f))
    bar = tqdm(total=len(files), initial=len(results), desc=desc, unit=unit, disable=not progress)

    def record(r: dict[str, Any]) -> None:
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
        report = {**meta, "finished": datetime.now(UTC).isoformat(), "interrupted": interrupted,
                  "counts": {"total": len(files), **counts, "not_run": len(files) - len(results)},
                  "wall_s": round(time.perf_counter() - t0, 3), **(totals(results) if totals else {}),
                  "files": results,
                  "errors": [{"file": r["file"], "error": r["error"], "stage": r["stage"]}
                             for r in results if r["status"] == "failed"]}
        finish_report(out, report)
    return report


def run_batch(src: str | os.PathLike[str], target: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
              overrides: str | os.PathLike[str] | None = None, scale: str | float | None = "legs",
              use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
              chunk: int | None = None, progress: bool = True, contacts: bool = False, missing: str = "rest",
              infill_model: str | None = None, fmt: str = "bvh", match_model: str | None = None,
              on_result: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Retarget every BVH under ``src`` (folder or glob) onto the skeleton of the BVH ``target``, writing
    ``out_dir/<base name>.bvh``; existing outputs are skipped (resumable). Returns the report, also
    written to ``out_dir/report.json`` (atomically, also on KeyboardInterrupt, which is re-raised).
    ``on_result`` is called after each file (progress hooks, tests)."""
    from tqdm import tqdm

    from ..retarget import load_overrides

    wall0 = time.perf_counter()
    if fmt not in ("bvh", "fbx", "blend"):
        raise BatchError(f"--format: expected bvh, fbx or blend, got {fmt!r}")
    out = Path(out_dir)
    src_path = Path(src)
    if src_path.is_dir() and src_path.resolve() == out.resolve():
        raise BatchError(f"--out {out} is the source folder; choose another folder (inputs are never overwritten)")
    check_output_dir(out, "--out", (src, target))
    if chunk is not None and chunk < 1:
        raise BatchError(f"--chunk: expected a positive integer, got {chunk}")
    if missing not in ("rest", "infill") or (missing == "infill") != (infill_model is not None):
        raise BatchError("--missing infill needs --infill-model (a per-element any-order checkpoint); "
                         f"--missing rest takes none (got {missing!r}, {infill_model!r})")
    mode = "ray" if (use_ray or ray_address) else "in-process"
    if mode == "ray":
        _import_ray()  # fail before any work, with the install hint
    check_suffix(target, CLIP_SUFFIXES, "--target")
    files = discover(src, exclude=out, suffix=CLIP_SUFFIXES)
    if not files:
        raise BatchError(f"no .bvh, .fbx or .blend files found at {src}")
    needs_bpy = fmt != "bvh" or any(f.suffix.lower() != ".bvh" for f in files) or Path(target).suffix.lower() != ".bvh"
    if needs_bpy:
        import importlib.util

        if importlib.util.find_spec("bpy") is None:
            raise BatchError(".fbx and .blend need Blender's Python module: pip install -e '.[blender]' "
                             "(bpy 5.0.1, Python 3.11)")
    try:
        tgt_skel = read_motion(target).skeleton
    except OSError as e:
        raise BatchError(f"--target {target}: cannot read: {e}") from e
    target_d = tgt_skel.to_dict()
    convention = None
    if match_model is not None:   # the twist convention of a checkpoint trained on the target skeleton
        from ..models.checkpoint import read_meta
        from ..models.registry import resolve

        try:
            meta_m = read_meta(resolve(match_model))
        except MotioncoreError as e:
            raise BatchError(f"--match-model {match_model}: {e}") from None
        conv = (meta_m.get("convention") or {}).get("mean_local_rotations")
        if conv is None or list(meta_m.get("skeleton", {}).get("names", [])) != list(tgt_skel.names):
            raise BatchError(f"--match-model {match_model}: needs a checkpoint with a rotation convention on the "
                             "target's skeleton (same joint names)")
        convention = conv
    saved_map = out / MAP_NAME
    if overrides is None and saved_map.is_file():
        overrides = saved_map
        print(f"retarget: using the bone map saved by an earlier run, {saved_map}", file=sys.stderr)
    ov = load_overrides(Path(overrides)) if overrides is not None else None
    scale = parse_scale(scale)

    results: list[dict[str, Any]] = []
    todo: list[str] = []
    refused = check_skeletons(files, tgt_skel, ov)
    seen: dict[Path, Path] = {}
    inputs = {f.resolve() for f in files}
    for f in files:
        o = output_path(f, out, fmt)
        clash = seen.get(o)
        if clash is not None or o.resolve() in inputs:
            why = f"output {o} would also be written by {clash}" if clash else f"output {o} is an input file"
            results.append({"file": str(f), "out": str(o), "status": "failed", "stage": "plan", "error": why,
                            "frames": 0, "seconds": 0.0})
            continue
        seen[o] = f
        if o.exists():
            results.append({"file": str(f), "out": str(o), "status": "skipped", "stage": None, "error": None,
                            "frames": 0, "seconds": 0.0})
        elif f in refused:
            results.append({"file": str(f), "out": str(o), "status": "failed", "stage": "map", "error": refused[f],
                            "frames": 0, "seconds": 0.0})
        else:
            todo.append(str(f))

    n_workers = workers or os.cpu_count() or 1
    meta: dict[str, Any] = {"version": 1, "src": str(src), "target": str(target), "out_dir": str(out),
                            "overrides": str(overrides) if overrides is not None else None,
                            "scale": scale, "contacts": contacts, "missing": missing, "infill_model": infill_model,
                            "format": fmt, "match_model": match_model,
                            "mode": mode, "workers": n_workers if mode == "ray" else 1,
                            "ray_address": ray_address, "host": platform.node(),
                            "started": datetime.now(UTC).isoformat()}
    start_report(out, meta)
    if ov is not None and Path(overrides).resolve() != saved_map.resolve():
        atomic_write_text(saved_map, json.dumps(ov, indent=2) + "\n")   # reused by the next run into --out
    bar = tqdm(total=len(files), initial=len(results), unit="file", desc="retarget", disable=not progress,
               dynamic_ncols=True)

    def record(res: dict[str, Any]) -> None:
        results.append(res)
        bar.update(1)
        if res["status"] == "failed":
            bar.set_postfix(failed=sum(r["status"] == "failed" for r in results), refresh=False)
        if on_result is not None:
            on_result(res)

    interrupted = False
    try:
        run_files(process_file, todo, str(out), {"target": target_d, "overrides": ov, "scale": scale,
                                                  "contacts": contacts, "missing": missing,
                                                  "infill_model": infill_model, "fmt": fmt,
                                                  "convention": convention}, record, meta,
                  use_ray=use_ray,
                  address=ray_address, workers=n_workers, chunk=chunk,
                  torch_threads=1 if missing == "infill" else None)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        bar.close()
        report = _build_report(meta, results, len(files), time.perf_counter() - wall0, interrupted)
        finish_report(out, report)
    return report
