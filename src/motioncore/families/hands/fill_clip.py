"""The hand in-fill on a whole clip (``tasks.infill.fill_clip`` for ``infill-hands``, its ``fill`` hook in
``models.kinds``): gap by gap through ``fill_hands``, or the request-time learning of ``gate.learn_and_fill``."""
from __future__ import annotations

from typing import Any

import numpy as np

from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.families.hands.fill import fill_hands
from motioncore.families.hands.gate import learn_and_fill
from motioncore.tasks.infill import Filled, _checked_window


def fill_clip_hands(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray,
                    n_samples: int = 1, fill: np.ndarray | None = None, object_track=None, residual=1.0,
                    learn: float | None = None, **_: Any) -> Filled:
    """``tasks.infill.fill_clip`` for the deterministic ``infill-hands`` (``fill_hands``), with the same checks;
    ``residual`` a weight or the gate's {gap length: weight}."""

    J = Skeleton.from_dict(meta["skeleton"]).num_joints
    q, r, keys, todo = _checked_window(rotations, root, known, fill, J)
    if not todo.any():
        raise MotioncoreError("fill: nothing to fill")
    obj = None if object_track is None else (np.asarray(object_track[0], np.float64),
                                             np.asarray(object_track[1], np.float64))
    if learn is not None:
        fq, fr, _ = learn_and_fill(model, meta, q, r, keys, todo, obj, float(learn))
    else:
        fq, fr = fill_hands(model, meta, q, r, keys, todo, obj, residual)
    fq = np.where(~todo[:, :J, None], q, fq)
    fr = np.where(~todo[:, J:], r, fr)
    return Filled(np.repeat(fq[None], n_samples, 0), np.repeat(fr[None], n_samples, 0), keys, todo)
