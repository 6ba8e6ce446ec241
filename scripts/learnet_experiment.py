"""One-shot style adaptation (learnet) on Bandai dataset 2: base vs learnet vs fine-tuned on a held-out style.

    nice -n 15 .venv/bin/python scripts/learnet_experiment.py --out out/learnet --holdout elderly
"""
from __future__ import annotations

from learnet_style import main  # scripts/learnet_style.py, beside this file

from motioncore.configs import parse_config
from motioncore.families.style.train_data import LearnetStyleConfig


def parse(argv: list[str] | None = None) -> LearnetStyleConfig:
    return parse_config(LearnetStyleConfig, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main(parse())
