"""eval.fill_quality: pops, feet under the ground, skate and jerk of a filled clip against its capture, on a real
walk (Bandai walk_active_005) with gaps cut out: the capture against itself, and the same clip spoiled the way
planting used to spoil it (a knee that snaps for one frame, feet sunk through the floor)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.gaps import runs
from motioncore.core.rotations import quat_continuity, quat_mul
from motioncore.eval.clips import cut_gaps
from motioncore.eval.fill_quality import fill_quality, pops, turns, under_ground
from motioncore.families.body.fill_plant import legs_of


@pytest.fixture(scope="module")
def walk(bandai_walk):
    from motioncore.io.bvh import read_bvh

    m = read_bvh(bandai_walk)
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    known = cut_gaps(len(q), 12, 15, spacing=45)
    return m, q, np.asarray(m.positions, np.float64), known


@needs_data
def test_the_capture_against_itself(walk):
    m, q, p, known = walk
    sk = m.skeleton
    _, gp = sk.forward_kinematics(q, p)
    feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
    r = fill_quality(q, gp, q, gp, known, m.fps, feet, gp)
    assert r["gaps"] == len(runs(~known)) == 3
    assert r["pops_max"] <= 1.0 and r["under"] == r["under_capture"]
    assert r["skate_ratio"] == pytest.approx(1.0) and r["jerk_ratio"] == pytest.approx(1.0)
    # the turns are the joints' own: the knee bends tens of degrees a second in a walk
    knee = legs_of(sk)[0].knee
    assert 1.0 < turns(q)[:, knee].max() < 20.0


@needs_data
def test_a_knee_that_snaps_for_one_frame_is_a_pop(walk):
    m, q, p, known = walk
    sk = m.skeleton
    s, e = runs(~known)[1]
    knee = legs_of(sk)[1].knee
    bad = q.copy()
    t = s + 5
    bend = np.array([np.cos(np.radians(20)), np.sin(np.radians(20)), 0.0, 0.0])   # 40 degrees about x
    bad[t, knee] = quat_mul(bend, q[t, knee])
    ratio, top = pops(bad, q, known)
    assert ratio.shape == (3, sk.num_joints)
    assert ratio[1, knee] > 2.5 and top[1, knee] >= 35.0
    assert ratio[0].max() <= 1.0 and ratio[2].max() <= 1.0   # the other gaps are the capture's
    _, gp = sk.forward_kinematics(bad, p)
    _, tp = sk.forward_kinematics(q, p)
    feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
    r = fill_quality(bad, gp, q, tp, known, m.fps, feet)
    assert r["pops_worst"][:2] == (s, knee) and r["pops_max"] == pytest.approx(ratio.max())
    assert np.isnan(r["jerk_bezier_ratio"]) and r["jerk_ratio"] > 1.0


@needs_data
def test_feet_sunk_through_the_floor_are_measured_in_cm(walk):
    m, q, p, known = walk
    sk = m.skeleton
    low = p.copy()
    low[~known, 0, 1] -= 6.0   # the whole body 6 cm lower on the filled frames (Bandai is in cm, Y-up)
    _, gp = sk.forward_kinematics(q, low)
    _, tp = sk.forward_kinematics(q, p)
    feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
    u, uc = under_ground(gp, tp, known, feet)
    assert u.shape == uc.shape == (4,)
    assert np.all(u >= uc) and u.max() > 5.0 and uc.max() < 2.0
