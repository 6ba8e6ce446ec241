"""``motioncore train``: PFNN, MANN (or their baselines), the any-order model and the infill-body recipe.

`cli/main.py` registers it with ``add_subcommands(sub)``. Heavy imports happen inside the handler so
``motioncore --help`` stays instant.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..models.kinds import hook, trainable
from .args import nonneg_float, positive_float, positive_int


def _cmd_train(args: argparse.Namespace) -> int:
    fam = trainable()[args.model]   # its family's record (models.kinds)
    if fam.train_checks:
        _check_train_args(args)
    if fam.train is not None:
        return hook(fam.train)(args)
    from ..train.controllers import ControllerRecipe, train_controller  # the path controllers' shared recipe
    from ..train.loop import TrainConfig, config_from

    model = fam.baseline if args.baseline else fam.kinds[0].kind
    recipe = config_from(ControllerRecipe, None, {"model": model, "data": args.data, "hidden_dim": args.hidden,
                                                  "max_clips": args.max_clips})
    cfg = config_from(TrainConfig, args.config, {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                                                 "device": args.device, "threads": args.threads,
                                                 "max_minutes": args.max_minutes})
    out = Path(args.out or f"runs/{model}")
    _, meta = train_controller(recipe, cfg, out, progress=not args.quiet, resume=not args.restart)
    last = meta["history"][-1]
    print(f"{model}: {last['epoch']} epochs, val loss {last['val_loss']:.4f}, {meta['train_wall_s']:.0f} s; "
          f"checkpoint {out / model}.json, curves {out / 'loss.png'}")
    return 0


def _check_train_args(args: argparse.Namespace) -> None:
    """``motioncore train``: the data set, the config file and the run folder, before anything loads."""
    from ..data import REGISTRY
    from ..errors import UsageError
    from ..io.atomic import check_output_dir

    if args.data is not None and args.data not in REGISTRY:
        raise UsageError(f"--data {args.data}: no such registered set; registered: {', '.join(sorted(REGISTRY))}")
    if args.config is not None:
        from ..errors import MotioncoreError
        from ..train.loop import read_config

        try:
            read_config(args.config, "TrainConfig")
        except MotioncoreError as e:
            raise UsageError(str(e)) from None
    check_output_dir(args.out or "runs", "--out")


def add_subcommands(sub: Any) -> None:
    """Register ``train`` on the top-level subparsers."""
    t = sub.add_parser("train", help="train a model on the real mocap (CPU by default, GPU when present)")
    t.add_argument("model", choices=list(trainable()),
                   help="what to train (infill-hands: a ridge fit, about 3 minutes on one core)")
    t.add_argument("--baseline", action="store_true", help="train the comparison network instead (PFNN: an MLP "
                   "taking phase as an input; MANN: a single expert)")
    t.add_argument("--config", help="JSON file of TrainConfig fields (flags override it)")
    t.add_argument("--data", help="registered dataset (default: bandai for pfnn, dog for mann)")
    t.add_argument("--epochs", type=positive_int, help="passes over the training set (default 20)")
    t.add_argument("--batch-size", type=positive_int, help="minibatch size (default 32; anyorder 16)")
    t.add_argument("--lr", type=positive_float, help="peak learning rate (default 1e-4; anyorder 3e-4; infill-body 1e-3, 3e-4 is right for a warm start)")
    t.add_argument("--hidden", type=positive_int, help="hidden units per layer (default 512)")
    t.add_argument("--max-clips", type=positive_int, help="use only the first N training clips (quick runs)")
    t.add_argument("--device", help="auto | cpu | cuda[:N]")
    t.add_argument("--threads", type=positive_int, help="CPU threads (default 2)")
    t.add_argument("--max-minutes", type=nonneg_float, help="stop (saving state) after this wall time (0: no limit)")
    t.add_argument("--out", help="run folder (default runs/<model>); holds the checkpoint, state, loss.png")
    t.add_argument("--restart", action="store_true", help="ignore a saved training state in --out")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    from motioncore.families.anyorder.train import add_anyorder_arguments

    add_anyorder_arguments(t)  # --d-model --n-layers --n-heads --d-ff --num-mixtures --window --max-windows
    from motioncore.families.body.train_loop import add_infill_body_arguments

    add_infill_body_arguments(t)  # --body-data --minutes --export
    t.add_argument("--cv", action="store_true", help="(infill-hands) choose the penalty and weight on each training "
                   "take held out in turn (the mean), not on the one validation take")
    t.set_defaults(func=_cmd_train)
