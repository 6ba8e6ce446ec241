"""Foot skate for ``batch infill``'s report.json, per file (``core.feet``): over the filled frames and the key on
either side of each gap, on each foot and toe joint's ground taken from the input clip, in cm/s at the clip's
rate, for

- ``filled``: the output;
- ``bezier``: Blender's Bezier of the same keys (what the animator had without the in-fill);
- ``input``: the input's own frames there (the capture, when the gaps were cut from one; a frozen run's copies);
- ``keyed``: the input over its keyed frames away from the gaps (pairs of consecutive keys): how much this
  capture's feet slide where nothing was filled;

with ``filled_over_input`` and ``filled_over_keyed``. ``cm_per_unit`` and ``unit``: the clip's unit, as ``eval clips``
reads it (``eval.clips.clip_unit``: CMU's ASF units x 2.54 / 0.45, known; else from its legs, 1 for cm, 100 for
metres).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core import feet as foots


def skate_report(m: Any, filled: Any, todo: np.ndarray) -> dict[str, Any] | None:
    """The report's ``skate`` entry (module doc) for the input Motion ``m`` and its ``filled`` copy (``todo``
    (T,) the frames filled); None for a clip without two legs with feet."""
    from ..eval.clips import clip_unit
    from ..eval.keyed import bezier_keys
    from ..retarget import clip_poses
    from ..retarget.contacts import feet_of

    todo = np.asarray(todo, bool)
    legs = feet_of(m.skeleton, clip_poses(m))
    if legs is None or not todo.any():
        return None
    feet = [j for leg in legs for j in leg]
    unit, unit_from = clip_unit(m)   # one unit everywhere: eval clips reads a clip's the same way
    known = ~todo
    bq, bp = bezier_keys(m.skeleton, m.rotations[None], m.positions[None], known[None])
    _, truth = m.global_transforms()
    ground, span = foots.ground(truth, feet), foots.fill_span(known)
    away = known & ~span   # keyed frames that are not a gap's key either side
    out: dict[str, Any] = {"cm_per_unit": round(unit, 4), "unit": unit_from}
    for name, gp, frames in (("filled", filled.global_transforms()[1], span),
                             ("bezier", m.skeleton.forward_kinematics(bq[0], bp[0])[1], span),
                             ("input", truth, span), ("keyed", truth, away)):
        s = foots.skate(gp, m.fps, feet, ground, frames, unit=unit)
        out[name] = round(s, 2) if np.isfinite(s) else None
    for ref in ("input", "keyed"):
        out[f"filled_over_{ref}"] = round(out["filled"] / out[ref], 3) if out["filled"] is not None and out[ref] \
            else None
    return out
