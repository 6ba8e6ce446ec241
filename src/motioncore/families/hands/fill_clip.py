"""The hand in-fill as an in-filling family (``HandsFamily``, ``models.kinds``: ``infill-hands``): ``fit`` learns the
take on pseudo-gaps cut from the clip's fully keyed frames (``Request.learn`` seconds: ``gate.learn_and_fill``'s
learning, 0 the gate alone), ``fill`` fills gap by gap through ``fill_hands``; a clip at another rate goes through
the model's rate and back (``infill.fill.back_to_clip``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from motioncore.errors import MotioncoreError
from motioncore.families.hands.fill import fill_hands
from motioncore.families.hands.gate import learn_and_fill
from motioncore.infill.family import Filled, Request
from motioncore.infill.fill import back_to_clip, model_request
from motioncore.infill.plan import InfillPlan

__all__ = ["HandsFamily"]


class HandsFamily:
    """``infill-hands``: one deterministic answer; its base (Blender's Bezier of the keys) is its fill at weight 0."""

    checks_clip = True
    own_rate = False

    def fit(self, request: Request, plan: InfillPlan) -> Any:
        """No fit of its own before the fill: with ``Request.learn`` the learning and the fill are one pass
        (``families.hands.gate.learn_and_fill``); the weight is ``Request.residual`` (a weight or {gap length:
        weight})."""
        return request.residual

    def fill(self, request: Request, plan: InfillPlan) -> Filled:
        if plan.route != "same":
            return back_to_clip(plan, self.fill(model_request(request, plan), plan.model))
        J = len(request.meta["skeleton"]["names"])
        q, r, keys, todo = plan.q, plan.r, plan.keys, plan.todo
        if not todo.any():
            raise MotioncoreError("fill: nothing to fill")
        obj = None if request.object_track is None else (np.asarray(request.object_track[0], np.float64),
                                                         np.asarray(request.object_track[1], np.float64))
        if request.learn is not None:
            fq, fr, _ = learn_and_fill(request.model, request.meta, q, r, keys, todo, obj, float(request.learn))
        else:
            fq, fr = fill_hands(request.model, request.meta, q, r, keys, todo, obj, self.fit(request, plan))
        fq = np.where(~todo[:, :J, None], q, fq)
        fr = np.where(~todo[:, J:], r, fr)
        n = request.n_samples
        return Filled(np.repeat(fq[None], n, 0), np.repeat(fr[None], n, 0), keys, todo, plan=plan)
