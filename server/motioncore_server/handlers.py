"""The handler table: request type -> function. Handlers get an already decoded and validated message
(protocol steps 1-6) plus a :class:`Context`; they do step 7 (their own field and array checks), never
touch sockets, and return a :class:`Result`, or a :class:`Batched` (one row for ``model.step``, which
the micro-batcher stacks with others), or raise a ``motioncore.wire.protocol.ProtocolError`` subclass (any
other exception becomes ``internal``).

Register a new type with ``HANDLERS["my.type"] = Handler(fn)``. ``inline=True`` only for cheap control
requests that may run on the socket loop (no model, no blocking); ``batchable=True`` sends its
single-frame requests to the micro-batching lane. docs/protocol.md documents every type in this table
(a test checks that).

The five model requests validate their inputs and then ask the registry for a model; until the model
owners register loaders (registry.LOADERS) they answer ``model_unavailable``.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from motioncore.core.motion import Motion
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.models.kinds import controller, default_model
from motioncore.retarget import auto_map, leg_scale
from motioncore.retarget import retarget as retarget_motion
from motioncore.wire.protocol import (
    PROTOCOL_VERSION,
    InvalidRequest,
    Message,
    ModelUnavailable,
    ProtocolError,
)

from .checks import (
    FLOATS,
    MAX_ABS,
    MAX_CLIP_FRAMES,
    MAX_FEATURES,
    MAX_JOINTS,
    MAX_ROLLOUT_FRAMES,
    OBJECT_ARRAYS,
    PATH_ARRAYS,
    check_array,
    check_field,
    check_object,
    check_path,
    check_rotations,
    only_arrays,
)
from .context import Batched, Context, Handler, Result, ServerInfo
from .registry import ServedModel

# ---------------------------------------------------------------------------------- control requests

def hello(req: Message, ctx: Context) -> Result:
    s = ctx.server
    return Result({"protocol_version": PROTOCOL_VERSION, "server_session": s.session, "device": s.device,
                   "versions": s.versions, "models": s.registry.names(), "limits": s.limits.as_dict(),
                   "types": s.types(), "config": s.config, "pid": os.getpid(), "started": s.started})


def health(req: Message, ctx: Context) -> Result:
    """Liveness in three fields (the cheap probe a client polls); ``stats: true`` adds the counters."""
    out = {"status": "ok", "uptime_s": round(time.time() - ctx.server.started, 3), "inflight": ctx.server.inflight()}
    if req.content and check_field(req.content, "stats", bool, default=False):
        out.update(ctx.server.stats())
    return Result(out)


def models(req: Message, ctx: Context) -> Result:
    return Result({"models": ctx.server.registry.describe()})


def cancel(req: Message, ctx: Context) -> Result:
    target = check_field(req.content, "id", str)
    return Result(ctx.server.cancel(target))


# ------------------------------------------------------------------------------------ model requests

def _f32(**arrays: np.ndarray) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, np.float32) for k, v in arrays.items()}


def _model(req: Message, ctx: Context, default: str | None = None) -> ServedModel:
    name = check_field(req.content, "model", str, default=None) or default
    if name is None:   # feature vectors: path controllers cannot serve them, so pick among the others
        served = [m for m in ctx.server.registry.describe() if m["available"] and req.type in m["tasks"]]
        name = next((m["name"] for m in served if not controller(m["kind"])), None)
        if name is None and served:
            raise ModelUnavailable(f"no model serving {req.type!r} for feature vectors is registered; the path "
                                   f"controllers {[m['name'] for m in served]} take the path form (buffer 'points')")
    model = ctx.server.registry.get(req.type, name)
    want = (model.info.get("inputs") or {})
    for k, a in req.arrays.items():   # per-model sizes, when the checkpoint declares them
        spec = want.get(k)
        if isinstance(spec, list) and len(spec) == a.ndim and any(s is not None and s != n for s, n in
                                                                   zip(spec, a.shape, strict=True)):
            raise InvalidRequest(f"array {k!r} has shape {tuple(a.shape)}; model {model.name!r} expects {spec}")
    return model


def _run(model: ServedModel, req: Message, inputs: dict[str, np.ndarray], ctx: Context) -> Result:
    if model.run is None:
        raise InvalidRequest(f"model {model.name!r} serves only single frames (frames=1) of {req.type!r}")
    content, arrays = model.run(req.type, inputs, dict(req.content), ctx)
    return Result(dict(content), dict(arrays))


def _default_model(req: Message, ctx: Context, ok: Callable[[dict], bool]) -> str:
    """The request's ``model`` field, or the first available model serving its type that ``ok`` accepts."""
    name = check_field(req.content, "model", str, default=None)
    if name is None:
        name = next((m["name"] for m in ctx.server.registry.describe() if m["available"] and ok(m)
                     and req.type in m["tasks"]), None)
        if name is None:
            raise ModelUnavailable(f"no model serving {req.type!r} this way is registered on this server "
                                   f"(known models: {ctx.server.registry.names() or 'none'})")
    return name


