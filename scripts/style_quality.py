"""The exemplar quality report (`motioncore.families.style.generate_quality`) on real Bandai clips: held-out and
training-style walks, non-walking clips (dance, kick, punch, slash), and each walk cut to 3.5 s.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/style_quality.py --model learnet-biped
"""
from __future__ import annotations

import argparse

import torch

from motioncore.data import load
from motioncore.errors import MotioncoreError
from motioncore.families.style.generate import StyleAdapter

CLIPS = ("dataset-2_walk_elderly_001", "dataset-1_walk_not-confident_001", "dataset-1_walk_proud_001", "dataset-1_walk_happy_001",
         "dataset-2_walk_youthful_001", "dataset-1_dance-short_normal_001", "dataset-1_kick_normal_001",
         "dataset-1_punch_normal_001", "dataset-1_slash_normal_001")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="learnet-biped")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ad = StyleAdapter.load(a.model)
    clips = {c.name: c for c in load("bandai", None, progress=False)}
    print(f"training clips' held-out error: {ad.meta.get('exemplar_error_cm')}")
    print("| clip | seconds | held-out cm: fitted / encoder / no style | warnings |\n|---|---|---|---|")
    for name in CLIPS:
        for cut in (None, 105):
            m = clips[name].motion if cut is None else clips[name].motion.slice(0, cut)
            try:
                q = ad.fit_report(m)[1]["quality"]
            except MotioncoreError as e:
                print(f"| {name}{'' if cut is None else ' (3.5 s)'} | | | refused: {e} |")
                continue
            cm = q["held_out_cm"]
            print(f"| {name}{'' if cut is None else ' (3.5 s)'} | {q['seconds']:.1f} | {cm['fitted']:.2f} / {cm['encoder']:.2f} / "
                  f"{cm['no_style']:.2f} | {'; '.join(q['warnings']) or 'none'} |", flush=True)


if __name__ == "__main__":
    main()
