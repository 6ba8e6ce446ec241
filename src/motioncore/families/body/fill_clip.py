"""The body in-fill as an in-filling family (``BodyFamily``, ``models.kinds``: ``infill-body``): ``fit`` is the
request-time gate on the clip's own keys (``families.body.gate``), ``fill`` fills the plan's gaps on its route:

- ``same`` (``fill_clip_body``): each gap in its own window (``core.gaps``; with the spline correction the gaps
  between single keys together) through ``fill_body``, the gate's weights per gap length, the feet planted;
- ``own`` (a clip faster than the model: ``families.body.fill_rate.fill_clip_body_at_rate``);
- ``through`` (a clip slower than the model, or blocking on the model's frames): filled at the model's rate and
  brought back (``infill.fill.back_to_clip``; blocking: ``fill_rate.smooth_back``).

With ``Request.rate`` and a scene rate, the scene-rate check runs first (``families.body.gate_rate``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from motioncore.core.rotations import quat_continuity, quat_normalize
from motioncore.families.body.adapt import DEFAULT_SECONDS, adapt_infill
from motioncore.families.body.fill import fill_body
from motioncore.families.body.fill_plant import plant_filled, plant_strength
from motioncore.families.body.fill_rate import fill_clip_body_at_rate, smooth_back
from motioncore.families.body.gate import MAX_PSEUDO, Gate, bucket, fit_gate
from motioncore.families.body.gate_rate import rate_check
from motioncore.families.body.model import basis_of
from motioncore.infill.family import Filled, Request
from motioncore.infill.fill import back_to_clip, model_request, plan_of
from motioncore.infill.learn import Learnt
from motioncore.infill.plan import InfillPlan, at_model_rate

__all__ = ["BodyFamily", "fill_clip_body"]


class BodyFamily:
    """``infill-body``: one deterministic answer, its Bezier base beside it, a gate fitted per request."""

    checks_clip = True
    own_rate = True

    def fit(self, request: Request, plan: InfillPlan) -> Gate | None:
        """The gate (``Request.gate`` True: fitted on the clip's keys at the model's rate; a ``Gate``: that one;
        False: None, the network as trained)."""
        if request.gate is True:
            m = plan if plan.route == "same" else plan.model
            plant = request.plant_feet if request.residual != 0.0 else False
            return fit_gate(request.model, request.meta, m.q, m.r, m.keys, m.todo,
                            limit=request.gate_limit or MAX_PSEUDO, plant=bool(plant), curve=request.curve,
                            donor=request.donor)
        return request.gate if isinstance(request.gate, Gate) else None

    def learn(self, request: Request, seconds: float | None = None, steps: int | None = None,
              progress: Any = None, cancel: Any = None, key: str | None = None) -> Learnt:
        """Learn This Action (``families.body.adapt.adapt_infill``) on the clip's keys at the model's rate: the
        adapted copy, and the gate fitted on the pseudo-gaps it held out (``gate_limit``)."""
        mq, mr, mk = at_model_rate(request.meta, request.rotations, request.root, request.known, request.fps)
        ad = adapt_infill(request.model, request.meta, mq, mr, mk, seconds=DEFAULT_SECONDS if seconds is None
                          else seconds, progress=progress, cancel=cancel, steps=steps, key=key)
        return Learnt(ad.model, {"gate_limit": ad.held or None}, ad.summary(), ad)

    def fill(self, request: Request, plan: InfillPlan) -> Filled:
        if request.rate is None or not plan.fps:
            return self._fill(request, plan)
        asked, request = request.rate, replace(request, rate=None)
        rc = rate_check(request.model, request.meta, plan.q, plan.r, plan.keys, plan.todo, float(plan.fps))
        if rc is None:
            return self._fill(request, plan)
        rate = rc.summary()
        if rc.best is not None and asked == "best":   # filled at that rate; the keys stay put
            rate["filled_at"] = float(rc.best)
            request = replace(request, fps=rc.best)
            plan = plan_of(request, self)
        return replace(self._fill(request, plan), rate=rate)

    def _fill(self, request: Request, plan: InfillPlan) -> Filled:
        plant = request.plant_feet if request.residual != 0.0 else False
        if plan.route == "through":
            out = self._fill(model_request(request, plan), plan.model)
            if plan.blocked and out.base_rotations is not None and out.base_root is not None:
                fq, fr, bq, br = smooth_back(plan, out)
                out = Filled(fq, fr, plan.keys, plan.todo, bq, br, out.gate, out.plant, plan)
            else:
                out = back_to_clip(plan, out)
        elif plan.route == "own":
            out = fill_clip_body_at_rate(request, plan, self.fit(request, plan))
        else:
            out = fill_clip_body(request, plan, self.fit(request, plan))
        plan.fit_rows(out.gate, plant)
        return out


def fill_clip_body(request: Request, plan: InfillPlan, gate: Gate | None) -> Filled:
    """Route ``same``: each gap in its own window (``core.gaps``) with its bucket's weights from ``gate``; the Bezier
    base comes back from the same pass (with ``Request.donor``, the gate's choice of the clip's own motion per gap,
    ``families.body.fill_donor``, its choices in ``gate.filled_by``). ``plant_feet``: then the feet planted (``families.body.fill_plant``) on the
    gaps whose length the gate keeps planting for; ``"judge"``: judged by the gate, not planted (a client that plants
    its own rig). Weight 0 (``residual``) asks for the base itself: Blender's curve, unplanted."""
    model, meta, n_samples, check = request.model, request.meta, request.n_samples, request.check
    residual = request.residual
    plant = request.plant_feet if residual != 0.0 else False
    J = len(meta["skeleton"]["names"])
    q, r, keys, todo = plan.q, plan.r, plan.keys, plan.todo
    out_q, out_r, base_q, base_r = q.copy(), r.copy(), q.copy(), r.copy()
    planted = np.zeros(len(q), bool)  # the gap frames whose feet are planted
    by_model = np.zeros(len(q), bool)  # ... of them, those planted on the model's own contacts (blocking)
    strength = np.ones(len(q))  # ... and how far each plant holds (the gate's, ``fill_plant.judge_plant``)
    feet = int(getattr(getattr(model, "cfg", None), "contacts", 0) or 0)
    contacts = np.zeros((len(q), feet))  # the model's contact probabilities: its filled frames, and the keys around
    seen = np.zeros(len(q), bool)
    for gaps, a, b in _runs(model, meta, plan):
        if check is not None:
            check()
        sel = np.zeros((b - a, J + 1), bool)
        for s, e in gaps:
            sel[s - a:e - a] = todo[s:e]
        longest = max(e - s for s, e in gaps)
        w = residual * np.asarray(gate.weights(longest) if gate is not None else (1.0, 1.0))
        cl: list = []
        fq, fr, bq, br = _fill_body_window(model, meta, q[a:b], r[a:b], keys[a:b], sel, (float(w[0]), float(w[1])),
                                           cl)
        if cl:
            mine = sel.any(1) | ~seen[a:b]
            contacts[a:b][mine] = cl[0][mine]
            seen[a:b] = True
        out_q[a:b] = np.where(sel[:, :J, None], fq, out_q[a:b])
        out_r[a:b] = np.where(sel[:, J:], fr, out_r[a:b])
        base_q[a:b] = np.where(sel[:, :J, None], bq, base_q[a:b])
        base_r[a:b] = np.where(sel[:, J:], br, base_r[a:b])
        for s, e in gaps:
            planted[s:e] = bool(plant) and (gate is None or gate.plant(e - s))
            strength[s:e] = plant_strength(gate, e - s)   # how far the gate lets each plant hold
            if plant and cl and len(gaps) > 1 and not planted[s:e].any() and _unjudged(gate, e - s):
                # blocking: no keyed stretch to judge planting on, and the keys cannot tell where a foot is down;
                # the model's contact output can (it was trained on the capture's labels)
                planted[s:e] = by_model[s:e] = True
    if request.donor and isinstance(gate, Gate):   # the gate's per-gap choice of the clip's own motion
        from motioncore.core.skeleton import Skeleton
        from motioncore.families.body.fill import BodyLayout
        from motioncore.families.body.fill_donor import fill_gaps

        lay = BodyLayout.of(Skeleton.from_dict(meta["skeleton"]))
        out_q, out_r, gate.filled_by = fill_gaps(lay, gate, out_q, out_r, base_q, base_r,
                                                 int(meta.get("root_joint", lay.body.root)), keys, todo)
    plant_info = None
    if planted.any() and plant == "judge":  # judged only: the client plants its own rig where the gate says
        plant_info = {"frames": int(planted.sum()), "judged_only": True}
    elif planted.any():
        runs_n, hips = 0, 0.0
        for part, given in ((planted & ~by_model, None), (by_model, contacts)):
            if not part.any():
                continue
            pq, pr, pl = plant_filled(meta, out_q, out_r, keys, todo & part[:, None], contacts=given,
                                      strength=np.where(by_model, 1.0, strength))
            if pl is not None:
                out_q, out_r = pq, pr
                runs_n, hips = runs_n + len(pl.runs), max(hips, float(pl.hips_moved))
        if runs_n or by_model.any():
            plant_info = {"frames": int(planted.sum()), "contact_runs": runs_n, "hips_moved": hips,
                          "model_contacts": int(by_model.sum())}
    rotations = plan.rotations
    keep = ~todo[:, :J, None]
    out_q = np.where(keep, rotations, quat_continuity(np.where(keep, quat_normalize(q), out_q), axis=0))
    base_q = np.where(keep, rotations, quat_continuity(np.where(keep, quat_normalize(q), base_q), axis=0))
    out_q, out_r, base_q, base_r = (np.repeat(a[None], n_samples, 0) for a in (out_q, out_r, base_q, base_r))
    return Filled(out_q, out_r, keys, todo, base_q, base_r, gate, plant_info, plan)


