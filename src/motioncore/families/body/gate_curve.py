"""The gate's second weight: how far to go from the curve the animator actually has toward the model's fill.

The model's base is Blender's Bezier of the keys (Auto Clamped handles: what an animator's default keys give).
Mocap imported with Blender's BVH importer has LINEAR keys, and an animator may key CONSTANT (stepped): what they
see in a gap is then linear (or held) interpolation, not the Bezier the model corrects. On the gate's own
pseudo-gaps (keys the clip has, cut out; ``families.body.gate``) the user's curve is rebuilt from the keys either
side (``user_curve``), the gated fill is blended from it (``blend_pose``: weight 0 the user's curve exactly, 1 the
fill), and the weight that lowers position error over the user's curve's plus rotation error over its most is kept
(ties to the smaller weight: a fill that does not beat the user's curve leaves it as it is). The add-on applies the
same blend to the rig (``addon/core/correct.py``).

Legend: B windows, T frames, J joints.
"""
from __future__ import annotations

import numpy as np

from motioncore.core.gaps import runs
from motioncore.core.quat_np import blend_pose
from motioncore.core.rotations import quat_normalize

__all__ = ["CURVES", "user_curve", "blend_pose", "fit_blend", "pose_errors"]

CURVES = ("bezier", "linear", "constant")   # the user's keys' interpolation, as the add-on reads it
GRID = np.round(np.linspace(0.0, 1.0, 11), 2)   # candidate weights: the gate's (``families.body.gate``) and the blend


def user_curve(q: np.ndarray, pos: np.ndarray, frames: np.ndarray, curve: str) -> tuple[np.ndarray, np.ndarray]:
    """What the user's keys give on the gaps ``frames`` (B, T; each run with a key either side) of windows ``q`` (B, T, J, 4) / ``pos`` (B, T, J, 3):
    ``linear``: each element interpolated linearly between the keys either side (quaternion components, then
    normalised; what LINEAR keys on Euler or quaternion channels give to within a fraction of a degree over a gap),
    ``constant``: the key before held. Outside the gaps: the keys."""
    uq, up = np.array(q, np.float64), np.array(pos, np.float64)
    for i, s, e in [(b, s, e) for b in range(len(q)) for s, e in runs(frames[b])]:   # keys at s - 1 and e
        a = q[i, s - 1]
        b = np.where(np.sum(a * q[i, e], -1, keepdims=True) < 0, -q[i, e], q[i, e])
        t = (np.arange(s, e) - (s - 1.0)) / (e - (s - 1.0)) if curve == "linear" else np.zeros(e - s)
        uq[i, s:e] = quat_normalize(a[None] + t[:, None, None] * (b - a)[None])
        up[i, s:e] = pos[i, s - 1][None] + t[:, None, None] * (pos[i, e] - pos[i, s - 1])[None]
    return uq, up


def pose_errors(sk, q: np.ndarray, pos: np.ndarray, tq: np.ndarray, tpos: np.ndarray, frames: np.ndarray
                ) -> tuple[float, float]:
    """(mean global joint position error in the skeleton's units, cm; mean local rotation error, degrees) of a
    pose against the truth over ``frames`` (B, T)."""
    _, p = sk.forward_kinematics(q, pos)
    _, tp = sk.forward_kinematics(tq, tpos)
    m = np.asarray(frames, bool)
    cm = np.linalg.norm(p - tp, axis=-1).mean(-1)[m]
    dot = np.abs(np.sum(q * tq, -1)).clip(0.0, 1.0)
    deg = np.degrees(2.0 * np.arccos(dot)).mean(-1)[m]
    return float(cm.mean()), float(deg.mean())


def fit_blend(sk, q: np.ndarray, pos: np.ndarray, frames: np.ndarray, fq: np.ndarray, fp: np.ndarray, curve: str
              ) -> tuple[float, dict[str, list[float]]]:
    """The blend weight from the user's ``curve`` toward the gated fill (``fq``, ``fp``: the pseudo-gap windows
    filled at the gate's weights) on the pseudo-gaps ``frames`` of windows ``q`` / ``pos`` (the truth), and the
    errors {curve, fill, blended: [cm, deg]} it was picked on."""
    uq, up = user_curve(q, pos, frames, curve)
    cur = pose_errors(sk, uq, up, q, pos, frames)
    best, errs = 0.0, {}
    score = None
    for w in GRID:
        bq, bp = blend_pose(uq, up, fq, fp, float(w))
        e = pose_errors(sk, bq, bp, q, pos, frames)
        errs[float(w)] = e
        s = e[0] / max(cur[0], 1e-9) + e[1] / max(cur[1], 1e-9)
        if score is None or s < score - 1e-12:
            best, score = float(w), s
    return best, {"curve": list(cur), "fill": list(errs[1.0]), "blended": list(errs[best])}
