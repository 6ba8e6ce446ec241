"""Feet planted in the body in-fill's answer (``core.plant`` on a skeleton), and the gate's judgement of it.

``plant_clip`` plants a filled clip on any body skeleton (its legs from ``legs_of``: the hierarchy first, then
names, the rule the add-on vendors). ``judge_plant`` fills the
gate's pseudo-gaps (cut from the clip's own keys, ``families.body.gate``) at the gate's weights, plants them, and
keeps planting for that gap length only where it does not cost error: the strongest of ``STRENGTHS`` (how far
each plant holds: 1 wholly, less gives way part of the way) whose position error and rotation error (local, as
Blender's curves hold it, and global) do not grow over the unplanted fill's by more than ``TOLERANCE`` (none) and
whose skate goes down; none where no strength does. ``plant_strength`` reads the kept strength from a gate.
"""
from __future__ import annotations

import numpy as np

from motioncore.core.kinematics import find_body_joints
from motioncore.core.plant import Leg, Planted, plant_feet
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.retarget.topology import find_legs

__all__ = ["legs_of", "plant_clip", "plant_filled", "judge_plant", "plant_strength", "TOLERANCE", "JUDGE",
           "STRENGTHS"]

JUDGE = 8  # pseudo-gaps planting is judged on (the gate's own, spread over the clip)
TOLERANCE = 0.0  # planting may not raise position error, nor local or global rotation error, on the pseudo-gaps
STRENGTHS = (1.0, 0.75, 0.5, 0.25)  # the plant's strengths tried, strongest first (``core.plant.plant_feet``)


def legs_of(skeleton: Skeleton) -> list[Leg]:
    """The two legs (thigh, shin, foot, toe) of a body skeleton, left then right, by the one leg finder
    (``retarget.topology.find_legs``: the hierarchy first, then names); [] when it has no two legs with a foot."""
    return [Leg(*lg) for lg in find_legs(skeleton.parents, skeleton.offsets, skeleton.names)]


def plant_clip(skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, keys: np.ndarray,
               todo: np.ndarray, fps: float, contacts: np.ndarray | None = None, strength: float | np.ndarray = 1.0
               ) -> Planted | None:
    """``core.plant.plant_feet`` on a clip on ``skeleton`` (local (T, J, 4) / (T, J, 3), frame masks (T,)); None
    when the skeleton has no legs to plant, or no joint named as the body's root (``find_body_joints``) to move it
    by. ``contacts``: given from outside ((T, legs) or (T, feet): each leg's ankle then toe, as ``legs_of`` orders
    them; bool or probabilities), used instead of those read from the clip."""
    legs = legs_of(skeleton)
    if not legs:
        return None
    try:
        root = find_body_joints(skeleton).root
    except MotioncoreError:
        return None
    return plant_feet(skeleton.parents, rotations, positions, keys, todo, legs, root, fps, contacts=contacts,
                      strength=strength)


def plant_filled(meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
                 fps: float | None = None, contacts: np.ndarray | None = None, strength: float | np.ndarray = 1.0
                 ) -> tuple[np.ndarray, np.ndarray, Planted | None]:
    """A filled clip on the checkpoint's skeleton (``rotations`` (T, J, 4), ``root`` (T, 3) the root joint's
    translation, ``keys`` / ``todo`` (T, J + 1)) with its feet planted on the frames where both legs and the root
    were filled (partial keys on a leg leave that frame alone): (rotations, root, what was planted).
    ``contacts``: the model's contact output ((T, legs) or (T, feet), ``plant_clip``), used instead of contacts
    read from the keys and the fill. ``strength`` (a number or (T,)): the gate's (``plant_strength``)."""
    sk = Skeleton.from_dict(meta["skeleton"])
    J, rj = sk.num_joints, int(meta["root_joint"])
    legs = legs_of(sk)
    if not legs:
        return rotations, root, None
    joints = [j for lg in legs for j in (lg.hip, lg.knee, lg.ankle)]
    frames = np.asarray(todo, bool)[:, joints].all(1) & np.asarray(todo, bool)[:, J]
    if not frames.any():
        return rotations, root, None
    pos = np.broadcast_to(np.asarray(sk.offsets, np.float64), rotations.shape[:1] + (J, 3)).copy()
    pos[:, rj] = root
    pl = plant_feet(sk.parents, rotations, pos, np.asarray(keys, bool).all(1), frames, legs,
                    find_body_joints(sk).root, float(fps or meta.get("fps") or 30.0), contacts=contacts,
                    strength=strength)
    return pl.rotations, pl.positions[:, rj], pl


