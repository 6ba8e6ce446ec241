"""One-shot style, four ways, on the same held-out exemplars as `motioncore eval style` (3 per held-out
style): the learnet's encoder alone, the encoder's code fitted to the exemplar (the product), the base
with ALL its weights fine-tuned on the exemplar (what a user would otherwise do), and the code of the
nearest training style (the training style whose fixed exemplar's encoder code is nearest the exemplar's,
in the training codes' metric). Each: next-frame error on the style's other clips, judge hits on the
three judged paths, and its wall time (what the method costs at request time, one torch thread).

    .venv/bin/python scripts/style_compare.py --out runs/style_compare.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from motioncore.data import load
from motioncore.families.pfnn.features import rotation_encoding
from motioncore.families.style.evaluate import pick_exemplars, prediction_errors
from motioncore.families.style.evaluate_judge import SETTLE_S, WALK_SPEED_MPS, Judge, walks
from motioncore.families.style.generate import StyleAdapter
from motioncore.families.style.train import finetune
from motioncore.families.style.train_data import LearnetStyleConfig
from motioncore.families.style.train_heldout import StyleConfig, prepare
from motioncore.models.registry import load_model
from motioncore.tasks.locomotion import Controller

METHODS = ("base", "encoder", "fitted", "finetuned", "nearest_style")


def setup() -> dict:
    ad = StyleAdapter.load("learnet-biped")
    exp = ad.meta["experiment"]
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in StyleConfig.__dataclass_fields__ and k != "rotations"},
                      rotations=rotation_encoding(ad.meta["layout"]))
    base, base_meta = load_model("pfnn-style-base")
    prep = prepare(cfg, load(cfg.data, None, progress=False))
    ids = sorted(prep.bank)
    style_codes = {s: ad.code(prep.clips[prep.style_exemplar[s]].motion) for s in ids}
    return {"ad": ad, "cfg": cfg, "base": base, "base_meta": base_meta, "prep": prep, "judge": Judge.load(),
            "style_codes": style_codes}


def nearest_style(ctx: dict, z_enc: np.ndarray) -> tuple[int, np.ndarray]:
    prec = ctx["ad"].prior.precision
    d = {s: float((z_enc - z) @ prec @ (z_enc - z)) for s, z in ctx["style_codes"].items()}
    s = min(d, key=d.__getitem__)
    return s, ctx["style_codes"][s]


def one(ctx: dict, h: str, ex: int) -> dict:
    ad, prep, jd, base = ctx["ad"], ctx["prep"], ctx["judge"], ctx["base"]
    motion = prep.clips[ex].motion
    secs, nets, codes = {}, {}, {}
    t = time.perf_counter()
    codes["encoder"] = ad.code(motion)
    secs["encoder"] = time.perf_counter() - t
    t = time.perf_counter()
    codes["fitted"] = ad.fit(motion)
    secs["fitted"] = time.perf_counter() - t
    t = time.perf_counter()
    sid, codes["nearest_style"] = nearest_style(ctx, ad.code(motion))
    secs["nearest_style"] = time.perf_counter() - t
    t = time.perf_counter()
    nets["finetuned"], _ = finetune(base, prep, ex, LearnetStyleConfig(seed=ctx["cfg"].seed, l1=ctx["cfg"].l1))
    secs["finetuned"] = time.perf_counter() - t
    secs["base"] = 0.0
    rows = np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c])
                           for c in prep.heldout_by_style[h] if c != ex])
    nf = {"base": prediction_errors(base, prep, rows)["joint_cm"],
          "finetuned": prediction_errors(nets["finetuned"], prep, rows)["joint_cm"]}
    nf.update({k: prediction_errors(ad.model, prep, rows, torch.as_tensor(z, dtype=torch.float32)[None])["joint_cm"]
               for k, z in codes.items()})
    ctls = {"base": Controller.from_model(base, ctx["base_meta"]),
            "finetuned": Controller.from_model(nets["finetuned"], ctx["base_meta"])}
    ctls.update({k: ad.controller(z) for k, z in codes.items()})
    named = {k: [jd.name(m, SETTLE_S) for m in walks(c, WALK_SPEED_MPS)] for k, c in ctls.items()}
    return {"style": h, "exemplar": prep.clips[ex].name, "exemplar_rows": int(prep.counts[ex]),
            "nearest_style": prep.styles[sid], "next_frame_cm": nf, "seconds": secs, "judge_named": named,
            "hits": {k: float(np.mean([n == h for n in v])) for k, v in named.items()}}


def markdown(reps: list[dict]) -> str:
    mean = lambda key, k: float(np.mean([r[key][k] for r in reps]))  # noqa: E731
    lines = ["| method | next-frame cm (held-out, other clips) | vs base | judge hits | request time, s (mean / max) |",
             "|---|---|---|---|---|"]
    b = mean("next_frame_cm", "base")
    for k in METHODS:
        s = [r["seconds"][k] for r in reps]
        lines.append(f"| {k} | {mean('next_frame_cm', k):.2f} | {mean('next_frame_cm', k) / b - 1:+.1%} | "
                     f"{mean('hits', k):.2f} | {np.mean(s):.2f} / {np.max(s):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/style_compare.json")
    ap.add_argument("--exemplars", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ctx = setup()
    reps = []
    for h in ctx["cfg"].holdouts:
        for ex in pick_exemplars(ctx["prep"], h, args.exemplars, ctx["ad"].min_rows * 2):
            reps.append(one(ctx, h, ex))
            r = reps[-1]
            print(f"{h} {r['exemplar']}: " + ", ".join(f"{k} {r['next_frame_cm'][k]:.2f} cm {r['hits'][k]:.2f} hits "
                                                     f"{r['seconds'][k]:.1f} s" for k in METHODS), flush=True)
    text = markdown(reps)
    Path(args.out).write_text(json.dumps({"exemplars": reps, "table": text}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
