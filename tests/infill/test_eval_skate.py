"""Foot skate in the in-fill benchmarks (eval infill, --keys-every, eval clips): a real walk, cut into windows,
filled by the truth (skate 1x its own), by Interp (its feet drag) and checked against core.feet directly."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F
from motioncore.core.rotations import quat_continuity
from motioncore.eval import BASELINES, evaluate_infill, format_table, position_stats
from motioncore.eval.clips import evaluate_clips, format_clips
from motioncore.eval.infill import skate_feet
from motioncore.eval.keyed import KEY_BASELINES, evaluate_keys


@pytest.fixture(scope="module")
def walk(bandai_walk):
    from motioncore.io.bvh import read_bvh

    return read_bvh(bandai_walk)


def _windows(m, T: int = 50, step: int = 25):
    q = quat_continuity(m.rotations, axis=0)
    starts = range(0, len(q) - T + 1, step)
    return np.stack([q[s:s + T] for s in starts]), np.stack([m.positions[s:s + T] for s in starts])


@needs_data
def test_skate_feet_are_the_walks_feet_and_toes(walk):
    q, p = _windows(walk)
    assert [walk.skeleton.names[j] for j in skate_feet(walk.skeleton, q, p)] == ["Foot_L", "Toes_L", "Foot_R",
                                                                                "Toes_R"]


@needs_data
def test_eval_infill_skate_is_the_fills_over_the_truths_on_the_gap_and_its_keys(walk):
    sk = walk.skeleton
    q, p = _windows(walk)
    mean, std = position_stats(sk.forward_kinematics(q, p)[1])

    def oracle(skeleton, qq, pp, n_past, n_trans):
        return q[:, :qq.shape[1]], p[:, :pp.shape[1]]

    res = evaluate_infill({"oracle": oracle, "interp": BASELINES["interp"]}, sk, q, p, mean, std,
                          lengths=(15, 30), progress=False)
    assert res["oracle"]["Skate"] == {"15": 1.0, "30": 1.0}
    assert res["interp"]["Skate"]["15"] > 1.5   # the feet follow the root's straight line while down
    # the figure itself: the gap (frames 10..24) and its keys (9 and 25), each window's ground from its truth
    feet = skate_feet(sk, q, p)
    iq, ip = BASELINES["interp"](sk, np.where(np.arange(50)[None, :, None, None] < 26, q, np.nan)[:, :26],
                                 p[:, :26], 10, 15)
    _, igp = sk.forward_kinematics(iq, ip)
    _, tgp = sk.forward_kinematics(q, p)
    g = F.ground(tgp, feet)
    want = F.skate(igp, walk.fps, feet, g, np.arange(9, 26)) / F.skate(tgp[:, :26], walk.fps, feet, g,
                                                                        np.arange(9, 26))
    assert res["interp"]["Skate"]["15"] == pytest.approx(want, rel=1e-9)
    assert res["interp"]["Skate cm/s"]["15"] == pytest.approx(F.skate(igp, walk.fps, feet, g, np.arange(9, 26)))
    assert "Skate@15" in format_table(res).splitlines()[0]
    assert res["oracle"]["GMD"] == res["oracle"]["GMD truth"]
    assert 0.0 <= res["interp"]["GMD truth"]["15"] < res["interp"]["GMD"]["15"] <= 1.0   # Interp's toes drag


@needs_data
def test_sparse_keys_skate_over_the_whole_window(walk):
    sk = walk.skeleton
    q, p = _windows(walk)
    mean, std = position_stats(sk.forward_kinematics(q, p)[1])
    res = evaluate_keys({"interp": KEY_BASELINES["interp"]}, sk, q, p, mean, std, every=(8,), progress=False)
    assert res["interp"]["Skate"]["8"] > 1.0
    assert res["interp"]["Skate truth cm/s"]["8"] == pytest.approx(F.skate(sk.forward_kinematics(q, p)[1],
                                                                           walk.fps, skate_feet(sk, q, p)))


@needs_data
def test_eval_clips_reports_skate_per_clip_and_pooled(walk):
    from motioncore.eval.clips import _bezier, cut_gaps

    def oracle(sk, q, p, known):
        return q, p

    res = evaluate_clips([walk], {"oracle": oracle}, n_gaps=2, lengths=(15,))
    row, summ = res["clips"][0], res["summary"]["15"]
    assert row["gaps"] == 2 and row["capture"]["skate"] > 0
    assert row["oracle"]["skate"] == pytest.approx(row["capture"]["skate"])
    assert summ["oracle"]["skate_over_truth"] == pytest.approx(1.0)
    assert summ["bezier"]["skate_over_truth"] == pytest.approx(row["bezier"]["skate_over_truth"])   # one clip
    assert summ["bezier"]["skate_over_truth"] > 1.5
    # the figure itself: Bezier's feet over the gaps and their keys, on the capture's ground
    known = cut_gaps(len(walk.rotations), 2, 15)
    q = quat_continuity(walk.rotations, axis=0)
    bq, bp = _bezier(walk.skeleton, q, walk.positions, known)
    feet = skate_feet(walk.skeleton, q[None], walk.positions[None])
    g = F.ground(walk.skeleton.forward_kinematics(q, walk.positions)[1], feet)
    want = F.skate(walk.skeleton.forward_kinematics(bq, bp)[1], walk.fps, feet, g, F.fill_span(known))
    assert row["bezier"]["skate"] == pytest.approx(want)
    assert 0 <= row["bezier"]["skating_ratio"] <= 1
    assert summ["bezier"]["skating_ratio"] == pytest.approx(row["bezier"]["skating_ratio"])   # one clip
    assert summ["oracle"]["skating_ratio"] == pytest.approx(summ["oracle"]["skating_ratio_truth"])
    assert "skate / truth" in format_clips(res)
