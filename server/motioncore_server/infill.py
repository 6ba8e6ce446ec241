"""The in-fill checkpoints served (``models.kinds``: loader ``infill``; the body and hands in-fill models and the
any-order ones): ``InfillModel.run`` answers the rotation form of ``infill`` (docs/protocol.md) through
``motioncore.infill.fill`` on the server's device, and ``adapt`` (Learn This Action) for a kind that learns by that
request. The request's joints are mapped onto the model's skeleton by name (``map_joints``; joints the rig lacks
held at rest), the reply carries the answer, its base, the gate's fits and the plan's per-gap table."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from motioncore.errors import MotioncoreError, WholeFramesError
from motioncore.infill import Filled, Request, family_for, fill
from motioncore.models.checkpoint import load_state_into
from motioncore.models.kinds import spec
from motioncore.models.registry import build
from motioncore.wire.protocol import InvalidRequest, WholeFramesRequired

from .body import AdaptCache, adapt_body
from .registry import ServedModel, has_object_cond

__all__ = ["InfillModel", "Mapped", "load_infill"]


@dataclass(frozen=True)
class Mapped:
    """A request on the model's skeleton: rotations (T, J, 4), keys and the elements to fill (T, J + 1), per model
    joint the request's column (``src``, -1: none) and whether it has one, the joints held at rest, the names sent."""

    q: np.ndarray
    known: np.ndarray
    fill: np.ndarray | None
    mapped: np.ndarray
    src: np.ndarray
    rest: list[str]
    names: list[str]


class Progress:
    """The fill's ``check``: cancellation between samples, and progress (``done`` of ``total`` samples)."""

    def __init__(self, ctx: Any, total: int) -> None:
        self.ctx, self.total, self.done = ctx, total, 0

    def __call__(self) -> None:
        self.ctx.check_cancelled()
        if self.done:
            self.ctx.progress(self.done, self.total)
        self.done += 1


