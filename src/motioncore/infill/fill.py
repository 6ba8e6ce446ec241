"""``fill(request)``: the one entry point of an in-fill (the server's ``infill``, ``batch infill``, ``eval clips``,
the demo and the tests). The request's plan is built once (``InfillPlan.of``), and the model's family fills it
(``InfillFamily.fill``; the family was resolved when the model was loaded).

A clip at another rate than the checkpoint's goes one of three routes (``InfillPlan.route``): ``same`` (at the
model's rate), ``own`` (a family that fills a faster clip at its own rate: ``infill-body``), ``through`` (to the
model's rate and back: ``model_request`` and ``back_to_clip``, here, for every family).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.rotations import quat_continuity, quat_normalize, quat_slerp
from .family import Filled, Request, family_for
from .plan import InfillPlan
from .rate import mirror_x

__all__ = ["fill", "fill_clip", "fill_clip_at", "plan_of", "model_request", "back_to_clip"]


def fill(request: Request) -> Filled:
    """Fill ``request`` (``infill.family.Request``): its plan, then its family's fill. ``mirror``: the clip is the
    mirror image of the checkpoint's skeleton (a left hand for the right-hand ``anyorder-hands``): it is mirrored
    (``infill.rate.mirror_x``, the ``object_track`` too) before the model and the result mirrored back, so the keys
    still come back bit-identical."""
    if request.mirror:
        return _mirrored(request)
    family = request.family or family_for(request.meta, request.model)
    return family.fill(request, plan_of(request, family))


_fill = fill   # for the wrappers whose ``fill`` argument is the mask of elements to fill


def plan_of(request: Request, family: Any = None) -> InfillPlan:
    """The request's plan, built as its family fills (``checks_clip``, ``own_rate``)."""
    family = family or request.family or family_for(request.meta, request.model)
    return InfillPlan.of(request.meta, request.rotations, request.root, request.known, request.fps, request.fill,
                         checked=family.checks_clip, own_rate=family.own_rate)


def fill_clip_at(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, fps: float | None,
                 fill: np.ndarray | None = None, **kw: Any) -> Filled:
    """``fill(Request(model, meta, rotations, root, known, fps, fill, **kw))``: a clip at ``fps`` frames per second
    (None: the checkpoint's rate) on the checkpoint's skeleton: ``rotations`` (T, J, 4) local unit quaternions WXYZ,
    ``root`` (T, 3) the local translation of the checkpoint's ``root_joint``, ``known`` (T,) whole-frame keys or
    (T, J + 1) per element (channel J: the root). Returns ``n_samples`` completions; known elements come back
    bit-identical. A clip at another rate goes to the checkpoint's rate and back (a model frame is known where the
    clip's frames around its time both are), or, for ``infill-body`` on a faster clip, is filled at its own rate.
    ``residual`` (deterministic models): the weight of the network's correction (0: Blender's Bezier of the keys);
    ``gate`` (``infill-body``): True fits the weights on pseudo-gaps cut from the clip's own keys (on up to
    ``gate_limit`` per length), a ``Gate`` uses those, False the network as trained; ``plant_feet``
    (``infill-body``): plant the feet in contact (``"judge"``: judged by the gate, not planted); ``curve``: the user's
    keys' interpolation, for the gate's blend; ``learn`` (``infill-hands``): seconds of learning on the clip's
    pseudo-gaps; ``object_track`` (hands): the manipulated object's pose per frame; ``order``, ``temperature``,
    ``seed``, ``k``, ``window`` (any-order sampling); ``check`` is called between samples (cancellation)."""
    return _fill(Request(model, meta, rotations, root, known, fps, fill, **kw))


def fill_clip(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, **kw: Any) -> Filled:
    """``fill_clip_at`` at the checkpoint's own rate."""
    return fill(Request(model, meta, rotations, root, known, None, **kw))


def model_request(request: Request, plan: InfillPlan) -> Request:
    """The request at the model's rate (route ``through``): the plan's model-rate arrays, the object track resampled
    with them."""
    m, rs = plan.model, plan.to_model
    assert m is not None and rs is not None
    track = request.object_track
    if track is not None:   # the object at the model's rate too
        oq = quat_continuity(quat_normalize(np.asarray(track[0], np.float64)), axis=0)
        op = np.asarray(track[1], np.float64)
        track = (quat_slerp(oq[rs.i0], oq[rs.i1], rs.w), op[rs.i0] + rs.w[:, None] * (op[rs.i1] - op[rs.i0]))
    return replace(request, rotations=m.rotations, root=m.root, known=m.keys, fps=None, object_track=track,
                   fill=None if request.fill is None else m.todo)


def back_to_clip(plan: InfillPlan, out: Filled) -> Filled:
    """A fill made at the model's rate (route ``through``) back at the clip's frames: each clip element to fill
    interpolated between the model frames around its time (slerp, lerp for the root); elements not filled
    bit-identical. The base too, when the answer has one."""
    q_in, r_in, todo = plan.q, plan.r, plan.todo
    T, J = q_in.shape[:2]
    q = quat_continuity(quat_normalize(q_in), axis=0)
    S = out.rotations.shape[0]
    bk = plan.back(plan.model.q.shape[0])
    b0, b1, v = bk.i0, bk.i1, bk.w

    def back(rots: np.ndarray, root: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fq = quat_slerp(rots[:, b0], rots[:, b1], np.broadcast_to(v[None, :, None], (S, T, J)))
        fr = root[:, b0] + v[None, :, None] * (root[:, b1] - root[:, b0])
        fq = quat_continuity(np.where(~todo[None, :, :J, None], q[None], fq), axis=1)
        fq = np.where(~todo[None, :, :J, None], q_in[None], fq)
        return fq, np.where(~todo[None, :, J:], r_in[None], fr)

    fq, fr = back(out.rotations, out.root)
    bq = br = None
    if out.base_rotations is not None and out.base_root is not None:
        bq, br = back(out.base_rotations, out.base_root)
    return Filled(fq, fr, plan.keys, todo, bq, br, out.gate, out.plant, plan)


def _mirrored(request: Request) -> Filled:
    q_m, r_m = mirror_x(request.rotations, request.root)
    track = None if request.object_track is None else mirror_x(*request.object_track)
    out = fill(replace(request, rotations=q_m, root=r_m, object_track=track, mirror=False))
    fq, fr = mirror_x(out.rotations, out.root)
    bq, br = (None, None) if out.base_rotations is None else mirror_x(out.base_rotations, out.base_root)
    return Filled(fq, fr, out.known, out.filled, bq, br, out.gate, out.plant, out.plan, out.rate)
