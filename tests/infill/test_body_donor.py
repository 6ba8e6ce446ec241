"""The clip's own motion as a donor (``families.body.fill_donor``): the vectorised search against its slow reference, the
warp exact at the keys, a periodic motion filled from its own earlier cycle, the gate judging the donor only on
pseudo-gaps it can cut, and the donor on the shared LAFAN1 walk against the deleted truth and Blender's curve."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.kinematics import yaw_quat
from motioncore.core.rotations import axis_angle_to_quat, quat_angle, quat_apply, quat_mul
from motioncore.core.skeleton import Skeleton
from motioncore.families.body import fill_donor as donor
from motioncore.families.body.fill import BodyLayout


@pytest.fixture(scope="module")
def model_meta():
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve

    return read_meta(resolve("infill-body"))


def _periodic(sk: Skeleton, rj: int, T: int, period: int, turn: float = 0.0, seed: int = 0):
    """A motion on ``sk`` that repeats every ``period`` frames (each joint swinging about its own axis, two
    harmonics), the root walking forward at a constant speed and turning ``turn`` radians a frame: one cycle is
    the next turned and moved."""
    rng = np.random.default_rng(seed)
    J = sk.num_joints
    axes = rng.normal(size=(J, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    amp, ph = rng.uniform(0.1, 0.5, (J, 2)), rng.uniform(0, 2 * np.pi, (J, 2))
    t = np.arange(T)[:, None] * 2 * np.pi / period
    ang = amp[:, 0] * np.sin(t + ph[:, 0]) + amp[:, 1] * np.sin(2 * t + ph[:, 1])   # (T, J)
    q = axis_angle_to_quat(ang[..., None] * axes[None])
    heading = turn * np.arange(T)
    q[:, 0] = quat_mul(yaw_quat(heading), q[:, 0])   # the whole body turns with the heading
    pos = np.broadcast_to(sk.offsets, (T, J, 3)).copy()
    step = np.stack([np.sin(heading), np.zeros(T), np.cos(heading)], -1) * 3.0   # 3 cm a frame ahead
    pos[:, 0] = np.cumsum(step, 0) - step[0]
    return q, pos


def test_the_fast_search_matches_the_slow_reference(model_meta):
    sk = Skeleton.from_dict(model_meta["skeleton"])
    layout, rj = BodyLayout.of(sk), int(model_meta["root_joint"])
    q, pos = _periodic(sk, rj, 400, 37, turn=0.01)
    q = q + np.random.default_rng(1).normal(scale=0.02, size=q.shape)   # not quite periodic: costs differ
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    full = np.ones(400, bool)
    for s, e in ((60, 75), (200, 230), (330, 333)):
        full[s:e] = False
    clip = donor.describe(layout, q, pos, full)
    for s, e in ((60, 75), (200, 230), (330, 333)):
        fast, slow = donor.search(clip, s, e), search_slow(clip, s, e)
        assert [(m.d, m.length) for m in fast] == [(m.d, m.length) for m in slow]
        np.testing.assert_allclose([m.cost for m in fast], [m.cost for m in slow], rtol=1e-9, atol=1e-12)
        for m in fast:   # a donor never reads an unkeyed frame, its context included
            assert full[m.d - donor.CONTEXT - 1:m.d + m.length + donor.CONTEXT + 1].all()
    pseudo = full.copy()
    pseudo[120:135] = False   # a pseudo-gap: its own frames are out of the search, as a real gap's
    for m in donor.search(clip, 120, 135, full=pseudo):
        assert m.d + m.length + donor.CONTEXT + 1 <= 120 or m.d - donor.CONTEXT - 1 >= 135


def test_a_periodic_motion_is_filled_from_its_own_cycle_exact_at_the_keys(model_meta):
    """A turning walk that repeats every 37 frames: the donor one cycle away matches at no cost, and the gap
    filled from it (turned and moved onto the keys) is the deleted truth."""
    sk = Skeleton.from_dict(model_meta["skeleton"])
    layout, rj = BodyLayout.of(sk), int(model_meta["root_joint"])
    q, pos = _periodic(sk, rj, 300, 37, turn=0.02)
    # the root translation lives on the root joint (``rj``), below its ancestor: move it there
    pos[:, rj] = pos[:, 0] + quat_apply(q[:, 0], sk.offsets[rj])
    pos[:, 0] = sk.offsets[0]
    q[:, rj] = quat_mul(q[:, 0], q[:, rj])
    q[:, 0] = [1.0, 0.0, 0.0, 0.0]
    full = np.ones(300, bool)
    s, e = 150, 170
    full[s:e] = False
    clip = donor.describe(layout, q, pos, full)
    best = donor.search(clip, s, e, k=1)[0]
    assert best.cost < 1e-12 and best.length == e - s and (s - best.d) % 37 == 0
    fq, fp, cost = donor.donor_fill(layout, clip, q, pos, s, e, k=1)
    assert np.degrees(quat_angle(fq, q[s:e])).max() < 1e-6
    np.testing.assert_allclose(fp[:, rj], pos[s:e, rj], atol=1e-6)
    # a costlier donor (a different cycle length) is still exact at both keys and has no jump next to them
    q2, pos2 = _periodic(sk, rj, 300, 41, turn=0.0, seed=3)
    m = donor.Match(1.0, 40, 24)
    wq, _, _ = donor.warp(layout, donor.describe(layout, q2, pos2, full), q2, m, s, e)
    jn = list(layout.joints[1:])
    step = np.degrees(quat_angle(q2[1:, jn], q2[:-1, jn])).max()   # the motion's own largest step a frame
    assert np.degrees(quat_angle(wq[0, jn], q2[s - 1, jn])).max() < 3 * step
    assert np.degrees(quat_angle(wq[-1, jn], q2[e, jn])).max() < 3 * step


def test_the_gate_judges_the_donor_only_where_it_can_cut_pseudo_gaps(model_meta, one_thread):
    """A short clip (the keyed stretches too short for pseudo-gaps with the network's context): the donor is not
    judged and every gap says the network or Blender's curve filled it; the keys come back exact."""
    from motioncore.infill.fill import fill_clip
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-body")
    sk = Skeleton.from_dict(meta["skeleton"])
    rj = int(meta["root_joint"])
    q, pos = _periodic(sk, rj, 90, 30)
    known = np.ones(90, bool)
    known[30:45] = False
    out = fill_clip(model, meta, q, pos[:, rj], known, donor=True, plant_feet=False)
    assert [f["by"] for f in out.gate.filled_by] in (["network"], ["bezier"])
    assert all(not f.donor for f in out.gate.fits.values())
    np.testing.assert_array_equal(out.rotations[0][known], q[known])


@needs_data
@pytest.mark.parametrize("length", [15])
def test_on_the_lafan1_walk_the_gated_donor_beats_the_gate_alone(raw_file, length, one_thread):
    """The shared LAFAN1 walk (evaluation and tests only), its first 2,400 frames keyed but 12 gaps, filled as
    ``eval clips`` fills them, with and without the donor: every gap says what filled it, the donor fills some,
    the keys stay exact, and against the deleted truth the fill with the donor is closer than without it (which
    itself beats Blender's Bezier of the keys)."""
    from motioncore.eval.clips import clip_unit, cut_gaps, evaluate_clips
    from motioncore.families.body.evaluate import load_body_clipfill
    from motioncore.io.bvh import read_bvh

    m = read_bvh(raw_file("lafan1", "lafan1_walk_7184f.bvh"))
    from motioncore.core.motion import Motion

    m = Motion(m.skeleton, m.rotations[:2400], m.positions[:2400], m.fps, "lafan1_2400")
    with_donor = load_body_clipfill("infill-body", donor=True)
    res = evaluate_clips([m], {"gate": load_body_clipfill("infill-body"), "donor": with_donor}, 12, (length,),
                         units=[clip_unit(m)])
    (row,) = res["clips"]
    by = [f["by"] for f in row["donor"]["filled_by"]]
    assert len(by) == int((~cut_gaps(2400, 12, length)).sum() // length) and "donor" in by
    print(f"{length} frames: gate {row['gate']['cm_ratio']:.3f} / {row['gate']['deg_ratio']:.3f}, donor "
          f"{row['donor']['cm_ratio']:.3f} / {row['donor']['deg_ratio']:.3f}; filled by {by}")
    assert row["gate"]["cm_ratio"] < 1.0
    assert row["donor"]["cm_ratio"] < row["gate"]["cm_ratio"]
    assert row["donor"]["deg_ratio"] < row["gate"]["deg_ratio"]


def search_slow(clip, s: int, e: int, k: int = donor.K, full: np.ndarray | None = None, C: int = donor.CONTEXT):
    """``fill_donor.search``'s reference: each candidate tried in a loop, its cost from the definition (per group, the mean
    squared difference of the standardised features, frames weighted toward the gap)."""
    full = clip.full if full is None else np.asarray(full, bool)
    c = donor._context(full, s, e, C)
    if c == 0:
        return []
    T, w = len(full), donor._frame_weights(c)
    found = []
    for n in donor._lengths(e - s):
        for d in range(T):
            if d - c - 1 < 0 or d + n + c + 1 > T or not full[d - c - 1:d + n + c + 1].all():
                continue
            cost = 0.0
            for i in range(c):   # frame i from each key, outward
                for (qa, da), (qb, db) in (((s - 1 - i, s - 1 - i), (d - 1 - i, d - 1 - i)),
                                           ((e + i, e + i + 1), (d + n + i, d + n + i + 1))):
                    cost += w[i] * float(np.sum((clip.pose[qa] - clip.pose[qb]) ** 2))
                    cost += w[i] * float(np.sum((clip.vel[da] - clip.vel[db]) ** 2))
            cost += float(np.sum((donor._span(clip, s - 1, e) - donor._span(clip, d - 1, d + n)) ** 2))
            found.append((cost, d, n))
    return donor._pick(found, e - s, k)
