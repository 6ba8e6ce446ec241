"""``motioncore retarget``: batch retargeting of BVH files (see docs/batch.md). Heavy imports happen in
the handler; Ray is imported only with --ray / --ray-address."""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from ..models.kinds import default_model
from .args import add_threads, nonneg_float, nonneg_int, positive_int, set_threads

# The exit status of every batch job (retarget, batch infill, batch generate): each one's --help ends with it and
# docs/batch.md's "Exit status" table states the same rows (tests/cli/test_cli_batch_help.py compares them).
EXIT_TABLE = (
    ("0", "every file was written or skipped"),
    ("1", "any file failed (a clip refused for its skeleton beside others that ran included), or the report could "
          "not be written"),
    ("2", "the batch could not start: a bad argument (one line naming it, before any work, nothing written), or "
          "every input refused for its skeleton"),
    ("130 / 143", "Ctrl-C / SIGTERM (the report is written with what finished, marked interrupted)"),
)
EXIT_HEAD = "exit status:"


def exit_epilog(width: int = 78) -> str:
    """The exit table as a --help epilog (kept as laid out by `_TableFormatter`)."""
    rows = [textwrap.fill(when, width, initial_indent=f"  {code:<11}", subsequent_indent=" " * 13)
            for code, when in EXIT_TABLE]
    return "\n".join([EXIT_HEAD, *rows])


class _TableFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the exit table is printed as laid out (the description is still wrapped)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return text if text.startswith(EXIT_HEAD) else super()._fill_text(text, width, indent)


def _cmd_retarget(args: argparse.Namespace) -> int:
    from ..batch.run import run_batch

    set_threads(args.threads)
    report = run_batch(args.src, args.target, args.out, overrides=args.map, scale=args.scale,
                       use_ray=args.ray, ray_address=args.ray_address, workers=args.workers, chunk=args.chunk,
                       progress=not args.quiet, contacts=args.contacts, missing=args.missing,
                       infill_model=args.infill_model, fmt=args.format, match_model=args.match_model,
                       keep_height=args.keep_height)
    c, t = report["counts"], report["timings"]
    rate = f", {t['files_per_s']:.1f} files/s" if t["files_per_s"] else ""
    print(f"retarget: {c['ok']} written, {c['skipped']} skipped (already there), {c['failed']} failed "
          f"of {c['total']} in {t['wall_s']:.1f} s{rate}; report {args.out}/report.json")
    _print_left_out(report)
    return _print_errors(report)


def _print_left_out(report: dict) -> None:
    """What the written files lack or what was done to them, on stderr: the target joints held at rest (per
    distinct set), the clips whose feet were moved 1 or more onto the target's contact height and the toes or feet
    below the floor (per file), for the files written by this run; report.json lists them per file, skipped ones
    included."""
    now = {r["file"] for r in report.get("files", []) if r.get("status") == "ok"}   # skipped ones: report.json
    report = {k: {f: v for f, v in report.get(k, {}).items() if f in now} for k in ("unmapped", "feet", "below_ground")}
    sets: dict[tuple[str, ...], int] = {}
    for joints in report.get("unmapped", {}).values():
        sets[tuple(joints)] = sets.get(tuple(joints), 0) + 1
    for joints, n in sets.items():
        print(f"retarget: {n} file(s) left {len(joints)} target joint(s) unmapped, held at rest: {', '.join(joints)} "
              "(--map FILE to map them)", file=sys.stderr)
    moved = {f: v for f, v in report.get("feet", {}).items() if abs(v["moved_up"]) >= 1.0}
    for f, v in list(moved.items())[:10]:
        print(f"retarget: {f}: feet moved {'up' if v['moved_up'] > 0 else 'down'} {abs(v['moved_up']):.1f} onto the "
              f"target's contact height {v['target']:.2f} (the target's units; --keep-height to keep them)",
              file=sys.stderr)
    if len(moved) > 10:
        print(f"retarget: ... and {len(moved) - 10} more files moved 1 or more (report.json: feet)", file=sys.stderr)
    for f, low in report.get("below_ground", {}).items():
        print(f"retarget: {f}: " + ", ".join(f"{j} {d:g} cm below the floor at its lowest" for j, d in low.items()),
              file=sys.stderr)


