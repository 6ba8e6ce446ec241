"""Keys = "Reduced": the fewest keys that hold a filled span, planned in numpy (no bpy).

Per channel and per filled span (`vendor.keyfit.fit_span`): keys on frames of the fill, their values the fill's, with
ALIGNED handles on fitted slopes. The tolerance is the user's, in world joint positions (at most ``max_cm``, on
average ``mean_cm``): each bone's channels get an angle of ``max_cm`` over the bone's reach (its head to the
farthest joint below it), the root's location ``max_cm`` itself; then the plan is checked in world joint positions
over every filled frame of each gap (the rig's rest heads, the rotations composed down the bones, the root's
displacement added). Each gap is fitted first at ``START`` x these tolerances; where the check holds, the tolerances
are doubled while it still holds and the keys get fewer (``LOOSEN`` times at most); where it misses, they are halved
until it holds (``TIGHTEN`` times; then a key on every frame). The channels' runs of one length are fitted together
(`vendor.keyfit.fit_spans`, the same keys as `fit_span` on each, in batched solves).

Legend: T frames of a window, B bones, C channels of one property.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..vendor import keyfit
from ..vendor.gaps import runs
from . import rigclip, rigmap
from .feet_report import rig_positions

MAX_CM, MEAN_CM = 0.5, 0.1   # the defaults of the operators' Max Error / Mean Error
KEYS = [("REDUCED", "Reduced", "The fewest keys, with handles to shape, that hold the fill within Max / Mean Error of "
                             "the world joint positions"),
        ("EVERY_FRAME", "Every Frame", "A key on every filled frame (a baked curve)")]   # the operators' Keys
START = 0.5                  # a gap's first fit: this fraction of each channel's tolerance (`channel_tolerance`)
TIGHTEN = 6                  # halvings of a gap's tolerance before it is keyed on every frame
JERK_KEYS, JERK_FRAMES = 2, 8   # keys added at most per run while it is jerkier than the fill (`keyfit.no_jerkier`):
                                 # JERK_KEYS, or one per JERK_FRAMES frames of a longer run
LOOSEN = 2                   # doublings of a gap's tolerance tried while the world check holds
MIN_REACH = 0.2              # a bone with nothing below it (hands, head, toes) counts as reaching this far (x max reach)


@dataclass
class Channel:
    """One property's filled values in a window: (T, C) ``values`` (the dense fill, every frame), written where
    ``todo`` (T,); ``bone`` its index in the rig's bones (-1: the root's location), ``mode`` the rotation mode or
    "location"; -1 the root bone's location, -2 the object's)."""

    path: str
    group: str
    values: np.ndarray
    todo: np.ndarray
    bone: int
    mode: str
    keys: list[dict[str, np.ndarray]] = field(default_factory=list)   # per channel: the planned keys


@dataclass
class Plan:
    channels: list[Channel]
    written: int          # keys planned
    every_frame: int      # keys an every-frame fill writes
    max_cm: float         # measured: world joint positions, reduced against the dense fill
    mean_cm: float
    checked: int          # joint positions (frames x joints) the check measured
    kept: int = 0         # gaps whose fill is the user's own curve within the tolerance: no keys written there


def reach(heads: np.ndarray, up: Sequence[int]) -> np.ndarray:
    """(B,) each bone's reach in armature units: its rest head to the farthest rest head below it (along ``up``, each
    bone's nearest keyed ancestor), at least ``MIN_REACH`` of the largest reach."""
    h = np.asarray(heads, np.float64)
    B = h.shape[0]
    out = np.zeros(B)
    for b in range(B):
        u = up[b]
        while u >= 0:
            out[u] = max(out[u], float(np.linalg.norm(h[b] - h[u])))
            u = up[u]
    return np.maximum(out, MIN_REACH * max(float(out.max()), 1e-9))


def channel_tolerance(mode: str, angle: float, units: float) -> float:
    """A channel's tolerance for a bone allowed ``angle`` radians (rotation modes), or ``units`` (location)."""
    if mode == "location":
        return units / np.sqrt(3.0)
    if mode in ("QUATERNION", "AXIS_ANGLE"):
        return angle / 4.0   # |dq| <= angle / 2 on four components: the rotation moves by at most ~angle
    return angle / np.sqrt(3.0)   # Euler: three angles


