"""A small, honest training loop shared by every model: AdamW with cosine warm restarts (as the
PFNN/MANN authors' code), minibatches from in-memory tensors, validation, progress bars, resumable
training state (safetensors + JSON, no pickle) and a loss-curve PNG.

The model-specific part is a ``loss_fn(model, batch) -> scalar`` over a dict of tensors.
"""
from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ..errors import MotioncoreError
from ..io.atomic import atomic_write
from ..models.checkpoint import CheckpointError, load_state_into, load_tensors, save_tensors

LossFn = Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 20  # passes over the training set
    batch_size: int = 32  # minibatch size (the papers use 32)
    lr: float = 1e-4  # AdamW learning rate (peak of each cosine cycle)
    weight_decay: float = 2.5e-3  # decoupled weight decay (Starke's AdamWR setting)
    restart_epochs: int = 10  # length of the first cosine cycle, in epochs; each next one doubles
    seed: int = 0  # data order and dropout
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 2  # torch intra-op threads on the CPU (set explicitly: the default can be far slower)
    max_minutes: float = 0.0  # stop after this wall time (0: no limit); the state is saved first

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "restart_epochs", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr: must be > 0, got {self.lr}")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise MotioncoreError(f"device {name!r} requested but CUDA is not available")
    return dev


def _batches(n: int, size: int, gen: torch.Generator) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=gen)
    return [perm[i:i + size] for i in range(0, n, size)]


def _opt_state_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors = {f"opt/{i}/{k}": v for i, st in sd["state"].items() for k, v in st.items()
               if isinstance(v, torch.Tensor)}
    return tensors, {"param_groups": sd["param_groups"]}


def _restore_opt(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: dict) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, v in tensors.items():
        if key.startswith("opt/"):
            _, i, k = key.split("/", 2)
            state.setdefault(int(i), {})[k] = v
    opt.load_state_dict({"state": state, "param_groups": groups["param_groups"]})


def evaluate(model: torch.nn.Module, loss_fn: LossFn, data: dict[str, torch.Tensor], batch: int = 4096) -> float:
    """Mean loss over ``data`` in eval mode (weighted by batch size)."""
    model.eval()
    n = next(iter(data.values())).shape[0]
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, batch):
            b = {k: v[i:i + batch] for k, v in data.items()}
            total += float(loss_fn(model, b)) * b[next(iter(b))].shape[0]
    model.train()
    return total / max(n, 1)


