"""Any-order transformer on scikit-learn's 8x8 digits: train, report bits per pixel by order, in-paint.

    .venv/bin/python scripts/digits_experiment.py --out out/digits --epochs 40 --max-minutes 5
"""
from __future__ import annotations

from digits import DigitsConfig, main  # scripts/digits.py, beside this file

from motioncore.configs import parse_config


def parse(argv: list[str] | None = None) -> DigitsConfig:
    return parse_config(DigitsConfig, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main(parse())
