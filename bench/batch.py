"""Batch retargeting throughput: >= 200 Bandai clips onto a CMU skeleton, in-process vs Ray (2 workers), in
one run. Prints a Markdown table (date, machine): files/s, the ratio, Ray start-up and per-file overhead.

    python bench/batch.py [--n 200] [--workers 2] [--chunk N]
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from motioncore.batch.run import run_batch
from motioncore.core.motion import Motion
from motioncore.data import load
from motioncore.io.bvh import write_bvh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200, help="Bandai clips (default 200)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=None, help="files per Ray task (default: motioncore's)")
    args = ap.parse_args()
    import ray

    bandai = load("bandai", progress=False) + load("bandai2", progress=False)
    cmu = load("cmu", progress=False)[0].motion
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "src"
        src.mkdir()
        for c in bandai[:args.n]:
            write_bvh(src / f"{c.name}.bvh", c.motion)
        n = len(list(src.glob("*.bvh")))
        frames = sum(c.motion.num_frames for c in bandai[:args.n])
        target = root / "cmu_target.bvh"
        write_bvh(target, Motion(cmu.skeleton, cmu.rotations[:2], cmu.positions[:2], cmu.fps, "target"))

        t0 = time.perf_counter()
        local = run_batch(src, target, root / "local", progress=False)
        t_local = time.perf_counter() - t0

        t0 = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="ERROR")
        t_init = time.perf_counter() - t0
        t_warm = t_init
        t0 = time.perf_counter()
        remote = run_batch(src, target, root / "ray", progress=False, use_ray=True, workers=args.workers,
                           chunk=args.chunk)
        t_all = time.perf_counter() - t0
        t_start = remote["timings"]["ray_init_s"]   # run_batch starts every worker (imports included) first
        t_ray = t_all - t_start
        t_warm = t_init + t_start
        ray.shutdown()
        same = all((root / "ray" / p.name).read_bytes() == p.read_bytes() for p in (root / "local").glob("*.bvh"))

    ok = local["counts"]["ok"], remote["counts"]["ok"]
    fl, fr = n / t_local, n / t_ray
    per_file_local = t_local / n
    # wall time per file each Ray worker spends beyond the in-process cost of the same file
    overhead = (t_ray * args.workers - t_local) / n
    print(f"## Batch retarget, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()} "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"ray {ray.__version__})\n")
    print(f"{n} Bandai clips ({frames} frames) -> CMU skeleton (31 joints); written {ok[0]} / {ok[1]}; "
          f"Ray outputs byte-identical: {same}; chunk {remote.get('chunk')}\n")
    print("| run | wall s | files/s | ms/file |")
    print("|---|---|---|---|")
    print(f"| in-process | {t_local:.2f} | {fl:.1f} | {1000 * per_file_local:.1f} |")
    print(f"| Ray, {args.workers} workers (after start-up) | {t_ray:.2f} | {fr:.1f} | {1000 * t_ray / n:.1f} |")
    print(f"\n* Ray / in-process throughput: **{fr / fl:.2f}x**")
    print(f"* Ray start-up: `ray.init` {t_init:.2f} s, workers started and warm at {t_warm:.2f} s; "
          f"end to end incl. start-up {n / (t_ray + t_warm):.1f} files/s")
    print(f"* per-file overhead after start-up (workers x Ray wall - in-process wall) / files: "
          f"{1000 * overhead:.1f} ms")


if __name__ == "__main__":
    main()
