"""One-shot style on held-out styles: train the base PFNN and the learnet on every Bandai locomotion style
but the held-out ones (resumable; see motioncore.families.style.train_heldout), then judge with
`motioncore eval style`.

    nohup nice -n 5 .venv/bin/python scripts/style_train.py --out /work/runs/style > style.log 2>&1 &
"""
from __future__ import annotations

from motioncore.configs import parse_config
from motioncore.families.style.train_heldout import StyleConfig, train


def parse(argv: list[str] | None = None) -> StyleConfig:
    return parse_config(StyleConfig, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    print(train(parse()))
