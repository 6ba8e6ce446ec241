"""The plan of one in-fill request, built once: the validated masks, the gaps, the rates and their resample indices,
the masks at the model's rate, and, once the family has fitted its request-time weights, one fit row per gap.

Everything a request derives from its keys is derived here, once: where the gaps are (``core.gaps``), how long each
is in the clip's frames and in the model's (30 fps), its gate bucket, the route the clip takes (``same``: at the
model's rate; ``own``: a clip faster than the model filled at its own rate; ``through``: to the model's rate and
back), and, on the way through the model's rate, the plan at that rate (``model``). ``table()`` is the per-gap
table of the reply (the add-on reads the weights, blend and planting of each gap from it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.gaps import MODEL_FPS, gap_runs, gap_windows, runs
from ..core.rotations import quat_continuity, quat_normalize
from ..errors import MotioncoreError, ShapeError
from .rate import Resample, back_to_clip, blocked_on_model_frames, resample

__all__ = ["Gap", "InfillPlan", "known_mask", "checked_window", "at_model_rate", "bucket", "BUCKET_EDGES", "gap_lengths"]

BUCKET_EDGES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)   # the gate's gap-length buckets (model frames)


def bucket(length: int) -> int:
    """The gap-length bucket of a gap of ``length`` model frames (its lower edge)."""
    return max(e for e in BUCKET_EDGES if e <= max(1, int(length)))


def gap_lengths(todo: np.ndarray) -> dict[int, list[int]]:
    """{bucket: the lengths of its gaps} for the gaps of a (T, E) ``todo`` at the model's rate, in the order the
    gaps come."""
    out: dict[int, list[int]] = {}
    for s, e in runs(np.asarray(todo).any(axis=1)):
        out.setdefault(bucket(e - s), []).append(e - s)
    return out


def known_mask(known: np.ndarray, T: int, J: int) -> np.ndarray:
    """A (T,) whole-frame or (T, J + 1) per-element bool mask as (T, J + 1)."""
    known = np.asarray(known)
    if known.dtype != bool:
        raise ShapeError(f"known: expected a bool mask, got dtype {known.dtype}")
    if known.shape == (T,):
        return np.repeat(known[:, None], J + 1, 1)
    if known.shape == (T, J + 1):
        return known.copy()
    raise ShapeError(f"known: expected ({T},) or ({T}, {J + 1}), got {known.shape}")


def checked_window(rotations: np.ndarray, root: np.ndarray, known: np.ndarray, fill: np.ndarray | None, J: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One window's arrays checked against a J-joint checkpoint: (rotations, root, keys, todo) (T, J + 1 masks)."""
    q, r = np.asarray(rotations, np.float64), np.asarray(root, np.float64)
    if q.ndim != 3 or q.shape[1:] != (J, 4):
        raise ShapeError(f"rotations: expected (T, {J}, 4) for this checkpoint's {J}-joint skeleton, got {q.shape}")
    T = q.shape[0]
    if r.shape != (T, 3):
        raise ShapeError(f"root: expected ({T}, 3), got {r.shape}")
    if not (np.isfinite(q).all() and np.isfinite(r).all()):
        raise ShapeError("rotations and root must be finite (unknown values too)")
    keys = known_mask(known, T, J)
    if not keys.any():
        raise MotioncoreError("known: no key given")
    if keys.all():
        raise MotioncoreError("known: every element is keyed; nothing to fill")
    todo = ~keys if fill is None else known_mask(fill, T, J)
    if (todo & keys).any():
        raise MotioncoreError("fill: marks keyed elements; the elements to fill must be unknown")
    return q, r, keys, todo


def model_fps(meta: dict) -> float:
    """The checkpoint's rate (0 when its metadata gives none)."""
    return float(meta.get("fps") or 0.0)


