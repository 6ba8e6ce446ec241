"""``motioncore eval``: infill (the LaFAN1 in-betweening benchmark and sparse keys), hands, style and
retarget; ``eval controllers`` is registered by `cli/controllers.py`.

`cli/main.py` registers them with ``add_subcommands(sub)``. Heavy imports happen inside the handlers so
``motioncore --help`` stays instant.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..models.kinds import default_model
from .args import MEASURED_ON, add_threads, nonneg_float, nonneg_int, positive_float, positive_int, set_threads


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


def _add_report_args(e: argparse.ArgumentParser, what: str, plot: str, quiet: str = "no progress bars") -> None:
    """The outputs `_plot_path` reads (--json, --plot, --out; ``plot``: the default file name under --out),
    --threads and --quiet: the same on every eval command that draws a plot."""
    e.add_argument("--json", help=f"write the {what} as JSON here (the plot goes beside it, same stem)")
    e.add_argument("--plot", help="write the plot here (.png)")
    e.add_argument("--out", default="out", help=f"folder for the plot without --json or --plot (default ./out: {plot})")
    add_threads(e)
    e.add_argument("--quiet", action="store_true", help=quiet)


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
                                   overrides=args.map, plant_feet=args.plant_feet)
        print(f"Sparse keys on {args.data} (a key pose every {args.keys_every} frames; {n} test windows; "
              "L2Q/L2P between the keys; lower is better)")
        from ..eval.keyed import format_keys_saved, keys_saved

        saved = keys_saved(results)
    else:
        results, n = run_infill_eval(args.data, models, tuple(args.lengths), progress=not args.quiet,
                                     overrides=args.map, plant_feet=args.plant_feet)
        print(f"In-betweening on {args.data} ({n} test windows; lower is better)")
    print(format_table(results))
    if args.keys_every:
        print(format_keys_saved(saved))
    plot_results(results, plot)
    print(f"plot: {plot}")
    if args.keys_every:
        for name, entry in saved.items():   # in the JSON beside the model's metrics
            results[name]["KeysSaved"] = entry
    if args.json:
        write_json(results, args.json)
        print(f"json: {args.json}")
    return 0


def _cmd_eval_clips(args: argparse.Namespace) -> int:
    import json

    from motioncore.families.body.evaluate import load_body_clipfill

    from ..data.datasets import load
    from ..eval.clips import clip_unit, evaluate_clips, format_clips, plot_clips
    from ..io.atomic import atomic_write_text

    plot = _plot_path(args, f"eval_clips_{_safe_stem(args.data)}")
    _check_models([args.model])
    set_threads(args.threads)
    from ..data.registry import REGISTRY

    if args.data in REGISTRY:
        pool = [c.motion for c in load(args.data, "test", fps=30, progress=not args.quiet)]
    else:   # outside clips (a folder or glob of BVH), each on its own skeleton; those no body maps onto are named
        from ..eval.run import outside_clips

        pool = outside_clips(args.data, args.model, lambda line: print(line, file=sys.stderr))
    clips = [m for m in pool if not args.subject or any(m.name.startswith(f"{s}_") for s in args.subject)]
    if args.limit:
        clips = clips[:args.limit]
    if not clips:
        from ..errors import UsageError

        raise UsageError(f"--data {args.data} --subject {args.subject}: no test clip matches (or none maps onto "
                         f"the model's body)")
    fills = {"shipped": load_body_clipfill(args.model, gate=False, plant_feet=False),
             "unplanted": load_body_clipfill(args.model, plant_feet=False), "gate": load_body_clipfill(args.model)}
    if args.adapt:
        fills["adapt"] = load_body_clipfill(args.model, adapt=args.adapt)
    if args.donor:
        fills["donor"] = load_body_clipfill(args.model, donor=True)
    say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    # one unit: a registered set's cache is in cm; an outside clip's unit from its naming and legs (CMU's ASF: known)
    units = [(1.0, "cm") if args.data in REGISTRY else clip_unit(m) for m in clips]
    res = evaluate_clips(clips, fills, args.gaps, tuple(args.lengths), progress=say, units=units)
    print(f"Whole clips keyed but {args.gaps} gaps per clip ({args.data} test, {len(clips)} clips, model "
          f"{args.model}; lower is better)")
    print(format_clips(res))
    plot_clips(res, plot)
    print(f"plot: {plot}")
    if args.json:
        atomic_write_text(args.json, json.dumps(res, indent=1) + "\n")
        print(f"json: {args.json}")
    return 0


def _cmd_eval_hand_tasks(args: argparse.Namespace) -> int:
    import json

    from motioncore.families.anyorder.evaluate_hands import TASKS, evaluate_tasks, format_tasks, plot_hands, plot_timing

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


def _cmd_eval_infill_hands(args: argparse.Namespace) -> int:
    import json

    from motioncore.families.anyorder.evaluate_hands import TASKS, HandsTask
    from motioncore.families.hands.evaluate import evaluate_infill_hands, format_infill_hands, plot_infill_hands

    from ..io.atomic import atomic_write_text

    plot = _plot_path(args, "eval_infill_hands")   # checked before any work
    set_threads(args.threads)
    if args.task:
        tasks = {t: TASKS[t]() for t in (list(TASKS) if "all" in args.task else list(dict.fromkeys(args.task)))}
    elif args.every != 10 or args.fingertips or args.window != 40:   # the wrist-key layout asked for
        tasks = {f"every{args.every}{'-tips' if args.fingertips else ''}": HandsTask(
            every=args.every, fingertips=args.fingertips, window=args.window)}
    else:
        tasks = {t: TASKS[t]() for t in ("wrist-every-10", "wrist-only")}
    res = {t: evaluate_infill_hands(args.model, task, use_object=not args.no_object, adapt_s=args.adapt,
                                    progress=not args.quiet) for t, task in tasks.items()}
    print(format_infill_hands(res))
    print(f"plot: {plot_infill_hands(res, plot)}")
    if args.json:
        atomic_write_text(args.json, json.dumps(res, indent=1))
        print(f"json: {args.json}")
    return 0


def _cmd_eval_hands(args: argparse.Namespace) -> int:
    import json

    from motioncore.families.anyorder.evaluate_hands import HandsTask, evaluate_hands, format_hands, plot_hands

    from ..errors import UsageError
    from ..io.atomic import atomic_write_text
    from ..models.kinds import default_model, family
    from ..models.registry import check_model

    if family(check_model(args.model, "infill")) == "hands":
        return _cmd_eval_infill_hands(args)
    if args.adapt is not None:
        hands = default_model("infill.hands")
        raise UsageError(f"--adapt: only for the deterministic {hands} (the model {args.model} samples); "
                         f"drop --adapt or pick --model {hands}")
    if args.max_windows is None:
        args.max_windows = 12
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

    from motioncore.families.style.evaluate import evaluate_style
    from motioncore.families.style.evaluate_judge import format_style, plot_style

    from ..errors import UsageError
    from ..io.atomic import atomic_write_text
    from ..models.checkpoint import CheckpointError, read_meta
    from ..models.kinds import KINDS, kinds_for
    from ..models.registry import resolve

    style = kinds_for("style")[0]
    want = {"--model": style, "--base": KINDS[style].base, "--judge": kinds_for("judge")[0]}
    for arg, name in (("--model", args.model), ("--base", args.base), ("--judge", args.judge)):
        try:
            kind = read_meta(resolve(name)).get("kind")
        except CheckpointError as e:
            raise UsageError(f"{arg} {name}: {e}") from None
        if kind != want[arg]:
            raise UsageError(f"{arg} {name}: a model of kind {kind}; expected kind {want[arg]}")
    plot = _plot_path(args, "eval_style")
    res = evaluate_style(args.model, args.base, args.judge, n_exemplars=args.exemplars, progress=not args.quiet,
                         threads=args.threads)
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


def add_subcommands(sub: Any) -> None:
    """Register ``eval`` with its ``infill``, ``hands``, ``style`` and ``retarget`` actions."""
    ev = sub.add_parser("eval", help="evaluation").add_subparsers(dest="action", required=True)
    e = ev.add_parser("infill", help="LaFAN1 in-betweening benchmark (L2Q, L2P, NPSS)",
                      description="LaFAN1 in-betweening benchmark (L2Q, L2P, NPSS). On the Bandai test split the "
                      f"defaults take ~26 s and --model infill-body ~36 s ({MEASURED_ON}); 12 s and 18 s on a quieter "
                      "day (2026-11-25), 35 s and 57 s at load average 9-10 (2026-11-27).")
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
    e.add_argument("--plant-feet", action="store_true",
                   help="infill-body: plant its feet in every window (families.body.fill_plant), unjudged: a window "
                        "has no keyed stretch for the gate to test planting on, so the add-on, server and batch "
                        "leave such windows' feet as filled (default: not planted)")
    _add_report_args(e, "results", "eval_infill_<data>.png")
    e.set_defaults(func=_cmd_eval_infill)
    e = ev.add_parser("clips", help="the animator's benchmark: whole clips keyed but N gaps; shipped, gate and "
                      "Learn This Action against Blender's Bezier (cm, degrees, jerk)",
                      description="The animator's benchmark: each test clip keyed at every frame but --gaps gaps of "
                      "each length, filled as the add-on fills (the gate fitted on the clip's own keys; with --adapt, "
                      "Learn This Action first), scored against the deleted truth and against Blender's Bezier of "
                      "the same keys. The defaults (CMU test subjects 05 and 07: 32 clips, 3 lengths) take ~108 s, plus "
                      f"--adapt seconds per clip and length ({MEASURED_ON}; python scripts/results_md.py --run clips); "
                      "212 s on a busier machine.")
    e.add_argument("--model", default=default_model("infill"), help="an infill-body checkpoint (default the bundled one)")
    e.add_argument("--data", default="cmu", help="registered dataset (its test split; default cmu: subjects 05 "
                   "and 07, never trained on) or a folder / quoted glob of BVH files (every clip, at 30 fps; a clip "
                   "whose body cannot be mapped is left out and named; each clip converted to cm: CMU's ASF units "
                   "x 2.54 / 0.45, others by their legs, 1 for cm, 100 for metres; the JSON names each clip's)")
    e.add_argument("--subject", action="append", help="only clips whose name starts with this subject (e.g. 07; "
                   "repeatable)")
    e.add_argument("--gaps", type=positive_int, default=12, help="gaps per clip, at least 60 frames apart (default 12)")
    e.add_argument("--lengths", type=positive_int, nargs="+", default=[5, 15, 30],
                   help="gap lengths in frames (default 5 15 30)")
    e.add_argument("--adapt", type=float, default=0.0, metavar="SECONDS",
                   help="also Learn This Action for this many seconds per clip and length (default off)")
    e.add_argument("--donor", action="store_true", help="also a 'donor' row: the gate offered the clip's own keyed "
                   "motion per gap beside the network (families.body.fill_donor; the JSON's filled_by says which filled "
                   "each gap)")
    e.add_argument("--limit", type=positive_int, help="at most this many clips")
    _add_report_args(e, "per-clip results", "eval_clips_<data>.png")
    e.set_defaults(func=_cmd_eval_clips)
    e = ev.add_parser("hands", help="ManipNet hands: wrist keyed every N frames, fill the fingers (vs Interp, Bezier)",
                      description="ManipNet hands: wrist keyed every N frames, fill the fingers (vs Interp and "
                      "Blender's Bezier). The defaults (infill-hands, tasks wrist-every-10 and wrist-only, all 96 "
                      f"windows, with and without the object) take ~11 s ({MEASURED_ON}); --adapt S adds about "
                      "8 S per task (2026-11-25). --model anyorder-hands: 12 windows and 5 samples each take ~58 s "
                      f"({MEASURED_ON}); the time grows with --max-windows and --samples.")
    e.add_argument("--model", default=default_model("infill.hands"), help="hand in-fill checkpoint: infill-hands (default; per take "
                   "and mean with bootstrap intervals) or the any-order anyorder-hands (samples, best of 5)")
    e.add_argument("--adapt", type=nonneg_float, metavar="SECONDS",
                   help="(infill-hands) also the adapt track: per take and half, the model fine-tuned SECONDS on "
                        "pseudo-gaps cut from the other half's frames (never a scored window's), then gated")
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
    e.add_argument("--max-windows", type=nonneg_int, default=None,
                   help="(any-order) evaluate N windows evenly spread over the test takes (default 12 of 96; 0: all)")
    _add_report_args(e, "figures", "eval_hands_every<N>.png")
    e.set_defaults(func=_cmd_eval_hands)
    e = ev.add_parser("style", help="one-shot style on the held-out styles: next-frame error and a style judge's "
                                    "verdict on walks by the base, the learnet with the exemplar's code and a wrong code")
    e.add_argument("--model", default=default_model("style"), help="style model (kind learnet-pfnn, default learnet-biped)")
    e.add_argument("--base", default=default_model("style.base"), help="the unadapted base trained beside it (default pfnn-style-base)")
    e.add_argument("--judge", default=default_model("style.judge"), help="style classifier (default style-judge)")
    e.add_argument("--exemplars", type=positive_int, default=3, help="exemplar clips per held-out style (default 3)")
    _add_report_args(e, "figures", "eval_style.png", quiet="no progress lines")
    e.set_defaults(func=_cmd_eval_style)
    e = ev.add_parser("retarget", help="CMU (subjects 01-03, 05-09) onto the Bandai skeleton: foot skating with and without --contacts, "
                                       "end-effector errors, A->B->A round trip, a stick-figure strip")
    e.add_argument("--fps", type=positive_float, default=30.0, help="resample the clips to this rate first (default 30)")
    e.add_argument("--png", default="out/retarget_cmu_bandai.png", help="stick-figure strip ('' for none)")
    e.add_argument("--json", help="write per-clip figures as JSON here")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=_cmd_eval_retarget)
