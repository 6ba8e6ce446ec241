"""Checkpoints: safetensors weights plus a JSON sidecar. No pickle, no code loaded from files.

A checkpoint ``NAME`` is two files, ``NAME.safetensors`` and ``NAME.json``. The JSON holds
``{"format": 1, "kind": "<model kind>", "config": {...}, ...metadata}``: metadata always names the
training data and its licence. Loading builds ``Model(Config(**config))`` and checks every tensor's
name, shape and dtype against it before copying, so a crafted file cannot smuggle in anything else.

Training state (optimizer moments, step counters) uses the same scheme with a ``.state`` suffix.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import MotioncoreError
from ..io.atomic import atomic_write, atomic_write_text

FORMAT = 1


class CheckpointError(MotioncoreError):
    """A checkpoint is missing, malformed, or does not match its config."""


def _paths(path: str | os.PathLike) -> tuple[Path, Path]:
    p = Path(path)
    base = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    return base.with_name(base.name + ".safetensors"), base.with_name(base.name + ".json")


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor], meta: dict[str, Any],
                 half: bool = False) -> Path:
    """Write ``NAME.safetensors`` and ``NAME.json`` atomically; returns the JSON path. ``half`` stores
    floating tensors as fp16 (loading casts back to the model's dtype)."""
    st, js = _paths(path)
    out = {k: (v.detach().to(torch.float16) if half and v.is_floating_point() else v.detach()).contiguous().cpu()
           for k, v in tensors.items()}
    atomic_write(st, lambda tmp: save_file(out, tmp))
    doc = {"format": FORMAT, **meta}
    atomic_write_text(js, json.dumps(doc, indent=1))
    return js


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    st, js = _paths(path)
    for p in (st, js):
        if not p.is_file():
            raise CheckpointError(f"checkpoint file {p} not found")
    try:
        meta = json.loads(js.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{js}: not valid JSON ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{js}: expected an object with format {FORMAT}, got {str(meta)[:80]!r}")
    try:
        tensors = load_file(st)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{st}: not a readable safetensors file ({e})") from e
    return tensors, meta


def save_model(path: str | os.PathLike, model: torch.nn.Module, kind: str, config: dict[str, Any],
               meta: dict[str, Any], half: bool = False) -> Path:
    """Save a model; ``meta`` must name ``training_data`` and ``licence``."""
    for key in ("training_data", "licence"):
        if key not in meta:
            raise CheckpointError(f"checkpoint metadata must name {key!r}")
    return save_tensors(path, model.state_dict(), {"kind": kind, "config": config, **meta}, half=half)


def load_state_into(model: torch.nn.Module, tensors: dict[str, torch.Tensor], where: str) -> None:
    """Copy ``tensors`` into ``model`` after checking names, shapes and dtypes (floats may differ in width)."""
    expected = model.state_dict()
    missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{where}: tensor names do not match the config (missing {missing[:5]}, "
                              f"unexpected {extra[:5]})")
    for k, ref in expected.items():
        t = tensors[k]
        if tuple(t.shape) != tuple(ref.shape):
            raise CheckpointError(f"{where}: tensor {k!r} has shape {tuple(t.shape)}, config says {tuple(ref.shape)}")
        if t.is_floating_point() != ref.is_floating_point():
            raise CheckpointError(f"{where}: tensor {k!r} has dtype {t.dtype}, expected {ref.dtype}")
        if not t.is_floating_point() and t.dtype != ref.dtype:
            raise CheckpointError(f"{where}: tensor {k!r} has dtype {t.dtype}, expected {ref.dtype}")
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"{where}: tensor {k!r} holds NaN or inf")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in tensors.items()})


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Only the JSON sidecar (cheap: for listings)."""
    _, js = _paths(path)
    try:
        return json.loads(js.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{js}: {e}") from e
