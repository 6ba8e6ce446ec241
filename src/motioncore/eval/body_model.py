"""The deterministic body in-fill checkpoint (``infill-body``) as a ``KeyFill`` / LaFAN1 ``Fill``, on any body
skeleton (``eval.keyed.on_skeleton``: the model's own skeleton directly, others through a retarget and back)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.skeleton import Skeleton
from .keyed import KeyFill, on_skeleton

__all__ = ["is_body_checkpoint", "load_body_keyfill"]


def is_body_checkpoint(name_or_path: str | Path) -> bool:
    from ..models.checkpoint import CheckpointError, read_meta
    from ..models.registry import resolve

    try:
        return read_meta(resolve(name_or_path)).get("kind") == "infill-body"
    except CheckpointError:
        return False


def load_body_keyfill(name_or_path: str | Path, device: str = "cpu", use_safety: bool = True, joint_map=None
                      ) -> tuple[KeyFill, dict]:
    """``use_safety``: scale the network's residual by its confidence (``tasks.body_fill.confidence``);
    ``joint_map``: model joint -> data joint for data on another skeleton (default ``retarget.auto_map``)."""
    from ..models.registry import load_model
    from ..tasks.body_fill import BodyLayout, confidence, run_model

    model, meta = load_model(name_or_path, device)
    sk = Skeleton.from_dict(meta["skeleton"])
    layout = BodyLayout.of(sk)

    def fill(skeleton: Skeleton, q: np.ndarray, p: np.ndarray, known: np.ndarray):
        kn = np.repeat(known[..., None], sk.num_joints + 1, axis=-1)
        q, p = np.asarray(q, np.float64), np.asarray(p, np.float64)
        conf = confidence(layout, meta["safety"], q, p, kn) if use_safety and meta.get("safety") else None
        return run_model(model, layout, q, p, kn, confidence=conf)

    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    return on_skeleton(fill, sk, None if conv is None else np.asarray(conv, np.float64), joint_map), meta
