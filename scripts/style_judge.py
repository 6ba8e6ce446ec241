"""Train the style judge (the classifier `motioncore eval style` uses) on real Bandai locomotion clips of
every style; prints its test-split accuracy and writes a `style-judge` checkpoint.

    .venv/bin/python scripts/style_judge.py --out out/style-judge
"""
from __future__ import annotations

import argparse
from dataclasses import asdict

import torch

from motioncore.data import get_spec, load
from motioncore.families.style.evaluate_judge import JudgeConfig, train_judge
from motioncore.models.checkpoint import save_model


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="checkpoint path without suffix (NAME.json + NAME.safetensors)")
    p.add_argument("--data", default="bandai")
    p.add_argument("--steps", type=int, default=JudgeConfig.steps)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    cfg = JudgeConfig(steps=a.steps, seed=a.seed)
    model, meta = train_judge(load(a.data, None), cfg)
    spec = get_spec(a.data)
    print(f"test accuracy {meta['test_accuracy']:.3f} on {meta['test_clips']} clips ({len(meta['styles'])} styles)")
    save_model(a.out, model, "style-judge", asdict(model.cfg),
               {**meta, "task": "judge", "training_data": f"{a.data}: Bandai Namco datasets 1 and 2, locomotion, all "
                f"{len(meta['styles'])} styles, train split", "licence": spec.licence, "citation": spec.citation},
               half=True)
    print(f"wrote {a.out}.json")


if __name__ == "__main__":
    main()