def path_rollout(req: Message, ctx: Context) -> Result:
    """The path form of pfnn.rollout / mann.rollout: a root path (metres) -> an animation (run by a
    controller checkpoint; see docs/protocol.md)."""
    only_arrays(req.arrays, PATH_ARRAYS)
    check_path(req)
    name = _default_model(req, ctx, lambda m: controller(m["kind"]))  # debug models take features
    model = ctx.server.registry.get(req.type, name)
    inputs = {k: np.asarray(v, np.float64) for k, v in req.arrays.items()}
    return _run(model, req, inputs, ctx)


def pfnn_rollout(req: Message, ctx: Context) -> Result | Batched:
    """x (D_in,) features, phase () in radians -> y (frames, D_out), phase (frames,); or the path form."""
    if "points" in req.arrays:
        return path_rollout(req, ctx)
    frames = check_field(req.content, "frames", int, default=1, lo=1, hi=MAX_ROLLOUT_FRAMES)
    only_arrays(req.arrays, {"x", "phase"})
    x = check_array(req.arrays, "x", shape=(None,), dtypes=FLOATS, max_size=MAX_FEATURES)
    phase = check_array(req.arrays, "phase", shape=(), dtypes=FLOATS)
    model = _model(req, ctx)
    inputs = _f32(x=x, phase=phase)
    if frames == 1 and model.step is not None:
        return Batched(model, inputs, lambda out: Result({"frames": 1}, {"y": out["y"][None],
                                                                        "phase": out["phase"].reshape(1)}))
    return _run(model, req, inputs, ctx)


def mann_rollout(req: Message, ctx: Context) -> Result | Batched:
    """x (D_in,) features -> y (frames, D_out); or the path form."""
    if "points" in req.arrays:
        return path_rollout(req, ctx)
    frames = check_field(req.content, "frames", int, default=1, lo=1, hi=MAX_ROLLOUT_FRAMES)
    only_arrays(req.arrays, {"x"})
    x = check_array(req.arrays, "x", shape=(None,), dtypes=FLOATS, max_size=MAX_FEATURES)
    model = _model(req, ctx)
    inputs = _f32(x=x)
    if frames == 1 and model.step is not None:
        return Batched(model, inputs, lambda out: Result({"frames": 1}, {"y": out["y"][None]}))
    return _run(model, req, inputs, ctx)


INFILL_ORDERS = ("bisection", "sequential", "random", "entropy")
MAX_SAMPLES = 16


def infill(req: Message, ctx: Context) -> Result:
    """Feature form: motion (T, D) with known (T,) bool -> motion (T, D). Rotation form (any-order
    checkpoints): rotations (T, J, 4), root (T, 3), known (T,) or (T, J + 1) -> rotations (S, T, J, 4),
    root (S, T, 3)."""
    check_field(req.content, "seed", int, default=None, lo=0, hi=2**63 - 1)
    if "rotations" in req.arrays:
        return _infill_rotations(req, ctx)
    only_arrays(req.arrays, {"motion", "known"})
    motion = check_array(req.arrays, "motion", shape=(None, None), dtypes=FLOATS)
    known = check_array(req.arrays, "known", shape=(motion.shape[0],), dtypes=("bool",))
    T, D = motion.shape
    if not 2 <= T <= MAX_CLIP_FRAMES or not 1 <= D <= MAX_FEATURES:
        raise InvalidRequest(f"array 'motion' must have 2..{MAX_CLIP_FRAMES} frames and 1..{MAX_FEATURES} "
                             f"features, got {(T, D)}")
    if not known.any():
        raise InvalidRequest("array 'known' marks no frame as known")
    model = _model(req, ctx)
    return _run(model, req, {"motion": np.asarray(motion, np.float32), "known": known}, ctx)


