"""The style outside the rollout (issue 56): train the learnet's output term on the base's states (the base
frozen; resumable, a snapshot per epoch; see motioncore.families.style.train_outside), then judge with
`motioncore eval style`.

    nohup nice -n 5 .venv/bin/python scripts/style_train_outside.py --out /work/runs/style/outside1 --threads 1 \
        > /work/runs/style/outside1.log 2>&1 &
"""
from __future__ import annotations

from motioncore.configs import parse_config
from motioncore.families.style.train_outside import OutsideConfig, train


def parse(argv: list[str] | None = None) -> OutsideConfig:
    return parse_config(OutsideConfig, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    print(train(parse())["history"][-1])
