"""The controller subcommands of `motioncore`: ``generate`` (a BVH along a path.json), ``demo`` (the
biped and the dog along a built-in S-shaped path with a speed-up, BVH + PNG) and ``eval controllers``.

`cli/main.py` registers them with ``add_subcommands(sub)``; run them through `motioncore.cli.main.main`.
Heavy imports happen inside the handlers so ``motioncore --help`` stays instant.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path as FilePath
from typing import Any

from ..models.kinds import KINDS, default_model
from .args import MEASURED_ON, nonneg_int, positive_int

DEMO_MODELS = {"biped": "pfnn-biped", "dog": "mann-dog"}  # bundled checkpoints the demo animates
DEMO_INFILL = default_model("demo.infill")  # bundled in-filling model: re-fills the biped's walk between sparse keys
DEMO_KEY_EVERY = 20  # the in-fill demo keeps the first 10 frames and then one key every N frames (0.67 s at 30 fps)
RUN_CHECKPOINTS = ("runs/pfnn/pfnn", "runs/pfnn-base/phase-mlp", "runs/mann/mann", "runs/mann-base/mann-1")
MODES = max((k.modes for k in KINDS.values()), key=len)  # as motioncore.tasks.locomotion.MODES (kept torch-free)


# ----------------------------------------------------------------------------- generate
def _cmd_generate(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from ..errors import MotioncoreError
    from ..io.atomic import check_output_file
    from ..io.bvh import write_bvh
    from ..models.registry import check_model
    from ..tasks.locomotion import Controller, generate
    from ..tasks.paths import PathError, load_path

    torch.set_num_threads(args.threads)
    path = load_path(args.path)  # validated before anything is loaded or written
    out = check_output_file(args.out, "--out", (args.path,), suffixes=(".bvh",))
    check_model(args.model, "controller")
    t0 = time.perf_counter()
    try:
        ctl = Controller.load(args.model, args.mode)
    except MotioncoreError as e:  # the mode against the model's kind
        raise MotioncoreError(f"--mode {args.mode}: {str(e).removeprefix('mode: ')}") from None
    try:
        ctl.track(path)  # gait names and defaults are checked against the model before the rollout
    except PathError as e:
        raise PathError(f"{args.path}: {e}") from None
    motion, ro = generate(ctl, path, args.frames, args.mode, out.stem)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_bvh(out, motion)  # atomic
    err = ctl.track(path).distance(ro.root[0][:, [0, 2]]).mean()
    print(f"wrote {out}: {motion.num_frames} frames at {motion.fps:g} fps, {motion.skeleton.num_joints} joints "
          f"({ctl.kind}, mode {args.mode}); mean distance to the path {err:.1f} cm; "
          f"{time.perf_counter() - t0:.1f} s")
    if not np.isfinite(motion.rotations).all():  # pragma: no cover - write_bvh refuses non-finite data
        return 1
    return 0


# ----------------------------------------------------------------------------- demo
def demo_path(character: str) -> Any:
    """The built-in path (metres): an S-shaped lane change (half a cosine, so it starts and ends straight)
    then a straight, with a speed-up as the S straightens so that the gait changes. The biped walks a
    3 m lane change over 8 m, then runs 6 m; the dog walks, trots through a 2 m lane change over 7 m,
    then canters 5 m. The bends (radius >= 4 m) suit both gaits."""
    import numpy as np

    from ..tasks.paths import Path

    bend, straight, shift = (8.0, 6.0, 3.0) if character == "biped" else (7.0, 5.0, 2.0)
    z = np.linspace(0.0, bend + straight, 141)
    x = shift * (1.0 - np.cos(np.pi * np.minimum(z, bend) / bend)) / 2.0
    if character == "biped":
        speed = np.interp(z, [0.0, 6.0, 8.5, 14.0], [1.1, 1.1, 2.8, 2.8])
        gait = np.where(z < 7.0, "walk", "run")
    else:
        speed = np.interp(z, [0.0, 3.0, 4.0, 7.0, 8.0, 12.0], [0.8, 0.8, 1.8, 1.8, 3.0, 3.0])
        gait = np.where(z < 3.5, "walk", np.where(z < 7.5, "trot", "canter"))
    return Path(np.stack([x, z], 1), None, speed, tuple(gait.tolist()))


def run_demo(out_dir: str | os.PathLike, models: dict[str, str] | None = None,
             infill: str | None = DEMO_INFILL) -> dict[str, Any]:
    """Animate the biped and the dog along `demo_path`; write ``biped.bvh``, ``dog.bvh`` and ``demo.png``;
    then (when the in-filling checkpoint ``infill`` exists) re-fill the biped's walk between sparse keys
    into ``biped_infill.bvh``. ``models`` overrides the bundled names (tests)."""
    import numpy as np

    from ..errors import MotioncoreError
    from ..eval.controllers import contact_rule, feet_positions, foot_contacts
    from ..io.bvh import write_bvh
    from ..models.registry import bundled_names
    from ..tasks.locomotion import Controller

    models = dict(DEMO_MODELS, **(models or {}))
    for character, name in models.items():
        if name == DEMO_MODELS[character] and name not in bundled_names():
            raise MotioncoreError(f"the demo needs the bundled model {name!r} (src/motioncore/checkpoints/{name}.json "
                                  f"and .safetensors), which is missing; bundled: {bundled_names()}")
    out = FilePath(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for character, name in models.items():
        t0 = time.perf_counter()
        ctl = Controller.load(name)
        path = demo_path(character)
        track = ctl.track(path)
        # End on arrival (the first frame within 5 cm of the end, or after 1.5x the planned time): stopping
        # from a run or a canter is rare in the mocap, so the demo does not ask for it.
        ro = ctl.rollout([path], int(1.5 * track.duration * ctl.fps))
        arrived = np.flatnonzero(ro.progress[0] >= track.length - 5.0)
        motion = ro.motion(0, character).slice(0, int(arrived[0]) + 1 if len(arrived) else ro.frames)
        bvh = out / f"{character}.bvh"
        write_bvh(bvh, motion)
        track = ctl.track(path)
        root_xz = ro.root[0, :motion.num_frames][:, [0, 2]]
        h, s = contact_rule(ctl)
        summary[character] = {
            "model": name, "bvh": str(bvh), "frames": motion.num_frames, "fps": motion.fps,
            "path_m": path.length, "path_error_cm": float(track.distance(root_xz).mean()),
            "end_cm": float(((root_xz[-1] - track.xz[-1]) ** 2).sum() ** 0.5), "seconds": time.perf_counter() - t0,
            "root": root_xz / 100.0, "path": path.points, "contacts": foot_contacts(feet_positions(ctl, motion), motion.fps, h, s)}
    if infill and (infill != DEMO_INFILL or infill in bundled_names()):
        summary["infill"] = demo_infill(out, infill, summary["biped"]["bvh"])
    png = out / "demo.png"
    plot_demo({k: v for k, v in summary.items() if k in models}, png)
    for k in models:
        v = summary[k]
        del v["root"], v["path"], v["contacts"]
    summary["plot"] = str(png)
    return summary


def demo_infill(out: FilePath, name: str, walk_bvh: str) -> dict[str, Any]:
    """Keep the walk's first 10 frames and a key every ``DEMO_KEY_EVERY`` frames, fill the rest with the
    any-order checkpoint ``name`` (temperature 0), write ``biped_infill.bvh``; report the mean local joint
    angle to the walk over the filled frames, for the model and for Interp (slerp between the keys)."""
    import numpy as np

    from ..core.motion import Motion
    from ..core.rotations import quat_angle
    from ..errors import MotioncoreError
    from ..infill import Request, fill, interp_channels
    from ..io.bvh import read_bvh, write_bvh
    from ..models.registry import load_model

    t0 = time.perf_counter()
    model, meta = load_model(name)
    walk = read_bvh(walk_bvh)
    if list(walk.skeleton.names) != list(meta["skeleton"]["names"]):
        raise MotioncoreError(f"{name}: its skeleton differs from the walk's; the in-fill demo needs the same joints")
    T, rj = walk.num_frames, int(meta["root_joint"])
    known = np.zeros(T, bool)
    known[:10] = True
    known[9::DEMO_KEY_EVERY] = True
    known[-1] = True
    f = fill(Request(model, meta, walk.rotations, walk.positions[:, rj], known))
    pos = walk.positions.copy()
    pos[:, rj] = f.root[0]
    filled = Motion(walk.skeleton, f.rotations[0], pos, walk.fps)
    bvh = out / "biped_infill.bvh"
    write_bvh(bvh, filled)
    keys = np.repeat(known[:, None], walk.skeleton.num_joints + 1, 1)
    iq, iroot = interp_channels(walk.rotations[None], walk.positions[None, :, rj], keys)
    gap = ~known
    err = lambda q: float(np.degrees(quat_angle(q[gap], walk.rotations[gap])).mean())  # noqa: E731
    from ..eval.infill import jerk_sum
    from ..retarget.contacts import feet_of
    from .demo_feet import demo_skate

    _, gp_model = walk.skeleton.forward_kinematics(filled.rotations, filled.positions)
    _, gp_true = walk.skeleton.forward_kinematics(walk.rotations, walk.positions)
    ipos = walk.positions.copy()
    ipos[:, rj] = iroot[0]
    _, gp_interp = walk.skeleton.forward_kinematics(iq[0], ipos)
    legs = feet_of(walk.skeleton, gp_true[::10])
    if legs is None:
        raise MotioncoreError(f"{name}: no two legs with feet in the walk's skeleton")
    positions = {"walk": gp_true, name: gp_model, "Interp": gp_interp}
    png = plot_infill(walk, iq[0], f.rotations[0], known, name, out / "demo_infill.png", positions=positions,
                      legs=legs)
    sk8 = demo_skate(gp_true, {"model": gp_model, "interp": gp_interp}, known, walk.fps, legs)
    return {"model": name, "bvh": str(bvh), "frames": T, "keys": int(known.sum()), "filled": int(gap.sum()),
            "model_deg": err(f.rotations[0]), "interp_deg": err(iq[0]), "plot": str(png),
            # every joint's world position, hips included, over the whole clip: the jitter an animator sees
            "jerk_over_truth": jerk_sum(gp_model) / jerk_sum(gp_true),
            # the feet over the filled frames and the keys either side, on the walk's ground (core.feet)
            "skate_cm_s": sk8["model_cm_s"], "skate_over_walk": sk8["model_over_walk"],
            "walk_skate_cm_s": sk8["walk_cm_s"], "interp_skate_over_walk": sk8["interp_over_walk"],
            "seconds": time.perf_counter() - t0}


def plot_infill(walk: Any, interp_q: Any, model_q: Any, known: Any, name: str, path: FilePath, n_joints: int = 4,
                positions: dict[str, Any] | None = None, legs: Any = None) -> FilePath:
    """PNG: the local rotation angle (degrees from rest) of the ``n_joints`` joints that move most, over
    time, for the truth, Interp and the model; the filled spans shaded, the keys as dots. With ``positions``
    (world positions (T, J, 3): the walk first, then the model and Interp, by name) and ``legs`` (each leg's foot
    and toe joints), two more rows: each foot's contact and the foot skate per frame (`cli.demo_feet`). Atomic
    write."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..core.gaps import runs as mask_runs
    from ..core.rotations import quat_angle
    from ..io.atomic import atomic_write

    ident = np.zeros_like(walk.rotations)
    ident[..., 0] = 1.0
    angle = lambda q: np.degrees(quat_angle(q, ident))  # noqa: E731  # (T, J)
    truth, interp, model = angle(walk.rotations), angle(interp_q), angle(model_q)
    joints = np.argsort(-truth.std(0))[:n_joints]
    t = np.arange(walk.num_frames) / walk.fps
    rows = n_joints + (2 if positions else 0)
    fig = Figure(figsize=(11, 2.2 * rows))
    FigureCanvasAgg(fig)
    for row, j in enumerate(joints):
        ax = fig.add_subplot(rows, 1, row + 1)
        for s, e in mask_runs(~known):
            ax.axvspan(t[s], t[min(e, len(t) - 1)], color="0.92", lw=0)
        ax.plot(t, truth[:, j], "k-", lw=1.6, label="truth (deleted frames)")
        ax.plot(t, interp[:, j], "--", color="C0", lw=1.2, label="Interp (slerp between keys)")
        ax.plot(t, model[:, j], "-", color="C3", lw=1.2, label=f"{name}")
        ax.plot(t[known], truth[known, j], "k.", ms=3, label="keys")
        ax.set_ylabel(f"{walk.skeleton.names[j]}\n(deg from rest)", fontsize=8)
        ax.grid(alpha=0.3)
        if row == 0:
            ax.set_title("in-fill of the biped's walk: joint angles across the gaps (shaded)", fontsize=10)
            ax.legend(loc="upper right", fontsize=7, ncol=4)
    if positions:
        from .demo_feet import plot_feet

        colours = dict(zip(positions, ["k", "C3", "C0"], strict=False))
        plot_feet(fig, rows, n_joints + 1, t, known, positions, walk.fps, legs, colours)
    fig.axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=80))
    return path


