"""Every joint's fastest frame-to-frame turn of a style model, walking in held-out and training styles'
fitted codes on the demo path, a sharp turn and the judge's paths, against the data's p99.9 + a margin
(`motioncore.families.style.evaluate_turns`).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/style_turns.py --model learnet-biped --json runs/style_turns.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from motioncore.cli.controllers import demo_path
from motioncore.families.style.evaluate_turns import format_turns, measure_turns, sharp_turn

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="learnet-biped")
    ap.add_argument("--exemplars", type=int, default=3, help="exemplar clips per held-out style")
    ap.add_argument("--margin", type=float, default=0.10, help="fraction over the data's p99.9 allowed")
    ap.add_argument("--json", default="", help="write the full result here")
    a = ap.parse_args()
    torch.set_num_threads(1)
    res = measure_turns({"demo": demo_path("biped"), "sharp turn": sharp_turn()}, a.model, a.exemplars, a.margin)
    print(format_turns(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
