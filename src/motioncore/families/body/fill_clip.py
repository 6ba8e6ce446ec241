"""The body in-fill on a whole clip (``tasks.infill.fill_clip`` for ``infill-body``, its ``fill`` hook in
``models.kinds``): the gate fitted once on the clip's keys, then each gap in its own window through ``fill_body``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from motioncore.core.gaps import gap_runs, gap_windows
from motioncore.core.rotations import quat_continuity, quat_normalize
from motioncore.core.skeleton import Skeleton
from motioncore.families.body.fill import fill_body
from motioncore.families.body.gate import MAX_PSEUDO, Gate, fit_gate
from motioncore.families.body.model import basis_of
from motioncore.tasks.infill import Filled, _checked_window


def fill_clip_body(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, n_samples: int = 1,
                   fill: np.ndarray | None = None, residual: float = 1.0, gate: Any = True,
                   check: Callable[[], None] | None = None, gate_limit: int | None = None,
                   plant_feet: bool | str = False, curve: str | None = None, donor: bool = False, **_: Any) -> Filled:
    """``tasks.infill.fill_clip`` for ``infill-body``: the gate fitted once on the clip's keys, then each gap in its
    own window (``core.gaps``) with its bucket's weights; the Bezier base comes back from the same pass. Batched
    windows (N, T, J, 4) are filled with the network as trained (no gate). ``plant_feet``: then the feet planted
    (``families.body.fill_plant``) on the gaps whose length the gate keeps planting for; ``"judge"``: judged by the
    gate, not planted (a client that plants its own rig). ``curve``: the user's keys' interpolation, for the gate's
    blend from the user's curve (``families.body.gate_curve``; the fill itself does not change). ``donor``: the
    clip's own motion offered per gap beside the network, the gate choosing (``families.body.donor``; its choices
    in ``gate.filled_by``)."""
    plant = plant_feet if residual != 0.0 else False   # weight 0 asks for the base itself: Blender's curve, unplanted
    if np.ndim(rotations) != 3:
        gate = False
    J = Skeleton.from_dict(meta["skeleton"]).num_joints
    q, r, keys, todo = _checked_window(rotations, root, known, fill, J)
    frames = todo.any(1)
    if gate is True:
        gate = fit_gate(model, meta, q, r, keys, todo, limit=gate_limit or MAX_PSEUDO, plant=bool(plant),
                        curve=curve, donor=donor)
    elif not isinstance(gate, Gate):
        gate = None
    from motioncore.families.body.fill_plant import plant_filled, plant_strength

    out_q, out_r, base_q, base_r = q.copy(), r.copy(), q.copy(), r.copy()
    planted = np.zeros(len(q), bool)  # the gap frames whose feet are planted
    by_model = np.zeros(len(q), bool)  # ... of them, those planted on the model's own contacts (blocking)
    strength = np.ones(len(q))  # ... and how far each plant holds (the gate's, ``fill_plant.judge_plant``)
    feet = int(getattr(getattr(model, "cfg", None), "contacts", 0) or 0)
    contacts = np.zeros((len(q), feet))  # the model's contact probabilities: its filled frames, and the keys around
    seen = np.zeros(len(q), bool)
    for gaps, a, b in _runs(model, meta, frames):
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
    if donor and isinstance(gate, Gate):
        from motioncore.families.body.donor import fill_gaps
        from motioncore.families.body.fill import BodyLayout

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
    keep = ~todo[:, :J, None]
    out_q = np.where(keep, rotations, quat_continuity(np.where(keep, quat_normalize(q), out_q), axis=0))
    base_q = np.where(keep, rotations, quat_continuity(np.where(keep, quat_normalize(q), base_q), axis=0))
    out_q, out_r, base_q, base_r = (np.repeat(a[None], n_samples, 0) for a in (out_q, out_r, base_q, base_r))
    return Filled(out_q, out_r, keys, todo, base_q, base_r, gate, plant_info)


def _runs(model, meta: dict, frames: np.ndarray) -> list[tuple[list[tuple[int, int]], int, int]]:
    """The windows the gaps are filled in: with the spline correction (one curve through single keys) the gaps of a
    blocked stretch go together (``core.gaps.gap_runs``, up to the model's window), so the curve shares its slope
    at every key between them; a model with the per-gap basis fills each gap in its own window, as trained."""
    if basis_of(model) == "spline":
        return gap_runs(frames, max_len=int(meta.get("config", {}).get("max_frames", 128)))
    return [([(s, e)], a, b) for s, e, a, b in gap_windows(frames)]


def _unjudged(gate: Any, length: int) -> bool:
    """Whether the gate had nothing to judge planting on for gaps of ``length`` (sparse keys)."""
    if gate is None:
        return True
    from motioncore.families.body.gate import bucket

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
