"""Batch retargeting: many BVH files onto one target skeleton, in-process or as Ray tasks.

``process_file`` is a plain top-level function over (path, out_dir, target skeleton dict, overrides,
scale, contacts) returning a small JSON-ready dict, so the very same code runs in this process or inside
Ray workers: `batch.runner.run_files` runs any such per-file function (retarget, ``batch_infill.fill_file``,
``batch_generate.generate_file``) in-process or as Ray tasks of a chunk of files each. ``run_batch`` plans the work (finds
inputs, skips outputs that already exist), runs it, and writes ``<out>/report.json`` atomically
(`batch.report`), also when interrupted. Ray is imported only when ``use_ray`` or ``ray_address`` is given.
Finding inputs and naming outputs: `batch.files`. See docs/batch.md.
"""
from __future__ import annotations

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
from ..io.files import check_suffix
from .errors import BatchError
from .files import CLIP_SUFFIXES, discover, error_text, output_path, read_motion, start_result, write_motion
from .report import carried, finish_report, previous_entries, start_report, written
from .runner import import_ray, run_files

__all__ = ["MAP_NAME", "STAGES", "below_ground", "check_skeletons", "parse_scale", "process_file", "run_batch"]

MAP_NAME = "bone_map.json"   # the --map of the last run into a folder, reused by the next one without --map
STAGES = ("plan", "read", "map", "retarget", "write")  # where a file can fail


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


