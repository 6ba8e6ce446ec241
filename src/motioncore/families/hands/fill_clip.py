"""The hand in-fill as an in-filling family (``HandsFamily``, ``models.kinds``: ``infill-hands``): ``fit`` learns the
take on pseudo-gaps cut from the clip's fully keyed frames (``Request.learn`` seconds: ``gate.learn_and_fill``'s
learning, 0 the gate alone), ``fill`` fills gap by gap through ``fill_hands``; a clip at another rate goes through
the model's rate and back (``infill.fill.back_to_clip``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from motioncore.errors import MotioncoreError
from motioncore.families.hands.fill import fill_hands
from motioncore.families.hands.gate import learn_gate
from motioncore.infill.family import Filled, Request
from motioncore.infill.fill import back_to_clip, model_request, plan_of
from motioncore.infill.learn import Learnt
from motioncore.infill.plan import InfillPlan

__all__ = ["HandsFamily"]


def _track(request: Request) -> tuple[np.ndarray, np.ndarray] | None:
    """The request's object track as float64 (hands with an object), or None."""
    t = request.object_track
    return None if t is None else (np.asarray(t[0], np.float64), np.asarray(t[1], np.float64))


class HandsFamily:
    """``infill-hands``: one deterministic answer; its base (Blender's Bezier of the keys) is its fill at weight 0."""

    checks_clip = True
    own_rate = False

    def fit(self, request: Request, plan: InfillPlan) -> tuple[Any, Any]:
        """(the network, its weight): with ``Request.learn`` seconds the take learnt on its pseudo-gaps and the gate
        fitted on them (``learn``); else the model at ``Request.residual`` (a weight or {gap length: weight})."""
        if request.learn is None:
            return request.model, request.residual
        learnt = self.learn(request, plan, seconds=float(request.learn))
        return learnt.model, learnt.fields["residual"]

    def learn(self, request: Request, plan: InfillPlan | None = None, seconds: float | None = None, **_: Any
              ) -> Learnt:
        """The take learnt for ``seconds`` (0: the gate alone) on pseudo-gaps shaped like its finger gaps
        (``families.hands.gate.learn_gate``)."""
        plan = plan or plan_of(request, self)
        net, gate, report = learn_gate(request.model, request.meta, plan.q, plan.r, plan.keys, _track(request),
                                       float(seconds or 0.0))
        return Learnt(net, {"residual": gate}, report)

    def fill(self, request: Request, plan: InfillPlan) -> Filled:
        if plan.route != "same":
            return back_to_clip(plan, self.fill(model_request(request, plan), plan.model))
        J = len(request.meta["skeleton"]["names"])
        q, r, keys, todo = plan.q, plan.r, plan.keys, plan.todo
        if not todo.any():
            raise MotioncoreError("fill: nothing to fill")
        net, weight = self.fit(request, plan)
        fq, fr = fill_hands(net, request.meta, q, r, keys, todo, _track(request), weight)
        fq = np.where(~todo[:, :J, None], q, fq)
        fr = np.where(~todo[:, J:], r, fr)
        n = request.n_samples
        return Filled(np.repeat(fq[None], n, 0), np.repeat(fr[None], n, 0), keys, todo, plan=plan)
