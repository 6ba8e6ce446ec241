"""The model registry: checkpoints found at start-up, loaded lazily (on first use, in a worker thread).

A checkpoint is ``NAME.safetensors`` + ``NAME.json`` (see motioncore.models.checkpoint); its JSON names a
``kind``. ``LOADERS`` maps each kind to a :class:`Loader`: the request types the kind serves and a
function that builds a :class:`ServedModel` from the loaded tensors and metadata. The model owners add
their kinds there, e.g.::

    from motioncore_server.registry import register_loader
    register_loader(kind, serves, load)   # load(tensors, meta, device) -> ServedModel

motioncore_server.models registers every served kind of ``motioncore.models.kinds`` this way.

Listing (``models``, ``hello``) reads only the JSON sidecars; tensors are read by the first request
that needs the model. A model whose load fails is reported as ``model_unavailable`` (and not retried).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from motioncore.models.checkpoint import CheckpointError, load_tensors, read_meta
from motioncore.models.kinds import defaults, spec
from motioncore.wire.protocol import ModelUnavailable

log = logging.getLogger("motioncore_server")

# The fields of a checkpoint's JSON that `models` reports (when present).
INFO_FIELDS = ("skeleton", "fps", "inputs", "outputs", "training_data", "licence")


def has_object_cond(meta: dict[str, Any]) -> bool:
    """True for an any-order checkpoint trained with the hand's object (``--object-cond``: ``cond_dim`` in its
    config and the conditions' normalisation in ``cond``) on a skeleton whose root joint is joint 0 (the
    wrist): ``fill_clip`` then uses an ``object_track`` (`models` lists it as ``object_cond``)."""
    if (k := spec(meta)) is not None and k.deterministic:  # the deterministic hand in-fill reads the object when given one
        return bool(meta.get("object_cond")) and int(meta.get("root_joint") or 0) == 0
    return (bool((meta.get("config") or {}).get("cond_dim")) and "cond" in meta
            and int(meta.get("root_joint") or 0) == 0)


def listed_convention(meta: dict[str, Any]) -> list[list[float]] | None:
    """The checkpoint's ``convention`` (the training data's mean local rotations, (J, 4) WXYZ) as `models`
    lists it for the add-on's rest alignment: from a checkpoint's JSON (``{"mean_local_rotations": ...}``)
    or a served model's info (the list itself); None when it has none."""
    conv = meta.get("convention")
    if isinstance(conv, dict):
        conv = conv.get("mean_local_rotations")
    try:   # a malformed one is left out rather than breaking the whole listing
        q = None if conv is None else np.asarray(conv, np.float64)
    except (TypeError, ValueError):
        return None
    return None if q is None or q.ndim != 2 or q.shape[1] != 4 else q.round(9).tolist()


@dataclass
class ServedModel:
    """What a loader returns: a model wrapped for serving. Arrays in, arrays out; numpy at the boundary.

    ``step`` runs ONE frame for B independent requests at once (every input and output has a leading
    batch axis B); the server micro-batches concurrent single-frame rollouts through it. ``run`` serves
    a whole request (multi-frame rollouts, infill, style.adapt, retarget): it gets the request type,
    the validated input arrays, the request content and a context with ``progress(done, total)`` and
    ``check_cancelled()``, and returns ``(content, arrays)``.
    """

    name: str
    kind: str
    tasks: tuple[str, ...]                                        # request types served
    info: dict[str, Any] = field(default_factory=dict)            # skeleton, fps, inputs, outputs ...
    step: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
    run: Callable[[str, dict[str, np.ndarray], dict[str, Any], Any], tuple[dict, dict]] | None = None


@dataclass(frozen=True)
class Loader:
    tasks: tuple[str, ...]                                                   # request types the kind serves
    load: Callable[[dict[str, torch.Tensor], dict[str, Any], torch.device], ServedModel]


# kind -> Loader. Empty until the model owners register their kinds (nothing is served yet).
LOADERS: dict[str, Loader] = {}


def register_loader(kind: str, tasks: Iterable[str], load: Callable[..., ServedModel]) -> None:
    """Teach every registry created afterwards how to build models of ``kind``."""
    LOADERS[kind] = Loader(tuple(tasks), load)


