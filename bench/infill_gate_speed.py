"""Benchmark: the default body In-fill with its request-time gate, and Learn This Action, on a long clip.

A 4,000-frame clip (Bandai test clips end to end, on the model's skeleton) keyed at every frame but one 30-frame
gap, one torch thread. Timed in the same run: the fill without the gate (the baseline: one network pass for the
gap), the gate alone (``families.body.gate.fit_gate``: pseudo-gaps cut from the keys, one network pass, the weights
re-assembled), and the whole default fill (gate + gap). Then Learn This Action at its default budget, timed
from the call to its return (before/after judging included). Prints medians and ratios to the baseline.

Usage: .venv/bin/python bench/infill_gate_speed.py [--frames 4000] [--gap 30] [--calls 5] [--adapt 20] [--json F]
Never asserts timings.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import numpy as np
import torch
from _machine import cpu_name, median_time  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.data import load
from motioncore.families.body.adapt import DEFAULT_SECONDS, adapt_infill
from motioncore.families.body.gate import fit_gate
from motioncore.infill import fill_clip
from motioncore.models.registry import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=4000)
    ap.add_argument("--gap", type=int, default=30)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--adapt", type=float, default=DEFAULT_SECONDS)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_model("infill-body")
    clips = sorted(load("bandai", "test", fps=30, progress=False), key=lambda c: -len(c.motion.rotations))
    q = np.concatenate([c.motion.rotations for c in clips])[: a.frames]
    r = np.concatenate([c.motion.positions[:, 1] for c in clips])[: a.frames]
    known = np.ones(len(q), bool)
    s = len(q) // 2
    known[s:s + a.gap] = False
    keys = np.repeat(known[:, None], q.shape[1] + 1, 1)
    base = median_time(lambda: fill_clip(model, meta, q, r, known, gate=False), a.calls)
    gate = median_time(lambda: fit_gate(model, meta, q, r, keys, ~keys), a.calls)
    full = median_time(lambda: fill_clip(model, meta, q, r, known), a.calls)
    t = time.perf_counter()
    ad = adapt_infill(model, meta, q, r, known, seconds=a.adapt)
    adapt_s = time.perf_counter() - t
    rows = {"fill, no gate (baseline)": base, "gate alone": gate, "default In-fill (gate + fill)": full}
    print(f"{len(q)}-frame clip, one {a.gap}-frame gap, one torch thread, median of {a.calls}")
    for k, v in rows.items():
        print(f"  {k:<32} {v * 1e3:8.1f} ms  {v / base:5.1f}x")
    print(f"  Learn This Action ({a.adapt:g} s budget): {adapt_s:.1f} s in all, {ad.steps} steps, held-out "
          f"pseudo-gap error {ad.before} -> {ad.after} cm, used: {ad.used}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "python": platform.python_version(),
                       "torch": torch.__version__, "frames": len(q), "gap": a.gap,
                       "seconds": {k: round(v, 4) for k, v in rows.items()},
                       "adapt": {"budget_s": a.adapt, "total_s": round(adapt_s, 2), **ad.summary()}}, f, indent=1)


if __name__ == "__main__":
    main()
