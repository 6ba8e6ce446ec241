"""A deterministic model's answer as a correction of the rig's own curves (plain numpy, no bpy): the model's change
goes on Blender's default Bezier of the keys (its base), and the result is blended from the curve the user has
(LINEAR from Blender's BVH importer, CONSTANT, Bezier with any handles) by the gate's weight per gap."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor.gaps import runs
from ..vendor.quat_np import quat_align, quat_normalize
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


def blend_pose(uq: np.ndarray, ur: np.ndarray, fq: np.ndarray, fr: np.ndarray, w: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """From the user's curve (``uq`` (T, B, 4), ``ur`` (T, 3)) toward the fill (``fq``, ``fr``) by ``w`` (T, 1):
    rotations by normalised linear interpolation on the user's hemisphere, the root linearly, as the server's gate
    scores it (``motioncore.families.body.gate_curve.blend_pose``); ``w`` 0: the user's curve exactly."""
    wq = w[..., None]   # (T, 1, 1)
    f = np.where(np.sum(uq * fq, -1, keepdims=True) < 0, -fq, fq)
    q = np.where(wq == 0.0, uq, quat_normalize(uq + wq * (f - uq)))
    return q, np.where(w == 0.0, ur, ur + w * (fr - ur))


def gap_blend(known: np.ndarray, fits: Sequence[Mapping[str, Any]], fps: float | None, model_fps: float) -> np.ndarray:
    """(T,) the gate's blend weight from the user's curve (its ``blend`` per gap length; 1 where it gives none) on
    each frame of each gap of ``known`` (T, B + 1): a gap takes the fit whose gap length (model frames, ``length``)
    is nearest its own in model frames (the buckets are the server's; the nearest median is the gap's own)."""
    k = np.asarray(known, bool).all(axis=1)
    w = np.ones(k.size)
    fits = [f for f in fits if "blend" in f and f.get("length")]
    if not fits:
        return w
    ratio = model_fps / float(fps) if fps else 1.0
    for s, e in runs(~k):
        n = max(1.0, (e - s) * ratio)
        f = min(fits, key=lambda f: abs(np.log(float(f["length"]) / n)))
        w[s:e] = float(f["blend"])
    return w