def _infill_rotations(req: Message, ctx: Context) -> Result:
    c = req.content
    check_field(c, "temperature", (int, float), default=0.0, lo=0.0, hi=10.0)
    check_field(c, "order", str, default="bisection", choices=INFILL_ORDERS)
    check_field(c, "samples", int, default=1, lo=1, hi=MAX_SAMPLES)
    check_field(c, "fps", (int, float), default=None, lo=1.0, hi=1000.0)
    check_field(c, "mirror", bool, default=False)
    check_field(c, "gate", bool, default=True)
    check_field(c, "plant_feet", (bool, str), default=True)
    if isinstance(c.get("plant_feet"), str) and c["plant_feet"] != "judge":
        raise InvalidRequest(f"field 'plant_feet' must be true, false or \"judge\", got {c['plant_feet']!r}")
    check_field(c, "learn", (int, float), default=None, lo=0.0, hi=120.0)
    check_field(c, "curve", str, default=None, choices=("bezier", "linear", "constant"))
    check_field(c, "rate", str, default="scene", choices=("scene", "best"))
    only_arrays(req.arrays, {"rotations", "root", "known", "fill", *OBJECT_ARRAYS})
    rot, root = check_rotations(req.arrays, c)
    T, J = rot.shape[:2]
    known = check_array(req.arrays, "known", shape=None, dtypes=("bool",))
    if known.shape not in ((T,), (T, J + 1)):
        raise InvalidRequest(f"array 'known' must have shape ({T},) or ({T}, {J + 1}), got {tuple(known.shape)}")
    if not known.any():
        raise InvalidRequest("array 'known' marks nothing as known")
    inputs = {"rotations": np.asarray(rot, np.float64), "root": np.asarray(root, np.float64), "known": known}
    fill = check_array(req.arrays, "fill", shape=None, dtypes=("bool",), required=False)
    if fill is not None:
        if fill.shape != known.shape:
            raise InvalidRequest(f"array 'fill' must have the shape of 'known' {tuple(known.shape)}, got {tuple(fill.shape)}")
        if (fill & known).any():
            raise InvalidRequest("array 'fill' marks known elements; fill only unknown ones")
        inputs["fill"] = fill
    inputs.update(check_object(req.arrays, T))
    # no model named: the deterministic body model for the single best answer, the any-order one for variations
    best = default_model("infill")
    best = best if best in ctx.server.registry.names() else None
    model = _model(req, ctx, best if float(c.get("temperature") or 0.0) == 0.0 else None)
    return _run(model, req, inputs, ctx)


def adapt(req: Message, ctx: Context) -> Result:
    """Learn This Action (the body in-fill's ``adapt``): the rotation form of ``infill`` (rotations, root, known;
    joints, fps) plus ``steps`` (the budget in learning steps, default 40) and ``seconds`` (its time limit, default
    300) -> ``adapted``
    (pseudo-gap error before and after, steps, whether the copy is used and why not). Later ``infill`` requests
    with the same keys use the adapted copy."""
    c = req.content
    check_field(c, "seconds", (int, float), default=None, lo=1.0, hi=600.0)
    check_field(c, "steps", int, default=None, lo=1, hi=100000)
    check_field(c, "fps", (int, float), default=None, lo=1.0, hi=1000.0)
    check_field(c, "again", bool, default=False)
    only_arrays(req.arrays, {"rotations", "root", "known"})
    rot, root = check_rotations(req.arrays, c)
    T, J = rot.shape[:2]
    known = check_array(req.arrays, "known", shape=None, dtypes=("bool",))
    if known.shape not in ((T,), (T, J + 1)):
        raise InvalidRequest(f"array 'known' must have shape ({T},) or ({T}, {J + 1}), got {tuple(known.shape)}")
    inputs = {"rotations": np.asarray(rot, np.float64), "root": np.asarray(root, np.float64), "known": known}
    best = default_model("infill")
    best = best if best in ctx.server.registry.names() else None
    return _run(_model(req, ctx, best), req, inputs, ctx)


