"""Feet that stay planted in filled frames: contacts from the keys and the filled motion, where each foot lands,
and two-bone IK on the legs (plain numpy; the add-on could run the same code as a vendored copy).

An in-fill that knows *when* a foot is down (its foot is low) can still slide it while it is down: the root
glides and the legs follow the Bezier of the keys. For each run of filled frames (a gap) and each leg:

1. **Ground**: per joint kind (ankles, toes) the lower of the two sides' 5th-percentile heights over the keyed
   frames (every frame when fewer than ``MIN_KEYS`` are keyed).
2. **Contact**: a filled frame where the ankle is within ``ANKLE_H`` (or the toe within ``TOE_H``) leg lengths of
   its ground, in runs of at least ``MIN_RUN`` frames; the frames of the keys either side take part, so a contact
   that goes on from a key is one run with it. The *pinned joint* is the ankle while it is low, else the toe
   (heel off: the foot rolls about the toe).
3. **Where it lands**: a ground-plane offset ``o(t)`` added to the leg's ankle target cancels the pinned joint's
   own motion during the run, so it stands still. A run that touches a key stands where the key puts it (the
   offset is 0 there); a run between keys stands where the fill puts it *on average over the run* (the least-
   squares plant: the offset has mean 0 over the run). A run that touches both keys and moves more than
   ``STEP`` leg lengths between them crosses a step the fill did not lift: it is split where the fill moves its
   foot fastest, each part standing at its own key, with ``SWING`` frames between them.
4. **Blend** (``core.plant_smooth``): between runs (and from the keys, where the offset is 0) the offset follows a
   quintic Hermite curve whose slopes match the runs' ends and whose acceleration is zero there; two plants are at
   least ``BLEND_S`` seconds apart and as long as moving the goal at ``MOVE`` leg lengths a second takes; a split
   step swings for at least ``STEP_S``. From each key the offsets ease in over ``EASE_S`` seconds (quintic
   smoothstep, C2), except where the foot stands still on the key and its contact goes on from it. A swing is lifted
   by a C2 bump; a filled ankle or toe under the keys' floor is lifted by the shortfall (``floor_lift``).
5. **IK**: per frame, analytic two-bone IK on thigh and shin puts the ankle on ``fill + o`` (``o`` times the
   gate's ``strength``): the knee bends in its own plane, the thigh swings onto the goal; where the leg is planted,
   or its foot low (within ``LOW`` times its contact height, fading out by twice that), the foot keeps its world
   rotation (flat on the floor; the toe follows), higher in the swing its own local one (eased over ``FOOT_S``).
   Near full reach the goal's distance softens (``SOFT``: the leg gives way, the knee never snaps straight), and each leg
   joint's correction turns per frame no faster than the keyed legs near the gap (``cap_turns``); ``missed`` says
   where an ankle fell short of its goal.
6. **Hips**: only where a leg cannot reach its goal (beyond ``REACH`` of its length) the root moves by the
   shortfall, smoothed over time, eased from the keys.

``contacts`` given from outside (a model's contact output, per leg or per foot joint) replace step 2's.

Only filled frames change; keys stay bit-identical. Vertical motion is the fill's own but for the lifts.

Legend: T frames, J joints; quaternions WXYZ; ``up`` the vertical axis (1: Y-up).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .gaps import runs
from .plant_smooth import cap_turns, ease_from_keys, ease_lift, floor_lift, hermite5, smoother01
from .quat_np import quat_align, quat_between_many, quat_conj, quat_mul, quat_normalize

__all__ = ["Leg", "Planted", "plant_feet", "fk", "foot_contacts_filled", "ANKLE_H", "TOE_H"]

ANKLE_H = 0.065  # an ankle within this many leg lengths of its ground is down (about 5 cm on an 80 cm leg)
TOE_H = 0.04  # a toe within this many (about 3 cm)
MIN_RUN = 2  # contact runs shorter than this many frames (at 30 fps) are ignored
TRAVEL = 0.35  # a run whose foot the fill carries farther than this many leg lengths is split
SWING = 4  # frames (at 30 fps) of swing carved out where a run is split at a step
REACH = 1.02  # a goal beyond this fraction of the leg's length moves the hips (by the excess)
MIN_KEYS = 4
SPEED_MAX = 2.0
HIPS_MAX = 0.1  # the hips move at most this many leg lengths
KEY_SPEED = 0.5  # a key whose foot moves slower than this many leg lengths per second stands still
CLEAR = True
FAST = 1.5
LIFT = 0.3
LIFT_MAX = 0.15
LIFT_KEYS = True  # a swing from or to a key is lifted too (the fill dragged a foot along the ground into a key)
SPEED_REL = 1.0
SPEED_ABS = 0.6
LAND = "mean"
STEP_S = 0.45  # s: the shortest step carved out where a run is split (a 21 cm step in 4 frames turned a knee 20 deg)
BLEND_S = 0.1  # s: the shortest blend between two plants (a swing between two stances, or a stance and a key)
FLOOR_SLACK = 0.0  # leg lengths: how far a foot may stand under the keys' floor before it is lifted
MOVE = 0.8  # leg lengths per second: a blend between two plants moves the goal at most this fast on average
SOFT = 0.97  # the leg's reach softens from this fraction of its length (or the fill's own, if longer) to full
LOW = 1.0  # a foot lower than this many times its contact height keeps its world rotation (fading out to twice that)
FOOT_S = 0.1  # s: the foot turns from its world rotation (planted) to its local one (swinging) over about this long
SOFT_TOP = 0.999  # the softened reach approaches this fraction of the length, never straight


@dataclass(frozen=True)
class Leg:
    """Joint indices of one leg: thigh (hip joint), shin (knee), foot (ankle) and toe (-1 when none)."""

    hip: int
    knee: int
    ankle: int
    toe: int = -1


@dataclass
class Planted:
    rotations: np.ndarray  # (T, J, 4) local
    positions: np.ndarray  # (T, J, 3) local translations (the root's moved only where a leg could not reach)
    contacts: np.ndarray  # (T, legs) bool: the contacts used on filled frames
    offsets: np.ndarray  # (T, legs, 3) the ankle goals' offsets from the fill
    missed: np.ndarray | None = None  # (T, legs) how far each ankle ended from its goal (the soft reach, the turn cap)
    hips_moved: int = 0  # filled frames where the root moved (a leg could not reach)
    runs: list[dict] = field(default_factory=list)  # per contact run: leg, frames, how it was planted


def quat_apply(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors (..., 3) by unit WXYZ quaternions (..., 4): v + 2 w (u x v) + 2 u x (u x v)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def fk(parents: Sequence[int], rotations: np.ndarray, positions: np.ndarray, joints: Sequence[int] | None = None
       ) -> tuple[np.ndarray, np.ndarray]:
    """Global rotations and positions (..., J, 4), (..., J, 3) from local ones (parents before children); with
    ``joints`` (each with its ancestors, in order) only those are computed (the others are left at zero)."""
    gq = np.zeros(rotations.shape, np.float64)
    gp = np.zeros(positions.shape, np.float64)
    for j in (range(len(parents)) if joints is None else joints):
        p = parents[j]
        if p < 0:
            gq[..., j, :] = rotations[..., j, :]
            gp[..., j, :] = positions[..., j, :]
        else:
            gq[..., j, :] = quat_mul(gq[..., p, :], rotations[..., j, :])
            gp[..., j, :] = gp[..., p, :] + quat_apply(gq[..., p, :], positions[..., j, :])
    return gq, gp


def _chain(parents: Sequence[int], legs: Sequence[Leg]) -> list[int]:
    """The legs' joints and their ancestors, parents first."""
    need: set[int] = set()
    for lg in legs:
        for j in (lg.hip, lg.knee, lg.ankle, lg.toe):
            while j >= 0 and j not in need:
                need.add(j)
                j = parents[j]
    return sorted(need)


