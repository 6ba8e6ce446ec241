"""Request-time style code fitting on 10 s exemplars (issue 35): seconds of `StyleAdapter.fit` (the code fitted,
what `style.adapt` runs) against `StyleAdapter.code` (the encoder alone, the same run's baseline) on one torch
thread, for clips of the held-out styles cut to 10 s. Prints a Markdown table: median and max seconds, and
the ratio of the medians.

    OMP_NUM_THREADS=1 .venv/bin/python bench/style_fit.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from motioncore.data import load
from motioncore.families.style.generate import StyleAdapter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ad = StyleAdapter.load("learnet-biped")
    held = set(ad.meta["held_out_styles"])
    T = int(round(args.seconds * ad.fps))
    clips = [c.motion.slice(0, T) for c in load("bandai", None, progress=False)
             if c.labels.get("style") in held and c.motion.num_frames >= T][:6]
    ad.fit(clips[0])  # warm-up
    secs: dict[str, list[float]] = {"encoder (code)": [], "fitted (fit)": []}
    for _ in range(args.repeats):
        for m in clips:
            for name, f in (("encoder (code)", ad.code), ("fitted (fit)", ad.fit)):
                t0 = time.perf_counter()
                f(m)
                secs[name].append(time.perf_counter() - t0)
    base = float(np.median(secs["encoder (code)"]))
    print(f"{len(clips)} held-out clips cut to {args.seconds:g} s ({T} frames), {args.repeats} repeats, 1 thread\n")
    print("| method | median s | max s | median vs encoder |\n|---|---:|---:|---:|")
    for name, v in secs.items():
        print(f"| {name} | {np.median(v):.3f} | {np.max(v):.3f} | {np.median(v) / base:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
