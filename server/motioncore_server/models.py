"""ServedModels for every kind of checkpoint the server runs, by ``models.kinds``' loader name (``LOADERS``): the
in-fill (``load_infill``: the body and hands in-fill models and the any-order ones, the rotation form of
``infill`` and ``adapt``), the path controllers (``load_controller``: kinds ``pfnn``, ``phase-mlp`` and ``mann``)
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

from motioncore.errors import MotioncoreError, WholeFramesError
from motioncore.models.checkpoint import load_state_into
from motioncore.models.kinds import KINDS, spec
from motioncore.models.registry import BUNDLED, build, bundled_names
from motioncore.tasks.locomotion import UNITS_PER_METRE, Controller
from motioncore.tasks.paths import Path as RootPath
from motioncore.wire.protocol import InvalidRequest, WholeFramesRequired

from .body import AdaptCache, adapt_body
from .checks import MAX_ROLLOUT_FRAMES
from .registry import ServedModel, has_object_cond, register_loader

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


def load_infill(tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device) -> ServedModel:
    """Registry loader for in-filling checkpoints (``models.kinds``: loader ``infill``; sampling or deterministic):
    the rotation form of ``infill`` (docs/protocol.md), run by ``motioncore.tasks.infill.fill_clip`` on the
    server's device; ``adapt`` (Learn This Action) for a kind that learns by that request."""
    from motioncore.tasks.infill import fill_clip_at

    kind = str(meta.get("kind"))
    k = spec(kind)
    model = build(kind, dict(meta.get("config") or {}))
    name = str(meta.get("name") or meta.get("bundled_name") or kind)
    load_state_into(model, tensors, name)
    model = model.to(device).eval()
    J = len(meta["skeleton"]["names"])
    whole_frames = bool(getattr(model.cfg, "group_frames", False))
    deterministic = k.deterministic  # one answer: temperature and samples repeat it

    model_names = list(meta["skeleton"]["names"])
    object_cond = has_object_cond(meta)

    def mapped_inputs(inputs: dict[str, np.ndarray], content: dict[str, Any]):
        """The request on the model's skeleton: (q (T, J, 4), known, fill, mapped, src, rest joints, names)."""
        if "rotations" not in inputs:
            raise InvalidRequest(f"model {name!r} fills rotations: send buffers 'rotations' (T, {J}, 4), 'root' "
                                 f"(T, 3) and 'known', not feature vectors")
        rot, known, fill = inputs["rotations"], inputs["known"], inputs.get("fill")
        T, Jin = rot.shape[:2]
        names = content.get("joints")
        if names is None and Jin != J:
            raise InvalidRequest(f"array 'rotations' has {Jin} joints; model {name!r} is for the {J}-joint skeleton "
                                 f"in its info (`models`): send that layout or name your joints in 'joints'")
        names = list(names) if names is not None else model_names
        col = {n: i for i, n in enumerate(names)}
        src = np.array([col.get(n, -1) for n in model_names])  # per model joint: the request's column or -1
        mapped = src >= 0
        if not mapped.any():
            raise InvalidRequest(f"field 'joints': no name matches the model's skeleton {model_names[:4]}...")

        def to_model(mask: np.ndarray, missing: bool) -> np.ndarray:
            m = np.repeat(mask[:, None], Jin + 1, 1) if mask.ndim == 1 else mask
            out = np.full((T, J + 1), missing)
            out[:, :J][:, mapped] = m[:, src[mapped]]
            out[:, J] = m[:, Jin]
            return out

        km = to_model(known, False)  # joints the request lacks are unknown ...
        fm = None if fill is None else to_model(fill, True)  # ... and filled
        rest: list[str] = []
        if (whole_frames or deterministic) and not mapped.all():
            # a whole-frame checkpoint needs every joint on a keyed frame: joints the rig lacks are held
            # at the rest pose (identity) on the frames where every joint it has is keyed
            full = km[:, :J][:, mapped].all(axis=1) & km[:, J]
            km[:, :J][:, ~mapped] = full[:, None]
            if fm is not None:
                fm[:, :J][:, ~mapped] = ~full[:, None]
            rest = [n for n, m in zip(model_names, mapped, strict=True) if not m]

        q = np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (T, J, 1))
        q[:, mapped] = rot[:, src[mapped]]
        return q, km, fm, mapped, src, rest, names

    adapted = AdaptCache() if k.learn == "adapt" else None  # Learn This Action: the body in-fill

    def run(task: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        if task == "adapt" and adapted is not None:
            mi = mapped_inputs(inputs, content)
            return adapt_body(model, meta, name, adapted, mi[0], inputs["root"], mi[1], content, ctx)
        q, km, fm, mapped, src, rest, names = mapped_inputs(inputs, content)
        rot, T = inputs["rotations"], inputs["rotations"].shape[0]

        track = None
        if "object_rotations" in inputs:
            if not object_cond:
                raise InvalidRequest(f"model {content.get('model') or name!r} was trained without an object and cannot use one: leave the "
                                     "object out, or pick a model with object_cond in `models`")
            track = (inputs["object_rotations"], inputs["object_positions"])
        S = int(content.get("samples") or 1)
        done = [0]

        def check() -> None:
            ctx.check_cancelled()
            if done[0]:
                ctx.progress(done[0], S)
            done[0] += 1

        net, body, reply = model, {}, {}
        if adapted is not None:
            net, body, reply = adapted.for_request(model, meta, q, inputs["root"], km, content)
        if content.get("learn") is not None:
            if k.learn != "learn":
                raise InvalidRequest(f"field 'learn': only the hand in-fill learns the take by this field; model "
                                     f"{name!r} is {kind!r}: send an 'adapt' request for the body (Learn This "
                                     "Action), or leave 'learn' out")
            body["learn"] = float(content["learn"])
        fps = content.get("fps")
        if adapted is not None and fps:   # the body in-fill: another rate fills the keys closer? (test gaps)
            from motioncore.families.body.gate_rate import rate_check
            rc = rate_check(net, meta, q, inputs["root"], km, ~km if fm is None else fm, float(fps))
            if rc is not None:
                reply["rate"] = rc.summary()
                if rc.best is not None and content.get("rate") == "best":   # filled at that rate; keys stay put
                    fps = rc.best
                    reply["rate"]["filled_at"] = float(rc.best)
        try:
            out = fill_clip_at(net, meta, q, inputs["root"], km, fps, fill=fm,
                            order=str(content.get("order") or "bisection"),
                            temperature=float(content.get("temperature") or 0.0), n_samples=S,
                            seed=int(content.get("seed") or 0), check=check, object_track=track,
                            mirror=bool(content.get("mirror")), **body)
        except WholeFramesError as e:   # a code of its own: the add-on resends whole frames on it
            raise WholeFramesRequired(str(e)) from None
        except MotioncoreError as e:  # ShapeError and the key-layout errors name what was wrong
            raise InvalidRequest(str(e)) from None
        ctx.progress(S, S)
        rot_out = np.repeat(rot[None], S, 0).astype(np.float32)  # joints the model lacks come back as sent
        rot_out[:, :, src[mapped]] = out.rotations[:, :, mapped]
        extra: dict[str, np.ndarray] = {}
        if deterministic:  # the base it corrected (Blender's Bezier of the keys, in the model's space; the body
            # in-fill returns it from the same pass): a client applies the correction (answer minus base) to its own
            # curves, so its rig adds no error of its own
            bq, br = out.base_rotations, out.base_root
            if bq is None or br is None:  # infill-hands: its fill with the correction off
                base = fill_clip_at(model, meta, q, inputs["root"], km, fps, fill=fm, n_samples=1,
                                    mirror=bool(content.get("mirror")), residual=0.0)
                bq, br = base.rotations, base.root
            b = np.repeat(rot[None], S, 0).astype(np.float32)
            b[:, :, src[mapped]] = np.broadcast_to(bq, (S,) + bq.shape[1:])[:, :, mapped]
            extra = {"base_rotations": b, "base_root": np.broadcast_to(np.asarray(br, np.float32), (S,) + br.shape[1:])}
        if out.gate is not None:
            reply["gate"] = out.gate.summary()
        if adapted is not None:  # the body in-fill: what planting the feet did (None: off, or the gate kept it off)
            reply["plant"] = out.plant
        return ({"model": name, "samples": S, "frames": T, "root_joint": int(meta["root_joint"]),
                 "skeleton": {"joints": model_names, "parents": list(meta["skeleton"]["parents"])},
                 "unmapped": [n for n in names if n not in set(model_names)],
                 "filled_joints": [n for n, m in zip(model_names, mapped, strict=True) if not m and n not in rest],
                 "rest_joints": rest, "object": track is not None,
                 "mirror": bool(content.get("mirror")), **reply},
                {"rotations": rot_out, "root": out.root.astype(np.float32), **extra})

    info = {k: meta.get(k) for k in ("skeleton", "fps", "training_data", "licence", "hand")}
    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    info.update({"device": str(device), "root_joint": meta.get("root_joint"), "deterministic": deterministic,
                 "group_frames": whole_frames, "object_cond": object_cond,
                 "convention": None if conv is None else np.asarray(conv, np.float64).round(9).tolist()})
    return ServedModel(name, kind, k.serves, info, step=None, run=run)


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
