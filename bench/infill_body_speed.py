"""Benchmark: the deterministic body in-fill (``infill-body``) on one 30-frame gap at batch 1, one torch thread,
against Interp and Blender's Bezier (quaternion channels) of the same keys, measured in the same run.

Each call is what the server does per gap: the Bezier base through the keys, the canonical frame, the network's
pass, the answer put back (``families.body.fill.run_model`` on one LaFAN1 window of 10 context frames, the gap and
the target frame, from the Bandai test split). Prints median and p90 over ``--calls`` calls and the ratios.

Usage: .venv/bin/python bench/infill_body_speed.py [--model infill-body] [--gap 30] [--calls 50] [--json F]
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
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.eval.keyed import bezier_quat_keys, interp_keys
from motioncore.eval.run import load_eval_sets
from motioncore.families.body.fill import BodyLayout, run_model
from motioncore.models.registry import load_model


def _time(fn, calls: int) -> tuple[float, float]:
    fn()  # warm-up
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3, float(np.percentile(ts, 90)) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="infill-body")
    ap.add_argument("--gap", type=int, default=30)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_model(a.model)
    w = load_eval_sets("bandai", progress=False)[0]
    T = 10 + a.gap + 1
    q, p = w.rotations[:1, :T], w.positions[:1, :T]
    sk = w.skeleton
    lay = BodyLayout.of(sk)
    frames = np.zeros((1, T), bool)
    frames[:, :10] = frames[:, -1] = True
    known = np.repeat(frames[..., None], sk.num_joints + 1, axis=-1)
    rows = {"interp": _time(lambda: interp_keys(sk, q, p, frames), a.calls),
            "bezier-quat": _time(lambda: bezier_quat_keys(sk, q, p, frames), a.calls),
            a.model: _time(lambda: run_model(model, lay, q, p, known), a.calls)}
    with torch.no_grad():
        feats = torch.zeros(1, T, lay.feature_dim)
        rows["network only"] = _time(lambda: model(feats), a.calls)
    base = rows["interp"][0]
    print(f"infill-body speed, {a.gap}-frame gap, batch 1, 1 torch thread; {datetime.date.today()}, "
          f"{cpu_name()}, {platform.python_version()}, torch {torch.__version__}")
    print("| fill | median (ms) | p90 (ms) | median / Interp |")
    print("|---|---:|---:|---:|")
    for k, (med, p90) in rows.items():
        print(f"| {k} | {med:.2f} | {p90:.2f} | {med / base:.1f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: {"median_ms": v[0], "p90_ms": v[1], "over_interp": v[0] / base} for k, v in rows.items()},
                      f, indent=1)


if __name__ == "__main__":
    main()
