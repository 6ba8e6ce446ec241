"""Planting without pops, feet above the floor, contacts from outside (core.plant): a real walk (Bandai
walk_active_005) with gaps cut out and filled by Blender's Bezier of the keys (whose feet slide and sink), planted,
against the deleted truth, at the capture's 30 fps and resampled to 120 fps (blend lengths are in seconds)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F
from motioncore.core.plant import given_contacts, two_bone_ik
from motioncore.core.rotations import quat_continuity
from motioncore.eval.clips import cut_gaps
from motioncore.eval.fill_quality import pops, under_ground
from motioncore.eval.keyed import bezier_keys
from motioncore.families.body.fill_plant import legs_of, plant_clip


def _clip(path, fps):
    from motioncore.core.kinematics import resample
    from motioncore.io.bvh import read_bvh

    m = read_bvh(path)
    if fps != m.fps:
        m = resample(m, fps)
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    k = int(round(fps / 30))
    known = cut_gaps(len(q), 12 * k, 15 * k, spacing=45 * k)   # 3 gaps of half a second
    p = np.asarray(m.positions, np.float64)
    bq, bp = bezier_keys(m.skeleton, q[None], p[None], known[None])
    return m, q, p, known, bq[0], bp[0]


@pytest.fixture(scope="module", params=[30, 120])
def walk(request, bandai_walk):
    return _clip(bandai_walk, float(request.param))


@needs_data
def test_planted_joints_turn_no_faster_than_the_capture(walk):
    """Per gap and joint, the largest one-frame turn over the filled frames and the pairs meeting the keys, over
    the capture's there (eval.fill_quality.pops): at most 1.5x at 30 and at 120 fps, where the blend that was not
    flat at the keys popped (the planting before: 0.98x / 4.06x on this clip, now 1.04x / 1.02x)."""
    m, q, p, known, bq, bp = walk
    pl = plant_clip(m.skeleton, bq, bp, known, ~known, m.fps)
    ratio, _ = pops(pl.rotations, q, known)
    assert ratio.max() <= 1.5
    assert np.abs(pl.offsets).max() > 5.0   # it did plant: the Bezier's feet slid by centimetres


@needs_data
def test_no_planted_foot_goes_under_the_keys_floor(walk):
    """The fill sinks: the whole body up to 6 cm lower inside each gap, smoothly from its keys (as the model put
    toes 3-9 cm under). Planted, no foot or toe is more than 2 cm under the keys' floor; unplanted, 4 cm or more."""
    from motioncore.core.gaps import runs

    m, q, p, known, bq, bp = walk
    sk = m.skeleton
    low = bp.copy()
    for s, e in runs(~known):
        x = np.arange(1, e - s + 1) / (e - s + 1)
        low[s:e, 1, 1] -= 6.0 * np.sin(np.pi * x) ** 2   # the hips (Bandai: cm, Y-up)
    pl = plant_clip(sk, bq, low, known, ~known, m.fps)
    feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
    _, tp = sk.forward_kinematics(q, p)
    _, sunk = sk.forward_kinematics(bq, low)
    _, got = sk.forward_kinematics(pl.rotations, pl.positions)
    assert under_ground(sunk, tp, known, feet)[0].max() > 4.0
    assert under_ground(got, tp, known, feet)[0].max() <= 2.0
    assert np.array_equal(pl.rotations[known], bq[known])


@needs_data
def test_contacts_given_from_outside_are_the_ones_planted(walk):
    """The capture's own contact labels (core.feet.leg_contacts), given per leg or per foot joint (as a model's
    contact output would be, probabilities included), are the contacts planted; none given, no foot is held."""
    m, q, p, known, bq, bp = walk
    sk = m.skeleton
    legs = legs_of(sk)
    _, tp = sk.forward_kinematics(q, p)
    per_foot = F.contacts(tp, m.fps, [j for lg in legs for j in (lg.ankle, lg.toe)])   # (T, 4)
    per_leg = per_foot.reshape(len(q), 2, 2).any(-1)
    a = plant_clip(sk, bq, bp, known, ~known, m.fps, contacts=per_leg)
    b = plant_clip(sk, bq, bp, known, ~known, m.fps, contacts=np.where(per_foot, 0.9, 0.1))
    np.testing.assert_array_equal(a.contacts[~known] & ~per_leg[~known], False)   # planted only where given
    np.testing.assert_array_equal(a.contacts, b.contacts)   # per foot: the same legs down (toe or heel pinned)
    feet = [j for lg in legs for j in (lg.ankle, lg.toe)]
    g, span = F.ground(tp, feet), F.fill_span(known)
    _, ap = sk.forward_kinematics(a.rotations, a.positions)
    _, zp = sk.forward_kinematics(bq, bp)
    assert F.skate(ap, m.fps, feet, g, span) < 0.7 * F.skate(zp, m.fps, feet, g, span)   # 0.6x at 120 fps
    none = plant_clip(sk, bq, bp, known, ~known, m.fps, contacts=np.zeros((len(q), 2), bool))
    assert not none.contacts.any() and np.abs(none.offsets[..., [0, 2]]).max() == 0.0
    with pytest.raises(ValueError, match="contacts"):
        given_contacts(np.zeros((len(q), 3)), len(q), legs)


@needs_data
def test_a_leg_that_cannot_reach_gives_way_smoothly(bandai_walk):
    """One real leg, its ankle's goal pulled straight away from the hip from 0.9 to 1.1 of the leg's length in
    small even steps: the hard IK straightens the knee in a snap as the goal passes the reach; the soft reach
    bends it open smoothly, never straight, and stays exact below 0.97 of the reach."""
    m = _clip(bandai_walk, 30.0)[0]
    sk = m.skeleton
    lg = legs_of(sk)[0]
    gq, gp = sk.forward_kinematics(m.rotations[:1], m.positions[:1])
    H, K, A = gp[0, lg.hip], gp[0, lg.knee], gp[0, lg.ankle]
    L = np.linalg.norm(K - H) + np.linalg.norm(A - K)
    u = (A - H) / np.linalg.norm(A - H)
    s = np.linspace(0.9, 1.1, 201)
    n = len(s)
    D = H + s[:, None] * L * u
    args = [np.repeat(x[None], n, 0) for x in (H, K, A)] + [D] + [np.repeat(gq[0, j][None], n, 0)
                                                               for j in (lg.hip, lg.knee, lg.ankle)]

    def knee_angle(soft):
        gh, gk, _ = two_bone_ik(*args, soft=soft)
        d = np.abs(np.sum(gh * gk, -1))
        return np.degrees(2 * np.arccos(np.clip(d, 0, 1)))   # the knee's bend: thigh to shin

    hard, soft = knee_angle(False), knee_angle(True)
    assert np.abs(np.diff(hard)).max() > 3 * np.abs(np.diff(soft)).max()
    assert soft.min() > 2.0   # never straight
    below = s < 0.96
    np.testing.assert_allclose(soft[below], hard[below], atol=1e-6)