def _print_errors(report: dict) -> int:
    """The first ten failures on stderr; the exit code: 1 when any file failed (a clip refused for its skeleton,
    stage map, beside others that ran included), 2 when every file was refused (nothing could start)."""
    for e in report["errors"][:10]:
        print(f"  failed [{e['stage']}] {e['file']}: {e['error']}", file=sys.stderr)
    if len(report["errors"]) > 10:
        print(f"  ... and {len(report['errors']) - 10} more (see report.json)", file=sys.stderr)
    refused = sum(e["stage"] == "map" for e in report["errors"])
    if refused and refused == report["counts"]["total"]:
        return 2
    return 1 if report["counts"]["failed"] else 0


def gate_line(g: dict) -> str:
    """What the gate did for one gap length, as the add-on and docs/infill.md say it; the length in the clip's own
    frames (``frames``, when the clip is at another rate than the model's)."""
    err = g.get("error") or {}
    why = (f" (on {g['pseudo']} test gaps cut from your keys: model {err['model'][0]:.1f} cm, Blender's curve "
           f"{err['bezier'][0]:.1f} cm)") if err.get("model") else ""
    kept = "kept Blender's curve" if g["rot"] == 0.0 and g["root"] == 0.0 else \
        f"correction at {g['rot']:.0%} (root {g['root']:.0%})"
    return f"gaps of {g.get('frames', g['length'])}: {kept}{why}"


def _cmd_batch_infill(args: argparse.Namespace) -> int:
    from ..batch.infill import run_batch_infill

    set_threads(args.threads)
    report = run_batch_infill(args.src, args.out, model=args.model, gaps_file=args.gaps, frozen=args.frozen,
                              temperature=args.temperature, seed=args.seed, progress=not args.quiet,
                              use_ray=args.ray, ray_address=args.ray_address, workers=args.workers, chunk=args.chunk,
                              fmt=args.format, adapt=args.adapt, adapt_steps=args.adapt_steps,
                              plant_feet=not args.no_plant_feet)
    c = report["counts"]
    for r in report["files"]:   # what the model did not cover, per file written now (a skipped one: report.json)
        if r.get("status") != "ok":
            continue
        if r.get("unmapped") or r.get("bezier_only"):
            print(f"batch infill: {Path(r['file']).name}: through the model's skeleton; model joints it lacks: "
                  f"{', '.join(r.get('unmapped') or []) or 'none'}; its joints the model does not drive (Bezier of "
                  f"their keys): {', '.join(r.get('bezier_only') or []) or 'none'}", file=sys.stderr)
        scaled = [g for g in r.get("gate") or [] if g["rot"] < 1.0 or g["root"] < 1.0]
        if scaled:   # the gate scaled the model's correction toward Blender's curve: say how much and why
            print(f"batch infill: {Path(r['file']).name}: " + "; ".join(gate_line(g) for g in scaled), file=sys.stderr)
        unplanted = [g for g in r.get("gate") or [] if not g.get("plant", True) and g.get("plant_error")]
        if unplanted and not args.no_plant_feet:   # the gate kept the feet unplanted: where and why
            print(f"batch infill: {Path(r['file']).name}: " + "; ".join(
                f"gaps of {g.get('frames', g['length'])}: feet not planted ("
                + (f"{g['plant_error']['unjudged']} to test planting on)" if "unjudged" in g["plant_error"] else
                   f"on its test gaps planting cost error: {g['plant_error']['unplanted'][0]:.2f} -> "
                   f"{g['plant_error']['planted'][0]:.2f} cm)") for g in unplanted), file=sys.stderr)
        ad = r.get("adapt") or {}
        if ad.get("skipped"):
            print(f"batch infill: {Path(r['file']).name}: not adapted: {ad['skipped']}", file=sys.stderr)
        elif ad.get("message"):   # Learn This Action: steps, seconds, held-out gaps, the error before and after
            print(f"batch infill: {Path(r['file']).name}: {ad['message']}", file=sys.stderr)
    print(f"batch infill: {c['ok']} written ({report['frames_filled']} frames filled), {c['skipped']} skipped "
          f"(already there), {c['failed']} failed of {c['total']} in {report['wall_s']:.1f} s; report "
          f"{args.out}/report.json")
    return _print_errors(report)


