"""Feet planted in filled frames (core.plant, families.body.fill_plant): on a real walk with its frames deleted in
gaps, against the deleted truth, Blender's Bezier of the same keys and the network's fill; the gate's judgement on
a clip where planting would cost error (a glide: the capture's own feet slide)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F
from motioncore.core.gaps import runs
from motioncore.core.plant import fk, plant_feet
from motioncore.core.rotations import quat_angle, quat_continuity
from motioncore.eval.clips import cut_gaps
from motioncore.eval.infill import jerk_sum
from motioncore.eval.keyed import bezier_keys
from motioncore.families.body.fill_plant import legs_of, plant_clip


@pytest.fixture(scope="module")
def walk(bandai_walk):
    from motioncore.io.bvh import read_bvh

    m = read_bvh(bandai_walk)
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    known = cut_gaps(len(q), 12, 15, spacing=45)   # 3 gaps of 15 frames (half a second) in 205 frames at 30 fps
    return m, q, np.asarray(m.positions, np.float64), known


def _scores(sk, q, p, tq, tp, known, fps):
    """cm and degrees over the gap frames, skate (cm/s) on the gaps and their keys, jerk over the gaps +- 3."""
    gq, gp = sk.forward_kinematics(q, p)
    tgq, tgp = sk.forward_kinematics(tq, tp)
    feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
    gap = ~known
    return {"cm": float(np.linalg.norm(gp - tgp, axis=-1)[gap].mean()),
            "deg": float(np.degrees(quat_angle(gq, tgq))[gap].mean()),
            "skate": F.skate(gp, fps, feet, F.ground(tgp, feet), F.fill_span(known)),
            "jerk": sum(jerk_sum(gp[s - 3:e + 3]) for s, e in runs(gap))}


@needs_data
def test_fk_on_the_legs_chain_is_the_skeletons_fk(walk):
    m, q, p, _ = walk
    sk = m.skeleton
    gq, gp = sk.forward_kinematics(q, p)
    aq, ap = fk(sk.parents, q, p)
    np.testing.assert_allclose(ap, gp, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(aq * gq, -1)), 1.0, atol=1e-9)
    legs = legs_of(sk)
    assert [(sk.names[lg.hip], sk.names[lg.knee], sk.names[lg.ankle], sk.names[lg.toe]) for lg in legs] == [
        ("UpperLeg_L", "LowerLeg_L", "Foot_L", "Toes_L"), ("UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")]


@needs_data
def test_planting_blenders_curve_stands_the_feet_still_at_no_cost(walk):
    """Bezier of the keys drags the feet (7x the capture's skate); planted, they skate as the capture does, with
    less position and rotation error, jerk under the capture's, keys bit-identical, the hips never moved."""
    m, q, p, known = walk
    sk = m.skeleton
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    bq, bp = bq[0], bp[0]
    pl = plant_clip(sk, bq, bp, known, ~known, m.fps)
    assert np.array_equal(pl.rotations[known], bq[known]) and np.array_equal(pl.positions[known], bp[known])
    truth = _scores(sk, q, p, q, p, known, m.fps)
    bez = _scores(sk, bq, bp, q, p, known, m.fps)
    got = _scores(sk, pl.rotations, pl.positions, q, p, known, m.fps)
    assert bez["skate"] > 5 * truth["skate"]
    assert got["skate"] <= 1.25 * truth["skate"]
    assert got["cm"] <= bez["cm"] and got["deg"] <= bez["deg"]
    assert got["jerk"] <= 1.25 * max(truth["jerk"], bez["jerk"])
    assert pl.hips_moved == 0
    # the contacts it planted, against the capture's own contact labels on the filled frames
    labels = F.leg_contacts(sk.forward_kinematics(q, p)[1], m.fps, [[lg.ankle, lg.toe] for lg in legs_of(sk)])
    c, lab = pl.contacts[~known], labels[~known]
    assert (c & lab).sum() / c.sum() >= 0.9 and (c & lab).sum() / lab.sum() >= 0.6


@needs_data
def test_the_planted_ankle_lands_on_its_goal(walk):
    """The IK puts each ankle exactly on the fill's position plus the planting offset wherever neither the soft
    reach nor the per-frame turn cap gives way, and says where they did (``missed``): by little on average, and on
    a contact by at most 1.5 cm (the cap gives way in swings: Bezier swings a leg faster than the keyed legs
    near the gap turn); only thigh, shin and foot rotations change."""
    m, q, p, known = walk
    sk = m.skeleton
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    pl = plant_clip(sk, bq[0], bp[0], known, ~known, m.fps)
    _, before = sk.forward_kinematics(bq[0], bp[0])
    _, after = sk.forward_kinematics(pl.rotations, pl.positions)
    legs = legs_of(sk)
    for i, lg in enumerate(legs):
        miss = np.linalg.norm(after[:, lg.ankle] - before[:, lg.ankle] - pl.offsets[:, i], axis=-1)
        np.testing.assert_allclose(miss, pl.missed[:, i], atol=1e-6)
        assert pl.missed[~known, i].mean() < 2.0 and pl.missed[pl.contacts[:, i], i].max() <= 1.5
        assert (pl.missed[~known, i] < 1e-6).any()
    changed = np.flatnonzero(np.abs(pl.rotations - bq[0]).max(axis=(0, 2)) > 1e-9)
    assert set(changed) <= {j for lg in legs for j in (lg.hip, lg.knee, lg.ankle)}
    assert np.abs(pl.offsets).max() > 5.0   # it did plant: the Bezier's feet slid by centimetres


@needs_data
def test_planting_the_capture_itself_moves_it_little(walk):
    """The capture's feet already stand still: planting it changes its joints by under a centimetre on average."""
    m, q, p, known = walk
    sk = m.skeleton
    pl = plant_clip(sk, q, p, known, ~known, m.fps)
    _, a = sk.forward_kinematics(q, p)
    _, b = sk.forward_kinematics(pl.rotations, pl.positions)
    assert np.linalg.norm(a - b, axis=-1)[~known].mean() < 1.0
    assert pl.hips_moved == 0


@needs_data
def test_the_hips_move_only_where_a_leg_cannot_reach(walk):
    """A fill whose body swings 25 cm sideways in each gap, feet and all: the planted feet stay, the legs cannot
    reach them at the swing's height, so there (and only on filled frames) the hips move toward them."""
    m, q, p, known = walk
    sk = m.skeleton
    fp = p.copy()
    for s, e in runs(~known):
        x = np.arange(1, e - s + 1) / (e - s + 1)
        fp[s:e, 1, 0] += 25.0 * np.sin(np.pi * x) ** 2
    legs = legs_of(sk)
    pl = plant_feet(sk.parents, q, fp, known, ~known, legs, 1, m.fps)
    moved = np.linalg.norm(pl.positions[:, 1] - fp[:, 1], axis=-1) > 1e-9
    assert 0 < pl.hips_moved == moved.sum() and not moved[known].any()
    _, gp = sk.forward_kinematics(q, fp)
    reach = [np.linalg.norm(gp[0, lg.knee] - gp[0, lg.hip]) + np.linalg.norm(gp[0, lg.ankle] - gp[0, lg.knee])
             for lg in legs]
    goals = gp[:, [lg.ankle for lg in legs]] + pl.offsets
    far = np.any([np.linalg.norm(goals[:, i] - gp[:, lg.hip], axis=-1) > reach[i] for i, lg in enumerate(legs)], 0)
    assert far.any() and moved[far].all()   # wherever a goal was out of reach, the hips moved


@needs_data
def test_fill_clip_plants_the_feet_by_default_and_the_gate_keeps_them_off_a_glide(walk, one_thread):
    from motioncore.models.registry import load_model
    from motioncore.tasks.infill import fill_clip

    m, q, p, known = walk
    model, meta = load_model("infill-body")
    r = p[:, 1].copy()
    on = fill_clip(model, meta, q, r, known)
    off = fill_clip(model, meta, q, r, known, plant_feet=False)
    assert on.plant is not None and on.plant["frames"] == (~known).sum() and off.plant is None
    (fit,) = on.gate.summary()
    assert fit["plant"] and fit["plant_error"]["planted"][2] < fit["plant_error"]["unplanted"][2]
    np.testing.assert_array_equal(on.rotations[0][known], q[known])
    sk = m.skeleton
    pos = lambda rot, root: np.concatenate([p[:, :1], root[:, None], p[:, 2:]], 1)  # noqa: E731
    a = _scores(sk, on.rotations[0], pos(on.rotations[0], on.root[0]), q, p, known, m.fps)
    b = _scores(sk, off.rotations[0], pos(off.rotations[0], off.root[0]), q, p, known, m.fps)
    print(f"strength {fit['plant_error']['strength']}: skate {b['skate']:.1f} -> {a['skate']:.1f} cm/s, "
          f"{b['cm']:.3f} -> {a['cm']:.3f} cm, {b['deg']:.3f} -> {a['deg']:.3f} deg")
    # on its test gaps a full plant raised the position error (5.30 -> 5.48 cm): the gate plants at the strongest
    # strength that raises no error there, and the real gaps' feet slide less at no cost in position or rotation
    assert 0.0 < fit["plant_error"]["strength"] < 1.0
    assert a["skate"] < 0.7 * b["skate"]
    assert a["cm"] <= b["cm"] and a["deg"] <= 1.01 * b["deg"]
    # a glide: the capture's whole body, feet included, slides sideways at 150 cm/s; planting would pin feet
    # that truly slide, so the gate's test gaps cut from the keys turn it off, and say why
    r2 = r.copy()
    r2[:, 0] += np.arange(len(r)) * 150.0 / m.fps
    glide = fill_clip(model, meta, q, r2, known)
    (fit,) = glide.gate.summary()
    assert glide.plant is None and not fit["plant"]
    assert fit["plant_error"]["planted"][0] > fit["plant_error"]["unplanted"][0]


@needs_data
def test_the_feet_are_planted_at_the_clips_own_rate(walk, one_thread):
    """A 60 fps clip is filled at its own rate (families.body.fill_rate); the gate judges planting at the model's
    rate and the feet are planted at the clip's: keys bit-identical, the filled feet skate less."""
    from motioncore.core.kinematics import resample
    from motioncore.models.registry import load_model
    from motioncore.tasks.infill import fill_clip_at

    m = resample(walk[0], 60.0)
    sk = m.skeleton
    q, p = quat_continuity(np.asarray(m.rotations, np.float64), axis=0), np.asarray(m.positions, np.float64)
    known = cut_gaps(len(q), 12, 30, spacing=90)
    model, meta = load_model("infill-body")
    on = fill_clip_at(model, meta, q, p[:, 1], known, 60.0)
    off = fill_clip_at(model, meta, q, p[:, 1], known, 60.0, plant_feet=False)
    (fit,) = on.gate.summary()
    assert fit["plant"] and on.plant is not None and off.plant is None
    np.testing.assert_array_equal(on.rotations[0][known], q[known])
    pos = lambda root: np.concatenate([p[:, :1], root[:, None], p[:, 2:]], 1)  # noqa: E731
    a = _scores(sk, on.rotations[0], pos(on.root[0]), q, p, known, m.fps)
    b = _scores(sk, off.rotations[0], pos(off.root[0]), q, p, known, m.fps)
    assert a["skate"] < b["skate"]


@needs_data
def test_blocking_plants_the_feet_on_the_models_contact_output(walk, one_thread):
    """A pose every 10 frames: no keyed stretch to judge planting on and nothing in the keys to tell where a foot is
    down; a model with a contact output (``infill-body-spline``) plants on it, keys exact, the feet slide less."""
    from motioncore.models.registry import load_model
    from motioncore.tasks.infill import fill_clip

    m, q, p, _ = walk
    model, meta = load_model("infill-body-spline")
    assert meta["config"]["contacts"] == 4 and meta["config"]["basis"] == "spline"
    known = np.zeros(len(q), bool)
    known[::10] = True
    known[-1] = True
    r = p[:, 1].copy()
    on = fill_clip(model, meta, q, r, known, plant_feet=True)
    off = fill_clip(model, meta, q, r, known, plant_feet=False)
    assert on.plant is not None and on.plant["model_contacts"] > 0 and off.plant is None
    np.testing.assert_array_equal(on.rotations[0][known], q[known])
    pos = lambda root: np.concatenate([p[:, :1], root[:, None], p[:, 2:]], 1)  # noqa: E731
    a = _scores(m.skeleton, on.rotations[0], pos(on.root[0]), q, p, known, m.fps)
    b = _scores(m.skeleton, off.rotations[0], pos(off.root[0]), q, p, known, m.fps)
    assert a["skate"] < b["skate"]
    # the bundled per-gap model has no contact output: blocking is left as filled, as before
    model0, meta0 = load_model("infill-body")
    assert fill_clip(model0, meta0, q, r, known, plant_feet=True).plant is None
