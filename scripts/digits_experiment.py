"""Any-order transformer on scikit-learn's 8x8 digits: train, report bits per pixel by order, in-paint.

    .venv/bin/python scripts/digits_experiment.py --out out/digits --epochs 40 --max-minutes 5
"""
from __future__ import annotations

import argparse
from dataclasses import fields

from motioncore.experiments.digits import DigitsConfig, main


def parse(argv: list[str] | None = None) -> DigitsConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(DigitsConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            kind = {"int": int, "float": float, "str": str}[f.type if isinstance(f.type, str) else f.type.__name__]
            p.add_argument(flag, type=kind, default=f.default, help=f"default {f.default}")
    return DigitsConfig(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    main(parse())