def plot_demo(summary: dict[str, Any], path: FilePath) -> None:
    """Top view (requested path vs achieved root) and foot contacts over time, one column per character;
    Agg canvas, written atomically."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 8))
    FigureCanvasAgg(fig)
    feet = {"biped": ["left foot", "left toe", "right foot", "right toe"],
            "dog": ["left front", "right front", "left hind", "right hind"]}
    for col, (character, s) in enumerate(summary.items()):
        ax = fig.add_subplot(2, 2, col + 1)  # top view, z (forward) to the right
        ax.plot(s["path"][:, 1], s["path"][:, 0], "k--", lw=1.5, label="requested path")
        ax.plot(s["root"][:, 1], s["root"][:, 0], "-", color="C1" if col else "C0", lw=2, label="achieved root")
        ax.plot(s["path"][0, 1], s["path"][0, 0], "go", label="start")
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("z (m)")
        ax.set_ylabel("x (m)")
        ax.set_title(f"{character} ({FilePath(s['model']).name}): mean path error {s['path_error_cm']:.1f} cm", fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
        ax = fig.add_subplot(2, 2, col + 3)
        c = np.asarray(s["contacts"], float).T  # (4, T)
        t = np.arange(c.shape[1]) / s["fps"]
        ax.imshow(c, aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0, interpolation="nearest", extent=(0.0, t[-1] if len(t) else 1.0, 3.5, -0.5))
        ax.set_yticks(range(4), labels=feet.get(character, [f"foot {i}" for i in range(4)]))
        ax.set_xlabel("time (s)")
        ax.set_title(f"{character} foot contacts (black = planted)")
    fig.tight_layout()
    from ..io.atomic import atomic_write

    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))  # the umask's mode, as any output


def _cmd_demo(args: argparse.Namespace) -> int:
    import torch

    from ..io.atomic import atomic_write_text, check_output_dir, check_output_file

    check_output_dir(args.out, "--out")
    if args.json:
        check_output_file(args.json, "--json", suffixes=(".json",))
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    summary = run_demo(args.out)
    for character in DEMO_MODELS:
        s = summary[character]
        print(f"{character:<5} ({s['model']}): {s['frames']} frames at {s['fps']:g} fps along a {s['path_m']:.1f} m "
              f"S-path; mean path error {s['path_error_cm']:.1f} cm, ends {s['end_cm']:.0f} cm from the path's end "
              f"-> {s['bvh']}")
    if "infill" in summary:
        s = summary["infill"]
        print(f"in-fill ({s['model']}): kept {s['keys']} of the walk's {s['frames']} frames as keys (10 + one every "
              f"{DEMO_KEY_EVERY}), filled {s['filled']}; mean error over the filled frames (angle between each "
              f"joint's filled and true rotation) {s['model_deg']:.2f} deg (Interp {s['interp_deg']:.2f} deg); "
              f"jerk {s['jerk_over_truth']:.2f}x the walk's; foot skate {s['skate_cm_s']:.1f} cm/s, "
              f"{s['skate_over_walk']:.1f}x the walk's {s['walk_skate_cm_s']:.1f} (Interp "
              f"{s['interp_skate_over_walk']:.1f}x) -> {s['bvh']}; curves and feet {s['plot']}")
    print(f"plot (paths, foot contacts): {summary['plot']}  ({time.perf_counter() - t0:.1f} s)")
    if args.json:
        import json

        atomic_write_text(args.json, json.dumps(summary, indent=1, default=float) + "\n")
        print(f"json: {args.json}")
    return 0


# ----------------------------------------------------------------------------- eval controllers
def _default_checkpoints() -> list[str]:
    from ..models.registry import bundled_names

    runs = [r for r in RUN_CHECKPOINTS if FilePath(r + ".json").is_file()]
    return runs or [n for n in DEMO_MODELS.values() if n in bundled_names()]


def _cmd_eval_controllers(args: argparse.Namespace) -> int:
    import torch

    from ..errors import MotioncoreError
    from ..eval.controllers import ControllerEvalConfig, evaluate_controllers, format_table, write_json
    from ..io.atomic import check_output_file
    from ..models.registry import check_model

    if args.json:
        check_output_file(args.json, "--json", suffixes=(".json",))
    torch.set_num_threads(args.threads)
    names = args.model or _default_checkpoints()
    for n in names:
        check_model(n, "controller")
    if not names:
        raise MotioncoreError(f"no checkpoints to evaluate: pass --model (none of {list(RUN_CHECKPOINTS)} "
                              f"or the bundled {list(DEMO_MODELS.values())} exist)")
    cfg = ControllerEvalConfig(args.max_clips, args.max_frames, args.max_rows, () if args.no_modes else
                               ControllerEvalConfig.modes)
    t0 = time.perf_counter()
    results = evaluate_controllers(names, cfg, progress=not args.quiet)
    print(f"Path-driven controllers on held-out test clips (up to {cfg.max_clips} clips x {cfg.max_frames} frames "
          f"driven along their own root paths; lower is better)\n")
    print(format_table(results))
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        write_json(results, args.json)
        print(f"json: {args.json}")
    return 0


# ----------------------------------------------------------------------------- registration
def _eval_subparsers(subparsers: Any) -> Any:
    """The sub-action group of ``motioncore eval`` (created if cli/evaluate.py has not added ``eval`` yet)."""
    parser = subparsers.choices.get("eval") or subparsers.add_parser("eval", help="evaluation")
    for action in parser._actions:  # argparse keeps the sub-action group only here
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parser.add_subparsers(dest="action", required=True)


def add_subcommands(subparsers: Any) -> None:
    """Register ``generate``, ``demo`` and ``eval controllers`` on the top-level subparsers."""
    g = subparsers.add_parser("generate", help="animate a character along a path.json and write a BVH")
    g.add_argument("model", help="bundled model (pfnn-biped, mann-dog) or a checkpoint path")
    g.add_argument("--path", required=True, help="path.json: points [[x, z], ...] in metres, optional fps, speed "
                                                 "(m/s), gait, facing (degrees); see docs/paths.md")
    g.add_argument("--out", required=True, help="BVH file to write (atomically)")
    g.add_argument("--frames", type=positive_int, help="output frames (default: long enough to walk the path, +1 s; a path over 60 s "
                                                    "needs it, never cut)")
    g.add_argument("--mode", choices=MODES, default="outputs", help="network evaluation form (constant, linear, "
                                                                    "cubic: PFNN's precomputed runtimes)")
    g.add_argument("--threads", type=positive_int, default=2, help="CPU threads (default 2)")
    g.set_defaults(func=_cmd_generate)

    d = subparsers.add_parser("demo", help="walk the bundled biped and dog along an S-shaped path, speeding up: BVH files "
                                          "and a PNG")
    d.add_argument("--out", default="out/demo", help="folder for biped.bvh, dog.bvh and demo.png (default out/demo)")
    d.add_argument("--threads", type=positive_int, default=2, help="CPU threads (default 2)")
    d.add_argument("--json", help="write the printed figures (paths, in-fill error, jerk, foot skate) as JSON here")
    d.set_defaults(func=_cmd_demo)

    e = _eval_subparsers(subparsers).add_parser(
        "controllers", help="PFNN vs PhaseMLP, MANN vs single expert on held-out clips: next-frame error, foot "
                            "skating, path following, PFNN runtime forms",
        description="PFNN vs PhaseMLP, MANN vs single expert on held-out clips: next-frame error, foot skating, "
                    f"path following, PFNN runtime forms. The defaults take ~2 min (132 s, {MEASURED_ON}).")
    e.add_argument("--model", action="append", help="checkpoint or bundled name (repeatable; default: "
                                                    + ", ".join(RUN_CHECKPOINTS) + " where present)")
    e.add_argument("--max-clips", type=positive_int, default=64, help="test clips driven along their own paths (default 64)")
    e.add_argument("--max-frames", type=positive_int, default=300, help="frames per rollout (default 300)")
    e.add_argument("--max-rows", type=nonneg_int, default=0, help="teacher-forced test rows (default 0: all)")
    e.add_argument("--no-modes", action="store_true", help="skip the PFNN runtime-form comparison")
    e.add_argument("--json", help="write the results as JSON here")
    e.add_argument("--threads", type=positive_int, default=2, help="CPU threads (default 2)")
    e.add_argument("--quiet", action="store_true", help="no progress bars")
    e.set_defaults(func=_cmd_eval_controllers)

