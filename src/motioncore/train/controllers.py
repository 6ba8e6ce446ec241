"""Training recipes for the path-driven controllers: PFNN (and its phase-as-input MLP baseline) on the
Bandai biped, MANN (and its single-expert baseline) on the dog.

Data: the registered set's *train* split; a fixed tenth of its clips (every 10th clip) is held out for
validation, so the test split stays untouched until evaluation. Loss: MSE on z-scored outputs, plus
Holden's L1 weight cost ``l1 * mean|W|``.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data import get_spec, load
from ..errors import MotioncoreError
from ..models.checkpoint import save_model
from ..models.kinds import FAMILIES, KINDS, kinds_for, recipe_family
from ..models.registry import build
from .loop import TrainConfig, fit, pick_device


@dataclass(frozen=True)
class ControllerRecipe:
    model: str = kinds_for("controller")[0]  # pfnn | phase-mlp (PFNN baseline) | mann | mann-1 (single-expert MANN baseline)
    data: str = ""  # registered dataset; default bandai for pfnn/phase-mlp, dog for mann
    hidden_dim: int = 512  # units per hidden layer
    dropout: float = 0.3  # drop probability on each layer's input (keep 0.7)
    num_experts: int = 8  # MANN experts (mann-1 forces 1)
    l1: float = 0.01  # Holden's L1 weight cost, times the mean absolute weight
    max_clips: int = 0  # use only the first N training clips (0: all); for quick runs and tests

    def __post_init__(self) -> None:
        names = [n for f in FAMILIES if f.baseline for n in (*(k.kind for k in f.kinds), f.baseline)]
        if self.model not in names:
            raise ValueError(f"model: expected {', '.join(names[:-1])} or {names[-1]}, got {self.model!r}")
        if self.hidden_dim < 1 or not 0 <= self.dropout < 1 or self.l1 < 0:
            raise ValueError("hidden_dim must be >= 1, dropout in [0, 1), l1 >= 0")

    @property
    def kind(self) -> str:
        """The checkpoint kind it trains (a family's ``--baseline`` net may be its own kind, or its main kind
        with another config: MANN-1 is a MANN with one expert)."""
        return self.model if self.model in KINDS else recipe_family(self.model).kinds[0].kind

    @property
    def gated(self) -> bool:
        """A gating network blends expert weights (MANN): its rows carry the gating input, not the phase."""
        return KINDS[self.kind].gated

    @property
    def dataset(self) -> str:
        return self.data or recipe_family(self.model).train_data


def build_rows(recipe: ControllerRecipe, split: str, progress: bool = True) -> tuple[dict[str, np.ndarray], Any, list]:
    """Feature rows (X, Y, phase or gating...) of a split, the layout and the clips."""
    clips = load(recipe.dataset, split, progress=progress)
    if recipe.max_clips:
        clips = clips[: recipe.max_clips]
    if recipe.gated:
        from motioncore.families.mann.features import mann_dataset, mann_layout

        rows = mann_dataset(clips)
        layout = mann_layout(clips[0].motion.skeleton, clips[0].motion.fps)
    else:
        from motioncore.families.pfnn.features import GAITS, pfnn_dataset, pfnn_layout

        rows = pfnn_dataset(clips)
        layout = pfnn_layout(clips[0].motion.skeleton, GAITS, clips[0].motion.fps)
    return rows, layout, clips


def make_model(recipe: ControllerRecipe, d_in: int, d_out: int, d_gate: int = 0) -> tuple[torch.nn.Module, str, dict]:
    """(model, kind, config dict)."""
    kind = recipe.kind
    cfg: dict[str, Any] = {"input_dim": d_in, "output_dim": d_out}
    if recipe.gated:
        cfg["gating_input_dim"] = d_gate
    cfg.update(hidden_dim=recipe.hidden_dim, dropout=recipe.dropout)
    if recipe.gated:   # the baseline (MANN-1) is the same net with a single expert
        cfg["num_experts"] = 1 if recipe.model != kind else recipe.num_experts
    return build(kind, cfg), kind, cfg


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p for n, p in model.named_parameters() if p.ndim >= 2]


def make_loss(recipe: ControllerRecipe, model: torch.nn.Module):
    weights = _weights(model)

    def loss_fn(m: torch.nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        if recipe.gated:
            pred = m(b["x"], b["g"])
        else:
            pred = m(b["x"], b["phase"])
        loss = torch.nn.functional.mse_loss(pred, b["y"])
        if recipe.l1 and m.training:
            loss = loss + recipe.l1 * torch.stack([w.abs().mean() for w in weights]).mean()
        return loss

    return loss_fn


def _tensors(recipe: ControllerRecipe, rows: dict[str, np.ndarray], xn, yn, idx: np.ndarray, layout) -> dict[str, torch.Tensor]:
    x = xn.transform(rows["X"][idx].astype(np.float64)).astype(np.float32)
    out = {"x": torch.from_numpy(x), "y": torch.from_numpy(yn.transform(rows["Y"][idx].astype(np.float64)).astype(np.float32))}
    if recipe.gated:
        out["g"] = out["x"][:, torch.from_numpy(np.asarray(layout.gating, dtype=np.int64))]
    else:
        out["phase"] = torch.from_numpy(rows["phase"][idx].astype(np.float32))
    return out


def _device(cfg: TrainConfig) -> str:
    """Where the run trained, for the metadata: ``cpu (2-core AMD EPYC, 1 torch thread(s))`` or the CUDA
    device's name."""
    dev = pick_device(cfg.device)
    if dev.type == "cuda":
        return f"{dev} ({torch.cuda.get_device_name(dev)})"
    info = Path("/proc/cpuinfo")
    names = [ln.split(":", 1)[1].strip() for ln in (info.read_text().splitlines() if info.is_file() else [])
             if ln.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    return f"cpu ({os.cpu_count()}-core {cpu}, {cfg.threads} torch thread(s))"


def train_controller(recipe: ControllerRecipe, cfg: TrainConfig, out_dir: str | Path, progress: bool = True,
                     resume: bool = True) -> tuple[torch.nn.Module, dict]:
    """Train, then save ``out_dir/<model>.safetensors/json`` with full metadata; returns (model, meta)."""
    from ..features.normaliser import layout_normalisers

    out = Path(out_dir)
    t0 = time.time()
    rows, layout, clips = build_rows(recipe, "train", progress)
    if len(rows["X"]) == 0:
        raise MotioncoreError(f"no training rows from {recipe.dataset}")
    val_mask = (rows["clip"] % 10) == 9  # every 10th training clip validates
    tr, va = np.flatnonzero(~val_mask), np.flatnonzero(val_mask)
    xn, yn = layout_normalisers(layout, rows["X"][tr].astype(np.float64), rows["Y"][tr].astype(np.float64))
    model, kind, mcfg = make_model(recipe, layout.d_in, layout.d_out, len(layout.gating))
    loss_fn = make_loss(recipe, model)
    history = fit(model, loss_fn, _tensors(recipe, rows, xn, yn, tr, layout), _tensors(recipe, rows, xn, yn, va, layout),
                  cfg, out, resume=resume, progress=progress)
    spec = get_spec(recipe.dataset)
    meta = {"task": "controller", "recipe": asdict(recipe), "train_config": asdict(cfg), "layout": layout.to_dict(),
            "x_norm": xn.to_dict(), "y_norm": yn.to_dict(), "skeleton": clips[0].motion.skeleton.to_dict(),
            "fps": clips[0].motion.fps, "training_data": f"{recipe.dataset} train split ({spec.description}); "
            f"{len(tr)} rows from {len(set(rows['clip'][tr].tolist()))} clips", "licence": spec.licence,
            "citation": spec.citation, "history": history, "train_wall_s": time.time() - t0,
            "rest_clip": clips[0].name, "device": _device(cfg)}
    save_model(out / recipe.model, model, kind, mcfg, meta)
    (out / f"{recipe.model}.history.json").write_text(json.dumps(history, indent=1))
    return model, meta
