"""The joints a retarget could not map, filled from the mapped ones by a per-element any-order checkpoint
(``families.anyorder.fill.fill_joints``): the filler ``retarget(..., missing="infill", joint_fill=...)`` takes, so that
``retarget`` (a lower layer) never imports the in-fill."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.motion import Motion
from ..errors import MotioncoreError
from ..retarget.mapping import RetargetError

__all__ = ["joint_filler", "JointFill"]

JointFill = Callable[[Motion, np.ndarray], Motion]   # (clip on the target skeleton, unmapped (J,) bool) -> filled
_MODELS: dict[str, tuple] = {}   # checkpoints by name, loaded once per process (a batch or a Ray worker)


def joint_filler(infill_model: str | tuple) -> JointFill:
    """A filler of unmapped joints with ``infill_model`` (a per-element any-order checkpoint on the target
    skeleton: a bundled name, a path or a loaded (model, meta)). Its errors are ``RetargetError``s."""
    from ..families.anyorder.fill import fill_joints  # torch: never at import (bpy's Python has none)
    from ..models.registry import load_model

    if isinstance(infill_model, str):
        if infill_model not in _MODELS:
            _MODELS[infill_model] = load_model(infill_model)
        model, meta = _MODELS[infill_model]
    else:
        model, meta = infill_model

    def fill(motion: Motion, unmapped: np.ndarray) -> Motion:
        names = list(meta["skeleton"]["names"])
        if names != list(motion.skeleton.names):
            raise RetargetError(f"infill_model is for the skeleton ({', '.join(names[:3])}, ...), not the target's "
                                f"({', '.join(motion.skeleton.names[:3])}, ...)")
        rj = int(meta["root_joint"])
        try:
            q = fill_joints(model, meta, motion.rotations, motion.positions[:, rj], unmapped)
        except RetargetError:
            raise
        except MotioncoreError as e:
            raise RetargetError(f"missing='infill': {e}") from None
        return Motion(motion.skeleton, q, motion.positions, motion.fps, motion.name)

    return fill
