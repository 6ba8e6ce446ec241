"""The infill-body recipe's resumable training loop (``train_infill_body``), its state in the run folder, its
validation and curve, and the ``motioncore train infill-body`` entry (train, or ``--export``).

Every ``save_every`` seconds the whole state is written atomically to ``RUN/state.safetensors`` + ``RUN/state.json``;
each step's batch is drawn from ``default_rng([seed, step])``, so a resumed run continues exactly. Ctrl-C or
SIGTERM ends the current step, saves the state and then stops (a second Ctrl-C stops at once). The recipe's
design: ``families.body.train``.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from motioncore.errors import MotioncoreError
from motioncore.families.body.train import BodyRecipe
from motioncore.families.body.train_batch import Net, batch_loss, sample_batch
from motioncore.families.body.train_data import build_data, contact_labels, validation_sets
from motioncore.families.body.train_export import export

__all__ = ["train_infill_body", "add_infill_body_arguments", "train_infill_body_from_args"]


def validate(model, net: Net, val: dict, lengths=(5, 15, 30, 45)) -> dict[str, dict[str, dict[str, float]]]:
    """Per metric ("L2Q", "L2P": the model's over Interp's; "Jerk": the model's over the truth's), validation set
    and length."""
    from motioncore.eval.baselines import interp
    from motioncore.eval.infill import evaluate_infill
    from motioncore.families.body.fill import run_model

    def fill(skeleton, q, p, n_past, n_trans):
        T, J = q.shape[1], q.shape[2]
        known = np.ones((len(q), T, J + 1), bool)
        known[:, n_past:n_past + n_trans] = False
        return run_model(model, net.layout, np.nan_to_num(q), np.nan_to_num(p), known)

    out: dict[str, dict[str, dict[str, float]]] = {"L2Q": {}, "L2P": {}, "Jerk": {}}
    for name, (q, p) in val["sets"].items():
        res = evaluate_infill({"model": fill, "interp": interp}, net.layout.skeleton, q, p, val["mean"], val["std"],
                              lengths=lengths, progress=False)
        for k in ("L2Q", "L2P"):
            out[k][name] = {str(n): res["model"][k][str(n)] / res["interp"][k][str(n)] for n in lengths}
        out["Jerk"][name] = {str(n): res["model"]["Jerk"][str(n)] for n in lengths}
    return out


def unseen_score(val: dict[str, dict[str, float]]) -> float | None:
    """The model-selection score of one validation's L2Q over Interp: the mean over the CMU subjects never
    trained on (sets ``cmu05``, ``cmu07``) at 15 and 30 frames; None where those sets were not validated."""
    sets = [k for k in val if k.startswith("cmu")]
    if not sets:
        return None
    return float(np.mean([val[k][n] for k in sets for n in ("15", "30") if n in val[k]]))


def _save_best(run: Path, ema) -> None:
    """The EMA weights of the best validation so far, atomically (``RUN/best.safetensors``)."""
    from safetensors.torch import save_file

    tmp = run / ".best-tmp.safetensors"
    save_file({k: v.detach().cpu().contiguous() for k, v in ema.state_dict().items()}, str(tmp))
    tmp.replace(run / "best.safetensors")


def _lr(recipe: BodyRecipe, step: int, wall: float) -> float:
    warm = min(1.0, (step + 1) / recipe.warmup)
    frac = min(1.0, wall / (recipe.minutes * 60.0))
    return recipe.lr * warm * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * frac)))


def _save_state(run: Path, model, ema, opt, state: dict) -> None:
    from safetensors.torch import save_file

    from motioncore.io.atomic import atomic_write, atomic_write_text
    from motioncore.train.loop import _opt_state_tensors

    tensors = {f"model/{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tensors.update({f"ema/{k}": v.detach().cpu().contiguous() for k, v in ema.state_dict().items()})
    opt_t, groups = _opt_state_tensors(opt)
    tensors.update({k: v.cpu().contiguous() for k, v in opt_t.items()})
    atomic_write(run / "state.safetensors", lambda tmp: save_file(tensors, tmp))
    atomic_write_text(run / "state.json", json.dumps({**state, "opt_groups": groups}, indent=1))


def _load_state(run: Path, model, ema, opt) -> dict | None:
    if not (run / "state.json").is_file():
        return None
    from safetensors.torch import load_file

    from motioncore.train.loop import _restore_opt

    state = json.loads((run / "state.json").read_text())
    t = load_file(str(run / "state.safetensors"))
    model.load_state_dict({k[6:]: v for k, v in t.items() if k.startswith("model/")})
    ema.load_state_dict({k[4:]: v for k, v in t.items() if k.startswith("ema/")})
    _restore_opt(opt, {k: v for k, v in t.items() if k.startswith("opt/")}, state.pop("opt_groups"))
    return state


def _pick_device(asked: str | None) -> str:
    """``--device`` (auto | cpu | cuda[:N]; default cpu for this recipe: one thread beats a busy GPU nowhere)."""
    import torch

    if asked in (None, "", "cpu"):
        return "cpu"
    if asked == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if asked.startswith("cuda") and not torch.cuda.is_available():
        raise MotioncoreError(f"--device {asked}: this machine has no CUDA device (torch {torch.__version__})")
    return asked


def _device_name(device: str, threads: int) -> str:
    """What trained this run last, for the checkpoint's metadata: the GPU's name, or the CPU and its threads."""
    import platform

    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.machine()}, {threads} thread(s))"


def _optimizer_to(opt, device: str) -> None:
    """The optimiser's state tensors onto ``device`` (a run saved on one machine resumed on another)."""
    for st in opt.state.values():
        for k, v in st.items():
            if hasattr(v, "to") and getattr(v, "dim", lambda: 1)() > 0:
                st[k] = v.to(device)