def fit(model: torch.nn.Module, loss_fn: LossFn, train: dict[str, torch.Tensor], val: dict[str, torch.Tensor],
        cfg: TrainConfig, out_dir: str | os.PathLike, resume: bool = True, progress: bool = True) -> list[dict]:
    """Train ``model`` in place; returns the per-epoch history. ``out_dir/train.state.*`` holds the
    resumable state after every epoch; ``out_dir/loss.png`` the curves. On Ctrl-C (KeyboardInterrupt),
    in any epoch, the state is saved with the current weights and optimiser moments (the partial epoch's
    progress counter, data order and schedule are rewound to the epoch's start, so a resume redoes that
    epoch from these weights), where it went is printed, and the KeyboardInterrupt is re-raised."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    dev = pick_device(cfg.device)
    model.to(dev)
    train = {k: v.to(dev) for k, v in train.items()}
    val = {k: v.to(dev) for k, v in val.items()}
    n = next(iter(train.values())).shape[0]
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=cfg.restart_epochs * steps_per_epoch, T_mult=2)
    gen = torch.Generator().manual_seed(cfg.seed)
    history: list[dict] = []
    start_epoch = 0
    state_path = out / "train.state"
    if resume and (out / "train.state.json").is_file():
        start_epoch, history = _resume(state_path, model, opt, sched, gen, cfg)
    t0 = time.perf_counter() - (history[-1]["wall_s"] if history else 0.0)
    rewind: dict[str, Any] = {}  # the unfinished epoch's start: data order and schedule
    try:
        _epochs(model, loss_fn, train, val, cfg, out, history, start_epoch, n, opt, sched, gen, t0, progress, rewind)
    except KeyboardInterrupt:
        _save_interrupted(state_path, model, opt, sched, gen, cfg, history, rewind)
        raise
    model.eval()
    return history


def _save_interrupted(path: Path, model, opt, sched, gen, cfg: TrainConfig, history: list[dict],
                      rewind: dict[str, Any]) -> None:
    """Save the resumable state after Ctrl-C: the weights as they are now, the data order and schedule as
    at the start of the unfinished epoch (``_epochs`` records them in ``rewind``), and say where."""
    if rewind.get("epochs_done") == len(history):
        gen.set_state(rewind["rng"])
        sched.load_state_dict(rewind["sched"])
    _save_state(path, model, opt, sched, gen, cfg, history)
    tqdm.write(f"interrupted: saved the weights after {len(history)} full epoch(s) and part of the next to "
               f"{path}.json / .safetensors; run the same command again to resume")


def _epochs(model, loss_fn: LossFn, train, val, cfg: TrainConfig, out: Path, history: list[dict], start_epoch: int,
            n: int, opt, sched, gen, t0: float, progress: bool, rewind: dict[str, Any]) -> None:
    state_path = out / "train.state"
    for epoch in range(start_epoch, cfg.epochs):
        rewind.update(epochs_done=len(history), rng=gen.get_state(), sched=sched.state_dict())  # Ctrl-C rewinds here
        model.train()
        running, count = 0.0, 0
        bar = tqdm(_batches(n, cfg.batch_size, gen), desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="batch",
                   disable=not progress, leave=False)
        for idx in bar:
            loss = loss_fn(model, {k: v[idx] for k, v in train.items()})
            if not torch.isfinite(loss):
                raise MotioncoreError(f"loss became {float(loss)} at epoch {epoch + 1}; lower the learning rate")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            running, count = running + float(loss.detach()), count + 1
            if count % 50 == 0:
                bar.set_postfix(loss=f"{running / count:.4f}")
        rec = {"epoch": epoch + 1, "train_loss": running / max(count, 1), "val_loss": evaluate(model, loss_fn, val),
               "lr": sched.get_last_lr()[0], "wall_s": time.perf_counter() - t0}
        history.append(rec)
        if progress:
            tqdm.write(f"epoch {rec['epoch']}: train {rec['train_loss']:.4f}  val {rec['val_loss']:.4f}  "
                       f"({rec['wall_s']:.0f} s)")
        _save_state(state_path, model, opt, sched, gen, cfg, history)
        plot_history(history, out / "loss.png")
        if cfg.max_minutes and rec["wall_s"] > cfg.max_minutes * 60:
            tqdm.write(f"stopping after {rec['wall_s'] / 60:.1f} min (max_minutes={cfg.max_minutes})")
            break


def _save_state(path: Path, model, opt, sched, gen, cfg: TrainConfig, history: list[dict]) -> None:
    tensors = {f"model/{k}": v for k, v in model.state_dict().items()}
    opt_t, groups = _opt_state_tensors(opt)
    tensors.update(opt_t)
    tensors["rng"] = gen.get_state()
    save_tensors(path, tensors, {"kind": "train_state", "train_config": asdict(cfg), "history": history,
                                 "optimizer": groups, "scheduler": sched.state_dict()})


def _resume(path: Path, model, opt, sched, gen, cfg: TrainConfig) -> tuple[int, list[dict]]:
    tensors, meta = load_tensors(path)
    if meta.get("kind") != "train_state":
        raise CheckpointError(f"{path}: not a training state")

    load_state_into(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}, str(path))
    _restore_opt(opt, tensors, meta["optimizer"])
    sched.load_state_dict(meta["scheduler"])
    gen.set_state(tensors["rng"])
    history = list(meta["history"])
    tqdm.write(f"resuming from epoch {len(history)} of {cfg.epochs} ({path}.json)")
    return len(history), history


def plot_history(history: list[dict], path: str | os.PathLike) -> None:
    """Train/val loss against epoch and wall time (PNG, written atomically)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.5))
    FigureCanvasAgg(fig)
    for ax, x, label in ((fig.add_subplot(1, 2, 1), "epoch", "epoch"), (fig.add_subplot(1, 2, 2), "wall_s", "wall time (s)")):
        xs = [h[x] for h in history]
        ax.plot(xs, [h["train_loss"] for h in history], "o-", label="train")
        ax.plot(xs, [h["val_loss"] for h in history], "s-", label="validation")
        ax.set_xlabel(label)
        ax.set_ylabel("loss")
        if min(min(h["train_loss"], h["val_loss"]) for h in history) > 0:
            ax.set_yscale("log")  # NLL losses can go negative: keep those linear
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))


def write_history(history: list[dict], path: str | os.PathLike) -> None:
    Path(path).write_text(json.dumps(history, indent=1))


def read_config(file: str | None, cls_name: str) -> dict[str, Any]:
    """The JSON object in a ``--config`` file ({} without one); MotioncoreError, one line, if it is missing,
    unreadable, not JSON or not an object (of ``cls_name`` fields)."""
    try:
        base = json.loads(Path(file).read_text()) if file else {}
    except OSError as e:
        raise MotioncoreError(f"--config {file}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MotioncoreError(f"--config {file}: not valid JSON ({e})") from None
    if not isinstance(base, dict):
        raise MotioncoreError(f"--config {file}: expected a JSON object of {cls_name} fields")
    return base


def config_from(cls: type, file: str | None, overrides: dict[str, Any]) -> Any:
    """A frozen config dataclass from an optional JSON file plus non-None overrides (flags win)."""
    base = read_config(file, cls.__name__)
    fields = set(cls.__dataclass_fields__)
    unknown = set(base) - fields
    if unknown:
        raise MotioncoreError(f"{file}: unknown {cls.__name__} fields {sorted(unknown)}; known: {sorted(fields)}")
    base.update({k: v for k, v in overrides.items() if v is not None and k in fields})
    try:
        return cls(**base)
    except (TypeError, ValueError) as e:
        raise MotioncoreError(f"{file or cls.__name__}: {e}") from None