def style_adapt(req: Message, ctx: Context) -> Result:
    """An exemplar clip (rotation form: rotations (T, J, 4), root (T, 3), optional joint names) or a style
    code z (Z,), plus a root path (the path form of pfnn.rollout) -> the path walked in the exemplar's
    style: the rollout arrays plus z, to send again instead of the exemplar."""
    c = req.content
    only_arrays(req.arrays, PATH_ARRAYS | {"rotations", "root", "z"})
    if ("z" in req.arrays) == ("rotations" in req.arrays):
        raise InvalidRequest("send either an exemplar clip (arrays 'rotations' and 'root') or a style code (array 'z')")
    if "z" in req.arrays:
        check_array(req.arrays, "z", shape=(None,), dtypes=FLOATS, max_size=MAX_FEATURES)
        if "root" in req.arrays:
            raise InvalidRequest("array 'root' belongs to an exemplar clip; with 'z' send no clip")
    else:
        check_rotations(req.arrays, c, min_frames=2)
        check_field(c, "fps", float, default=None, lo=1.0, hi=1000.0)
        check_field(c, "root_space", str, default="joint", choices=("joint", "ground"))
    check_path(req)
    name = _default_model(req, ctx, lambda m: True)
    inputs = {k: np.asarray(v, np.float64) for k, v in req.arrays.items()}
    return _run(ctx.server.registry.get(req.type, name), req, inputs, ctx)


def _skeleton(content: Mapping[str, Any], field_name: str) -> int:
    sk = check_field(content, field_name, dict)
    joints, parents = sk.get("joints"), sk.get("parents")
    if not (isinstance(joints, list) and all(isinstance(j, str) for j in joints) and 1 <= len(joints) <= MAX_JOINTS):
        raise InvalidRequest(f"field {field_name!r}.joints must be a list of 1..{MAX_JOINTS} joint names")
    if not (isinstance(parents, list) and len(parents) == len(joints)
            and all(type(p) is int and -1 <= p < i for i, p in enumerate(parents))):
        raise InvalidRequest(f"field {field_name!r}.parents must list, per joint, -1 or the index of an "
                             f"earlier joint ({len(joints)} entries)")
    return len(joints)


def _full_skeleton(content: Mapping[str, Any], field_name: str):
    """A motioncore Skeleton from a wire skeleton that also carries ``offsets`` (J lists of 3 numbers)."""
    J = _skeleton(content, field_name)
    sk = content[field_name]
    offsets = sk.get("offsets")
    if not (isinstance(offsets, list) and len(offsets) == J and all(
            isinstance(o, list) and len(o) == 3 and all(type(v) in (int, float) for v in o) for o in offsets)):
        raise InvalidRequest(f"field {field_name!r}.offsets must list, per joint, the rest offset [x, y, z] "
                             f"({J} entries)")
    off = np.asarray(offsets, np.float64)
    if not (np.abs(off) <= MAX_ABS).all():
        raise InvalidRequest(f"field {field_name!r}.offsets must be finite and within +-{MAX_ABS:g}")
    try:
        return Skeleton(tuple(sk["joints"]), np.asarray(sk["parents"]), off)
    except MotioncoreError as e:
        raise InvalidRequest(f"field {field_name!r}: {e}") from None


