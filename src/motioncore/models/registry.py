"""Build and load models by kind; bundled checkpoints by name.

A checkpoint's JSON names its ``kind``; ``models.kinds.KINDS`` gives each kind its (Config, Model) pair so loading
is ``Model(Config(**meta["config"]))`` followed by a checked copy of the safetensors weights.
Bundled checkpoints live in ``motioncore/checkpoints/<name>.{json,safetensors}``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .checkpoint import CheckpointError, load_state_into, load_tensors, read_meta
from .kinds import KINDS, hook, kinds_for

BUNDLED = Path(__file__).resolve().parents[1] / "checkpoints"


def bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED.glob("*.json")) if BUNDLED.is_dir() else []


def resolve(name_or_path: str | Path) -> Path:
    """A bundled model name or a checkpoint path (with or without suffix) to the checkpoint base path."""
    p = Path(name_or_path)
    if str(name_or_path) in bundled_names():
        return BUNDLED / str(name_or_path)
    base = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    if base.with_name(base.name + ".json").is_file():
        return base
    if p.is_file():
        raise CheckpointError(f"{p}: not a checkpoint (a checkpoint is NAME.json with NAME.safetensors beside it, "
                              "as motioncore train writes)")
    raise CheckpointError(f"no bundled model or checkpoint {str(name_or_path)!r}; bundled: {bundled_names()}")


TASK_KINDS = {task: kinds_for(task) for task in ("infill", "controller")}  # what each command can run (models.kinds)


def check_model(name_or_path: str | Path, task: str, arg: str = "--model") -> dict[str, Any]:
    """The JSON metadata of a bundled name or checkpoint path, checked (before any work) to be a model of
    ``task`` ("infill": any-order in-filling, "controller": a path controller). Raises ``CheckpointError``
    naming ``arg``, the model and what it is instead."""
    try:
        meta = read_meta(resolve(name_or_path))
    except CheckpointError as e:
        raise CheckpointError(f"{arg} {name_or_path}: {e}") from None
    kind = meta.get("kind")
    if kind not in TASK_KINDS[task]:
        fits = [n for n in bundled_names() if read_meta(BUNDLED / n).get("kind") in TASK_KINDS[task]]
        label = {"infill": "an in-filling", "controller": "a path-controller"}[task]
        raise CheckpointError(f"{arg} {name_or_path}: a model of kind {kind} (task {meta.get('task')}); this command "
                              f"needs {label} model (kind {' or '.join(TASK_KINDS[task])}, e.g. {', '.join(fits)})")
    return meta


def build(kind: str, config: dict[str, Any]) -> torch.nn.Module:
    if kind not in KINDS:
        raise CheckpointError(f"unknown model kind {kind!r}; known: {sorted(KINDS)}")
    cfg_cls, model_cls = hook(KINDS[kind].config), hook(KINDS[kind].model)
    try:
        cfg = cfg_cls(**config)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"invalid {kind} config: {e}") from e
    return model_cls(cfg)


def load_model(name_or_path: str | Path, device: str | torch.device = "cpu") -> tuple[torch.nn.Module, dict]:
    """(model in eval mode, metadata) of a bundled name or checkpoint path."""
    base = resolve(name_or_path)
    tensors, meta = load_tensors(base)
    model = build(str(meta.get("kind")), dict(meta.get("config") or {}))
    load_state_into(model, tensors, str(base))
    return model.to(device).eval(), meta


def describe(name_or_path: str | Path) -> dict[str, Any]:
    """Listing fields from the JSON only: name, kind, task, skeleton size, fps, training data, licence, metrics."""
    base = resolve(name_or_path)
    meta = read_meta(base)
    return {"name": base.name, "kind": meta.get("kind"), "task": meta.get("task"),
            "joints": len(meta.get("skeleton", {}).get("names", [])) or None, "fps": meta.get("fps"),
            "training_data": meta.get("training_data"), "licence": meta.get("licence"),
            "metrics": meta.get("metrics", {}), "path": str(base)}
