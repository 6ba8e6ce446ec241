"""Mapping a rig (`retarget.auto_map`: bodies by topology on the clip's frames, then names) against the name-only
preset match of the same rigs, same run. Prints milliseconds per map (median of repeats) and the ratio.

    OMP_NUM_THREADS=1 MOTIONCORE_DATA=/work/shared/mocap python bench/rig_map.py

The issue's target: a map under 50 ms."""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.rigs import NAME_SETS, renamed  # noqa: E402

from motioncore.core.skeleton import Skeleton  # noqa: E402
from motioncore.data import load  # noqa: E402
from motioncore.retarget import auto_map, clip_poses  # noqa: E402


def timed(fn, n: int = 20) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3


def main() -> None:
    walk = load("bandai2", "test", progress=False)[0].motion
    print("| name set | names only (ms) | topology + poses + names (ms) | ratio |")
    print("|---|---:|---:|---:|")
    for name, table in NAME_SETS.items():
        src = renamed(walk, table)
        flat = Skeleton(src.skeleton.names, [-1] * 22, src.skeleton.offsets * 0)   # no hierarchy: names only
        base = timed(lambda: auto_map(flat, walk.skeleton))   # noqa: B023
        full = timed(lambda: auto_map(src.skeleton, walk.skeleton, source_poses=clip_poses(src)))  # noqa: B023
        print(f"| {name} | {base:.2f} | {full:.2f} | {full / base:.1f}x |")


if __name__ == "__main__":
    main()
