"""Fitting more than the code at request time (an experiment, `motioncore.families.style.adapt_offsets`): on the held-out
exemplars `motioncore eval style` uses, the product's fitted z alone against z plus per-layer offsets on the
adapters' diagonal (f(z) + delta), each scored on the style's OTHER clips (next-frame cm) and by the judge on
its three paths, with the request's seconds (one torch thread).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/style_scale_fit.py --model learnet-biped --out runs/style_scales.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from motioncore.data import load
from motioncore.families.style.adapt_offsets import fit_offsets
from motioncore.families.style.evaluate import pick_exemplars, prediction_errors
from motioncore.families.style.evaluate_judge import SETTLE_S, WALK_SPEED_MPS, Judge, walks
from motioncore.families.style.generate import StyleAdapter
from motioncore.families.style.model import StyledPFNN
from motioncore.families.style.train_heldout import StyleConfig, prepare
from motioncore.models.registry import load_model
from motioncore.tasks.locomotion import Controller


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="learnet-biped")
    ap.add_argument("--out", default="runs/style_scales.json")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--l2", type=float, default=0.05)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ad = StyleAdapter.load(a.model)
    exp = ad.meta["experiment"]
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in ("data", "holdouts", "exemplar_content", "window_min_s", "window_max_s", "balance", "seed")})
    prep = prepare(cfg, load(cfg.data, None, progress=False))
    base, base_meta = load_model("pfnn-style-base")
    jd = Judge.load()
    base_named = [jd.name(m, SETTLE_S) for m in walks(Controller.from_model(base, base_meta), WALK_SPEED_MPS)]
    names = [b.name for b in ad.layout.outputs if b.name in ("joint_pos", "joint_vel", "joint_axes")]
    cols = torch.as_tensor(np.concatenate([np.arange(ad.layout.output_block(n).start, ad.layout.output_block(n).stop) for n in names]))
    reps = []
    for h in cfg.holdouts:
        for ex in pick_exemplars(prep, h, 3, ad.min_rows * 2):
            motion = prep.clips[ex].motion
            t = time.perf_counter()
            z = ad.fit(motion)
            s_z = time.perf_counter() - t
            rows = ad.exemplar_data(motion)
            tt = lambda v: torch.as_tensor(np.asarray(v, np.float64), dtype=torch.float32)  # noqa: E731
            net, info = fit_offsets(ad.model.pfnn, tt(ad._base.x_norm.transform(rows["X"])), tt(ad._base.y_norm.transform(rows["Y"])),
                                    tt(rows["phase"]), tt(z)[None], a.steps, a.lr, a.l2, cols=cols)
            s_d = time.perf_counter() - t
            others = np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c])
                                     for c in prep.heldout_by_style[h] if c != ex])
            zt = tt(z)[None]
            nf = {"base": prediction_errors(base, prep, others)["joint_cm"],
                  "z": prediction_errors(ad.model.pfnn, prep, others, zt)["joint_cm"],
                  "z+offsets": prediction_errors(net, prep, others, zt)["joint_cm"]}
            ctl = ad.controller(z)
            ctl_d = ad.controller(z)
            ctl_d.model = StyledPFNN(net, zt).eval()
            named = {"base": base_named, "z": [jd.name(m, SETTLE_S) for m in walks(ctl, WALK_SPEED_MPS)],
                     "z+offsets": [jd.name(m, SETTLE_S) for m in walks(ctl_d, WALK_SPEED_MPS)]}
            rep = {"style": h, "exemplar": prep.clips[ex].name, "next_frame_cm": nf, "named": named,
                   "hits": {k: float(np.mean([n == h for n in v])) for k, v in named.items()},
                   "seconds": {"z": s_z, "z+offsets": s_d}, "best_step": info["best_step"],
                   "delta_rms": float(info["deltas"].pow(2).mean().sqrt())}
            reps.append(rep)
            print(json.dumps({k: rep[k] for k in ("exemplar", "next_frame_cm", "hits", "seconds", "best_step", "delta_rms")}), flush=True)
    mean = lambda key, k: float(np.mean([r[key][k] for r in reps]))  # noqa: E731
    summary = {k: {"next_frame_cm": mean("next_frame_cm", k), "hits": mean("hits", k)} for k in ("base", "z", "z+offsets")}
    summary["seconds"] = {k: {"mean": mean("seconds", k), "max": float(np.max([r["seconds"][k] for r in reps]))}
                          for k in ("z", "z+offsets")}
    Path(a.out).write_text(json.dumps({"settings": vars(a), "summary": summary, "exemplars": reps}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
