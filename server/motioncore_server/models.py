"""ServedModels for every kind of checkpoint the server runs, by ``models.kinds``' loader name (``LOADERS``): the
in-fill (``load_infill``, ``infill.InfillModel``: the body and hands in-fill models and the any-order ones, the
rotation form of ``infill`` and ``adapt``), the path controllers (``load_controller``: kinds ``pfnn``, ``phase-mlp`` and ``mann``)
and the style learnet (``load_style``).

Importing this module registers their loaders (``registry.register_loader``); ``bundled_checkpoints()``
lists the checkpoints shipped with motioncore for the server to register lazily at start-up.

A controller serves whole requests through ``run`` only (no single-frame ``step``): a request carries a
root path (docs/protocol.md, ``pfnn.rollout`` / ``mann.rollout`` path form), already validated by the
handler into ``points`` (N, 2) and optional ``speed`` / ``facing`` (N,) and ``gait`` (N, C) arrays plus
content fields ``gait`` (names), ``frames``. The network runs on the server's device (``--device``);
the per-frame features and the pose decoding stay in numpy on the CPU.

``learnet-pfnn`` checkpoints (``learnet-biped``) serve ``style.adapt``: an exemplar clip (rotation form)
or a style code ``z``, plus the same path form; the path is walked by the learnet's PFNN with the
exemplar's code baked in: the encoder's code fitted to the exemplar at request time (`motioncore.families.style.generate`).
"""
from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from motioncore.errors import MotioncoreError
from motioncore.models.checkpoint import load_state_into
from motioncore.models.kinds import KINDS, spec
from motioncore.models.registry import BUNDLED, build, bundled_names
from motioncore.tasks.locomotion import UNITS_PER_METRE, Controller
from motioncore.tasks.paths import Path as RootPath
from motioncore.wire.protocol import InvalidRequest

from .checks import MAX_ROLLOUT_FRAMES
from .infill import load_infill
from .registry import ServedModel, register_loader

log = logging.getLogger("motioncore_server")



def bundled_checkpoints() -> list[Path]:
    """Base paths (no suffix) of the checkpoints bundled with motioncore."""
    return [BUNDLED / n for n in bundled_names()]


def skeleton_info(ctl: Controller) -> dict[str, Any]:
    sk = ctl.skeleton
    return {"joints": list(sk.names), "parents": [int(p) for p in sk.parents]}


