"""The `motioncore` command: the top-level parser, ``models``, and `main` (exit codes, one-line errors).

Subcommands: ``data``, ``bvh``, ``eval``, ``train``, ``generate``, ``demo``, ``retarget``, ``serve``,
``ping``, ``models``. Each family's parser and handlers live beside this file and register themselves with
``add_subcommands(sub)``: `mocap` (data, bvh), `evaluate` (eval), `train`, `controllers` (generate, demo,
eval controllers), `batch` (retarget, batch); ``serve`` and ``ping`` come from `motioncore.wire.client`.
Heavy imports (torch, matplotlib) happen inside the handlers so ``motioncore --help`` is instant.
"""
from __future__ import annotations

import argparse
import json
import sys

from .args import PREFIX, Parser, sigterm_raises
from .evaluate import add_subcommands as add_eval_commands
from .mocap import add_subcommands as add_mocap_commands
from .train import add_subcommands as add_train_commands


def _cmd_models(args: argparse.Namespace) -> int:
    from ..eval.baselines import BASELINES
    from ..models.registry import bundled_names, describe

    models = [{"name": n, "kind": "baseline", "task": "infill", "joints": None, "fps": None,
               "training_data": None, "licence": None} for n in BASELINES]
    models += [describe(n) for n in bundled_names()]
    if args.json:
        print(json.dumps(models, indent=2))
    else:
        for m in models:
            print(f"{m['name']:<16} {m['kind']:<10} {m['task'] or '':<11} {m['licence'] or ''}")
    return 0


def _version() -> str:
    from .. import __version__

    return f"motioncore {__version__}"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="motioncore", description="Neural motion synthesis for animators.",
               epilog="Errors are one line and exit 2 before any work; --debug shows tracebacks of unexpected errors.")
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an unexpected error")
    sub = p.add_subparsers(dest="command", required=True)

    add_mocap_commands(sub)  # data, bvh
    add_eval_commands(sub)  # eval infill, hands, style, retarget
    add_train_commands(sub)  # train

    from .server import add_subcommands as add_server_commands

    add_server_commands(sub)  # serve, ping

    m = sub.add_parser("models", help="list the models --model accepts")
    m.add_argument("--json", action="store_true", help="print the list as JSON")
    m.set_defaults(func=_cmd_models)

    from .controllers import add_subcommands  # generate, demo, eval controllers

    add_subcommands(sub)
    from .batch import add_subcommands as add_batch_commands

    add_batch_commands(sub)  # retarget
    return p


def _broken_pipe() -> int:
    """The reader of stdout went away (``motioncore models | head -1``): point stdout at /dev/null so the
    flush at exit is quiet, and exit 141 (128 + SIGPIPE) as a shell tool would."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit codes: 0 done, 1 some work failed (per-file failures, an unexpected error),
    2 bad input (before any work), 130 Ctrl-C, 141 stdout closed (``| head``), 143 SIGTERM. Errors are one line on stderr; ``--debug``
    shows the traceback of an unexpected one."""
    from ..errors import MotioncoreError
    from .args import Terminated

    args = build_parser().parse_args(argv)
    try:
        with sigterm_raises():
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe (``| head``) shows here, not at exit
            return code
    except BrokenPipeError:
        return _broken_pipe()
    except Terminated:
        print("motioncore: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("motioncore: interrupted", file=sys.stderr)
        return 130
    except MotioncoreError as e:
        if args.debug:
            raise
        print(f"{PREFIX} {e}", file=sys.stderr)
        return int(getattr(e, "exit_code", 2))
    except Exception as e:  # noqa: BLE001  (one line, never a traceback, unless --debug)
        if args.debug:
            raise
        print(f"{PREFIX} {type(e).__name__}: {e} (run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