def plot_curve(history: list[dict], path: Path) -> None:
    """Training loss and validation L2Q / Interp against wall time (PNG, atomic)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from motioncore.io.atomic import atomic_write

    fig = Figure(figsize=(15, 4), layout="constrained")
    FigureCanvasAgg(fig)
    a, b, c = fig.subplots(1, 3)
    tr = [h for h in history if "loss" in h]
    a.plot([h["wall_s"] / 60 for h in tr], [h["loss"] for h in tr], "-")
    a.set_xlabel("wall time (min)")
    a.set_ylabel("training loss (unweighted)")
    a.set_yscale("log")
    a.grid(alpha=0.3)
    for ax, key, label in ((b, "val", "L2Q / Interp"), (c, "val_l2p", "L2P / Interp")):
        va = [h for h in history if key in h]
        names = list(va[-1][key]) if va else []
        for i, name in enumerate(names):
            vn = [h for h in va if name in h[key]]  # a set added on a resume starts there
            for n, style in zip(("5", "15", "30", "45"), ("-", "--", "-.", ":")):
                ax.plot([h["wall_s"] / 60 for h in vn], [h[key][name][n] for h in vn], style,
                        color=f"C{i}", label=f"{name} @{n}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xlabel("wall time (min)")
        ax.set_ylabel(f"{label} (validation)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle("infill-body training (one CPU thread)")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))


@contextmanager
def _stop_requests() -> Iterator[list[int]]:
    """While training, SIGINT (Ctrl-C) and SIGTERM append their number to the yielded list instead of raising:
    the loop finishes its step and saves the state first. A second one raises KeyboardInterrupt at once."""
    asked: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield asked
        return

    def handler(signum: int, frame: object) -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(signum)
        print("stopping after this step and saving the run (Ctrl-C again: stop at once, losing the steps since the "
              "last save)", file=sys.stderr, flush=True)

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, handler)
    try:
        yield asked
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def train_infill_body(recipe: BodyRecipe, run: Path, max_minutes: float | None = None, progress: bool = True,
                      val_sets: dict | None = None, data: dict | None = None, max_steps: int | None = None,
                      warm_start: str | None = None, device: str = "cpu") -> dict:
    """Train (or resume) in ``run``; stops after ``max_minutes`` of this call, at ``max_steps`` (in all) or at the
    recipe's budget. Returns the final state dict. ``warm_start``: a checkpoint (e.g. the bundled infill-body) whose
    weights start a run that has no state in ``run`` (a new machine: the schedule and optimiser start afresh).
    Ctrl-C / SIGTERM: the state is saved after the current step, then KeyboardInterrupt is raised. ``device``: where
    the model trains (a lent GPU: "cuda"); the state is saved on the CPU, so a run moves between machines."""
    with _stop_requests() as asked:
        state = _train(recipe, run, max_minutes, progress, val_sets, data, max_steps, warm_start, asked, device)
    if asked:
        print(f"stopped at step {state['step']}; the state is saved in {run}: the same command resumes", file=sys.stderr)
        raise KeyboardInterrupt
    return state


def _train(recipe: BodyRecipe, run: Path, max_minutes: float | None, progress: bool, val_sets: dict | None,
           data: dict | None, max_steps: int | None, warm_start: str | None, asked: list[int],
           device: str = "cpu") -> dict:
    import torch

    from motioncore.families.body.model import InfillBody, InfillBodyConfig

    torch.set_num_threads(recipe.threads)
    run.mkdir(parents=True, exist_ok=True)
    data = data or build_data(recipe.data, run.parent / "cache", progress)
    net = Net(data["skeleton"])
    if recipe.contacts and "contacts" not in data:
        data = {**data, "contacts": contact_labels(data, run.parent / "cache")}
    torch.manual_seed(recipe.seed)  # weight initialisation
    cfg = InfillBodyConfig(net.layout.num_model_joints, recipe.d_model, recipe.n_layers, recipe.n_heads, recipe.d_ff,
                           dropout=recipe.dropout, basis=recipe.basis, contacts=len(net.layout.body.feet) if recipe.contacts else 0)
    model = InfillBody(cfg)
    ema = InfillBody(cfg)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    state = _load_state(run, model, ema, opt)
    model.to(device)
    ema.to(device)
    _optimizer_to(opt, device)
    if state is None:
        state = {"step": 0, "wall_s": 0.0, "history": [], "recipe": recipe.to_dict(), "config": cfg.to_dict()}
        if warm_start:  # a new machine without the run's state: start from a checkpoint's weights (fp16 -> fp32)
            from motioncore.models.registry import load_model

            init, meta = load_model(warm_start)
            shape = ("num_joints", "d_model", "n_layers", "n_heads", "d_ff", "max_frames")
            if any(meta.get("config", {}).get(k) != cfg.to_dict()[k] for k in shape):
                raise MotioncoreError(f"--warm-start {warm_start}: its config {meta.get('config')} is not this "
                                      f"recipe's {cfg.to_dict()}")
            # the transformer and its residual head carry over (a new basis re-reads the same per-frame residual);
            # a contact output the checkpoint lacks starts from its fresh initialisation
            for m in (model, ema):
                missing, unexpected = m.load_state_dict({k: v.to(device) for k, v in init.state_dict().items()},
                                                        strict=False)
                if unexpected or any(not k.startswith("contact.") for k in missing):
                    raise MotioncoreError(f"--warm-start {warm_start}: weights do not match ({missing}, {unexpected})")
            state["warm_start"] = {"from": str(warm_start), "steps": meta.get("steps"),
                                   "train_wall_s": meta.get("train_wall_s")}
    elif state["recipe"] != recipe.to_dict():
        changed = {k: (state["recipe"].get(k), v) for k, v in recipe.to_dict().items() if state["recipe"].get(k) != v}
        print(f"resuming {run} with changed recipe fields {changed}", file=sys.stderr)
        state["recipe"] = recipe.to_dict()
    state["device"] = _device_name(device, recipe.threads)
    if val_sets is None:
        val_sets = validation_sets(data["skeleton"], data["convention"], recipe.val_windows, progress)
    print(f"{data['describe']}; {sum(p.numel() for p in model.parameters()):,} parameters; "
          f"resuming at step {state['step']} ({state['wall_s'] / 60:.1f} min)" if state["step"] else
          f"{data['describe']}; {sum(p.numel() for p in model.parameters()):,} parameters", file=sys.stderr)
    t0 = time.monotonic()
    wall0 = state["wall_s"]
    last_save = last_val = time.monotonic()
    run_loss, run_n = 0.0, 0
    budget = recipe.minutes * 60.0
    stop = None if max_minutes is None else max_minutes * 60.0
    model.train()
    while True:
        now = time.monotonic()
        wall = wall0 + now - t0
        done = bool(asked) or wall >= budget or (stop is not None and now - t0 >= stop) or (
            max_steps is not None and state["step"] >= max_steps)
        if (done and not asked) or now - last_val >= recipe.val_every or state["step"] == 0:
            scores = validate(ema, net, val_sets)
            val = scores["L2Q"]
            state["history"].append({"step": state["step"], "wall_s": wall, "val": val, "val_l2p": scores["L2P"],
                                     "val_jerk": scores["Jerk"]})
            left = min(budget - wall, np.inf if stop is None else stop - (now - t0))
            eta = " (done)" if done else f" (about {max(left, 0.0) / 60:.0f} min left)"
            print(f"step {state['step']} {wall / 60:.1f} min{eta}: " + " | ".join(
                f"{m}{'/Interp' if m != 'Jerk' else '/truth'} " + "; ".join(
                    f"{k} " + " / ".join(f"{v[n]:.3f}" for n in v) for k, v in sc.items())
                for m, sc in scores.items()), file=sys.stderr, flush=True)
            score = unseen_score(val)
            if score is not None and score < state.get("best", {}).get("score", np.inf):
                _save_best(run, ema)
                state["best"] = {"step": state["step"], "wall_s": wall, "score": score, "val": val}
                state["wall_s"] = wall  # the best weights and the state that names them are saved together
                _save_state(run, model, ema, opt, state)
                last_save = time.monotonic()
            plot_curve(state["history"], run / "curve.png")
            last_val = time.monotonic()
        if done or time.monotonic() - last_save >= recipe.save_every:
            state["wall_s"] = wall0 + time.monotonic() - t0
            _save_state(run, model, ema, opt, state)
            last_save = time.monotonic()
        if done:
            return state
        rng = np.random.default_rng([recipe.seed, state["step"]])
        r, p, k, gap, labels = sample_batch(rng, data, recipe)
        for g in opt.param_groups:
            g["lr"] = _lr(recipe, state["step"], wall)
        loss, raw = batch_loss(model, net, r, p, k, gap, recipe.loss, contacts=labels, foot_weight=recipe.foot_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1.0 - recipe.ema)
        state["step"] += 1
        run_loss += float(raw.detach())
        run_n += 1
        if run_n == 100:
            state["history"].append({"step": state["step"], "wall_s": wall0 + time.monotonic() - t0,
                                     "loss": run_loss / run_n})
            run_loss, run_n = 0.0, 0


def add_infill_body_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("infill-body")
    g.add_argument("--body-data", choices=["bandai+cmu", "cmu", "all"], default=None,
                   help="training data: Bandai train + CMU train subjects (default), CMU alone (permissive), or "
                        "all: Bandai + CMU + Bandai's standing gestures")
    g.add_argument("--gesture-share", type=float, default=None,
                   help="all: the share of each batch drawn from Bandai's gestures (default 0.2)")
    g.add_argument("--posture-deg", type=float, default=None,
                   help="augmentation: each joint turned by a fixed random rotation per window, this many degrees "
                        "(normal; default 0: off), as another performer stands")
    g.add_argument("--root-height-cm", type=float, default=None,
                   help="augmentation: the root's height moved per window by up to this many cm (default 0)")
    g.add_argument("--basis", choices=["sine", "spline"], default=None,
                   help="the correction's curves: a bump per gap (sine: infill-body) or one C2 spline through the "
                        "keys (spline, the default: infill-body-spline)")
    g.add_argument("--no-contacts", action="store_true", help="no contact output (default: one per foot and toe); "
                   "with --export: the checkpoint without the run's contact output")
    g.add_argument("--select", choices=["last", "unseen"], default=None,
                   help="--export writes the last EMA weights (default) or those that scored best on CMU 05 and 07, "
                        "performers never trained on")
    g.add_argument("--cmu-share", type=float, default=None,
                   help="bandai+cmu: the share of each batch drawn from the CMU clips (default 0.5)")
    g.add_argument("--minutes", type=float, default=None,
                   help="wall-time budget of the learning-rate schedule, cumulative over resumes (default 110)")
    g.add_argument("--warm-start", default=None, metavar="CHECKPOINT",
                   help="a run without saved state starts from these weights (e.g. infill-body: the last bundled)")
    g.add_argument("--tokens", type=int, default=None, help="frames per batch (default 2560; a GPU takes 40960)")
    g.add_argument("--foot-weight", type=float, default=None,
                   help="the feet's velocity error where the capture's are down, in the loss (default 4)")
    g.add_argument("--pack", default=None, metavar="PATH", help="write a compact slice of the training data and the "
                   "validation windows (about 18 MB, .npz) for a machine without the mocap, and exit")
    g.add_argument("--data-pack", default=None, metavar="PATH", help="train from such a pack instead of the mocap")
    g.add_argument("--export", default=None, help="(infill-body; run folder: --out) write the EMA weights as a checkpoint (fp16) to this path and exit")


def train_infill_body_from_args(args: argparse.Namespace) -> int:
    over = {"data": args.body_data, "cmu_share": args.cmu_share, "minutes": args.minutes, "threads": args.threads,
            "seed": getattr(args, "seed", None), "d_model": getattr(args, "d_model", None),
            "n_layers": getattr(args, "n_layers", None), "lr": getattr(args, "lr", None),
            "tokens": getattr(args, "tokens", None), "foot_weight": getattr(args, "foot_weight", None),
            "gesture_share": args.gesture_share, "posture_deg": args.posture_deg,
            "root_height_cm": args.root_height_cm, "dropout": getattr(args, "dropout", None), "select": args.select,
            "basis": args.basis, "contacts": False if args.no_contacts else None}
    recipe = BodyRecipe(**{**BodyRecipe().to_dict(), **{k: v for k, v in over.items() if v is not None}})
    run = Path(args.out or ("runs/infill-body-cmu" if recipe.data == "cmu" else "runs/infill-body"))
    if args.pack:
        from motioncore.families.body.train_pack import write_pack

        data = build_data(recipe.data, run.parent / "cache", not getattr(args, "quiet", False))
        print(write_pack(data, validation_sets(data["skeleton"], data["convention"], recipe.val_windows,
                                               not getattr(args, "quiet", False)), Path(args.pack)))
        return 0
    data = val = None
    if args.data_pack:
        from motioncore.families.body.train_pack import load_pack

        data, val = load_pack(Path(args.data_pack))
    if args.export:
        if not (run / "state.json").is_file():
            raise MotioncoreError(f"--export: no training state in {run} (train first)")
        print(export(run, Path(args.export), Path(args.export).stem, data=data, contacts=not args.no_contacts))
        return 0
    state = train_infill_body(recipe, run, args.max_minutes or None, progress=not getattr(args, "quiet", False),
                              warm_start=args.warm_start, device=_pick_device(args.device), data=data, val_sets=val)
    print(f"{run}: step {state['step']}, {state['wall_s'] / 60:.1f} min; curve {run / 'curve.png'}; "
          f"export with --export PATH")
    return 0
