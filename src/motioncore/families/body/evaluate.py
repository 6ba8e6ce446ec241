"""The deterministic body in-fill checkpoint (``infill-body``) as a ``KeyFill`` / LaFAN1 ``Fill``, on any body
skeleton (``eval.keyed.on_skeleton``: the model's own skeleton directly, others through a retarget and back)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from motioncore.core.gaps import MODEL_FPS
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.eval.keyed import KeyFill, on_skeleton
from motioncore.infill import Request, family_for, fill

__all__ = ["is_body_checkpoint", "load_body_keyfill"]


def is_body_checkpoint(name_or_path: str | Path) -> bool:
    from motioncore.models.checkpoint import CheckpointError, read_meta
    from motioncore.models.registry import resolve

    try:
        return read_meta(resolve(name_or_path)).get("kind") == "infill-body"
    except CheckpointError:
        return False


def load_body_keyfill(name_or_path: str | Path, device: str = "cpu", use_safety: bool = True, joint_map=None,
                      plant_feet: bool = False) -> tuple[KeyFill, dict]:
    """``use_safety``: scale the network's residual by its confidence (``families.body.fill.confidence``);
    ``joint_map``: model joint -> data joint for data on another skeleton (default ``retarget.auto_map``);
    ``plant_feet``: plant the feet of each window's answer (``families.body.fill_plant``), unjudged (a window has no
    keyed stretch to cut test gaps from), on the model's contact output where it has one."""
    from motioncore.families.body.fill import BodyLayout, confidence, run_model
    from motioncore.models.registry import load_model

    model, meta = load_model(name_or_path, device)
    sk = Skeleton.from_dict(meta["skeleton"])
    layout = BodyLayout.of(sk)

    weights: list[np.ndarray] = []  # per call, the weight each window's correction got (eval.infill: "Weight")

    def fill(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
        kn = np.repeat(known[..., None], sk.num_joints + 1, axis=-1)
        q, p = np.asarray(q, np.float64), np.asarray(p, np.float64)
        conf = confidence(layout, meta["safety"], q, p, kn) if use_safety and meta.get("safety") else None
        weights.append(np.ones(len(q)) if conf is None else np.asarray(conf, np.float64))
        con: list = []
        fq, fp = run_model(model, layout, q, p, kn, confidence=conf, contacts=con if plant_feet else None)
        if plant_feet:
            from motioncore.families.body.fill_plant import plant_clip

            given = np.concatenate(con) if con else None   # the model's contact output, where it has one
            for b in range(len(q)):
                pl = plant_clip(sk, fq[b], fp[b], known[b], ~known[b], float(meta.get("fps") or MODEL_FPS),
                                contacts=None if given is None else given[b])
                if pl is not None:
                    fq[b], fp[b] = pl.rotations, pl.positions
        return fq, fp

    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    wrapped = on_skeleton(fill, sk, None if conv is None else np.asarray(conv, np.float64), joint_map)
    wrapped.weights = weights  # type: ignore[attr-defined]
    return wrapped, meta


def load_body_clipfill(name_or_path: str | Path, gate: bool = True, adapt: float = 0.0, joint_map=None,
                       device: str = "cpu", plant_feet: bool = True, donor: bool = False) -> KeyFill:
    """Whole clips filled as the add-on and ``batch infill`` fill them (``infill.fill``: each gap in
    its own window, the gate fitted on the clip's own keys when ``gate``; Learn This Action for ``adapt``
    seconds first when > 0; the feet planted unless ``plant_feet`` is False; the clip's own motion offered as a
    donor per gap when ``donor``, ``families.body.fill_donor``), on any body skeleton through
    ``on_skeleton``. The returned fill's ``last_info()``
    gives the last clip's mean gate weight (``weight``) and, after adapting, the pseudo-gap errors."""
    from motioncore.models.registry import load_model

    model, meta = load_model(name_or_path, device)
    sk = Skeleton.from_dict(meta["skeleton"])
    rj = int(meta["root_joint"])
    family = family_for(meta)   # resolved once, at load (``infill.family``)
    info: dict = {}

    def fill_on_model(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
        oq, op = np.array(q, np.float64), np.array(p, np.float64)
        info.clear()
        for b in range(len(q)):
            net, limit = model, None
            if adapt > 0:
                from motioncore.families.body.adapt import adapt_infill

                try:
                    ad = adapt_infill(model, meta, q[b], p[b, :, rj], known[b], seconds=adapt)
                    net, limit = ad.model, ad.held or None  # the gate on the pseudo-gaps adapting held out
                    info.update(adapt_before=ad.before, adapt_after=ad.after, adapt_steps=ad.steps,
                                adapt_used=ad.used)
                except MotioncoreError as e:  # too little keyed to learn from: the gate alone, and say so
                    info["adapt_skipped"] = str(e)
            out = fill(Request(net, meta, q[b], p[b, :, rj], known[b], gate=gate, gate_limit=limit,
                               plant_feet=plant_feet, family=family, donor=donor))
            oq[b], op[b, :, rj] = out.rotations[0], out.root[0]
            if out.gate is not None:
                info["weight"] = out.gate.mean_weight()
                if out.gate.filled_by:
                    info["filled_by"] = out.gate.filled_by
                info["gate"] = out.gate.summary()
        return oq, op

    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    wrapped = on_skeleton(fill_on_model, sk, None if conv is None else np.asarray(conv, np.float64), joint_map)

    def run(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
        if q.ndim == 3:  # one clip
            oq, op = wrapped(skeleton, q[None], p[None], known[None])
            return oq[0], op[0]
        return wrapped(skeleton, q, p, known)

    run.last_info = lambda: dict(info)  # type: ignore[attr-defined]
    return run