def rollout_path(ctl: Controller, name: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
    """One path-driven rollout for a validated request; progress and cancellation through ``ctx``."""
    gait: Any = inputs.get("gait")
    if gait is None:
        gait = content.get("gait")
    try:
        path = RootPath(np.asarray(inputs["points"], np.float64),
                        speed=None if "speed" not in inputs else np.asarray(inputs["speed"], np.float64),
                        gait=None if gait is None else (tuple(gait) if isinstance(gait, list) else gait),
                        facing=None if "facing" not in inputs else np.asarray(inputs["facing"], np.float64))
        frames = content.get("frames")
        if frames is None:
            frames = ctl.default_frames([ctl.track(path)])
        frames = int(frames)
        if frames > MAX_ROLLOUT_FRAMES:
            raise InvalidRequest(f"field 'frames': the path needs {frames} frames, more than the limit "
                                 f"{MAX_ROLLOUT_FRAMES}; send 'frames' or a shorter path")
        # a per-request view of the controller whose predict (once per frame) reports and checks
        view = copy.copy(ctl)
        done = [0]

        def predict(x: np.ndarray, phase: np.ndarray | None = None, normalised: bool = False) -> np.ndarray:
            ctx.check_cancelled()
            y = Controller.predict(view, x, phase, normalised)
            done[0] += 1
            if done[0] % 10 == 0 or done[0] == frames:
                ctx.progress(done[0], frames)
            return y

        view.predict = predict  # type: ignore[method-assign]
        ro = view.rollout(path, frames=frames)
    except InvalidRequest:
        raise
    except (MotioncoreError, ValueError) as e:   # PathError names the field
        raise InvalidRequest(f"path: {e}") from None
    f32 = lambda a: np.ascontiguousarray(a[0], np.float32)  # noqa: E731  (the single character)
    arrays = {"rotations": f32(ro.rotations), "translations": f32(ro.positions), "root": f32(ro.root),
              "yaw": f32(ro.yaw), "offsets": np.asarray(ctl.skeleton.offsets, np.float32)}
    if ro.contacts is not None:
        arrays["contacts"] = f32(ro.contacts)
    if ro.phase is not None:
        arrays["phase"] = f32(ro.phase)
    out = {"frames": ro.frames, "fps": ro.fps, "units": "cm", "units_per_metre": UNITS_PER_METRE,
           "skeleton": skeleton_info(ctl), "labels": list(ctl.labels), "model": name}
    return out, arrays


def load_controller(tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device) -> ServedModel:
    """Registry loader for path-controller checkpoints (``models.kinds``: task ``controller``)."""
    kind = str(meta.get("kind"))
    model = build(kind, dict(meta.get("config") or {}))
    load_state_into(model, tensors, str(meta.get("name") or meta.get("bundled_name") or kind))
    ctl = Controller.from_model(model.to(device).eval(), meta)  # features on the CPU, the network on device
    name = str(meta.get("name") or meta.get("bundled_name") or kind)

    def run(task: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        if "points" not in inputs:
            raise InvalidRequest(f"model {name!r} is a path controller: send the path form of {task!r} "
                                 "(buffer 'points' (N, 2) in metres), not feature vectors")
        return rollout_path(ctl, name, inputs, content, ctx)

    info = {k: meta.get(k) for k in ("skeleton", "fps", "training_data", "licence")}
    info.update({"device": str(device), "labels": list(ctl.labels)})
    return ServedModel(name, kind, spec(kind).serves, info, step=None, run=run)


def load_style(tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device) -> ServedModel:
    """Registry loader for the style learnet's checkpoints (``models.kinds``: loader ``style``): ``style.adapt``
    (docs/protocol.md)."""
    from motioncore.families.style.generate import StyleAdapter

    kind = str(meta.get("kind"))
    model = build(kind, dict(meta.get("config") or {}))
    name = str(meta.get("name") or meta.get("bundled_name") or kind)
    load_state_into(model, tensors, name)
    ad = StyleAdapter(model.to(device).eval(), meta)  # type: ignore[arg-type]
    Z = ad.model.pfnn.cfg.style_dim

    def run(task: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        missing: list[str] = []
        if "z" in inputs:
            z, source = np.asarray(inputs["z"], np.float32).reshape(-1), "z"
            if z.shape != (Z,):
                raise InvalidRequest(f"array 'z' must have shape ({Z},) for model {name!r}, got {tuple(inputs['z'].shape)}")
        else:
            try:
                motion, missing = ad.motion(inputs["rotations"], inputs["root"], content.get("joints"),
                                            content.get("fps"), content.get("root_space") == "ground")
                if ad.prior is None:  # an older checkpoint: the encoder alone
                    z, fit, quality = ad.code(motion), None, None
                else:  # the encoder's code fitted to the exemplar (families.style.adapt)
                    z, rep = ad.fit_report(motion)
                    fit = {"steps": rep["steps"], "best_step": rep["best_step"], "rows": rep["rows"],
                           "seconds": round(rep["fit_s"], 3)}
                    quality = rep["quality"]
            except MotioncoreError as e:
                raise InvalidRequest(str(e)) from None
            source = "exemplar"
        out, arrays = rollout_path(ad.controller(z), name, inputs, content, ctx)
        out.update(style_from=source, missing_joints=missing)
        if source == "exemplar":
            out.update(code_fit=fit, exemplar_quality=quality)
        arrays["z"] = np.asarray(z, np.float32)
        return out, arrays

    info = {k: meta.get(k) for k in ("skeleton", "fps", "training_data", "licence", "metrics")}
    info.update({"device": str(device), "labels": list(ad.layout.labels), "z_dim": Z,
                 "exemplar_min_s": round((ad.min_rows + 2 * ad.fps) / ad.fps, 2)})
    return ServedModel(name, kind, spec(kind).serves, info, step=None, run=run)


LOADERS = {"infill": load_infill, "controller": load_controller, "style": load_style}   # models.kinds' loader names
for _k in KINDS.values():   # every served kind, once, from its family's record
    if _k.loader is not None:
        register_loader(_k.kind, _k.serves, LOADERS[_k.loader])