def retarget(req: Message, ctx: Context) -> Result:
    """rotations (T, J, 4) WXYZ unit quaternions + root (T, 3) on source -> the same on target, with
    motioncore.retarget (bodies matched by topology on the sent frames, then names; rest-pose alignment,
    leg-length root scaling)."""
    src, tgt = _full_skeleton(req.content, "source"), _full_skeleton(req.content, "target")
    scale = req.content.get("scale", "legs")
    if not (scale in ("legs", None) or (type(scale) in (int, float) and 0 < scale < 1e3)):
        raise InvalidRequest("field 'scale' must be \"legs\", null or a positive number")
    only_arrays(req.arrays, {"rotations", "root"})
    rot = check_array(req.arrays, "rotations", shape=(None, src.num_joints, 4), dtypes=FLOATS)
    root = check_array(req.arrays, "root", shape=(rot.shape[0], 3), dtypes=FLOATS)
    if not 1 <= rot.shape[0] <= MAX_CLIP_FRAMES:
        raise InvalidRequest(f"array 'rotations' must have 1..{MAX_CLIP_FRAMES} frames, got {rot.shape[0]}")
    if rot.size and np.abs(np.linalg.norm(rot, axis=-1) - 1).max() > 1e-3:
        raise InvalidRequest("array 'rotations' must hold unit quaternions (WXYZ), |q| within 1e-3 of 1")
    q = np.asarray(rot, np.float64)
    pos = np.broadcast_to(src.offsets, (len(q), src.num_joints, 3)).copy()
    pos[:, 0] = root
    note = None
    try:
        idx = np.unique(np.linspace(0, len(q) - 1, min(64, len(q))).astype(np.int64))
        poses = src.forward_kinematics(q[idx] / np.linalg.norm(q[idx], axis=-1, keepdims=True), pos[idx])[1]
        jmap = auto_map(src, tgt, source_poses=poses)   # the body read from the motion (retarget.topology)
        if not jmap.pairs:
            raise InvalidRequest("no target joint could be matched to a source joint by name")
        if scale == "legs":
            try:
                scale = float(leg_scale(src, tgt, jmap))
            except MotioncoreError as e:   # rigs without leg chains (a partial rig): no root scaling
                scale, note = 1.0, f"root not scaled: {e}"
        out = retarget_motion(Motion(src, q / np.linalg.norm(q, axis=-1, keepdims=True), pos, 30.0), tgt, jmap,
                              scale=scale)
    except MotioncoreError as e:
        raise InvalidRequest(f"retarget: {e}") from None
    content = {"frames": int(len(q)), "mapped": len(jmap.pairs), "unmapped": list(jmap.unmapped)[:MAX_JOINTS],
               "scale": 1.0 if scale is None else float(scale)}
    if note:
        content["scale_note"] = note
    return Result(content, {"rotations": out.rotations.astype(np.float32), "root": out.positions[:, 0].astype(np.float32),
                            "translations": out.positions.astype(np.float32)})


# ------------------------------------------------------------------------- debug requests (--debug)

def debug_sleep(req: Message, ctx: Context) -> Result:
    """Wait ``seconds`` in ``steps`` steps, sending progress after each; cancellable."""
    seconds = check_field(req.content, "seconds", float, lo=0.0, hi=600.0)
    steps = check_field(req.content, "steps", int, default=10, lo=1, hi=10_000)
    for i in range(steps):
        ctx.wait(seconds / steps)
        ctx.check_cancelled()
        ctx.progress(i + 1, steps)
    return Result({"seconds": seconds, "steps": steps})


def debug_echo(req: Message, ctx: Context) -> Result:
    """Reply with the request's content and arrays."""
    return Result(dict(req.content), dict(req.arrays))


def debug_fail(req: Message, ctx: Context) -> Result:
    raise RuntimeError("debug.fail raised on purpose")


HANDLERS: dict[str, Handler] = {
    "hello": Handler(hello, inline=True),
    "health": Handler(health, inline=True),
    "models": Handler(models, inline=True),
    "cancel": Handler(cancel, inline=True),
    "pfnn.rollout": Handler(pfnn_rollout, batchable=True),
    "mann.rollout": Handler(mann_rollout, batchable=True),
    "infill": Handler(infill),
    "style.adapt": Handler(style_adapt),
    "adapt": Handler(adapt),
    "retarget": Handler(retarget),
}

DEBUG_HANDLERS: dict[str, Handler] = {
    "debug.sleep": Handler(debug_sleep),
    "debug.echo": Handler(debug_echo),
    "debug.fail": Handler(debug_fail),
}


def handler_table(debug: bool = False) -> dict[str, Handler]:
    """The table a server uses: HANDLERS, plus DEBUG_HANDLERS when started with --debug."""
    return {**HANDLERS, **(DEBUG_HANDLERS if debug else {})}


__all__ = ["HANDLERS", "DEBUG_HANDLERS", "Handler", "Result", "Batched", "Context", "ServerInfo", "ProtocolError",
           "handler_table"]