@dataclass
class _Entry:
    name: str
    kind: str
    path: Path | None
    meta: dict[str, Any]
    model: ServedModel | None = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Registry:
    """Checkpoints by name; ``get(task, name)`` returns a loaded ServedModel or raises ModelUnavailable."""

    def __init__(self, device: torch.device | str = "cpu", loaders: dict[str, Loader] | None = None):
        self.device = torch.device(device)
        self.loaders = LOADERS if loaders is None else loaders
        self._entries: dict[str, _Entry] = {}

    # -- discovery (metadata only)
    def add_checkpoint(self, path: str | Path) -> str:
        """Register one checkpoint (``NAME``, ``NAME.json`` or ``NAME.safetensors``); returns its name."""
        p = Path(path)
        base = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
        meta = read_meta(base)
        if not base.with_name(base.name + ".safetensors").is_file():
            raise CheckpointError(f"{base}.safetensors not found")
        name = str(meta.get("name") or base.name)
        if name in self._entries:
            raise CheckpointError(f"two checkpoints are named {name!r} ({self._entries[name].path} and {base})")
        self._entries[name] = _Entry(name, str(meta.get("kind", "")), base, meta)
        return name

    def add_dir(self, folder: str | Path) -> list[str]:
        """Register every ``*.json`` checkpoint with a matching ``.safetensors`` in ``folder``; skip others."""
        names = []
        for js in sorted(Path(folder).glob("*.json")):
            if not js.with_suffix(".safetensors").is_file():
                continue
            try:
                names.append(self.add_checkpoint(js))
            except CheckpointError as e:
                log.warning("skipping checkpoint", extra={"fields": {"path": str(js), "error": str(e)}})
        return names

    def add_model(self, model: ServedModel) -> None:
        """Register an already built model (tests, benchmarks, debug models)."""
        self._entries[model.name] = _Entry(model.name, model.kind, None, dict(model.info), model=model)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def tasks_of(self, e: _Entry) -> tuple[str, ...]:
        if e.model is not None:
            return e.model.tasks
        loader = self.loaders.get(e.kind)
        return loader.tasks if loader else ()

    def describe(self) -> list[dict[str, Any]]:
        """One JSON-able dict per model, from metadata only (never loads)."""
        out = []
        for name in self.names():
            e = self._entries[name]
            d = {"name": name, "kind": e.kind, "tasks": list(self.tasks_of(e)),
                 **{k: e.meta.get(k) for k in INFO_FIELDS},
                 "object_cond": bool(e.meta.get("object_cond")) or has_object_cond(e.meta),
                 "convention": listed_convention(e.meta),
                 **({"hand": e.meta["hand"]} if e.meta.get("hand") in ("l", "r") else {}),   # a hands model's hand
                 "default_for": [use for use, model in defaults().items() if model == name],   # models.kinds
                 "loaded": e.model is not None,
                 "available": e.error is None and bool(self.tasks_of(e))}
            if e.error or not self.tasks_of(e):
                d["reason"] = e.error or f"no loader registered for kind {e.kind!r}"
            out.append(d)
        return out

    # -- lazy loading
    def get(self, task: str, name: str | None = None) -> ServedModel:
        """The model ``name`` (or the first, by name, that serves ``task``), loading it on first use."""
        if name is not None:
            e = self._entries.get(name)
            if e is None:
                raise ModelUnavailable(f"no model named {name!r} (known: {self.names()})")
            if task not in self.tasks_of(e):
                raise ModelUnavailable(f"model {name!r} (kind {e.kind!r}) does not serve {task!r}")
        else:
            e = next((self._entries[n] for n in self.names() if task in self.tasks_of(self._entries[n])
                      and self._entries[n].error is None), None)
            if e is None:
                raise ModelUnavailable(f"no model serving {task!r} is registered on this server "
                                       f"(known models: {self.names() or 'none'})")
        return self._load(e)

    def _load(self, e: _Entry) -> ServedModel:
        with e.lock:
            if e.model is not None:
                return e.model
            if e.error is not None:
                raise ModelUnavailable(f"model {e.name!r} failed to load: {e.error}")
            try:
                assert e.path is not None  # entries without a path are added already built
                tensors, meta = load_tensors(e.path)
                model = self.loaders[e.kind].load(tensors, meta, self.device)
            except (CheckpointError, KeyError, TypeError, ValueError, RuntimeError) as err:
                e.error = f"{type(err).__name__}: {err}"
                log.error("model load failed", extra={"fields": {"model": e.name, "error": e.error}})
                raise ModelUnavailable(f"model {e.name!r} failed to load: {e.error}") from None
            log.info("model loaded", extra={"fields": {"model": e.name, "kind": e.kind, "device": str(self.device)}})
            e.model = model
            return model


# ------------------------------------------------------------------ debug model (tests, benchmarks)

def debug_mlp(device: torch.device | str = "cpu", d_in: int = 342, d_hidden: int = 512, d_out: int = 311,
              seed: int = 0) -> ServedModel:
    """A random MLP (342 -> 512 -> 512 -> 311, the PFNN sizes) serving pfnn.rollout; ``--debug`` only.

    ``step`` maps x (B, d_in) and phase (B,) to y (B, d_out) and the next phase. ``run`` rolls out
    several frames with the input held fixed (enough to exercise progress and cancel).
    """
    g = torch.Generator().manual_seed(seed)
    dev = torch.device(device)
    ws = [(torch.randn(a, b, generator=g) / a ** 0.5).to(dev) for a, b in ((d_in, d_hidden), (d_hidden, d_hidden),
                                                                          (d_hidden, d_out))]

    @torch.inference_mode()
    def step(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h = torch.as_tensor(np.array(inputs["x"], dtype=np.float32), device=dev)  # (B, d_in); a copy: wire arrays are read-only
        for i, w in enumerate(ws):
            h = h @ w if i == len(ws) - 1 else torch.relu(h @ w)
        phase = np.mod(inputs["phase"].astype(np.float32) + np.float32(0.1), np.float32(2 * np.pi))
        return {"y": h.cpu().numpy(), "phase": phase}

    def run(task: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        frames = int(content.get("frames", 1))
        x, phase = inputs["x"][None], np.asarray(inputs["phase"], np.float32).reshape(1)
        ys, phases = [], []
        for f in range(frames):
            ctx.check_cancelled()
            out = step({"x": x, "phase": phase})
            ys.append(out["y"][0])
            phases.append(out["phase"][0])
            phase = out["phase"]
            ctx.progress(f + 1, frames)
        return {"frames": frames}, {"y": np.stack(ys), "phase": np.asarray(phases, np.float32)}

    return ServedModel("debug.mlp", "debug.mlp", ("pfnn.rollout",),
                       {"skeleton": None, "fps": 60, "inputs": {"x": [d_in], "phase": []},
                        "outputs": {"y": [d_out], "phase": []}, "training_data": None, "licence": None},
                       step=step, run=run)
