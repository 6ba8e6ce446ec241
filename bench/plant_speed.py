"""Benchmark: what planting the feet adds to the body In-fill, per 30-frame gap, on one thread.

Bandai test walks end to end on the model's skeleton (``--frames`` frames), keyed at every frame but ``--gaps``
gaps of ``--gap`` frames 60 frames apart; one torch thread. Timed in the same run (median of ``--calls``):

- the default In-fill without planting (``fill_clip(..., plant_feet=False)``: the gate and the gaps; the baseline);
- planting alone on that answer (``families.body.fill_plant.plant_filled``: contacts, where each foot lands, IK);
- the default In-fill with planting (the gate also judges planting on its pseudo-gaps), each call interleaved
  with a baseline call: what planting adds is the median of the pairs' differences.

Prints ms per gap and the ratios to the baseline. Usage:
    .venv/bin/python bench/plant_speed.py [--frames 2000] [--gap 30] [--gaps 8] [--calls 5] [--json F]
Never asserts timings.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time

import numpy as np
import torch
from _machine import cpu_name, median_time  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.data import load
from motioncore.families.body.fill_plant import JUDGE, plant_filled
from motioncore.infill import fill_clip
from motioncore.models.registry import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--gap", type=int, default=30)
    ap.add_argument("--gaps", type=int, default=8)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_model("infill-body")
    clips = [c for c in load("bandai", "test", fps=30, progress=False) if "walk" in c.name.lower()] or \
        list(load("bandai", "test", fps=30, progress=False))
    q = np.concatenate([c.motion.rotations for c in clips])[: a.frames]
    r = np.concatenate([c.motion.positions[:, 1] for c in clips])[: a.frames]
    known = np.ones(len(q), bool)
    starts = np.linspace(30, len(q) - a.gap - 30, a.gaps).round().astype(int)
    for s in starts:
        known[s:s + a.gap] = False
    keys = np.repeat(known[:, None], q.shape[1] + 1, 1)
    out = fill_clip(model, meta, q, r, known, plant_feet=False)
    fq, fr = out.rotations[0], out.root[0]
    plant = median_time(lambda: plant_filled(meta, fq, fr, keys, ~keys), a.calls)
    pairs = []   # interleaved, so a busy machine slows both alike: the median difference is what planting adds
    for _ in range(a.calls + 1):
        t0 = time.perf_counter()
        fill_clip(model, meta, q, r, known, plant_feet=False)
        t1 = time.perf_counter()
        fill_clip(model, meta, q, r, known)
        pairs.append((t1 - t0, time.perf_counter() - t1))
    pairs = pairs[1:]   # the first pair warms up
    base, full = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    added = statistics.median(p[1] - p[0] for p in pairs)
    n = len(starts)
    rows = {"In-fill, feet not planted (baseline)": base, "planting alone": plant,
            "In-fill, feet planted (default)": full}
    print(f"{len(q)}-frame Bandai walk clip, {n} gaps of {a.gap} frames, one torch thread, median of {a.calls} "
          f"({cpu_name()})")
    for k, v in rows.items():
        print(f"  {k:<38} {v * 1e3 / n:8.2f} ms per gap  {v / base:5.2f}x")
    print(f"  planting adds {added * 1e3 / n:.2f} ms per gap to the default In-fill (median of the interleaved "
          f"pairs' differences; planting alone {plant * 1e3 / n:.2f} ms, the rest the gate judging it on "
          f"{JUDGE} of its pseudo-gaps)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "python": platform.python_version(),
                       "torch": torch.__version__, "frames": len(q), "gap": a.gap, "gaps": n,
                       "ms_per_gap": {k: round(v * 1e3 / n, 3) for k, v in rows.items()},
                       "added_ms_per_gap": round(added * 1e3 / n, 3)}, f, indent=1)


if __name__ == "__main__":
    main()