def _ground(h: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each joint's ground: its 5th-percentile height over the keyed frames. ``h`` (T, n) -> (n,)."""
    sel = h[keys] if int(keys.sum()) >= MIN_KEYS else h
    return np.percentile(sel, 5, axis=0)


def _speed(x: np.ndarray, fps: float) -> np.ndarray:
    """Per frame speed (T, ...) from positions (T, ..., 3): the mean of the frame pairs either side."""
    v = np.linalg.norm(np.diff(x, axis=0), axis=-1) * fps
    v = np.concatenate([v[:1], v, v[-1:]], 0)
    return 0.5 * (v[1:] + v[:-1])


def _clearance(h: np.ndarray, v: np.ndarray, keys: np.ndarray, todo: np.ndarray, down: np.ndarray,
               leg_length: float, fps: float) -> np.ndarray:
    """(T,) how far to raise a swinging foot: where the fill moves a foot fast but lower than the keys ever carry
    a fast-moving foot (the 10th percentile of its height over keyed frames where it moves faster than
    ``FAST`` legs per second), raise it by the shortfall, smoothed over time; zero on contacts and keys."""
    fast = FAST * leg_length
    need = np.zeros(len(h))
    for c in range(h.shape[1]):
        if np.isnan(h[:, c]).any():
            continue
        sel = keys & (v[:, c] > fast)
        if int(sel.sum()) < MIN_KEYS:
            continue
        clear = float(np.percentile(h[sel, c], 25))
        ramp = _smooth01((v[:, c] - 0.5 * fast) / (0.5 * fast))
        need = np.maximum(need, np.maximum(0.0, clear - h[:, c]) * ramp)
    need = np.where(todo & ~down, need, 0.0)
    k = max(1, int(round(2 * fps / 30.0)))
    for _ in range(2):
        pad = np.pad(need, k)
        need = np.where(todo, np.mean([pad[j:j + len(need)] for j in range(2 * k + 1)], 0), 0.0)
    return need


def _smooth01(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def foot_contacts_filled(heights: np.ndarray, leg_length: float, speeds: np.ndarray | None = None,
                         body_speed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per frame (T,) for one leg from ``heights`` (T, 2) ankle and toe above their grounds (toe column NaN when
    none): (down, pinned) where ``down`` is True when the foot is down and ``pinned`` is 0 (ankle) or 1 (toe)."""
    low_a = heights[:, 0] < ANKLE_H * leg_length
    low_t = np.nan_to_num(heights[:, 1], nan=np.inf) < TOE_H * leg_length
    if speeds is not None and body_speed is not None:
        lim = np.clip(SPEED_REL * body_speed, SPEED_ABS * leg_length, SPEED_MAX * leg_length)
        low_a &= speeds[:, 0] < lim
        low_t &= np.nan_to_num(speeds[:, 1], nan=np.inf) < lim
    return low_a | low_t, np.where(low_t, 1, 0)


def _gap_offsets(f: np.ndarray, down: np.ndarray, pin: np.ndarray, a: int, b: int, key_a: bool, key_b: bool,
                 leg_length: float, fps: float, leg: int, log: list[dict], height: np.ndarray | None = None,
                 up: int = 1, still: tuple[bool, bool] = (True, True)) -> tuple[np.ndarray, np.ndarray]:
    """Ground-plane offsets (b - a + 1, 3) over frames a..b (a and b: the keys either side, or the clip's ends
    where ``key_a`` / ``key_b`` is False) for one leg; ``f`` (T, 2, 3) the ankle and toe (toe may repeat the
    ankle) positions with the vertical zeroed; ``still`` whether the foot stands still at the key before and after
    (its speed over the keyed frames there; True where unknown). Returns (offsets, contact mask) over a..b."""
    n = b - a + 1
    seg_down = down[a:b + 1].copy()
    k = fps / 30.0
    min_run, swing = max(2, int(round(MIN_RUN * k))), max(2, int(round(SWING * k)))
    step_n, blend_n = max(swing, int(round(STEP_S * fps))), max(2, int(round(BLEND_S * fps)))
    rs = []
    for s, e in runs(seg_down):
        if key_a and s == 0 and not still[0]:  # the key's foot moves: the run starts after a swing from it
            s = min(e, swing)
        elif key_a and 0 < s <= swing and still[0]:  # a contact that goes on from a planted key
            s = 0
        if key_b and e == n and not still[1]:
            e = max(s, n - swing)
        elif key_b and n - swing <= e < n and still[1]:
            e = n
        if e - s >= min_run or (e > s and ((s == 0 and key_a) or (e == n and key_b))):
            rs.append((s, e))
    merged: list[tuple[int, int]] = []
    for s, e in sorted(rs):  # a run carried onto a key can reach the next one: one run
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    rs = merged
    seg = np.zeros(n, bool)
    for s, e in rs:
        seg[s:e] = True
    # the pinned joint's ground-plane step per frame pair t-1 -> t (frames a + t)
    jt = pin[a:b + 1]
    pos = f[a:b + 1, :, :]
    step = np.zeros((n, 3))
    step[1:] = pos[np.arange(1, n), jt[1:]] - pos[np.arange(n - 1), jt[1:]]
    o = np.zeros((n, 3))
    anchors: list[tuple[int, int, np.ndarray, np.ndarray]] = []  # (s, e, offsets, slope at each end)
    speed = np.linalg.norm(step, axis=-1)
    limit = TRAVEL * leg_length

    def pieces(s: int, e: int) -> list[tuple[int, int]]:
        """A run split where the fill carries its foot farther than ``TRAVEL`` (a step it did not lift, or no
        contact at all): at the fastest frame, ``swing`` frames carved out around it."""
        cum = np.cumsum(step[s + 1:e], 0)
        if e - s < 2 * step_n + 2 or not len(cum) or np.linalg.norm(cum, axis=-1).max() <= limit:
            return [(s, e)]
        c = int(np.argmax(speed[s + step_n:e - step_n])) + s + step_n
        lo, hi = c - step_n // 2, c + (step_n - step_n // 2)
        return pieces(s, lo) + pieces(hi, e)

    todo_runs: list[tuple[int, int, str]] = []
    for s0, e0 in rs:
        for s, e in pieces(s0, e0):
            if e - s < min_run and not ((key_a and s == 0) or (key_b and e == n)):
                continue
            touch_a, touch_b = key_a and s == 0, key_b and e == n
            how = "keys both sides" if touch_a and touch_b else "key before" if touch_a else \
                "key after" if touch_b else "mean"
            todo_runs.append((s, e, how))
    for s, e, how in todo_runs:
        cum = np.zeros((e - s, 3))
        cum[1:] = -np.cumsum(step[s + 1:e], 0)  # the offset that keeps the pinned joint where it was at s
        if how == "key before":
            off = cum
        elif how == "key after":
            off = cum - cum[-1]
        elif how == "keys both sides":  # residual drift spread over the run, so both keys hold
            w = np.linspace(0.0, 1.0, e - s)[:, None]
            off = cum - w * cum[-1]
        elif LAND == "onset":
            off = cum
        elif LAND == "end":
            off = cum - cum[-1]
        else:
            off = cum - cum.mean(0)
        o[s:e] = off
        sl = np.zeros((2, 3))
        sl[0] = -step[s + 1] if e - s > 1 else 0.0
        sl[1] = -step[e - 1] if e - s > 1 else 0.0
        anchors.append((s, e, off, sl))
        log.append({"leg": leg, "frames": [a + s, a + e], "plant": how})
    if key_a and not any(s == 0 for s, *_ in anchors):
        anchors.append((0, 1, np.zeros((1, 3)), np.zeros((2, 3))))
    if key_b and not any(e == n for _, e, *_ in anchors):
        anchors.append((n - 1, n, np.zeros((1, 3)), np.zeros((2, 3))))
    anchors.sort(key=lambda x: x[0])
    anchors = _spaced(anchors, blend_n, n, seg, MOVE * leg_length / fps)
    for (_, e1, off1, sl1), (s2, _, off2, sl2) in zip(anchors[:-1], anchors[1:], strict=True):
        if s2 - e1 >= 1:  # the swing: frames e1 .. s2 - 1
            o[e1:s2] = hermite5(off1[-1], sl1[1], off2[0], sl2[0], s2 - e1 + 1)
        if height is not None and LIFT and s2 - e1 >= 2 and (LIFT_KEYS or (e1 > 1 and s2 < n - 1)):  # a swing
            travel = float(np.linalg.norm((f[a + s2, 0] + off2[0]) - (f[a + e1 - 1, 0] + off1[-1])))  # contacts
            clear = min(LIFT_MAX * leg_length, LIFT * travel)
            lift = max(0.0, clear - float(height[a + e1:a + s2].max()))
            if lift > 0:
                x = np.arange(1, s2 - e1 + 1) / (s2 - e1 + 1)
                o[e1:s2, up] += lift * 64.0 * (x * (1.0 - x)) ** 3   # flat to the second derivative at both ends
    if anchors:  # no key at an end of the clip: the nearest run's offset holds
        o[:anchors[0][0]] = o[anchors[0][0]]
        o[anchors[-1][1]:] = o[anchors[-1][1] - 1]
    if key_a:
        o[0] = 0.0
    if key_b:
        o[-1] = 0.0
    return o, seg


def _spaced(anchors: list, blend_n: int, n: int, seg: np.ndarray, move: float = np.inf) -> list:
    """Anchors (s, e, offsets, end slopes) in order with at least ``blend_n`` frames between neighbours, and enough
    that the offset changes by at most ``move`` per frame on average, where a run can give them: a run's free end
    is trimmed (its frames stay in the contact mask ``seg``: the blend lands there); a key's own frame and a run's
    end on a key stay."""
    out = [list(x) for x in anchors]
    for i in range(len(out) - 1):
        (s1, e1, off1, sl1), (s2, e2, off2, sl2) = out[i], out[i + 1]
        jump = float(np.linalg.norm(off2[0] - off1[-1]))
        need = max(blend_n, int(np.ceil(jump / move)) if np.isfinite(move) else 0) - (s2 - e1)
        if need <= 0:
            continue
        can1 = max(0, (e1 - s1) - 1) if not (e1 - s1 == 1 and s1 == 0) else 0
        can2 = max(0, (e2 - s2) - 1) if not (e2 - s2 == 1 and e2 == n) else 0
        d1 = min(can1, need - min(can2, need // 2 + need % 2))
        d2 = min(can2, need - d1)
        if d1 > 0:
            off1 = off1[:-d1]
            sl1 = sl1.copy()
            sl1[1] = off1[-1] - off1[-2] if len(off1) > 1 else 0.0
            out[i] = [s1, e1 - d1, off1, sl1]
        if d2 > 0:
            off2 = off2[d2:]
            sl2 = sl2.copy()
            sl2[0] = off2[1] - off2[0] if len(off2) > 1 else 0.0
            out[i + 1] = [s2 + d2, e2, off2, sl2]
    return [tuple(x) for x in out]


def _toward(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Unit quaternions (n, 4) from ``a`` toward ``b`` by ``w`` (n,) (normalised linear blend, the short way)."""
    return quat_normalize(a + w[:, None] * (quat_align(b, a) - a))


def _contact_weight(c: np.ndarray, fps: float) -> np.ndarray:
    """(T,) 1 where a leg is planted (``c`` (T,) bool) and ``FOOT_S`` seconds either side, 0 in the rest of its
    swing, eased over about ``FOOT_S`` seconds beyond that (widened, two box filters, the quintic smoothstep): how far
    its foot keeps its world rotation rather than its local one (whole on every planted frame: the toe stays)."""
    n = max(2, int(round(FOOT_S * fps)))
    pad = np.pad(c.astype(np.float64), 2 * n, mode="edge")
    x = np.max([pad[j:j + len(c)] for j in range(4 * n + 1)], 0)   # widened by 2n: the box filters take n back
    for _ in range(2):
        pad = np.pad(x, n, mode="edge")
        x = np.mean([pad[j:j + len(c)] for j in range(2 * n + 1)], 0)
    return smoother01(x)


def _soft_distance(dist: np.ndarray, own: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The goal's distance from the hip, softened near full reach: unchanged up to ``SOFT`` of the leg's length (or
    the fill's own distance, if longer), then approaching ``SOFT_TOP`` of it smoothly (C1) instead of snapping
    straight, so a plant the leg cannot reach gives way and the knee does not snap."""
    top = SOFT_TOP * length
    start = np.maximum(SOFT * length, own)
    room = np.maximum(top - start, 1e-12)
    over = np.maximum(dist - start, 0.0)
    soft = start + room * (1.0 - np.exp(-over / room))
    return np.where((dist > start) & (start < top), soft, dist)   # a fill straighter than that: as it is


def two_bone_ik(H, K, A, D, gq_hip, gq_knee, gq_ankle, soft: bool = False):
    """Per frame, the world rotations of thigh, shin and foot that put the ankle on D (the knee in its plane,
    lengths kept, the goal clamped to the reach; the foot keeps its world rotation). ``soft``: the reach softens
    near full extension (``_soft_distance``): the ankle falls short of a goal near or beyond reach, smoothly."""
    l1 = np.linalg.norm(K - H, axis=-1)
    l2 = np.linalg.norm(A - K, axis=-1)
    dist = np.linalg.norm(D - H, axis=-1)
    if soft:
        dist = _soft_distance(dist, np.linalg.norm(A - H, axis=-1), l1 + l2)
    dist = np.clip(dist, np.abs(l1 - l2) + 1e-6, l1 + l2 - 1e-6)
    u, v = H - K, A - K
    nrm = np.cross(u, v)
    nn = np.linalg.norm(nrm, axis=-1, keepdims=True)
    fallback = quat_apply(gq_hip, np.array([1.0, 0.0, 0.0]))
    nrm = np.where(nn > 1e-8, nrm / np.maximum(nn, 1e-12), fallback)
    cur = np.arccos(np.clip(np.sum(u * v, -1) / np.maximum(l1 * l2, 1e-12), -1.0, 1.0))
    want = np.arccos(np.clip((l1 ** 2 + l2 ** 2 - dist ** 2) / np.maximum(2 * l1 * l2, 1e-12), -1.0, 1.0))
    half = 0.5 * (want - cur)
    bend = np.concatenate([np.cos(half)[:, None], np.sin(half)[:, None] * nrm], axis=-1)
    gk = quat_mul(bend, gq_knee)
    A1 = K + quat_apply(bend, v)
    swing = quat_between_many(A1 - H, D - H)
    return quat_mul(swing, gq_hip), quat_mul(swing, gk), gq_ankle


def given_contacts(contacts: np.ndarray, T: int, legs: Sequence[Leg]) -> tuple[np.ndarray, np.ndarray]:
    """Contacts given from outside (a model's contact output) as (down, toe pinned), each (T, legs) bool:
    ``contacts`` (T, legs) per leg, or (T, feet) per foot joint as ``core.feet`` picks them (each leg's ankle,
    then its toe where it has one, leg after leg); bool or probabilities (down above 0.5). Per foot joint, the toe
    is pinned where it is down and the ankle is not."""
    c = np.asarray(contacts)
    cols = sum(2 if lg.toe >= 0 else 1 for lg in legs)
    if c.ndim != 2 or c.shape[0] != T or c.shape[1] not in (len(legs), cols):
        raise ValueError(f"contacts: expected ({T}, {len(legs)}) per leg or ({T}, {cols}) per foot joint, "
                         f"got {c.shape}")
    c = c > 0.5 if c.dtype != bool else c
    if c.shape[1] == len(legs) and cols != len(legs):
        return c, np.zeros_like(c)
    down, toe, k = np.zeros((T, len(legs)), bool), np.zeros((T, len(legs)), bool), 0
    for i, lg in enumerate(legs):
        if lg.toe >= 0:
            down[:, i], toe[:, i] = c[:, k] | c[:, k + 1], c[:, k + 1] & ~c[:, k]
            k += 2
        else:
            down[:, i] = c[:, k]
            k += 1
    return down, toe


def plant_feet(parents: Sequence[int], rotations: np.ndarray, positions: np.ndarray, keys: np.ndarray,
               todo: np.ndarray, legs: Sequence[Leg], root: int, fps: float = 30.0, up: int = 1,
               contacts: np.ndarray | None = None, strength: float | np.ndarray = 1.0) -> Planted:
    """See the module doc. ``rotations`` (T, J, 4) and ``positions`` (T, J, 3) local (a filled clip, keys
    included), ``keys`` (T,) the keyed frames (the ground is read there), ``todo`` (T,) the frames that may
    change (the filled ones), ``legs`` the legs, ``root`` the joint whose translation moves the body.
    ``contacts``: given from outside (a model's contact output; ``given_contacts``), used on every frame instead of
    the contacts read from the keys and the fill. ``strength`` (a number or (T,) per frame, 0..1): how much of each
    ankle goal's offset (the plant and the lifts) is applied (the gate's, ``families.body.fill_plant.judge_plant``:
    planting that would cost error at full strength gives way part of the way)."""
    parents = [int(p) for p in parents]
    q = np.asarray(rotations, np.float64).copy()
    p = np.asarray(positions, np.float64).copy()
    keys, todo = np.asarray(keys, bool), np.asarray(todo, bool)
    T = len(q)
    L = len(legs)
    chain = _chain(parents, legs)
    gq, gp = fk(parents, q, p, chain)
    flat = np.ones(3)
    flat[up] = 0.0
    lengths = [float(np.median(np.linalg.norm(gp[:, lg.knee] - gp[:, lg.hip], axis=-1)
                               + np.linalg.norm(gp[:, lg.ankle] - gp[:, lg.knee], axis=-1))) for lg in legs]
    ankles = gp[:, [lg.ankle for lg in legs], up]
    toes = np.stack([gp[:, lg.toe, up] if lg.toe >= 0 else np.full(T, np.nan) for lg in legs], 1)
    g_a = _ground(ankles, keys)
    g_t = _ground(toes, keys) if not np.isnan(toes).any() else np.full(L, np.nan)
    offsets = np.zeros((T, L, 3))
    given = None if contacts is None else given_contacts(contacts, T, legs)
    contacts = np.zeros((T, L), bool)
    log: list[dict] = []
    ease = ease_from_keys(todo, fps)
    world: list[np.ndarray] = []   # per leg (T,): how far its foot keeps its world rotation (1) or its local one
    for i, lg in enumerate(legs):
        held = np.zeros(T, bool)
        h = np.stack([ankles[:, i] - g_a[i], toes[:, i] - g_t[i]], 1)
        low = np.fmin(h[:, 0] / (ANKLE_H * lengths[i]), h[:, 1] / (TOE_H * lengths[i]))   # 1: at the threshold
        world.append(np.maximum(1.0 - smoother01((low - LOW) / LOW), 0.0))
        if given is not None:
            down, pin = given[0][:, i], np.where(given[1][:, i], 1 if lg.toe >= 0 else 0, 0)
        else:
            down, pin = foot_contacts_filled(h, lengths[i], _speed(gp[:, [lg.ankle, lg.toe if lg.toe >= 0 else
                                                                                lg.ankle]] * flat, fps),
                                             _speed(gp[:, root] * flat, fps))
        f = np.stack([gp[:, lg.ankle], gp[:, lg.toe if lg.toe >= 0 else lg.ankle]], 1) * flat
        pair = np.linalg.norm(np.diff(f, axis=0), axis=-1).min(-1) * fps  # (T - 1,) the slower of ankle and toe
        pair = np.where(keys[1:] & keys[:-1], pair, np.nan)  # keyed pairs only
        kv = np.fmin(np.r_[np.nan, pair], np.r_[pair, np.nan])  # at a key: its keyed pair on either side
        for s, e in runs(todo):
            a, b = max(s - 1, 0), min(e, T - 1)
            still = (bool(kv[a] < KEY_SPEED * lengths[i]) if np.isfinite(kv[a]) else True,
                     bool(kv[b] < KEY_SPEED * lengths[i]) if np.isfinite(kv[b]) else True)
            o, c = _gap_offsets(f, down, pin, a, b, s > 0, e < T, lengths[i], fps, i, log, h[:, 0], up, still)
            offsets[s:e, i] = o[s - a:s - a + (e - s)]
            contacts[s:e, i] = c[s - a:s - a + (e - s)]
            held[a] |= s > 0 and bool(c[0]) and still[0]   # planted on from a key whose foot stands still
            held[b] |= e < T and bool(c[-1]) and still[1]
        if CLEAR:
            offsets[:, i, up] += _clearance(h, _speed(f, fps), keys, todo, contacts[:, i], lengths[i], fps)
        offsets[:, i, up] += floor_lift(h, offsets[:, i, up], todo, fps,
                                                                                 FLOOR_SLACK * lengths[i])   # no foot or toe under the keys' floor
        offsets[:, i] *= ease_from_keys(todo, fps, held)[:, None]   # flat where planting starts and ends at keys
        offsets[:, i, up] = ease_lift(offsets[:, i, up], todo, MOVE * lengths[i] / fps)   # lifts ease in from keys
    world = [np.maximum(w, _contact_weight(contacts[:, i], fps)) for i, w in enumerate(world)]
    offsets[~todo] = 0.0
    offsets = offsets * np.broadcast_to(np.asarray(strength, np.float64), (T,))[:, None, None]   # the gate's
    goals = gp[:, [lg.ankle for lg in legs]] + offsets
    # the hips move only where a leg cannot reach
    need = np.zeros((T, 3))
    for i, lg in enumerate(legs):
        d = goals[:, i] - gp[:, lg.hip]
        dist = np.linalg.norm(d, axis=-1)
        over = dist - REACH * lengths[i]
        need += np.where((over > 0)[:, None], d / np.maximum(dist, 1e-9)[:, None] * over[:, None], 0.0)
    moved = 0
    if np.any(np.abs(need[todo]) > 0):
        shift = np.where(todo[:, None], need, 0.0)
        k = max(1, int(round(2 * fps / 30.0)))
        for _ in range(2):
            pad = np.pad(shift, ((k, k), (0, 0)))
            shift = np.where(todo[:, None], np.mean([pad[j:j + T] for j in range(2 * k + 1)], 0), 0.0)
        shift = shift * ease[:, None]   # flat where it starts and ends at the keys, as the feet's offsets
        size = np.linalg.norm(shift, axis=-1, keepdims=True)
        shift = shift * np.minimum(1.0, HIPS_MAX * min(lengths) / np.maximum(size, 1e-12))
        moved = int((size[:, 0] > 1e-9).sum())
        par = parents[root]
        local = shift if par < 0 else quat_apply(quat_conj(gq[:, par]), shift)
        p[:, root] = np.where(todo[:, None], p[:, root] + local, p[:, root])
        gq, gp = fk(parents, q, p, chain)
    for i, lg in enumerate(legs):
        sel = np.flatnonzero(todo & (np.linalg.norm(offsets[:, i], axis=-1) > 1e-9))
        if sel.size == 0:
            continue
        gh, gk, ga = two_bone_ik(gp[sel, lg.hip], gp[sel, lg.knee], gp[sel, lg.ankle], goals[sel, i],
                                 gq[sel, lg.hip], gq[sel, lg.knee], gq[sel, lg.ankle], soft=True)
        par = parents[lg.hip]
        gpar = gq[sel, par] if par >= 0 else np.tile([1.0, 0.0, 0.0, 0.0], (sel.size, 1))
        q[sel, lg.hip] = quat_mul(quat_conj(gpar), gh)
        q[sel, lg.knee] = quat_mul(quat_conj(gh), gk)
        # the foot keeps its world rotation where it is planted or low, its own local rotation higher in the swing
        # (the other leg's chain is untouched: no FK again)
        q[sel, lg.ankle] = _toward(q[sel, lg.ankle], quat_mul(quat_conj(gk), ga), world[i][sel])
    q = quat_align(quat_normalize(q), rotations)
    q = np.where(todo[:, None, None], q, rotations)
    q = cap_turns(q, quat_align(quat_normalize(np.asarray(rotations, np.float64)), q),
                   [j for lg in legs for j in (lg.hip, lg.knee, lg.ankle)], keys, todo, fps)
    p = np.where(todo[:, None, None], p, positions)
    _, gp2 = fk(parents, q, p, chain)
    missed = np.stack([np.linalg.norm(gp2[:, lg.ankle] - goals[:, i], axis=-1) for i, lg in enumerate(legs)], 1)
    missed[~todo] = 0.0
    return Planted(q, p, contacts, offsets, missed, moved, log)