class InfillModel:
    """One in-filling checkpoint loaded on ``device``; its family (``infill.family``) resolved here, once."""

    def __init__(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device) -> None:
        kind = str(meta.get("kind"))
        self.kind, self.spec, self.meta = kind, spec(kind), meta
        self.family = family_for(meta)
        self.name = str(meta.get("name") or meta.get("bundled_name") or kind)
        model = build(kind, dict(meta.get("config") or {}))
        load_state_into(model, tensors, self.name)
        self.model = model.to(device).eval()
        self.device = device
        self.model_names = list(meta["skeleton"]["names"])
        self.J = len(self.model_names)
        self.whole_frames = bool(getattr(self.model.cfg, "group_frames", False))
        self.deterministic = self.spec.deterministic  # one answer: temperature and samples repeat it
        self.object_cond = has_object_cond(meta)
        self.adapted = AdaptCache() if self.spec.learn == "adapt" else None  # Learn This Action: the body in-fill

    def served(self) -> ServedModel:
        return ServedModel(self.name, self.kind, self.spec.serves, self.info(), step=None, run=self.run)

    def info(self) -> dict[str, Any]:
        meta = self.meta
        info = {k: meta.get(k) for k in ("skeleton", "fps", "training_data", "licence", "hand")}
        conv = (meta.get("convention") or {}).get("mean_local_rotations")
        info.update({"device": str(self.device), "root_joint": meta.get("root_joint"),
                     "deterministic": self.deterministic, "group_frames": self.whole_frames,
                     "object_cond": self.object_cond,
                     "convention": None if conv is None else np.asarray(conv, np.float64).round(9).tolist()})
        return info

    def run(self, task: str, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        if task == "adapt" and self.adapted is not None:
            m = self.map_joints(inputs, content)
            return adapt_body(self.model, self.meta, self.name, self.adapted, m.q, inputs["root"], m.known, content,
                              ctx, self.family)
        return self.infill(inputs, content, ctx)

    def map_joints(self, inputs: dict[str, np.ndarray], content: dict[str, Any]) -> Mapped:
        """The request on the model's skeleton (joints matched by name; joints the request lacks unknown and
        filled, or held at the rest pose where a whole-frame or deterministic checkpoint needs every joint)."""
        name, J, model_names = self.name, self.J, self.model_names
        if "rotations" not in inputs:
            raise InvalidRequest(f"model {name!r} fills rotations: send buffers 'rotations' (T, {J}, 4), 'root' "
                                 f"(T, 3) and 'known', not feature vectors")
        rot, known, fill_mask = inputs["rotations"], inputs["known"], inputs.get("fill")
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
        km = _to_model(known, False, T, J, Jin, src, mapped)  # joints the request lacks are unknown ...
        fm = None if fill_mask is None else _to_model(fill_mask, True, T, J, Jin, src, mapped)  # ... and filled
        rest: list[str] = []
        if (self.whole_frames or self.deterministic) and not mapped.all():
            # a whole-frame checkpoint needs every joint on a keyed frame: joints the rig lacks are held
            # at the rest pose (identity) on the frames where every joint it has is keyed
            full = km[:, :J][:, mapped].all(axis=1) & km[:, J]
            km[:, :J][:, ~mapped] = full[:, None]
            if fm is not None:
                fm[:, :J][:, ~mapped] = ~full[:, None]
            rest = [n for n, m in zip(model_names, mapped, strict=True) if not m]
        q = np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (T, J, 1))
        q[:, mapped] = rot[:, src[mapped]]
        return Mapped(q, km, fm, mapped, src, rest, names)

    def request(self, m: Mapped, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any
                ) -> tuple[Request, dict[str, Any]]:
        """The library's ``Request`` for an ``infill`` message, and the reply fields known before the fill (the
        adapted copy's summary): the adapted copy when Learn This Action learnt these keys (``AdaptCache``)."""
        name, kind, meta = self.name, self.kind, self.meta
        track = None
        if "object_rotations" in inputs:
            if not self.object_cond:
                raise InvalidRequest(f"model {content.get('model') or name!r} was trained without an object and "
                                     "cannot use one: leave the object out, or pick a model with object_cond in "
                                     "`models`")
            track = (inputs["object_rotations"], inputs["object_positions"])
        net, body, reply = self.model, {}, {}
        if self.adapted is not None:
            net, body, reply = self.adapted.for_request(self.model, meta, m.q, inputs["root"], m.known, content)
        if content.get("learn") is not None:
            if self.spec.learn != "learn":
                raise InvalidRequest(f"field 'learn': only the hand in-fill learns the take by this field; model "
                                     f"{name!r} is {kind!r}: send an 'adapt' request for the body (Learn This "
                                     "Action), or leave 'learn' out")
            body["learn"] = float(content["learn"])
        S = int(content.get("samples") or 1)
        return Request(net, meta, m.q, inputs["root"], m.known, content.get("fps"), m.fill,
                       mirror=bool(content.get("mirror")), order=str(content.get("order") or "bisection"),
                       temperature=float(content.get("temperature") or 0.0), n_samples=S,
                       seed=int(content.get("seed") or 0), check=Progress(ctx, S), object_track=track,
                       rate=(content.get("rate") or "scene") if self.adapted is not None else None,
                       family=self.family, **body), reply

    def infill(self, inputs: dict[str, np.ndarray], content: dict[str, Any], ctx: Any) -> tuple[dict, dict]:
        """An ``infill`` message: its joints mapped, one ``Request``, ``fill(request)``, the reply."""
        m = self.map_joints(inputs, content)
        request, reply = self.request(m, inputs, content, ctx)
        try:
            out = fill(request)
        except WholeFramesError as e:   # a code of its own: the add-on resends whole frames on it
            raise WholeFramesRequired(str(e)) from None
        except MotioncoreError as e:  # ShapeError and the key-layout errors name what was wrong
            raise InvalidRequest(str(e)) from None
        if out.rate is not None:   # the body in-fill: another rate fills the keys closer? (test gaps)
            reply["rate"] = out.rate
        S = request.n_samples
        ctx.progress(S, S)
        return self.reply(m, request, out, inputs, reply)

    def reply(self, m: Mapped, request: Request, out: Filled, inputs: dict[str, np.ndarray], reply: dict[str, Any]
              ) -> tuple[dict, dict]:
        """The answer on the request's joints (joints the model lacks as sent), the base it corrected for a
        deterministic model, the gate's fits and the plan's per-gap table."""
        rot, S, T = inputs["rotations"], request.n_samples, inputs["rotations"].shape[0]
        mapped, src = m.mapped, m.src
        rot_out = np.repeat(rot[None], S, 0).astype(np.float32)  # joints the model lacks come back as sent
        rot_out[:, :, src[mapped]] = out.rotations[:, :, mapped]
        extra: dict[str, np.ndarray] = {}
        if self.deterministic:  # the base it corrected (Blender's Bezier of the keys, in the model's space; the body
            # in-fill returns it from the same pass): a client applies the correction (answer minus base) to its own
            # curves, so its rig adds no error of its own
            bq, br = out.base_rotations, out.base_root
            if bq is None or br is None:  # infill-hands: its fill with the correction off
                base = fill(Request(self.model, self.meta, m.q, inputs["root"], m.known, request.fps, m.fill,
                                    n_samples=1, mirror=request.mirror, residual=0.0, family=self.family))
                bq, br = base.rotations, base.root
            b = np.repeat(rot[None], S, 0).astype(np.float32)
            b[:, :, src[mapped]] = np.broadcast_to(bq, (S,) + bq.shape[1:])[:, :, mapped]
            extra = {"base_rotations": b, "base_root": np.broadcast_to(np.asarray(br, np.float32), (S,) + br.shape[1:])}
        if out.gate is not None:
            reply["gate"] = out.gate.summary()
            reply["gaps"] = out.plan.table() if out.plan is not None else []   # the plan's per-gap table
        if self.adapted is not None:  # the body in-fill: what planting the feet did (None: off, or the gate kept it)
            reply["plant"] = out.plant
        model_names, meta = self.model_names, self.meta
        return ({"model": self.name, "samples": S, "frames": T, "root_joint": int(meta["root_joint"]),
                 "skeleton": {"joints": model_names, "parents": list(meta["skeleton"]["parents"])},
                 "unmapped": [n for n in m.names if n not in set(model_names)],
                 "filled_joints": [n for n, k in zip(model_names, mapped, strict=True) if not k and n not in m.rest],
                 "rest_joints": m.rest, "object": request.object_track is not None,
                 "mirror": request.mirror, **reply},
                {"rotations": rot_out, "root": out.root.astype(np.float32), **extra})


def _to_model(mask: np.ndarray, missing: bool, T: int, J: int, Jin: int, src: np.ndarray, mapped: np.ndarray
              ) -> np.ndarray:
    """A (T,) or (T, Jin + 1) mask on the request's joints as (T, J + 1) on the model's (``missing`` where the
    request has no joint)."""
    m = np.repeat(mask[:, None], Jin + 1, 1) if mask.ndim == 1 else mask
    out = np.full((T, J + 1), missing)
    out[:, :J][:, mapped] = m[:, src[mapped]]
    out[:, J] = m[:, Jin]
    return out


def load_infill(tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device) -> ServedModel:
    """Registry loader for in-filling checkpoints (``models.kinds``: loader ``infill``): ``InfillModel.run``."""
    return InfillModel(tensors, meta, device).served()