def _runs(model, meta: dict, plan: InfillPlan) -> list[tuple[list[tuple[int, int]], int, int]]:
    """The windows the gaps are filled in: with the spline correction (one curve through single keys) the gaps of a
    blocked stretch go together (``core.gaps.gap_runs``, up to the model's window), so the curve shares its slope
    at every key between them; a model with the per-gap basis fills each gap in its own window, as trained."""
    if basis_of(model) == "spline":
        return plan.runs(int(meta.get("config", {}).get("max_frames", 128)))
    return [([(s, e)], a, b) for s, e, a, b in plan.windows()]


def _unjudged(gate: Any, length: int) -> bool:
    """Whether the gate had nothing to judge planting on for gaps of ``length`` (sparse keys)."""
    if gate is None:
        return True
    fit = gate.fits.get(bucket(length))
    return fit is None or "unjudged" in (getattr(fit, "plant_error", None) or {})


def _fill_body_window(model, meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray,
                      todo: np.ndarray, residual: tuple[float, float], contacts: list | None = None):
    """One gap's window for the deterministic ``infill-body`` (``families.body.fill``): (filled rotations, root,
    base rotations, base root). A channel with no key in the window (sparse, staggered curves) stays as sent."""
    bare = ~keys.any(0)
    keys, todo = keys | bare, todo & ~bare
    if not todo.any():
        return rotations, root, rotations, root
    return fill_body(model, meta, rotations, root, keys, todo, residual, base=True, contacts=contacts)
