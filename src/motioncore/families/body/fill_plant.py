"""Feet planted in the body in-fill's answer (``core.plant`` on a skeleton), and the gate's judgement of it.

``plant_clip`` plants a filled clip on any body skeleton (its legs from ``legs_of``: the hierarchy first, then
names, the rule the add-on vendors). ``judge_plant`` fills the
gate's pseudo-gaps (cut from the clip's own keys, ``families.body.gate``) at the gate's weights, plants them, and
keeps planting for that gap length only where it does not cost error: position and rotation error, each over
the unplanted fill's, grow on average by at most ``TOLERANCE``, and the skate goes down.
"""
from __future__ import annotations

import numpy as np

from motioncore.core.kinematics import find_body_joints
from motioncore.core.plant import Leg, Planted, plant_feet
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.retarget.topology import find_legs

__all__ = ["legs_of", "plant_clip", "plant_filled", "judge_plant", "TOLERANCE", "JUDGE"]

JUDGE = 8  # pseudo-gaps planting is judged on (the gate's own, spread over the clip)
TOLERANCE = 0.05  # planting may cost at most 5% of error (mean of position and rotation) on the pseudo-gaps


def legs_of(skeleton: Skeleton) -> list[Leg]:
    """The two legs (thigh, shin, foot, toe) of a body skeleton, left then right, by the one leg finder
    (``retarget.topology.find_legs``: the hierarchy first, then names); [] when it has no two legs with a foot."""
    return [Leg(*lg) for lg in find_legs(skeleton.parents, skeleton.offsets, skeleton.names)]


def plant_clip(skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, keys: np.ndarray,
               todo: np.ndarray, fps: float, contacts: np.ndarray | None = None) -> Planted | None:
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
    return plant_feet(skeleton.parents, rotations, positions, keys, todo, legs, root, fps, contacts=contacts)


def plant_filled(meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
                 fps: float | None = None, contacts: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, Planted | None]:
    """A filled clip on the checkpoint's skeleton (``rotations`` (T, J, 4), ``root`` (T, 3) the root joint's
    translation, ``keys`` / ``todo`` (T, J + 1)) with its feet planted on the frames where both legs and the root
    were filled (partial keys on a leg leave that frame alone): (rotations, root, what was planted).
    ``contacts``: the model's contact output ((T, legs) or (T, feet), ``plant_clip``), used instead of contacts
    read from the keys and the fill."""
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
                    find_body_joints(sk).root, float(fps or meta.get("fps") or 30.0), contacts=contacts)
    return pl.rotations, pl.positions[:, rj], pl


def judge_plant(meta: dict, q: np.ndarray, pos: np.ndarray, frames: np.ndarray, fq: np.ndarray, fp: np.ndarray
                ) -> tuple[bool, dict]:
    """On pseudo-gap windows (``q`` (B, T, J, 4), ``pos`` (B, T, J, 3) the truth, ``frames`` (B, T) the scored gap
    frames, ``fq`` / ``fp`` the windows as the gate fills them): plant at most ``JUDGE`` of them (evenly picked)
    and say whether planting keeps the errors within ``TOLERANCE`` (their mean growth) and lowers the skate.
    Returns (plant, {unplanted, planted: [cm, deg, skate cm/s], truth_skate})."""
    from motioncore.core.feet import fill_span, skate_sums
    from motioncore.core.feet import ground as feet_ground
    from motioncore.core.rotations import quat_angle

    sk = Skeleton.from_dict(meta["skeleton"])
    legs = legs_of(sk)
    if not legs:
        return False, {}
    if len(q) > JUDGE:  # a few spread over the clip: the judgement costs little beside the gate's own pass
        pick = np.linspace(0, len(q) - 1, JUDGE).round().astype(int)
        q, pos, frames, fq, fp = q[pick], pos[pick], frames[pick], fq[pick], fp[pick]
    fps = float(meta.get("fps") or 30.0)
    keys = ~frames  # a pseudo-gap window is keyed but for its gap
    root = find_body_joints(sk).root
    pq, pp = fq.copy(), fp.copy()
    for b in range(len(q)):
        pl = plant_feet(sk.parents, fq[b], fp[b], keys[b], frames[b], legs, root, fps)
        pq[b], pp[b] = pl.rotations, pl.positions
    tg, tp = sk.forward_kinematics(q, pos)
    feet = [j for lg in legs for j in (lg.ankle, lg.toe) if j >= 0]
    ground = feet_ground(tp, feet)  # (B, F) the truth's ground, per window

    def skate_of(p: np.ndarray) -> float:  # pooled over the windows, each on its gap and the keys either side
        s = np.array([skate_sums(p[b], fps, feet, ground[b], fill_span(~frames[b])) for b in range(len(p))])
        return float(s[:, 0].sum() / max(s[:, 1].sum(), 1e-9))

    out = {}
    for name, (a, b) in (("unplanted", (fq, fp)), ("planted", (pq, pp))):
        g, p = sk.forward_kinematics(a, b)
        cm = float(np.linalg.norm(p - tp, axis=-1)[frames].mean())
        deg = float(np.degrees(quat_angle(g, tg))[frames].mean())
        out[name] = [round(cm, 4), round(deg, 4), round(skate_of(p), 3)]
    out["truth_skate"] = round(skate_of(tp), 3)
    u, p = out["unplanted"], out["planted"]
    growth = 0.5 * (p[0] / max(u[0], 1e-9) + p[1] / max(u[1], 1e-9)) - 1.0  # position and rotation error alike
    ok = growth <= TOLERANCE and p[2] < u[2]
    return bool(ok), out
