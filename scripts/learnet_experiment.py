"""One-shot style adaptation (learnet) on Bandai dataset 2: base vs learnet vs fine-tuned on a held-out style.

    nice -n 15 .venv/bin/python scripts/learnet_experiment.py --out out/learnet --holdout elderly
"""
from __future__ import annotations

import argparse
from dataclasses import fields

from motioncore.experiments.learnet_style import LearnetStyleConfig, main


def parse(argv: list[str] | None = None) -> LearnetStyleConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(LearnetStyleConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            kind = {"int": int, "float": float, "str": str}[f.type if isinstance(f.type, str) else f.type.__name__]
            p.add_argument(flag, type=kind, default=f.default, help=f"default {f.default}")
    return LearnetStyleConfig(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    main(parse())
