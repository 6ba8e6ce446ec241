"""Benchmark: load every Bandai Namco dataset-2 BVH clip with motioncore.io.bvh.read_bvh and with the
PyPI parsers `bvhio` and `bvh`, on the same files, in the same run.

Legend: T frames, J joints, C channels. Only parsing is timed: the clips are extracted once (outside
the repository, to ~/.cache/motioncore/bench/dataset-2/) before any clock starts, and the OS file
cache is warmed by reading every file once.

What "full parse" means per parser:
  ours   read_bvh(path): skeleton + (T, J, 4) float64 quaternions + (T, J, 3) positions.
  bvhio  bvhio.readAsBvh(path): joint tree + one Pose (position, quaternion) per joint and frame.
  bvh    bvh.Bvh(text) + names/offsets/channels + all channel values as float64 (T, C) in one
         np.array call (the cheapest way to get numbers out of it, so this favours `bvh`).
By default every parser parses every file; with --subset N the PyPI parsers parse the first N files
and their time is scaled to all files by frame count (marked "subset, scaled").

Usage: PYTHONPATH=src .venv/bin/python bench/bvh_load.py [--limit N] [--subset N] [--repeat N]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.data.cache import cache_root
from motioncore.io.bvh import read_bvh

ARCHIVE = "bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz"
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MOTIONCORE_DATA", REPO.parent / "shared" / "mocap"))
CACHE = cache_root() / "bench" / "dataset-2"   # $MOTIONCORE_CACHE, else the XDG cache dir


def extract(archive: Path, dest: Path) -> list[Path]:
    """The archive's .bvh members under ``dest`` (extracted on the first run only), sorted."""
    done = dest / ".complete"
    if not done.exists():
        dest.mkdir(parents=True, exist_ok=True)
        print(f"extracting {archive} -> {dest} (once) ...", flush=True)
        with tarfile.open(archive, "r:xz") as tf:
            members = [m for m in tf.getmembers() if m.isfile() and m.name.endswith(".bvh")]
            for m in members:
                m.name = Path(m.name).name  # flat, no path tricks
            tf.extractall(dest, members=members, filter="data")
        done.write_text(f"{len(members)}\n")
    return sorted(dest.glob("*.bvh"))


def load_ours(path: Path) -> int:
    return read_bvh(path).num_frames


def load_bvhio(path: Path) -> int:
    import bvhio

    return int(bvhio.readAsBvh(str(path)).FrameCount)


def load_bvh(path: Path) -> int:
    import bvh

    mocap = bvh.Bvh(path.read_text())
    names = mocap.get_joints_names()
    _ = [(mocap.joint_offset(n), mocap.joint_channels(n)) for n in names]
    values = np.array(mocap.frames, dtype=np.float64)  # (T, C) all channel values as floats
    return int(values.shape[0])


def time_parser(load: Callable[[Path], int], files: list[Path], repeat: int) -> tuple[int, float]:
    """(frames parsed, best wall seconds over ``repeat`` passes) for ``files``."""
    best, frames = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        frames = sum(load(f) for f in files)
        best = min(best, time.perf_counter() - t0)
    return frames, best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="use only the first N files")
    ap.add_argument("--subset", type=int, default=None,
                    help="time the PyPI parsers on the first N files only, scaled to all by frames")
    ap.add_argument("--repeat", type=int, default=3, help="passes for our parser (best is kept)")
    args = ap.parse_args(argv)
    archive = DATA / ARCHIVE
    if not archive.exists():
        print(f"missing {archive} (set MOTIONCORE_DATA)", file=sys.stderr)
        return 2
    files = extract(archive, CACHE)[: args.limit]
    for f in files:  # warm the OS file cache so every parser reads from memory
        f.read_bytes()
    all_frames = sum(read_bvh(f).num_frames for f in files)  # also warms our hierarchy cache
    print(f"date {datetime.datetime.now().isoformat(timespec='seconds')}; machine {platform.machine()} "
          f"{cpu_name()}; {os.cpu_count()} CPUs; Python {platform.python_version()}; "
          f"numpy {np.__version__}")
    print(f"{len(files)} files, {all_frames} frames, from {archive.name}\n")
    rows = []
    for name, load, subset, repeat in (("motioncore.read_bvh", load_ours, None, args.repeat),
                                       ("bvhio 1.5 readAsBvh", load_bvhio, args.subset, 1),
                                       ("bvh 0.3 Bvh+floats", load_bvh, args.subset, 1)):
        part = files[:subset]
        frames, secs = time_parser(load, part, repeat)
        scaled = secs * all_frames / frames if frames else float("nan")  # per-frame scaling to all files
        rows.append((name, len(part), frames, secs, scaled))
    ours_fps = all_frames / rows[0][4]
    print(f"{'parser':<22} {'files':>6} {'frames':>8} {'seconds':>8} {'frames/s':>10} "
          f"{'s (all files)':>13} {'x slower than ours':>18}")
    for name, n, frames, secs, scaled in rows:
        fps = frames / secs
        note = "" if n == len(files) else " (subset, scaled)"
        print(f"{name:<22} {n:>6} {frames:>8} {secs:>8.2f} {fps:>10.0f} {scaled:>13.2f} "
              f"{ours_fps / fps:>18.1f}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
