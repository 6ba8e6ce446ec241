"""A deterministic model's answer as a correction of the rig's own curves (plain numpy, no bpy): the model's change
goes on Blender's default Bezier of the keys (its base), and the result is blended from the curve the user has
(LINEAR from Blender's BVH importer, CONSTANT, Bezier with any handles) by the gate's weight per gap."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor.quat_np import blend_pose, quat_align, quat_normalize
from . import rigmap


def correct(out: np.ndarray, root: np.ndarray, base: tuple[np.ndarray, np.ndarray], seg: Mapping[str, Any],
            known: np.ndarray, blend: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic model's answer as a correction of the rig's own curves. The model's base is Blender's
    default Bezier of the keys (``keys_bezier``: Auto Clamped, whatever the keys' interpolation); where a bone is
    filled, the full fill is ``(answer base^-1) keys_bezier`` (the change the model makes to that Bezier, in the
    bone's parent frame, applied to the rig's own Bezier of the same keys), the root ``keys_bezier_root + answer -
    base``, so the mapping between the rig and the model's skeleton adds no error of its own. It is then blended
    from the curve the user has (``bezier``: what Blender gives for their keys, LINEAR or CONSTANT ones too) by
    ``blend`` (T,) (the gate's weight per frame, `gap_blend`; None: 1): 0 gives the user's curve exactly. Keys stay
    as they are."""
    b_rot, b_root = base
    user = np.asarray(seg["bezier"], np.float64)
    user_root = np.asarray(seg["bezier_root"], np.float64)
    kb = np.asarray(seg.get("keys_bezier", user), np.float64)
    kb_root = np.asarray(seg.get("keys_bezier_root", user_root), np.float64)
    delta = rigmap.quat_mul(out, rigmap.quat_conj(b_rot))
    fixed = quat_align(quat_normalize(rigmap.quat_mul(delta, kb)), out)
    full_root = kb_root + root - b_root
    if blend is not None:
        w = np.asarray(blend, np.float64)[:, None]   # (T, 1): every bone of a frame alike
        fixed, full_root = blend_pose(user, user_root, fixed, full_root, w)
    todo = ~np.asarray(known, bool)
    rot = np.where(todo[:, :-1, None], fixed, out)
    r = np.where(todo[:, -1:], full_root, root)
    return rot, r


def table_blend(n_frames: int, rows: Sequence[Mapping[str, Any]] | None) -> np.ndarray:
    """(T,) the gate's blend weight from the user's curve on each frame, read from the server's per-gap table (the
    reply's ``gaps``: per gap its ``start``, ``end`` in the request's frames and its ``blend``; the server matched
    each gap to its fit, ``motioncore.infill.plan``); 1 elsewhere, and everywhere for a server without the table."""
    w = np.ones(int(n_frames))
    for r in rows or []:
        if "blend" in r:
            w[int(r["start"]):int(r["end"])] = float(r["blend"])
    return w
