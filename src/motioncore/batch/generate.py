"""Batch generation: many root paths in, one BVH of locomotion per path out.

``motioncore batch generate SRC --out DIR [--model pfnn-biped]`` reads every ``*.json`` path file under
SRC (folder or glob; the format of docs/paths.md), walks the path controller along each and writes
``DIR/<base name>.bvh`` (temporary file + rename: a killed run leaves no half file; a re-run skips
finished outputs) plus ``DIR/report.json`` (per file: status, frames, mean distance to the path, seconds,
error and stage). Inputs are never modified; a bad path file is recorded and the batch goes on; the exit
code is 1 when any file failed. ``--ray`` / ``--ray-address`` run the same per-file function as Ray
tasks (`batch.runner.run_files`).
"""
from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..io.atomic import check_output_dir
from .errors import BatchError
from .files import discover, error_text, start_result, write_motion
from .runner import run_job

__all__ = ["generate_file", "run_batch_generate"]

STAGES = ("read", "model", "generate", "write")
_CONTROLLERS: dict[tuple[str, str], Any] = {}   # per process (a Ray worker loads each model once)


def _controller(model: str, mode: str) -> Any:
    from ..tasks.locomotion import Controller

    if (model, mode) not in _CONTROLLERS:
        from ..models.registry import check_model

        check_model(model, "controller")
        _CONTROLLERS[(model, mode)] = Controller.load(model, mode)
    return _CONTROLLERS[(model, mode)]


def generate_file(path: str, out_dir: str, model: str = "pfnn-biped", mode: str = "outputs",
                  frames: int | None = None, fmt: str = "bvh") -> dict[str, Any]:
    """Walk ``model`` along the path file ``path`` and write ``out_dir/<base name>.bvh``; a JSON-ready
    result dict (never raises for a bad file)."""
    from ..tasks.locomotion import generate
    from ..tasks.paths import load_path

    t0 = time.perf_counter()
    out, res = start_result(path, out_dir, fmt)
    if res["status"] == "skipped":
        return res
    stage = "read"
    try:
        p = load_path(path)
        stage = "model"
        ctl = _controller(model, mode)
        track = ctl.track(p)   # gait names and defaults checked against the model before the rollout
        stage = "generate"
        motion, ro = generate(ctl, p, frames, mode, out.stem)
        stage = "write"
        write_motion(out, motion)
        res.update(status="ok", frames=motion.num_frames, fps=motion.fps,
                   path_error_cm=round(float(track.distance(ro.root[0][:, [0, 2]]).mean()), 3))
    except KeyboardInterrupt:
        raise
    except Exception as e:   # a bad file must never stop the batch
        res.update(stage=stage, error=error_text(e))
    res["seconds"] = time.perf_counter() - t0
    return res


def run_batch_generate(src: str, out_dir: str, model: str = "pfnn-biped", mode: str = "outputs",
                       frames: int | None = None, progress: bool = True, use_ray: bool = False,
                       ray_address: str | None = None, workers: int | None = None,
                       chunk: int | None = None, fmt: str = "bvh") -> dict[str, Any]:
    """Generate one BVH per path file under ``src``; writes and returns the report."""

    from ..errors import MotioncoreError

    out = Path(out_dir)
    if fmt not in ("bvh", "fbx", "blend"):
        raise BatchError(f"--format: expected bvh, fbx or blend, got {fmt!r}")
    if frames is not None and frames < 1:
        raise BatchError(f"--frames: expected a positive integer, got {frames}")
    check_output_dir(out, "--out", (src,))
    from ..models.registry import check_model

    try:
        check_model(model, "controller")
        _controller(model, mode)   # the mode checked against the model before any work (and loaded once here)
    except MotioncoreError as e:
        msg = str(e)
        raise BatchError(msg if msg.startswith("--") else f"--mode {mode}: {msg.removeprefix('mode: ')}") from None
    files = discover(src, exclude=out, suffix=".json")
    files = [f for f in files if f.name != "report.json"]
    if not files:
        raise BatchError(f"no path .json files under {src!r} (docs/paths.md)")
    meta: dict[str, Any] = {"job": "generate", "src": str(src), "out": str(out), "model": model, "mode": mode,
                            "frames": frames, "started": datetime.now(UTC).isoformat(),
                            "run": "ray" if (use_ray or ray_address) else "in-process"}
    return run_job(generate_file, files, out, fmt, {"model": model, "mode": mode, "frames": frames, "fmt": fmt}, meta,
                   desc="generate", unit="path", progress=progress, use_ray=use_ray, ray_address=ray_address,
                   workers=workers, chunk=chunk,
                   totals=lambda rs: {"frames_written": sum(r.get("frames", 0) for r in rs if r["status"] == "ok")})
