"""Benchmark: real models through the motion server against the same call in-process, in the same run.

Cases (bundled checkpoints, CPU, one torch thread on both sides):
  pfnn-biped, one frame: ``pfnn.rollout`` path form with frames=1 (the first frame of a 3 m straight
    path) through the server, against ``Controller.rollout(path, 1)`` in this process.
  pfnn-biped, 120 frames: the same path for 4 s, per frame.
  anyorder-body in-fill: ``infill`` rotation form, a 30-frame gap between 10 context frames and a target
    frame of a Bandai test clip (temperature 0, bisection), against ``motioncore.infill.fill``
    in this process (needs the mocap; skipped without it).
  learnet-biped style.adapt: a Bandai elderly walk as the exemplar (rotation form) and 120 frames along
    the path, against ``StyleAdapter`` code + controller + rollout in this process (needs the mocap).
The server runs as a subprocess (``--workers 1 --threads 1``); calls alternate (in-process, server, ...)
in blocks so this VM's drifts hit both alike. Prints a Markdown table; never asserts timings.

Usage: .venv/bin/python bench/server_models.py [--n 200] [--blocks 5]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.wire.client import Client


def _start(folder: Path) -> tuple[subprocess.Popen, Path]:
    conn = folder / "conn.json"
    p = subprocess.Popen([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--port", "0",
                          "--device", "cpu", "--workers", "1", "--threads", "1", "--log-level", "warning"],
                         stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline():
        raise RuntimeError("server did not start")
    return p, conn


def _blocks(local, remote, n: int, blocks: int) -> tuple[list[float], list[float]]:
    a, b = [], []
    local()
    remote()  # warm-up (lazy model load on the server)
    for _ in range(blocks):
        for fn, out in ((local, a), (remote, b)):
            for _ in range(max(1, n // blocks)):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
    return a, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from motioncore.tasks.locomotion import Controller
    from motioncore.tasks.paths import Path as RootPath

    print(f"# bench/server_models.py, {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores, CPU only, "
          f"torch {torch.__version__}, Python {platform.python_version()}")
    rows = []
    ctl = Controller.load("pfnn-biped")
    pts = np.array([[0.0, 0.0], [0.0, 1.5], [0.0, 3.0]])
    path = RootPath(pts)
    with tempfile.TemporaryDirectory() as tmp:
        p, conn = _start(Path(tmp))
        try:
            with Client(conn, timeout=60) as c:
                for frames, n in ((1, args.n), (120, max(5, args.n // 20))):
                    loc = lambda f=frames: ctl.rollout([path], f)  # noqa: E731
                    rem = lambda f=frames: c.call("pfnn.rollout", {"model": "pfnn-biped", "frames": f},  # noqa: E731
                                                  {"points": pts.astype(np.float32)})
                    a, b = _blocks(loc, rem, n, args.blocks)
                    rows.append((f"pfnn-biped rollout, {frames} frame{'s' if frames > 1 else ''}", len(a),
                                 statistics.median(a), statistics.median(b), frames))
                rows += _infill_rows(c, args)
                rows += _style_rows(c, args, pts)
        finally:
            p.terminate()
            p.wait(15)
    print()
    print("| case | n | in-process p50 (ms) | server p50 (ms) | server / in-process | server per frame (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, a, b, frames in rows:
        print(f"| {name} | {n} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f}x | {b * 1e3 / frames:.3f} |")


def _infill_rows(c: Client, args) -> list:
    from motioncore.data.cache import data_root
    from motioncore.models.registry import bundled_names, load_model

    if "anyorder-body" not in bundled_names() or not data_root().is_dir():
        print("anyorder-body or the mocap missing: no in-fill row")
        return []
    from motioncore.data import load
    from motioncore.infill import fill_clip

    model, meta = load_model("anyorder-body")
    clip = load("bandai", "test", fps=30, progress=False)[0].motion
    rj = int(meta["root_joint"])
    q = clip.rotations[30:71].astype(np.float32)
    root = clip.positions[30:71, rj].astype(np.float32)
    known = np.zeros(41, bool)
    known[:10] = True
    known[40] = True
    loc = lambda: fill_clip(model, meta, q, root, known)  # noqa: E731
    rem = lambda: c.infill_rotations(q, root, known, model="anyorder-body")  # noqa: E731
    n = max(5, args.n // 10)
    a, b = _blocks(loc, rem, n, args.blocks)
    return [("anyorder-body in-fill, 30-frame gap", len(a), statistics.median(a), statistics.median(b), 30)]


def _style_rows(c: Client, args, pts: np.ndarray) -> list:
    from motioncore.data.cache import data_root

    if not data_root().is_dir():
        print("the mocap is missing: no style row")
        return []
    from motioncore.data import load
    from motioncore.families.style.generate import StyleAdapter
    from motioncore.tasks.paths import Path as RootPath

    ad = StyleAdapter.load("learnet-biped")
    ex = next(x for x in load("bandai2", progress=False) if x.labels.get("style") == "elderly"
              and x.labels.get("content") == "walk" and x.split == "test").motion
    rot, root = ex.rotations.astype(np.float32), ex.positions[:, ad._base.body.root].astype(np.float32)
    path = RootPath(pts)
    loc = lambda: ad.controller(ad.code(ad.motion(rot, root)[0])).rollout([path], 120)  # noqa: E731
    rem = lambda: c.style_adapt(pts.astype(np.float32), rotations=rot, root=root, frames=120)  # noqa: E731
    a, b = _blocks(loc, rem, max(5, args.n // 20), args.blocks)
    return [(f"learnet-biped style.adapt: {ex.num_frames}-frame exemplar + 120-frame walk", len(a),
             statistics.median(a), statistics.median(b), 120)]


if __name__ == "__main__":
    main()