def _cmd_batch_generate(args: argparse.Namespace) -> int:
    from ..batch.generate import run_batch_generate

    set_threads(args.threads)
    report = run_batch_generate(args.src, args.out, model=args.model, mode=args.mode, frames=args.frames,
                                progress=not args.quiet, use_ray=args.ray, ray_address=args.ray_address,
                                workers=args.workers, chunk=args.chunk, fmt=args.format)
    c = report["counts"]
    print(f"batch generate: {c['ok']} written ({report['frames_written']} frames), {c['skipped']} skipped (already "
          f"there), {c['failed']} failed of {c['total']} in {report['wall_s']:.1f} s; report {args.out}/report.json")
    return _print_errors(report)


def _ray_args(p: Any) -> None:
    p.add_argument("--format", choices=["bvh", "fbx", "blend"], default="bvh",
                   help="output format (default bvh; fbx and blend need the blender extra)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ray", action="store_true", help="run as Ray tasks on a local cluster (needs the scale extra)")
    g.add_argument("--ray-address", metavar="ADDR", help="run on an existing Ray cluster (e.g. auto, ray://host:10001)")
    p.add_argument("--workers", type=positive_int, help="CPUs for the local Ray cluster (default: all cores)")
    p.add_argument("--chunk", type=positive_int, help="files per Ray task (default: about 4 tasks per worker, 4-64)")
    add_threads(p, " in this process (each Ray worker uses 1)")