def process_file(path: str, out_dir: str, target: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                 scale: str | float | None = "legs", contacts: bool = False, missing: str = "rest",
                 infill_model: str | None = None, fmt: str = "bvh", convention: Any = None,
                 target_poses: Any = None, floor: float | None = None) -> dict[str, Any]:
    """Retarget one clip (.bvh, or .fbx / .blend with bpy) onto ``target`` (a ``Skeleton.to_dict()``) and
    write ``out_dir/<base name>.<fmt>`` atomically. Never raises for a bad file: returns
    ``{"file", "out", "status": "ok"|"skipped"|"failed", "stage", "error", "frames", "seconds", "unmapped",
    "below_ground"}`` (``unmapped``: the target joints held at rest; ``below_ground``: {mapped toe or foot:
    cm below the floor at its lowest}, `below_ground`; ``feet``: with ``floor`` (the target clip's contact height),
    the clip moved up or down onto it, `retarget.contacts.stand_on`: {"target": floor, "before": the retargeted
    clip's contact height, "moved_up": the move}, in the target's units). The joint map is built once per distinct
    source skeleton (cached in this process; ``target_poses``: some frames of the target clip, ``clip_poses``)."""
    from ..core.skeleton import Skeleton
    from ..retarget import auto_map, check_map, clip_poses, retarget
    from ..tasks.joints import joint_filler

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
        poses = clip_poses(motion)   # the body's shape and sides from its frames, never its rest pose alone
        jm = _cached(_key("map", src_d, tkey, overrides),
                     lambda: check_map(auto_map(motion.skeleton, tgt, overrides=overrides, source_poses=poses,
                                                target_poses=target_poses), motion.skeleton, tgt, Path(path).name,
                                       source_poses=poses, target_poses=target_poses))
        res["unmapped"] = list(jm.unmapped)
        stage = "retarget"
        fill = joint_filler(infill_model) if missing == "infill" and infill_model is not None else None
        moved = retarget(motion, tgt, jm, scale=scale, contacts=contacts, missing=missing, joint_fill=fill,
                         convention=None if convention is None else np.asarray(convention, np.float64))
        if floor is not None:   # the feet on the target's own ground (its walks' contact height)
            from ..retarget.contacts import contact_height_of, stand_on

            before = contact_height_of(moved)
            moved, dy = stand_on(moved, floor)
            if before is not None:
                res["feet"] = {"target": round(floor, 3), "before": round(before, 3), "moved_up": round(dy, 3)}
        res["below_ground"] = below_ground(moved, jm)
        stage = "write"
        write_motion(out, moved)
        res["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a bad file must never stop the batch
        res.update(stage=stage, error=error_text(e))
    res["seconds"] = time.perf_counter() - t0
    return res


def check_skeletons(files: Sequence[Path], target: Any, overrides: Mapping[str, Any] | None,
                    target_poses: Any = None) -> dict[Path, str]:
    """Before any work: {file: one-line refusal} for the BVH inputs whose skeleton cannot be mapped onto
    ``target`` (`retarget.check_map`; each distinct skeleton checked once, on the frames of its first clip:
    the body's shape is read from the motion, never from the rest pose). Unreadable files and .fbx / .blend
    are left to the per-file job."""
    from ..io.bvh import read_bvh_header
    from ..retarget import RetargetError, auto_map, check_map, clip_poses

    verdicts: dict[str, str | None] = {}
    refused: dict[Path, str] = {}
    for f in files:
        if f.suffix.lower() != ".bvh":
            continue
        try:
            sk = read_bvh_header(f)[0]
            k = _key(sk.to_dict())
            if k not in verdicts:
                m = read_motion(f, keep=True)   # the batch's first job on this file takes it (`read_motion`)
                poses = clip_poses(m)
        except (MotioncoreError, OSError):
            continue
        if k not in verdicts:
            try:
                check_map(auto_map(sk, target, overrides=overrides, source_poses=poses, target_poses=target_poses),
                          sk, target, "{file}", source_poses=poses, target_poses=target_poses)
                verdicts[k] = None
            except RetargetError as e:   # a dog onto a biped; a --map naming joints this rig lacks
                verdicts[k] = str(e)
        if verdicts[k] is not None:
            refused[f] = verdicts[k].replace("{file}", f.name, 1)
    return refused


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


def below_ground(motion: Any, joint_map: Any, tol_cm: float = 1.0) -> dict[str, float]:
    """{target toe or foot (mapped, from the map's roles): cm below the floor at its lowest}, for those more
    than ``tol_cm`` below. The floor is height 0 along the body's up axis (the world axis nearest the median
    hips -> head direction; Y for the project's data); none when the body does not stand (each foot at least
    135 deg from the head at the hips, median over the frames)."""
    roles = getattr(joint_map, "roles", {}) or {}
    sk = motion.skeleton
    want = [roles[c] for c in ("l_toe", "r_toe", "l_foot", "r_foot") if c in roles and roles[c] in sk._index
            and roles[c] in joint_map.pairs]
    if not want or "hips" not in roles or "head" not in roles:
        return {}
    gp = motion.global_transforms()[1]
    hips, head = gp[:, sk.index(roles["hips"])], gp[:, sk.index(roles["head"])]
    for foot in (roles.get("l_foot"), roles.get("r_foot")):   # no floor to speak of unless the body stands
        if foot is None or np.median(_cos(head - hips, gp[:, sk.index(foot)] - hips)) > np.cos(np.radians(135)):
            return {}
    up_dir = np.median(head - hips, axis=0)
    axis = int(np.argmax(np.abs(up_dir)))
    sign = 1.0 if up_dir[axis] > 0 else -1.0
    low = {n: float(-(sign * gp[:, sk.index(n), axis]).min()) for n in want}
    return {n: round(d, 2) for n, d in low.items() if d > tol_cm}


# ----------------------------------------------------------------------------------------------
# the batch: plan, run, report
# ----------------------------------------------------------------------------------------------
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
    unmapped = {r["file"]: r["unmapped"] for r in results if r.get("unmapped")}   # held at rest, per file
    below = {r["file"]: r["below_ground"] for r in results if r.get("below_ground")}
    feet = {r["file"]: r["feet"] for r in results if r.get("feet")}   # moved onto the target's contact height
    return {**{k: v for k, v in meta.items() if k != "ray_init_s"}, "finished": _now(),
            "interrupted": interrupted, "counts": counts, "timings": timings, "errors": errors,
            "unmapped": unmapped, "below_ground": below, "feet": feet, "files": results}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_batch(src: str | os.PathLike[str], target: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
              overrides: str | os.PathLike[str] | None = None, scale: str | float | None = "legs",
              use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
              chunk: int | None = None, progress: bool = True, contacts: bool = False, missing: str = "rest",
              infill_model: str | None = None, fmt: str = "bvh", match_model: str | None = None,
              keep_height: bool = False,
              on_result: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Retarget every BVH under ``src`` (folder or glob) onto the skeleton of the BVH ``target``, writing
    ``out_dir/<base name>.bvh``; existing outputs are skipped (resumable). Each clip's feet are moved onto the
    target clip's contact height (`process_file`'s ``floor``; ``keep_height``: the root as scaled, unmoved).
    Returns the report, also written to ``out_dir/report.json`` (atomically, also on KeyboardInterrupt, which is
    re-raised). ``on_result`` is called after each file (progress hooks, tests)."""
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
        import_ray()  # fail before any work, with the install hint
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
    from ..retarget import clip_poses

    try:
        tgt_motion = read_motion(target)
    except OSError as e:
        raise BatchError(f"--target {target}: cannot read: {e}") from e
    tgt_skel, tgt_poses = tgt_motion.skeleton, clip_poses(tgt_motion)
    from ..retarget.contacts import contact_height_of

    floor = None if keep_height else contact_height_of(tgt_motion)   # None: a target without two legs
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
    refused = check_skeletons(files, tgt_skel, ov, tgt_poses)
    previous = previous_entries(out)   # a skipped file keeps its last entry (`report.carried`)
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
            results.append(carried(previous, {"file": str(f), "out": str(o), "stage": None, "error": None,
                                              "frames": 0, "seconds": 0.0}, _now()))
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
                            "floor": None if floor is None else round(floor, 3),
                            "mode": mode, "workers": n_workers if mode == "ray" else 1,
                            "ray_address": ray_address, "host": platform.node(),
                            "started": datetime.now(UTC).isoformat()}
    start_report(out, meta, previous)
    if ov is not None and Path(overrides).resolve() != saved_map.resolve():
        atomic_write_text(saved_map, json.dumps(ov, indent=2) + "\n")   # reused by the next run into --out
    bar = tqdm(total=len(files), initial=len(results), unit="file", desc="retarget", disable=not progress,
               dynamic_ncols=True)

    def record(res: dict[str, Any]) -> None:
        if res["status"] == "ok":
            written(res, _now())
        elif res["status"] == "skipped":   # written by another run since this one was planned
            res = carried(previous, res, _now())
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
                                                  "convention": convention, "target_poses": tgt_poses,
                                                  "floor": floor},
                  record, meta,
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