def at_model_rate(meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, fps: float | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A clip at ``fps`` on the checkpoint's skeleton, at the checkpoint's rate: rotations (slerp), root (lerp) and
    keys (T', J + 1) (a model frame is keyed where the clip frames around it both are)."""
    q = np.asarray(rotations, np.float64)
    T, J = q.shape[:2]
    keys = known_mask(np.asarray(keys), T, J)
    mfps = model_fps(meta)
    if fps is None or not mfps or abs(float(fps) - mfps) < 1e-9:
        return quat_continuity(quat_normalize(q), axis=0), np.asarray(root, np.float64), keys
    return resample(q, root, keys, Resample.of(T, float(fps), mfps))


@dataclass(frozen=True)
class Gap:
    """One gap of the request: frames [start, end) of the clip to fill (any element), its run (the gaps between
    single keys filled together share one), its length in the clip's frames and in the model's, and its bucket."""

    start: int
    end: int
    run: int
    frames: int          # length in the clip's frames
    length: int          # length in the model's frames (the gate's)
    bucket: int          # the gate's bucket of ``length``


@dataclass
class InfillPlan:
    """One request's plan (module docstring). ``q``, ``r``: the clip's rotations and root (float64); ``keys`` and
    ``todo`` (T, J + 1): the keys and the elements to fill; ``rotations``, ``root``: as sent (keys come back as
    these, bit-identical)."""

    meta: dict
    fps: float | None
    route: str                                 # "same" | "own" | "through"
    rotations: Any
    root: Any
    q: np.ndarray
    r: np.ndarray
    keys: np.ndarray
    todo: np.ndarray
    gaps: list[Gap]
    to_model: Resample | None = None           # the clip's frames at the model's rate (routes own and through)
    model: InfillPlan | None = None            # the plan at the model's rate (routes own and through)
    blocked: bool = False                      # single keys all on model frames (a clip faster than the model)
    fits: list[dict] = field(default_factory=list)   # one fit row per gap (``fit_rows``), once fitted

    @property
    def model_fps(self) -> float:
        return model_fps(self.meta) or MODEL_FPS

    @property
    def frames(self) -> np.ndarray:
        """(T,) the frames with something to fill."""
        return self.todo.any(axis=1)

    @classmethod
    def of(cls, meta: dict, rotations: Any, root: Any, known: Any, fps: float | None = None, fill: Any = None,
           checked: bool = True, own_rate: bool = False) -> InfillPlan:
        """The plan of a clip at ``fps`` (None: the model's rate). ``checked``: the arrays validated against the
        checkpoint's skeleton here (a family that checks its own windows, the any-order sampler, passes False);
        ``own_rate``: the family fills a clip faster than the model at the clip's own rate."""
        q_in = np.asarray(rotations, np.float64)
        mfps = model_fps(meta)
        J = len(meta["skeleton"]["names"])
        if fps is None or not mfps or abs(float(fps) - mfps) < 1e-9 or q_in.ndim != 3:
            return cls._checked(meta, fps, "same", rotations, root, known, fill, J, checked, mfps or MODEL_FPS)
        T = q_in.shape[0]
        keys = known_mask(known, T, J)
        todo = ~keys if fill is None else known_mask(fill, T, J)
        fps = float(fps)
        blocked = fps > mfps and blocked_on_model_frames(keys, todo, fps, mfps)
        if own_rate and fps > mfps and not blocked:
            plan = cls._checked(meta, fps, "own", rotations, root, known, fill, J, True, mfps)
        else:
            r_in = np.asarray(root, np.float64)
            plan = cls(meta, fps, "through", rotations, root, q_in, r_in, keys, todo, _gaps(todo, fps, mfps),
                       blocked=blocked)
        rs = Resample.of(T, fps, mfps)
        mq, mr, mk = resample(plan.q, plan.r, plan.keys, rs)
        mtodo = rs.touched(plan.todo) & ~mk
        mfill = None if fill is None and plan.route == "through" else mtodo
        plan.to_model = rs
        plan.model = cls._checked(meta, None, "same", mq, mr, mk, mfill, J, checked, mfps) \
            if plan.route == "through" else \
            cls(meta, None, "same", mq, mr, mq, mr, mk, mtodo, _gaps(mtodo, mfps, mfps))
        return plan

    @classmethod
    def _checked(cls, meta, fps, route, rotations, root, known, fill, J, checked, mfps) -> InfillPlan:
        if checked:
            q, r, keys, todo = checked_window(rotations, root, known, fill, J)
        else:
            q, r = np.asarray(rotations, np.float64), np.asarray(root, np.float64)
            T = q.shape[0] if q.ndim == 3 else 0
            keys = known_mask(known, T, J) if q.ndim == 3 else np.zeros((0, J + 1), bool)
            todo = (~keys if fill is None else known_mask(fill, T, J)) if q.ndim == 3 else keys
        return cls(meta, fps, route, rotations, root, q, r, keys, todo, _gaps(todo, fps or mfps, mfps))

    def back(self, n_model: int) -> Resample:
        """The clip's frames from ``n_model`` frames at the model's rate (the way back of route ``through``)."""
        return back_to_clip(n_model, len(self.q), self.model_fps, float(self.fps))

    def windows(self, context: int | None = None) -> list[tuple[int, int, int, int]]:
        """(s, e, a, b) per gap: the gap and its window of up to ``context`` frames either side (``core.gaps``)."""
        return gap_windows(self.frames) if context is None else gap_windows(self.frames, context)

    def runs(self, max_len: int) -> list[tuple[list[tuple[int, int]], int, int]]:
        """The gaps between single keys, together: per run its gaps and window (``core.gaps.gap_runs``)."""
        return gap_runs(self.frames, max_len=max_len)

    def lengths(self) -> dict[int, list[int]]:
        """{bucket: the lengths (model frames) of its gaps}, in the order the gaps come."""
        out: dict[int, list[int]] = {}
        for g in self.gaps:
            out.setdefault(g.bucket, []).append(g.length)
        return out

    def fit_rows(self, gate: Any, plant: Any = None) -> list[dict]:
        """One row per gap from a fitted gate (``families.body.gate.Gate``; None: the network as trained): its
        weights, blend, planting and the method it was fitted by, in the gate's bucket of the gap's model length.
        Route ``through``: the gate was fitted at the model's rate, on the gaps of ``model``; each clip gap takes
        the model gap it overlaps most."""
        fits = getattr(gate, "fits", None) or {}
        rows = []
        for g in self.gaps:
            length = g.length
            if self.route == "through" and self.model is not None and self.model.gaps:
                length = _overlapping(g, self.model.gaps, float(self.fps), self.model_fps).length
            f = fits.get(bucket(length))
            row = {"start": g.start, "end": g.end, "frames": g.frames, "length": length, "bucket": bucket(length),
                   "rot": 1.0, "root": 1.0, "blend": 1.0, "plant": bool(plant) if plant is not None else None,
                   "method": "none"}
            if f is not None:
                row.update(rot=float(f.rot), root=float(f.root), blend=float(f.blend), method=str(f.method),
                           plant=bool(plant) and bool(f.plant) if plant is not None else bool(f.plant),
                           strength=float((getattr(f, "plant_error", None) or {}).get("strength", 1.0))
                           if f.plant else 0.0)
                if getattr(f, "candidate", None) is not None:
                    row["candidate"] = f.candidate
            rows.append(row)
        self.fits = rows
        return rows

    def table(self) -> list[dict]:
        """The per-gap table of the reply: per gap its frames in the clip, its lengths and its fit row."""
        if self.fits:
            return [dict(r) for r in self.fits]
        return [{"start": g.start, "end": g.end, "frames": g.frames, "length": g.length, "bucket": g.bucket}
                for g in self.gaps]


def _gaps(todo: np.ndarray, fps: float, mfps: float) -> list[Gap]:
    """The gaps of a (T, J + 1) ``todo`` at ``fps``: runs of frames with anything to fill, each with its run of
    gaps between single keys and its length in model frames."""
    frames = np.asarray(todo, bool).any(axis=1) if np.ndim(todo) == 2 else np.zeros(0, bool)
    out: list[Gap] = []
    run = -1
    prev_end = None
    for s, e in runs(frames):
        if prev_end is None or s - prev_end != 1:
            run += 1
        prev_end = e
        n = max(1, int(round((e - s) * mfps / fps))) if fps and abs(fps - mfps) > 1e-9 else e - s
        out.append(Gap(s, e, run, e - s, n, bucket(n)))
    return out


def _overlapping(g: Gap, model_gaps: list[Gap], fps: float, mfps: float) -> Gap:
    """The model-rate gap whose time overlaps the clip gap ``g`` most (the nearest when none does)."""
    t0, t1 = g.start / fps, g.end / fps

    def overlap(m: Gap) -> tuple[float, float]:
        m0, m1 = m.start / mfps, m.end / mfps
        return (min(t1, m1) - max(t0, m0), -abs((m0 + m1) - (t0 + t1)))

    return max(model_gaps, key=overlap)