def add_subcommands(sub: Any) -> None:
    """Add ``retarget``, ``batch infill`` and ``batch generate`` to the ``motioncore`` subparsers."""
    from .controllers import MODES

    r = sub.add_parser("retarget", help="retarget many BVH files onto one skeleton (resumable; optional Ray)",
                       description="Retarget every BVH under SRC onto the skeleton of --target, writing "
                                   "OUT/<base name>.bvh and OUT/report.json. Existing outputs are skipped, so a "
                                   "re-run resumes. Every input's skeleton is checked against the target first: "
                                   "one that cannot be mapped is refused (one line naming the unmapped joints, in "
                                   "the report).", epilog=exit_epilog(), formatter_class=_TableFormatter)
    r.add_argument("src", help="folder (searched recursively for *.bvh, *.fbx, *.blend) or glob ('**' recursive, "
                              "quote it); .fbx and .blend need the blender extra (bpy)")
    r.add_argument("--target", required=True, help="clip (.bvh, .fbx or .blend) whose skeleton the clips are moved onto")
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--map", help="bone map applied on top of the automatic joint map: the add-on's JSON "
                                 "{target joint: source joint} or a .toml/.json override file; saved in --out and "
                                 "reused by the next run without --map")
    r.add_argument("--scale", default="legs", help="root translation scale: legs (default), none or a number")
    r.add_argument("--contacts", action="store_true",
                   help="pin the ankles where the source's are planted (two-bone leg IK): less foot sliding, not "
                        "none: on four CMU clips of the retarget tests and docs "
                        "onto a Bandai rig, foot skate 19.2-40.4 -> 13.8-31.7 cm/s, 0.67-0.81x (python "
                        "bench/retarget_contacts.py, 2026-11-28)")
    r.add_argument("--keep-height", action="store_true",
                   help="keep the root's height as scaled (default: each clip moved up or down so its feet stand at "
                        "the target clip's contact height, the median lowest-toe height of its frames)")
    r.add_argument("--missing", choices=["rest", "infill"], default="rest",
                   help="target joints the source lacks: hold at rest (default) or fill with --infill-model")
    r.add_argument("--infill-model", help="per-element any-order checkpoint on the target skeleton (--missing infill)")
    r.add_argument("--match-model", help="match the twists to this checkpoint's training data (e.g. anyorder-body, "
                                         "when the target is its skeleton), so its in-filling works on the outputs")
    _ray_args(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=_cmd_retarget)

    b = sub.add_parser("batch", help="headless batch jobs over folders of clips").add_subparsers(dest="action",
                                                                                              required=True)
    i = b.add_parser("infill", help="fill dropped or marked frames of many BVH clips (resumable)",
                     description="Fill the frames listed in --gaps and/or frozen runs (--frozen N) of every BVH "
                                 "under SRC with an in-filling checkpoint, on each clip's own skeleton (through "
                                 "the model's and back) and at its own frame rate; writes OUT/<base name>.bvh and "
                                 "OUT/report.json. Existing outputs are skipped. Clips whose body cannot be mapped "
                                 "onto the model's (a quadruped) are refused before any work (in the report). "
                                 "A re-run keeps the report entries of the files it skips.",
                     epilog=exit_epilog(), formatter_class=_TableFormatter)
    i.add_argument("src", help="folder (searched recursively for *.bvh) or glob")
    i.add_argument("--out", required=True, help="output folder")
    i.add_argument("--model", default=default_model("infill"), help="in-filling checkpoint (default infill-body, the deterministic "
                   "body model; anyorder-body draws variations with --temperature)")
    i.add_argument("--gaps", help='JSON {"clip base name": [[start, end], ...]} (end exclusive)')
    i.add_argument("--frozen", type=nonneg_int, default=0,
                   help="also refill runs of at least N frames identical to the frame before (dropped frames; "
                        "default 0: off)")
    i.add_argument("--temperature", type=nonneg_float, default=0.0, help="sampling temperature (default 0)")
    i.add_argument("--seed", type=int, default=0, help="random seed of the sampling (default 0)")
    i.add_argument("--adapt", type=nonneg_float, default=0.0, metavar="SECONDS",
                   help="infill-body: Learn This Action on each clip's own keys for this many seconds first (default "
                        "0: off; 20 is the add-on's default); report.json gives the pseudo-gap error before and after")
    i.add_argument("--adapt-steps", type=nonneg_int, default=0, metavar="STEPS",
                   help="infill-body: Learn This Action for this many learning steps instead of a time budget (the "
                        "same result on any machine; default 0: off)")
    i.add_argument("--no-plant-feet", action="store_true",
                   help="infill-body: leave the feet as the network fills them (default: feet in contact are planted "
                        "by IK on the legs where test gaps cut from the clip's keys say it costs no error; "
                        "report.json's gate gives that judgement per gap length)")
    _ray_args(i)
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=_cmd_batch_infill)
    gen = b.add_parser("generate", help="walk a path controller along many path files, one BVH each (resumable)",
                       description="For every path .json under SRC (docs/paths.md), walk the controller along it "
                                   "and write OUT/<base name>.bvh and OUT/report.json. Existing outputs are skipped.",
                       epilog=exit_epilog(), formatter_class=_TableFormatter)
    gen.add_argument("src", help="folder (searched recursively for *.json) or glob")
    gen.add_argument("--out", required=True, help="output folder")
    gen.add_argument("--model", default="pfnn-biped", help="path controller: pfnn-biped (default), mann-dog or a checkpoint")
    gen.add_argument("--mode", default="outputs", choices=MODES,
                     help="network evaluation form (default outputs; constant, linear, cubic: PFNN only)")
    gen.add_argument("--frames", type=positive_int, help="frames per clip (default: enough to walk each path)")
    _ray_args(gen)
    gen.add_argument("--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(func=_cmd_batch_generate)