def fit(values: np.ndarray, todo: np.ndarray, frames: np.ndarray, tol: float, span: slice) -> dict[str, np.ndarray]:
    """The keys of one channel ``values`` (T,) on its ``todo`` frames within ``span``: each run of todo frames fitted
    apart (`keyfit.fit_span`); frames, values, and the handles (lx, ly, rx, ry). The plain path of `fit_many`."""
    return fit_many([values], [todo], frames, [tol], span)[0]


def fit_many(values: Sequence[np.ndarray], todo: Sequence[np.ndarray], frames: np.ndarray, tol: Sequence[float],
             span: slice, batched: bool = True, curves: list[np.ndarray] | None = None
             ) -> list[dict[str, np.ndarray]]:
    """`fit` of many channels (each (T,) with its todo (T,) and tol) at once: the runs of one length, over all the
    channels, fitted together (`keyfit.fit_spans`: the same keys as `keyfit.fit_span` on each, in a few batched
    solves); ``batched=False`` fits each run alone. ``curves`` (each (T,), a copy of the channel's values): the
    curve through the keys is written on each run's frames (frames one apart)."""
    runs_of: list[list[tuple[int, int]]] = []
    for td in todo:
        t = np.zeros(td.shape, bool)
        t[span] = td[span]
        runs_of.append(runs(t))
    by_len: dict[int, list[tuple[int, int, int]]] = {}
    for c, rs in enumerate(runs_of):
        for s, e in rs:
            by_len.setdefault(e - s, []).append((c, s, e))
    fitted: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for items in by_len.values():
        cols = np.stack([values[c][s:e] for c, s, e in items], axis=1)
        tols = np.array([tol[c] for c, _, _ in items], np.float64)
        got = (keyfit.fit_spans(cols, tols) if batched
               else [keyfit.fit_span(cols[:, i], float(tols[i])) for i in range(len(items))])
        if JERK_KEYS:   # no jerkier than the fill, the three frames either side (the animator's curve) included
            ext = np.stack([_around(values[c], s, e) for c, s, e in items])
            got = keyfit.no_jerkier_spans(ext, got, max(JERK_KEYS, cols.shape[0] // JERK_FRAMES), batched)
        for (c, s, _), r in zip(items, got):
            fitted[(c, s)] = r
        if curves is not None:   # the curves through the keys on the run's frames (third handles: Hermite)
            for (c, s, e), v in zip(items, keyfit.hermite_spans(cols.T, got)):
                curves[c][s:e] = v
    out = []
    for c, rs in enumerate(runs_of):
        parts = []
        for s, _ in rs:
            idx, m = fitted[(c, s)]
            kx = frames[s + idx]
            ky = values[c][s + idx]
            parts.append((kx, ky, *keyfit.third_handles(kx, ky, m)))
        if not parts:
            out.append({k: np.zeros(0) for k in ("frames", "values", "lx", "ly", "rx", "ry")})
            continue
        cat = [np.concatenate(p) for p in zip(*parts)]
        out.append(dict(zip(("frames", "values", "lx", "ly", "rx", "ry"), cat)))
    return out


def _around(y: np.ndarray, s: int, e: int) -> np.ndarray:
    """(e - s + 6,) ``y[s - 3:e + 3]``, the ends repeated where the window stops."""
    idx = np.clip(np.arange(s - 3, e + 3), 0, y.size - 1)
    return np.asarray(y, np.float64)[idx]


def evaluate(keys: dict[str, np.ndarray], values: np.ndarray, todo: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """(T,) the channel as written: the planned keys' Bezier on the todo frames, ``values`` elsewhere (the
    animator's keys)."""
    out = np.asarray(values, np.float64).copy()
    for s, e in runs(todo):
        sel = (keys["frames"] >= frames[s]) & (keys["frames"] <= frames[e - 1])
        if sel.any():
            k = {c: keys[c][sel] for c in ("frames", "values", "lx", "ly", "rx", "ry")}
            out[s:e] = keyfit.bezier_evaluate(k["frames"], k["values"], k["lx"], k["ly"], k["rx"], k["ry"], frames[s:e])
    return out


def positions(rig: dict[str, Any], bone_values: dict[int, np.ndarray], modes: Sequence[str], root: np.ndarray
              ) -> np.ndarray:
    """(T, B, 3) joint positions (armature units) from each bone's raw channel values (T, C) and the root's (T, 3)
    displacement in armature axes."""
    qs = np.stack([rigmap.to_model(rigclip.to_quat(bone_values[j], modes[j]), rig["offsets"][b])
                   for j, b in enumerate(rig["bones"])], axis=1)
    root_bone = rig["bones"].index(rig["root"]) if rig.get("root") in rig["bones"] else 0
    T = qs.shape[0]
    p = rig_positions(qs, np.zeros((T, 3)), rig["heads"], rig["up"], root_bone, -1)
    return p + root[:, None, :]


def plan(rig: dict[str, Any], frames: np.ndarray, raw: Sequence[np.ndarray], channels: list[Channel],
         max_cm: float = MAX_CM, mean_cm: float = MEAN_CM, cm_per_unit: float = 1.0, batched: bool = True,
         user: Sequence[np.ndarray] | None = None) -> Plan:
    """Reduced keys for a window's ``channels`` (the bones' rotations and the root's location that are written):
    fitted per channel, checked per gap in world joint positions against the dense fill (``raw``: every bone's
    (T, C) values as filled), tightened where they miss. ``cm_per_unit``: centimetres per scene unit. ``batched``:
    the channels' spans fitted together (`fit_many`); False fits each alone (the same keys; the parity test's).
    ``user`` (per channel (T, C), its values on the user's own curve, their keys alone): a gap where that curve
    already holds the fill within ``max_cm`` (``mean_cm`` on average) in world joint positions gets no keys (the
    fill changed nothing there; ``Plan.kept`` counts them), so the user's curve stays as it is."""
    frames = np.asarray(frames, np.float64)
    T = frames.size
    modes = list(rig["modes"])
    dense = {j: np.asarray(v, np.float64) for j, v in enumerate(raw)}
    reach_u = reach(rig["heads"], rig["up"])
    budget = max_cm / max(cm_per_unit, 1e-12)   # in armature units
    mw = np.asarray(rig.get("object_rs", np.eye(3)), np.float64)
    scale = float(np.cbrt(abs(np.linalg.det(mw)))) or 1.0   # the object's scale: armature units -> scene units
    budget /= scale
    any_todo = np.zeros(T, bool)
    for c in channels:
        any_todo |= c.todo
    gap_runs = runs(any_todo)
    dense_pos = positions(rig, dense, modes, np.zeros((T, 3)))
    for c in channels:
        c.keys = [dict() for _ in range(c.values.shape[1])]
    parts: dict[tuple[int, int], list[dict[str, np.ndarray]]] = {}
    max_seen, sum_err, n_err = 0.0, 0.0, 0
    unit = bool(T < 2 or np.all(np.diff(frames) == 1.0))   # frames one apart: the curves are Hermite on them

    def holds(err: np.ndarray) -> bool:
        return bool(err.max() <= max_cm and err.mean() <= mean_cm)

    def attempt(span: slice, factor: float) -> tuple[list[list[dict[str, np.ndarray]]], np.ndarray, int]:
        """The keys of every channel on ``span`` at ``factor`` x its tolerance (< 0: every frame), the world
        errors (cm) they leave on the span's frames, and the keys' count."""
        cols, tds, tols = [], [], []
        for c in channels:
            angle = budget / reach_u[c.bone] if c.bone >= 0 else 0.0
            tol = channel_tolerance(c.mode, angle, budget) * factor
            for i in range(c.values.shape[1]):
                cols.append(c.values[:, i])
                tds.append(c.todo)
                tols.append(-1.0 if factor < 0 else tol)
        curves = [np.array(v, np.float64) for v in cols] if unit else None
        flat = fit_many(cols, tds, frames, tols, span, batched, curves)
        got, at = [], 0
        for c in channels:
            got.append(flat[at:at + c.values.shape[1]])
            at += c.values.shape[1]
        red = dict(dense)
        root = np.zeros((T, 3))
        at = 0
        for c, ks in zip(channels, got):
            ev = (np.stack(curves[at:at + len(ks)], axis=1) if curves is not None else
                  np.stack([evaluate(k, c.values[:, i], c.todo & _mask(T, span), frames) for i, k in enumerate(ks)],
                           axis=1))
            at += len(ks)
            if c.bone >= 0:
                red[c.bone] = ev
            else:   # -1: the root bone's location (armature units); -2: the object's (scene units)
                root = (ev - c.values) / (scale if c.bone == -2 else 1.0)
        pos = positions(rig, red, modes, root)
        err = np.linalg.norm(pos[span] - dense_pos[span], axis=-1) * cm_per_unit * scale
        return got, err, sum(k["frames"].size for ks in got for k in ks)

    kept = 0
    if user is not None:   # the user's own curve, posed: the gaps it already holds are left to it
        mine = dict(dense)
        user_root = np.zeros((T, 3))
        for c, u in zip(channels, user, strict=True):
            u = np.asarray(u, np.float64)
            if c.bone >= 0:
                mine[c.bone] = np.where(c.todo[:, None], u, mine[c.bone])
            else:
                user_root += np.where(c.todo[:, None], u - c.values, 0.0) / (scale if c.bone == -2 else 1.0)
        user_err = np.linalg.norm(positions(rig, mine, modes, user_root) - dense_pos, axis=-1) * cm_per_unit * scale
    for s, e in gap_runs:
        span = slice(s, e)
        if user is not None and holds(user_err[span]):
            kept += 1
            max_seen = max(max_seen, float(user_err[span].max()))
            sum_err += float(user_err[span].sum())
            n_err += user_err[span].size
            continue
        factor = START
        got, err, n = attempt(span, factor)
        if holds(err):   # loosened while the world check holds and fewer keys come of it
            for _ in range(LOOSEN):
                if err.max() > 0.6 * max_cm or err.mean() > 0.6 * mean_cm:
                    break   # twice the tolerance about doubles the misses: it would not hold
                g2, e2, n2 = attempt(span, factor * 2.0)
                if not holds(e2) or n2 >= n:
                    break
                factor, got, err, n = factor * 2.0, g2, e2, n2
        else:            # tightened until it holds; then a key on every frame
            for _ in range(TIGHTEN):
                factor *= 0.5
                got, err, n = attempt(span, factor)
                if holds(err):
                    break
            else:
                got, err, n = attempt(span, -1.0)
        max_seen = max(max_seen, float(err.max()))
        sum_err += float(err.sum())
        n_err += err.size
        for ci, ks in enumerate(got):
            for i, k in enumerate(ks):
                parts.setdefault((ci, i), []).append(k)
    written = every = 0
    for ci, c in enumerate(channels):
        for i in range(c.values.shape[1]):
            ks = parts.get((ci, i), [])
            c.keys[i] = {k: np.concatenate([p[k] for p in ks]) if ks else np.zeros(0)
                         for k in ("frames", "values", "lx", "ly", "rx", "ry")}
            written += c.keys[i]["frames"].size
            every += int(c.todo.sum())
    return Plan(channels, written, every, max_seen, sum_err / max(n_err, 1), n_err, kept)


def report(written: int, stats: dict[str, float]) -> str:
    """What a Reduced write says: "wrote 1,240 keys (every frame: 11,880), within 0.5 cm", and how many gaps kept
    the user's own curve (``stats["kept"]``: the fill matched it within the tolerance, no keys written there)."""
    kept = int(stats.get("kept", 0))
    same = (f"; {kept} gap(s) left on your own curve (the fill matched it within {stats.get('kept_cm', MAX_CM):.2g} cm:"
            " no keys there)") if kept else ""
    return (f"wrote {written:,} keys (every frame: {int(stats.get('every_frame', 0)):,}), within "
            f"{stats.get('max_cm', 0.0):.2g} cm{same}")


def _mask(T: int, span: slice) -> np.ndarray:
    m = np.zeros(T, bool)
    m[span] = True
    return m
