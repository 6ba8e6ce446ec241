"""Batch in-filling: fill dropped or marked frames in many BVH clips with an any-order checkpoint.

``motioncore batch infill SRC --out DIR`` reads every BVH under SRC (folder or glob), finds the frames to
fill, fills them with ``motioncore.tasks.infill.fill_clip`` and writes ``DIR/<base name>.bvh`` (temporary file
+ rename, so a killed run leaves no half file; a re-run skips finished outputs) plus ``DIR/report.json``
(per file: status, frames filled, gaps, seconds, error and stage). Inputs are never modified; a bad file
is recorded and the batch goes on; the exit code is 1 when any file failed.

Frames to fill, per clip (both may be used together):

- ``--gaps FILE.json``: ``{"<clip base name>": [[start, end], ...]}``, end exclusive, in the clip's frames;
- ``--frozen N``: runs of at least N frames identical to the frame before them (every rotation and the
  root, bit for bit; a capture that froze) are refilled, the frame before the run kept as the key.

Clips must be on the checkpoint's skeleton (joints matched by name; ``motioncore retarget`` first
otherwise). Clips at another frame rate than the checkpoint's (30 fps for the bundled models) are resampled
to it first (slerp; the gaps follow in time) and written at it; the command says so. See docs/batch.md.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..io.atomic import check_output_dir
from .errors import BatchError
from .files import CLIP_SUFFIXES, discover, output_path, read_motion, write_motion
from .runner import run_job

__all__ = ["frozen_runs", "gap_mask", "fill_file", "run_batch_infill"]

STAGES = ("read", "gaps", "map", "fill", "write")


def frozen_runs(rotations: np.ndarray, root: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """[start, end) runs of at least ``min_len`` frames equal to the frame before them (bit for bit)."""
    from ..core.gaps import runs as mask_runs

    same = np.r_[False, (rotations[1:] == rotations[:-1]).all((1, 2)) & (root[1:] == root[:-1]).all(1)]
    return [(s, e) for s, e in mask_runs(same) if e - s >= min_len]


def gap_mask(T: int, gaps: Sequence[Sequence[int]]) -> np.ndarray:
    """(T,) bool: True on the frames to fill. Raises ValueError naming a bad range."""
    fill = np.zeros(T, bool)
    for g in gaps:
        if len(g) != 2 or not all(isinstance(v, int) for v in g):
            raise ValueError(f"gap {g!r}: expected [start, end] (integers, end exclusive)")
        s, e = g
        if not 0 <= s < e <= T:
            raise ValueError(f"gap [{s}, {e}] is outside the clip's {T} frames or empty")
        fill[s:e] = True
    return fill


def fill_file(path: str, out_dir: str, model_name: str, gaps: Mapping[str, Any], frozen: int,
              temperature: float = 0.0, seed: int = 0, fmt: str = "bvh") -> dict[str, Any]:
    """Fill one clip; a JSON-ready result dict (never raises for a bad file)."""
    from ..core.gaps import runs as mask_runs
    from ..models.registry import load_model
    from ..tasks.infill import fill_clip

    t0 = time.perf_counter()
    out = output_path(path, out_dir, fmt)
    res: dict[str, Any] = {"file": str(path), "output": str(out), "status": "failed", "stage": None, "error": None}
    stage = "read"
    try:
        m = read_motion(path)
        stage = "map"
        model, meta = _cached_model(model_name, load_model)
        names = list(meta["skeleton"]["names"])
        if list(m.skeleton.names) != names:
            missing = [n for n in names if n not in m.skeleton.names][:5]
            raise ValueError(f"the clip's joints differ from the model's ({len(m.skeleton.names)} vs {len(names)}; "
                             f"missing e.g. {missing}): retarget it onto the model's skeleton first")
        fps = float(meta.get("fps") or m.fps)
        stage = "gaps"
        rj = int(meta["root_joint"])
        todo = gap_mask(m.num_frames, gaps.get(Path(path).stem, []))
        runs = frozen_runs(m.rotations, m.positions[:, rj], frozen) if frozen else []
        for s, e in runs:
            todo[s:e] = True
        if abs(m.fps - fps) > 1e-3:   # to the model's rate; the output is at the model's rate too
            res["resampled_from"] = m.fps
            m, todo = _resample(m, todo, fps)
        res["gaps"] = [[a, b] for a, b in mask_runs(todo)]
        res["frames_filled"] = int(todo.sum())
        if not todo.any():
            stage = "write"
            write_motion(out, m)  # nothing to fill: the clip as it is, so the output folder is complete
            res.update(status="ok", stage=None, seconds=time.perf_counter() - t0)
            return res
        if todo.all():
            raise ValueError("every frame is marked to fill: no key left")
        stage = "fill"
        f = fill_clip(model, meta, m.rotations, m.positions[:, rj], ~todo, temperature=temperature, seed=seed)
        pos = m.positions.copy()
        pos[:, rj] = f.root[0]
        stage = "write"
        from ..core.motion import Motion

        write_motion(out, Motion(m.skeleton, f.rotations[0], pos, m.fps, m.name))
        res.update(status="ok", stage=None)
    except Exception as e:  # noqa: BLE001  (a bad file is reported, never fatal)
        res.update(error=f"{type(e).__name__}: {e}", stage=stage)
    res["seconds"] = time.perf_counter() - t0
    return res


def _resample(m: Any, todo: np.ndarray, fps: float) -> tuple[Any, np.ndarray]:
    """``m`` at ``fps`` (slerp) and the frames to fill on the new timeline: those with a frame to fill
    among the two source frames around them."""
    from ..core.kinematics import resample

    r = resample(m, fps)
    t = np.arange(r.num_frames) * (m.fps / fps)   # source frame coordinates
    i0 = np.clip(np.floor(t).astype(np.int64), 0, m.num_frames - 1)
    i1 = np.clip(np.ceil(t - 1e-9).astype(np.int64), 0, m.num_frames - 1)
    return r, todo[i0] | todo[i1]


_MODELS: dict[str, Any] = {}


def _cached_model(name: str, load: Any) -> Any:
    if name not in _MODELS:
        _MODELS[name] = load(name)
    return _MODELS[name]


def run_batch_infill(src: str, out_dir: str, model: str = "infill-body", gaps_file: str | None = None,
                     frozen: int = 0, temperature: float = 0.0, seed: int = 0, progress: bool = True,
                     use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
                     chunk: int | None = None, fmt: str = "bvh") -> dict[str, Any]:
    """Fill every clip under ``src``; writes and returns the report (see the module docstring). With
    ``use_ray`` / ``ray_address`` the same per-file function runs as Ray tasks (`batch.runner.run_files`).
    Every argument is checked before any work (``BatchError`` naming it): the output folder, the model
    (an any-order in-filling checkpoint), ``frozen`` >= 0, the gap file (every key names an input clip)."""
    from ..errors import MotioncoreError
    from ..models.registry import check_model

    out = Path(out_dir)
    if not gaps_file and not frozen:
        raise BatchError("nothing to fill: give --gaps FILE.json and/or --frozen N")
    if frozen < 0:
        raise BatchError(f"--frozen: expected a frame count >= 1 (0: off), got {frozen}")
    if fmt not in ("bvh", "fbx", "blend"):
        raise BatchError(f"--format: expected bvh, fbx or blend, got {fmt!r}")
    check_output_dir(out, "--out", (src,))
    try:
        check_model(model, "infill")
    except MotioncoreError as e:
        raise BatchError(str(e)) from None
    gaps: dict[str, Any] = {}
    if gaps_file:
        gaps = _read_gaps(gaps_file)
    files = discover(src, exclude=out, suffix=CLIP_SUFFIXES)
    if not files:
        raise BatchError(f"no .bvh, .fbx or .blend files under {src!r}")
    gaps = _match_gaps(gaps, files, gaps_file)
    refused = _check_joints(files, model)
    meta: dict[str, Any] = {"job": "infill", "src": str(src), "out": str(out), "model": model, "gaps_file": gaps_file,
                            "frozen": frozen, "temperature": temperature, "seed": seed,
                            "started": datetime.now(UTC).isoformat(),
                            "mode": "ray" if (use_ray or ray_address) else "in-process"}
    return run_job(fill_file, files, out, fmt, {"model_name": model, "gaps": gaps, "frozen": frozen,
                                                "temperature": temperature, "seed": seed, "fmt": fmt}, meta,
                   desc="infill", unit="clip", progress=progress, use_ray=use_ray, ray_address=ray_address,
                   workers=workers, chunk=chunk, refused=refused,
                   totals=lambda rs: {"frames_filled": sum(r.get("frames_filled", 0) for r in rs if r["status"] == "ok")})


def _check_joints(files: Sequence[Path], model: str) -> dict[Path, str]:
    """Before any work: {file: one line} for the BVH inputs whose joints are not the model's (only the
    hierarchy is read; each distinct skeleton once; unreadable files are left to the per-file job)."""
    from ..errors import MotioncoreError
    from ..io.bvh import read_bvh_header
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve

    names = list(read_meta(resolve(model))["skeleton"]["names"])
    refused: dict[Path, str] = {}
    for f in files:
        if f.suffix.lower() != ".bvh":
            continue
        try:
            have = list(read_bvh_header(f)[0].names)
        except (MotioncoreError, OSError):
            continue
        if have != names:
            unmapped = [n for n in names if n not in have]
            refused[f] = (f"{f.name}: its joints are not the model's {len(names)}; unmapped: "
                          f"{', '.join(unmapped) or 'none (another order)'}; retarget it onto the model's skeleton "
                          "first (motioncore retarget, --map FILE for a bone map)")
    return refused


def _read_gaps(gaps_file: str) -> dict[str, Any]:
    """The gap file, its shape checked: ``{"clip": [[start, end], ...]}`` with whole numbers."""
    try:
        gaps = json.loads(Path(gaps_file).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BatchError(f"--gaps {gaps_file}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(gaps, dict) or not all(isinstance(v, list) for v in gaps.values()):
        raise BatchError(f"--gaps {gaps_file}: expected {{\"clip name\": [[start, end], ...]}}")
    for k, v in gaps.items():
        for g in v:
            if (not isinstance(g, list) or len(g) != 2 or not all(type(x) is int for x in g)
                    or not 0 <= g[0] < g[1]):
                raise BatchError(f"--gaps {gaps_file}: {k!r}: gap {g!r} is not [start, end] with 0 <= start < end "
                                 "(whole frames, end exclusive)")
    return gaps


def _match_gaps(gaps: dict[str, Any], files: Sequence[Path], gaps_file: str | None) -> dict[str, Any]:
    """Gaps keyed by each input's base name; a key may also be the file name (``clip.bvh``). Keys that
    name no input clip stop the run, listed."""
    stems = {f.stem for f in files}
    names = {f.name: f.stem for f in files}
    out: dict[str, Any] = {}
    unknown = []
    for k, v in gaps.items():
        stem = k if k in stems else names.get(k)
        if stem is None:
            unknown.append(k)
        else:
            out.setdefault(stem, []).extend(v)
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:8]) + (f" and {len(unknown) - 8} more" if len(unknown) > 8 else "")
        raise BatchError(f"--gaps {gaps_file}: {len(unknown)} key(s) name no input clip: {shown}; keys are clip base "
                         f"names such as {sorted(stems)[0]!r}")
    return out