def plant_strength(gate, length: int) -> float:
    """The plant's strength the gate kept for gaps of ``length`` frames (``judge_plant``): 1 without a gate, a fit,
    or a judgement (an old reply); 0 where it keeps the feet unplanted."""
    f = None if gate is None else getattr(gate, "fits", {}).get(_bucket(length))
    if f is None:
        return 1.0
    return float((f.plant_error or {}).get("strength", 1.0)) if f.plant else 0.0


def _bucket(length: int) -> int:
    from motioncore.families.body.gate import bucket

    return bucket(length)


def judge_plant(meta: dict, q: np.ndarray, pos: np.ndarray, frames: np.ndarray, fq: np.ndarray, fp: np.ndarray,
                bezier: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[bool, dict]:
    """On pseudo-gap windows (``q`` (B, T, J, 4), ``pos`` (B, T, J, 3) the truth, ``frames`` (B, T) the scored gap
    frames, ``fq`` / ``fp`` the windows as the gate fills them; ``bezier`` the same windows as Blender's curve of the
    keys, the gate's weight 0): plant at most ``JUDGE`` of them (evenly picked) at each of ``STRENGTHS`` in turn and
    keep the first (strongest) that lowers the skate without raising the position error over the unplanted fill's,
    nor the rotation error (local, as an animator's curves hold it, and global) over the larger of the unplanted
    fill's and Blender's curve's (planting never leaves the rotations worse than doing nothing would), each by more
    than ``TOLERANCE``. Returns (plant, {unplanted, planted, bezier: [cm, local deg, skate cm/s, global deg],
    truth_skate, strength (0: none kept), tried: [[strength] + planted]}); ``planted`` the kept strength's figures
    (or the weakest tried's)."""
    from motioncore.core.feet import fill_span, skate_sums
    from motioncore.core.feet import ground as feet_ground
    from motioncore.core.rotations import quat_angle

    sk = Skeleton.from_dict(meta["skeleton"])
    legs = legs_of(sk)
    if not legs:
        return False, {}
    pick = None
    if len(q) > JUDGE:  # a few spread over the clip: the judgement costs little beside the gate's own pass
        pick = np.linspace(0, len(q) - 1, JUDGE).round().astype(int)
        q, pos, frames, fq, fp = q[pick], pos[pick], frames[pick], fq[pick], fp[pick]
    fps = float(meta.get("fps") or 30.0)
    keys = ~frames  # a pseudo-gap window is keyed but for its gap
    root = find_body_joints(sk).root
    tg, tp = sk.forward_kinematics(q, pos)
    feet = [j for lg in legs for j in (lg.ankle, lg.toe) if j >= 0]
    ground = feet_ground(tp, feet)  # (B, F) the truth's ground, per window

    def skate_of(p: np.ndarray) -> float:  # pooled over the windows, each on its gap and the keys either side
        s = np.array([skate_sums(p[b], fps, feet, ground[b], fill_span(~frames[b])) for b in range(len(p))])
        return float(s[:, 0].sum() / max(s[:, 1].sum(), 1e-9))

    def score(a: np.ndarray, b: np.ndarray) -> list[float]:
        g, p = sk.forward_kinematics(a, b)
        cm = float(np.linalg.norm(p - tp, axis=-1)[frames].mean())
        local = float(np.degrees(quat_angle(a, q))[frames].mean())
        world = float(np.degrees(quat_angle(g, tg))[frames].mean())
        return [round(cm, 4), round(local, 4), round(skate_of(p), 3), round(world, 4)]

    u = score(fq, fp)
    out: dict = {"unplanted": u, "truth_skate": round(skate_of(tp), 3), "strength": 0.0, "tried": []}
    top = list(u)   # the errors planting may not exceed: the unplanted fill's, Blender's curve's for the rotations
    if bezier is not None:
        bq, bp = bezier if pick is None else (bezier[0][pick], bezier[1][pick])
        out["bezier"] = z = score(bq, bp)
        top[1], top[3] = max(u[1], z[1]), max(u[3], z[3])
    for k in STRENGTHS:
        pq, pp = fq.copy(), fp.copy()
        for b in range(len(q)):
            pl = plant_feet(sk.parents, fq[b], fp[b], keys[b], frames[b], legs, root, fps, strength=k)
            pq[b], pp[b] = pl.rotations, pl.positions
        p = out["planted"] = score(pq, pp)
        out["tried"].append([k] + p)
        worse = max(p[i] / max(top[i], 1e-9) for i in (0, 1, 3)) - 1.0   # position, local and global rotation
        if worse <= TOLERANCE and p[2] < u[2]:
            out["strength"] = k
            break
    return out["strength"] > 0, out
