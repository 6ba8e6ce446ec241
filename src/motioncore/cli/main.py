"""The `motioncore` command: parse arguments, call the library, print results.

Subcommands: ``data``, ``bvh``, ``eval``, ``train``, ``generate``, ``demo``, ``retarget``, ``serve``,
``ping``, ``models``.
Heavy imports (torch, matplotlib) happen inside the handlers so ``motioncore --help`` is instant.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .args import (
    PREFIX,
    Parser,
    add_threads,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    set_threads,
    sigterm_raises,
)


def _cmd_data_list(args: argparse.Namespace) -> int:
    from ..data import REGISTRY, summary

    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        from ..errors import UsageError

        raise UsageError(f"data list: unknown set(s) {unknown}; registered: {sorted(REGISTRY)}")
    names = args.names or list(REGISTRY)  # every set, the unions (bandai = bandai1 + bandai2) included
    rows = [summary(n) for n in names]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = f"{'dataset':<15} {'clips':>5} {'train':>5} {'test':>5} {'frames':>8} {'fps':>5} {'joints':>6}  licence"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<15} {r['clips']:>5} {r['train']:>5} {r['test']:>5} {r['frames']:>8} {r['fps']:>5g} "
              f"{r['joints']:>6}  {r['licence']}")
    return 0


def _cmd_data_unpack(args: argparse.Namespace) -> int:
    from ..data import REGISTRY, data_root
    from ..data.cache import unpack

    names = args.names or [n for n in REGISTRY if not REGISTRY[n].union]
    seen: set[str] = set()
    for n in names:
        for rel, _ in REGISTRY[n].parts:
            if rel not in seen:
                seen.add(rel)
                print(unpack(data_root() / rel))
    return 0


def _cmd_bvh_roundtrip(args: argparse.Namespace) -> int:
    from ..io.bvh_roundtrip import roundtrip_main
    from ..io.files import files_with_suffix

    files: list[str] = []
    for f in args.files:
        p = Path(f)
        files += [str(x) for x in files_with_suffix(p, ".bvh")] if p.is_dir() else [f]
    return roundtrip_main(files, tol=args.tol)


def _cmd_bvh_resample(args: argparse.Namespace) -> int:
    from ..core.kinematics import resample
    from ..errors import UsageError
    from ..io.atomic import check_output_dir, check_output_file
    from ..io.bvh import read_bvh, write_bvh
    from ..io.files import check_suffix, files_with_suffix

    src = Path(args.src)
    if src.is_dir():
        out = check_output_dir(args.out, "OUT", (src,))
        pairs = [(f, out / f.relative_to(src).with_suffix(".bvh")) for f in files_with_suffix(src, ".bvh")]
        if not pairs:
            raise UsageError(f"IN {src}: no .bvh files in the folder")
    elif src.is_file():
        pairs = [(check_suffix(src, (".bvh",), "IN"), check_output_file(args.out, "OUT", (src,), suffixes=(".bvh",)))]
    else:
        raise UsageError(f"IN {src}: no such file or folder (expected a .bvh file or a folder of them)")
    for f, o in pairs:
        m = read_bvh(f)
        r = resample(m, args.fps)
        o.parent.mkdir(parents=True, exist_ok=True)
        write_bvh(o, r)
        print(f"{o}: {m.num_frames} frames at {m.fps:g} fps -> {r.num_frames} at {args.fps:g}")
    return 0


def _plot_path(args: argparse.Namespace, default: str) -> Path:
    """Where an eval command's plot goes: ``--plot``, else beside ``--json`` with its stem, else
    ``--out/<default>.png``; checked (with ``--json``) before any work."""
    from ..io.atomic import check_output_dir, check_output_file

    if args.json:
        check_output_file(args.json, "--json", suffixes=(".json",))
    if args.plot:
        return check_output_file(args.plot, "--plot", suffixes=(".png",))
    if args.json:
        return Path(args.json).with_suffix(".png")
    return check_output_dir(args.out, "--out") / f"{default}.png"


def _safe_stem(text: str) -> str:
    """A file-name part from a dataset name, folder or glob: ``bandai``, ``my_clips``, ``cmu_bvh_0_23_0_1-4``."""
    import re

    stem = re.sub(r"[^A-Za-z0-9-]+", "_", text.strip("/")).strip("_")
    return re.sub(r"_bvh$", "", stem) or "data"


def _check_models(names: list[str]) -> None:
    from ..errors import UsageError
    from ..eval.baselines import BASELINES
    from ..models.checkpoint import CheckpointError
    from ..models.registry import check_model, resolve

    for m in names:
        if m in BASELINES:
            continue
        try:
            resolve(m)
        except CheckpointError:
            raise UsageError(f"--model {m}: unknown model {m!r}: expected one of {sorted(BASELINES)}, a bundled "
                             "in-filling model (see `motioncore models`) or a checkpoint path") from None
        check_model(m, "infill")


def _cmd_eval_infill(args: argparse.Namespace) -> int:
    from ..eval.infill import format_table, plot_results, write_json
    from ..eval.run import run_infill_eval

    models = args.model or ["zerovel", "interp"]
    plot = _plot_path(args, f"eval_infill_{_safe_stem(args.data)}")
    _check_models(models)
    set_threads(args.threads)
    if args.keys_every:
        from ..eval.run import run_keys_eval

        results, n = run_keys_eval(args.data, models, tuple(args.keys_every), progress=not args.quiet,
                                   overrides=args.map)
        print(f"Sparse keys on {args.data} (a key pose every {args.keys_every} frames; {n} test windows; "
              "L2Q/L2P between the keys; lower is better)")
    else:
        results, n = run_infill_eval(args.data, models, tuple(args.lengths), progress=not args.quiet,
                                     overrides=args.map)
        print(f"In-betweening on {args.data} ({n} test windows; lower is better)")
    print(format_table(results))
    plot_results(results, plot)
    print(f"plot: {plot}")
    if args.json:
        write_json(results, args.json)
        print(f"json: {args.json}")
    return 0


def _cmd_eval_hand_tasks(args: argparse.Namespace) -> int:
    import json

    from ..eval.hands import TASKS, evaluate_tasks, format_tasks, plot_hands, plot_timing
    from ..io.atomic import atomic_write_text
    from ..models.registry import check_model

    check_model(args.model, "infill")
    set_threads(args.threads)
    tasks = list(TASKS) if "all" in args.task else list(dict.fromkeys(args.task))
    res = evaluate_tasks(args.model, tasks, use_object=not args.no_object, n_samples=args.samples,
                         temperature=args.temperature, order=args.order, k=args.k or 0,
                         max_windows=args.max_windows, progress=not args.quiet)
    print(format_tasks(res))
    tag = "noobj" if args.no_object else "obj"
    base = _plot_path(args, f"eval_hands_{tag}")
    for t, r in res.items():
        print(f"plot: {plot_hands(r, base.with_name(f'{base.stem}_{t}.png'))}")
    print(f"plot: {plot_timing(res, base.with_name(f'{base.stem}_timing.png'))}")
    if args.json:
        atomic_write_text(args.json, json.dumps({t: {**r['summary'], "windows": r["windows"], "object": r["object"],
                                                     "timing": r["timing"], "model_name": r["model"]}
                                                 for t, r in res.items()}, indent=1))
        print(f"json: {args.json}")
    return 0


def _cmd_eval_hands(args: argparse.Namespace) -> int:
    import json

    from ..eval.hands import HandsTask, evaluate_hands, format_hands, plot_hands
    from ..io.atomic import atomic_write_text
    from ..models.registry import check_model

    if getattr(args, "task", None):
        return _cmd_eval_hand_tasks(args)
    task = HandsTask(every=args.every, fingertips=args.fingertips, window=args.window)
    suffix = f"every{task.every}{'_tips' if task.fingertips else ''}"
    plot = _plot_path(args, f"eval_hands_{suffix}")
    check_model(args.model, "infill")
    set_threads(args.threads)
    res = evaluate_hands(args.model, task, n_samples=args.samples, temperature=args.temperature, order=args.order,
                         k=args.k or 1, max_windows=args.max_windows, progress=not args.quiet)
    print(format_hands(res))
    plot = plot_hands(res, plot)
    print(f"plot: {plot}")
    if args.json:
        atomic_write_text(args.json, json.dumps({k: v for k, v in res.items() if k != "curves"}, indent=1))
        print(f"json: {args.json}")
    return 0


def _cmd_eval_style(args: argparse.Namespace) -> int:
    import json

    from ..errors import UsageError
    from ..eval.style import format_style, plot_style
    from ..experiments.style_eval import evaluate_style
    from ..io.atomic import atomic_write_text
    from ..models.checkpoint import CheckpointError, read_meta
    from ..models.registry import resolve

    want = {"--model": "learnet-pfnn", "--base": "pfnn", "--judge": "style-judge"}
    for arg, name in (("--model", args.model), ("--base", args.base), ("--judge", args.judge)):
        try:
            kind = read_meta(resolve(name)).get("kind")
        except CheckpointError as e:
            raise UsageError(f"{arg} {name}: {e}") from None
        if kind != want[arg]:
            raise UsageError(f"{arg} {name}: a model of kind {kind}; expected kind {want[arg]}")
    plot = _plot_path(args, "eval_style")
    res = evaluate_style(args.model, args.base, args.judge, n_exemplars=args.exemplars, progress=not args.quiet)
    print(format_style(res))
    print(f"plot: {plot_style(res, plot)}")
    if args.json:
        atomic_write_text(args.json, json.dumps(res, indent=1))
        print(f"json: {args.json}")
    return 0


def _cmd_eval_retarget(args: argparse.Namespace) -> int:
    from ..eval.retarget_quality import Options, markdown, run
    from ..io.atomic import check_output_file

    if args.png:
        check_output_file(args.png, "--png", suffixes=(".png",))
    if args.json:
        check_output_file(args.json, "--json", suffixes=(".json",))
    res = run(Options(fps=args.fps, png=args.png or None, out=args.json), progress=not args.quiet)
    print(markdown(res))
    if res.get("png"):
        print(f"plot: {res['png']}")
    if args.json:
        print(f"json: {args.json}")
    return 0


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


def _cmd_train(args: argparse.Namespace) -> int:
    if args.model == "infill-body":
        from ..recipes.infill_body_train import train_infill_body_from_args

        return train_infill_body_from_args(args)
    if args.model == "anyorder":
        from ..train.anyorder import train_anyorder_from_args

        _check_train_args(args)
        return train_anyorder_from_args(args)
    from ..train.controllers import ControllerRecipe, train_controller
    from ..train.loop import TrainConfig, config_from

    _check_train_args(args)
    model = {"pfnn": "pfnn", "mann": "mann"}[args.model]
    if args.baseline:
        model = {"pfnn": "phase-mlp", "mann": "mann-1"}[args.model]
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
        try:
            cfg = json.loads(Path(args.config).read_text())
        except OSError as e:
            raise UsageError(f"--config {args.config}: {e.strerror or e}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UsageError(f"--config {args.config}: not valid JSON ({e})") from None
        if not isinstance(cfg, dict):
            raise UsageError(f"--config {args.config}: expected a JSON object of TrainConfig fields")
    check_output_dir(args.out or "runs", "--out")


def _version() -> str:
    from .. import __version__

    return f"motioncore {__version__}"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="motioncore", description="Neural motion synthesis for animators.",
               epilog="Errors are one line and exit 2 before any work; --debug shows tracebacks of unexpected errors.")
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an unexpected error")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="registered mocap sets").add_subparsers(dest="action", required=True)
    d = data.add_parser("list", help="clips, frames, fps, joints and licence of each set")
    d.add_argument("names", nargs="*", help="registered set names (default: every set, unions included)")
    d.add_argument("--json", action="store_true", help="print the rows as JSON")
    d.set_defaults(func=_cmd_data_list)
    d = data.add_parser("unpack", help="unpack archives into the cache and print the folders")
    d.add_argument("names", nargs="*", help="registered set names (default: all)")
    d.set_defaults(func=_cmd_data_unpack)

    bvh = sub.add_parser("bvh", help="BVH tools").add_subparsers(dest="action", required=True)
    b = bvh.add_parser("roundtrip", help="read, write, re-read; report worst errors; exit 1 above --tol")
    b.add_argument("files", nargs="+", help="BVH files or folders (searched recursively)")
    b.add_argument("--tol", type=nonneg_float, default=1e-4, help="max rotation error (deg) and position error")
    b.set_defaults(func=_cmd_bvh_roundtrip)
    b = bvh.add_parser("resample", help="resample BVH clips to another frame rate (slerp for rotations)")
    b.add_argument("src", metavar="IN", help="a .bvh file or a folder of them (searched recursively)")
    b.add_argument("out", metavar="OUT", help="the .bvh to write, or (IN a folder) the folder mirroring IN")
    b.add_argument("--fps", type=positive_float, required=True, help="the new frame rate (e.g. 30)")
    b.set_defaults(func=_cmd_bvh_resample)

    ev = sub.add_parser("eval", help="evaluation").add_subparsers(dest="action", required=True)
    e = ev.add_parser("infill", help="LaFAN1 in-betweening benchmark (L2Q, L2P, NPSS)")
    e.add_argument("--model", action="append", help="zerovel, interp, bezier, bezier-quat, a bundled model or a checkpoint "
                                                    "(repeatable; default: zerovel and interp)")
    e.add_argument("--data", default="bandai", help="registered dataset or folder/glob of BVH (default bandai)")
    e.add_argument("--map", help="bone map for clips on another skeleton than the model's: the add-on's JSON "
                                 "{model joint: clip joint} (clips that cannot be mapped are refused)")
    e.add_argument("--lengths", type=positive_int, nargs="+", default=[5, 15, 30, 45],
                   help="transition lengths in frames (default 5 15 30 45)")
    e.add_argument("--keys-every", type=positive_int, action="append", metavar="N",
                   help="sparse keys instead of LaFAN1 gaps: key one pose every N frames and nothing else "
                        "(repeatable, e.g. --keys-every 8 --keys-every 16); the JSON is keyed by N")
    e.add_argument("--json", help="write the results as JSON here (the plot goes beside it, same stem)")
    e.add_argument("--plot", help="write the plot here (.png)")
    e.add_argument("--out", default="out", help="folder for the plot without --json or --plot "
                                                "(default ./out: eval_infill_<data>.png)")
    add_threads(e)
    e.add_argument("--quiet", action="store_true", help="no progress bars")
    e.set_defaults(func=_cmd_eval_infill)
    e = ev.add_parser("hands", help="ManipNet hands: wrist keyed every N frames, fill the fingers (vs Interp)")
    e.add_argument("--model", default="anyorder-hands", help="any-order hand checkpoint (default anyorder-hands)")
    e.add_argument("--every", type=positive_int, default=10, help="wrist key spacing in frames at 30 fps (default 10)")
    e.add_argument("--fingertips", action="store_true", help="also key the distal finger joints")
    e.add_argument("--task", action="append", choices=["wrist-every-10", "fingers-every-30", "wrist-only", "all"],
                   help="the animator's tasks (repeatable; all: the three): Interp, Bezier, the model at T=0, best "
                        "and mean of --samples, diversity, grasp timing; --json writes {task: figures}")
    e.add_argument("--no-object", action="store_true",
                   help="do not give an object-conditioned model the object (a rig without one)")
    e.add_argument("--window", type=positive_int, default=40, help="frames per test window (default 40)")
    e.add_argument("--samples", type=positive_int, default=5, help="completions per window for the diversity (default 5)")
    e.add_argument("--temperature", type=nonneg_float, default=1.0, help="sampling temperature of the completions")
    e.add_argument("--order", default="bisection", choices=["random", "sequential", "bisection"],
                   help="order in which the missing elements are sampled (default bisection)")
    e.add_argument("--k", type=positive_int, help="elements committed per step (default 1; with --task one "
                                                  "frame's filled elements)")
    e.add_argument("--max-windows", type=nonneg_int, default=12,
                   help="evaluate N windows evenly spread over the test takes (default 12 of 96; 0: all)")
    e.add_argument("--json", help="write the figures as JSON here (the plot goes beside it, same stem)")
    e.add_argument("--plot", help="write the plot here (.png)")
    e.add_argument("--out", default="out", help="folder for the plot without --json or --plot "
                                                "(default ./out: eval_hands_every<N>.png)")
    add_threads(e)
    e.add_argument("--quiet", action="store_true", help="no progress bars")
    e.set_defaults(func=_cmd_eval_hands)
    e = ev.add_parser("style", help="one-shot style on the held-out styles: next-frame error and a style judge's "
                                    "verdict on walks by the base, the learnet with the exemplar's code and a wrong code")
    e.add_argument("--model", default="learnet-biped", help="style model (kind learnet-pfnn, default learnet-biped)")
    e.add_argument("--base", default="pfnn-style-base", help="the unadapted base trained beside it (default pfnn-style-base)")
    e.add_argument("--judge", default="style-judge", help="style classifier (default style-judge)")
    e.add_argument("--exemplars", type=positive_int, default=3, help="exemplar clips per held-out style (default 3)")
    e.add_argument("--json", help="write the figures as JSON here (the plot goes beside it, same stem)")
    e.add_argument("--plot", help="write the plot here (.png)")
    e.add_argument("--out", default="out", help="folder for the plot without --json or --plot (default ./out: eval_style.png)")
    e.add_argument("--quiet", action="store_true", help="no progress lines")
    e.set_defaults(func=_cmd_eval_style)
    e = ev.add_parser("retarget", help="CMU 01-03 onto the Bandai skeleton: foot skating with and without --contacts, "
                                       "end-effector errors, A->B->A round trip, a stick-figure strip")
    e.add_argument("--fps", type=positive_float, default=30.0, help="resample the clips to this rate first (default 30)")
    e.add_argument("--png", default="out/retarget_cmu_bandai.png", help="stick-figure strip ('' for none)")
    e.add_argument("--json", help="write per-clip figures as JSON here")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=_cmd_eval_retarget)

    t = sub.add_parser("train", help="train a model on the real mocap (CPU by default, GPU when present)")
    t.add_argument("model", choices=["pfnn", "mann", "anyorder", "infill-body"], help="what to train")
    t.add_argument("--baseline", action="store_true", help="train the comparison network instead (PFNN: an MLP "
                   "taking phase as an input; MANN: a single expert)")
    t.add_argument("--config", help="JSON file of TrainConfig fields (flags override it)")
    t.add_argument("--data", help="registered dataset (default: bandai for pfnn, dog for mann)")
    t.add_argument("--epochs", type=positive_int, help="passes over the training set (default 20)")
    t.add_argument("--batch-size", type=positive_int, help="minibatch size (default 32; anyorder 16)")
    t.add_argument("--lr", type=positive_float, help="peak learning rate (default 1e-4; anyorder 3e-4)")
    t.add_argument("--hidden", type=positive_int, help="hidden units per layer (default 512)")
    t.add_argument("--max-clips", type=positive_int, help="use only the first N training clips (quick runs)")
    t.add_argument("--device", help="auto | cpu | cuda[:N]")
    t.add_argument("--threads", type=positive_int, help="CPU threads (default 2)")
    t.add_argument("--max-minutes", type=nonneg_float, help="stop (saving state) after this wall time (0: no limit)")
    t.add_argument("--out", help="run folder (default runs/<model>); holds the checkpoint, state, loss.png")
    t.add_argument("--restart", action="store_true", help="ignore a saved training state in --out")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    from ..train.anyorder import add_anyorder_arguments

    add_anyorder_arguments(t)  # --d-model --n-layers --n-heads --d-ff --num-mixtures --window --max-windows
    from ..recipes.infill_body_train import add_infill_body_arguments

    add_infill_body_arguments(t)  # --body-data --minutes --export
    t.set_defaults(func=_cmd_train)

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
