"""The one home of resampling for the in-fill: a clip at the scene's rate to the model's (30 fps) and back.

``resample_frames`` gives, per frame at the new rate, the two frames around its time and the blend weight;
everything else here applies those indices: rotations by slerp, translations by lerp, a key mask (a frame at the
new rate is keyed where the frames around its time both are, or where it falls on one). Nothing else in the
library calls ``resample_frames``: the plan (``infill.plan``) holds the indices of a request, the families apply
them through this module.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.rotations import quat_continuity, quat_normalize, quat_slerp
from ..errors import MotioncoreError

__all__ = ["Resample", "resample_frames", "resample", "back_to_clip", "blocked_on_model_frames", "mirror_x",
           "interp_channels"]


def resample_frames(n_frames: int, fps_from: float, fps_to: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames at ``fps_to`` covering a clip of ``n_frames`` at ``fps_from``: (i0, i1, w) per new frame, the
    clip frames around its time and the blend weight (w = 0 exactly on a clip frame). The last new frame
    reaches the clip's end (held there when the durations do not divide)."""
    if n_frames < 1 or fps_from <= 0 or fps_to <= 0:
        raise MotioncoreError(f"resampling needs frames and positive rates, got {n_frames}, {fps_from}, {fps_to}")
    dur = (n_frames - 1) / fps_from
    m = int(np.ceil(dur * fps_to - 1e-6)) + 1
    x = np.minimum(np.arange(m) * (fps_from / fps_to), n_frames - 1)   # new frame times in clip frames
    i0 = np.minimum(np.floor(x + 1e-6).astype(np.int64), n_frames - 1)
    w = np.where(np.abs(x - i0) < 1e-6, 0.0, x - i0)
    return i0, np.minimum(i0 + 1, n_frames - 1), w


@dataclass(frozen=True)
class Resample:
    """The frames of a clip of ``n`` frames at ``fps_from`` seen at ``fps_to``: per new frame the clip frames
    around its time (``i0``, ``i1``) and the blend weight ``w`` (0 on a clip frame)."""

    i0: np.ndarray
    i1: np.ndarray
    w: np.ndarray

    @classmethod
    def of(cls, n: int, fps_from: float, fps_to: float) -> Resample:
        return cls(*resample_frames(n, fps_from, fps_to))

    @property
    def size(self) -> int:
        return int(self.w.size)

    @property
    def at(self) -> np.ndarray:
        """The new frames' times in clip frames."""
        return self.i0 + self.w

    def quats(self, q: np.ndarray) -> np.ndarray:
        """(T, J, 4) sign-continuous rotations -> (size, J, 4), by slerp."""
        return quat_slerp(q[self.i0], q[self.i1], np.broadcast_to(self.w[:, None], (self.w.size, q.shape[1])))

    def lerp(self, x: np.ndarray) -> np.ndarray:
        """(T, ...) values -> (size, ...), linearly."""
        w = self.w.reshape((-1,) + (1,) * (x.ndim - 1))
        return x[self.i0] + w * (x[self.i1] - x[self.i0])

    def keys(self, keys: np.ndarray) -> np.ndarray:
        """(T, E) key mask -> (size, E): keyed where the clip frames around are both keyed (or it falls on one)."""
        return keys[self.i0] & (keys[self.i1] | (self.w == 0)[:, None])

    def touched(self, todo: np.ndarray) -> np.ndarray:
        """(T, E) mask of elements to fill -> (size, E): where either clip frame around is to be filled."""
        return todo[self.i0] | todo[self.i1]


def resample(q: np.ndarray, r: np.ndarray, keys: np.ndarray, rs: Resample
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A clip's rotations (T, J, 4; made unit and sign-continuous first), root (T, 3) and keys (T, J + 1) at the
    new frames of ``rs``."""
    q = quat_continuity(quat_normalize(np.asarray(q, np.float64)), axis=0)
    r = np.asarray(r, np.float64)
    return rs.quats(q), r[rs.i0] + rs.w[:, None] * (r[rs.i1] - r[rs.i0]), rs.keys(keys)


def back_to_clip(n_model: int, n_clip: int, mfps: float, fps: float) -> Resample:
    """The clip's ``n_clip`` frames at ``fps`` from ``n_model`` model frames at ``mfps`` (the way back of a fill made
    at the model's rate): the model's frames end before the clip's last frame, the last one is held."""
    b0, b1, v = resample_frames(n_model, mfps, fps)
    T = n_clip
    b0, b1, v = b0[:T], b1[:T], np.pad(v, (0, max(0, T - v.size)))[:T]
    if b0.size < T:
        b0, b1 = np.pad(b0, (0, T - b0.size), mode="edge"), np.pad(b1, (0, T - b1.size), mode="edge")
    return Resample(b0, b1, v)


def blocked_on_model_frames(keys: np.ndarray, todo: np.ndarray, fps: float, mfps: float) -> bool:
    """Whether a clip faster than the model (``fps`` a whole multiple of ``mfps``) is blocked: it has single keys
    (a keyed frame with a filled one on either side) and every one of them falls on a model frame, so the keys
    survive the model's rate exactly."""
    ratio = fps / mfps
    step = int(round(ratio))
    if step < 2 or abs(ratio - step) > 1e-6:
        return False
    k = np.asarray(keys, bool).all(axis=1)
    t = np.asarray(todo, bool).any(axis=1)
    before, after = np.r_[False, t[:-1]], np.r_[t[1:], False]
    single = np.flatnonzero(k & before & after)
    return bool(single.size) and bool(np.all(single % step == 0))


def mirror_x(rotations: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mirror image across the YZ plane (x -> -x) of local rotations (..., 4) WXYZ and translations
    (..., 3), joints unchanged (``kinematics.mirror`` without the left/right swap): a ManipNet left hand is the
    exact mirror image of the right one (same joint names, offsets with x negated). Its own inverse, exactly
    (sign flips only)."""
    return (np.asarray(rotations, np.float64) * np.array([1.0, 1.0, -1.0, -1.0]),
            np.asarray(positions, np.float64) * np.array([-1.0, 1.0, 1.0]))


def _bracket(known: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a (T,) key mask: previous key, next key and the blend weight per frame (held outside)."""
    T = len(known)
    idx = np.flatnonzero(known)
    if idx.size == 0:
        raise MotioncoreError("a channel has no key to interpolate from")
    t = np.arange(T)
    nxt = idx[np.clip(np.searchsorted(idx, t), 0, idx.size - 1)]
    prv = idx[np.clip(np.searchsorted(idx, t, side="right") - 1, 0, idx.size - 1)]
    prv = np.where(prv > t, nxt, prv)
    nxt = np.where(nxt < t, prv, nxt)
    w = np.where(nxt > prv, (t - prv) / np.maximum(nxt - prv, 1), 0.0)
    return prv, nxt, w


def interp_channels(q: np.ndarray, root: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Interp for per-channel keys: q (N, T, J, 4), root (N, T, 3), keys (T, J + 1) -> filled copies."""
    q, root = q.copy(), root.copy()
    J = q.shape[2]
    for j in range(J + 1):
        prv, nxt, w = _bracket(keys[:, j])
        if j < J:
            q[:, :, j] = quat_slerp(q[:, prv, j], q[:, nxt, j], np.broadcast_to(w, q.shape[:2]))
        else:
            root[:] = root[:, prv] + w[None, :, None] * (root[:, nxt] - root[:, prv])
    return q, root
