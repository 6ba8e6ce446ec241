"""Foot skate, GMD's skating ratio, contact labels and the contact height (core/feet.py): hand-built feet whose
answer is known, the vectorised paths against slow per-pair loops, and a real walk whose feet are made to slide."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F


def _track(x: np.ndarray, h: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
    """(T, 1, 3) one joint's world positions, Y-up: x, height h, z."""
    z = np.zeros_like(x) if z is None else z
    return np.stack([x, h, z], -1)[:, None, :]


def test_a_foot_sliding_on_the_ground_skates_at_its_speed():
    T, fps = 31, 30.0
    p = _track(np.arange(T) * 2.0, np.zeros(T))   # 2 cm a frame at 30 fps: 60 cm/s
    assert F.skate(p, fps, [0]) == pytest.approx(60.0)
    assert F.skate(p, 120.0, [0]) == pytest.approx(240.0)   # the clip's own rate
    assert F.skate(p, fps, [0], unit=2.0) == pytest.approx(120.0)   # 2 cm a unit
    diag = _track(np.arange(T) * 3.0, np.zeros(T), np.arange(T) * 4.0)   # 5 cm a frame, diagonally
    assert F.skate(diag, fps, [0]) == pytest.approx(150.0)


def test_a_lifted_foot_does_not_count_and_a_still_planted_one_is_zero():
    fps = 30.0
    x = np.concatenate([np.zeros(20), np.arange(1, 21) * 5.0])          # still, then fast
    h = np.concatenate([np.zeros(20), np.full(20, 10.0)])               # on the ground, then 10 cm up
    p = _track(x, h)
    assert F.skate(p, fps, [0]) == pytest.approx(0.0)
    # the lift-off pair (mean height 5 cm, over H): weight 0, so the 150 cm/s pairs never count
    v, w = F.skate_pairs(p, fps, [0])
    assert w[:19].min() == 1.0 and w[19:].max() == 0.0
    assert np.isnan(F.skate(p, fps, [0], frames=np.arange(25, 40)))   # only the lifted frames: undefined


def test_the_weight_follows_its_formula_between_the_ground_and_h():
    T, fps = 21, 30.0
    ground = np.array([0.0])
    on = F.skate_pairs(_track(np.arange(T) * 2.0, np.zeros(T)), fps, [0], ground)[1]
    half = F.skate_pairs(_track(np.arange(T) * 2.0, np.full(T, F.SKATE_H / 2)), fps, [0], ground)[1]
    high = F.skate_pairs(_track(np.arange(T) * 2.0, np.full(T, F.SKATE_H)), fps, [0], ground)[1]
    below = F.skate_pairs(_track(np.arange(T) * 2.0, np.full(T, -3.0)), fps, [0], ground)[1]
    assert np.allclose(on, 1.0) and np.allclose(below, 1.0) and np.allclose(high, 0.0)
    assert np.allclose(half, 2.0 - math.sqrt(2.0))
    # two feet: one sliding 60 cm/s on the ground, one 100 cm/s at H / 2 (its ground given as 0)
    p = np.concatenate([_track(np.arange(T) * 2.0, np.zeros(T)),
                        _track(np.arange(T) * 100 / 30, np.full(T, F.SKATE_H / 2))], axis=1)
    w2 = 2.0 - math.sqrt(2.0)
    assert F.skate(p, fps, [0, 1], ground=np.zeros(2)) == pytest.approx((60 + w2 * 100) / (1 + w2))


def test_the_frames_pick_pairs_whose_both_frames_are_in_them():
    fps, T = 30.0, 30
    x = np.concatenate([np.zeros(10), np.arange(1, 11) * 1.0, np.full(10, 10.0)])   # slides 30 cm/s on 10..19
    p = _track(x, np.zeros(T))
    assert F.skate(p, fps, [0], frames=np.arange(10, 20)) == pytest.approx(30.0)
    mask = np.zeros(T, bool)
    mask[9:20] = True
    assert F.skate(p, fps, [0], frames=mask) == pytest.approx(30.0)   # pairs (9, 10) .. (18, 19): all slide 1 cm a frame
    assert np.isnan(F.skate(p, fps, [0], frames=[0, 5, 22, 29]))   # no two consecutive frames: no pair
    with pytest.raises(ValueError, match="frames"):
        F.skate(p, fps, [0], frames=[40])


def test_the_fill_span_is_each_run_of_filled_frames_and_the_key_either_side():
    known = np.ones(20, bool)
    known[5:8] = False
    known[12:13] = False
    assert np.flatnonzero(F.fill_span(known)).tolist() == [4, 5, 6, 7, 8, 11, 12, 13]
    assert F.fill_span(np.ones(5, bool)).sum() == 0


def _slow_skate(p: np.ndarray, fps: float, feet: list[int], ground: np.ndarray, frames: set[int]) -> float:
    """One pair, one joint at a time."""
    num = den = 0.0
    for t in range(len(p) - 1):
        if t not in frames or t + 1 not in frames:
            continue
        for k, j in enumerate(feet):
            a, b = p[t, j], p[t + 1, j]
            v = math.hypot(b[0] - a[0], b[2] - a[2]) * fps
            h = (a[1] + b[1]) / 2 - ground[k]
            w = min(max(2.0 - 2.0 ** (h / 2.5), 0.0), 1.0)
            num, den = num + w * v, den + w
    return num / den


def test_skate_matches_a_slow_per_pair_loop_and_pools_windows():
    rng = np.random.default_rng(0)
    N, T, J = 3, 50, 5
    p = np.cumsum(rng.normal(0, 1.0, (N, T, J, 3)), axis=1)
    p[..., 1] = np.abs(p[..., 1]) * 0.5
    feet = [1, 3, 4]
    frames = set(range(7, 41)) | {45, 46}
    g = F.ground(p, feet)
    assert g.shape == (N, 3)
    assert np.allclose(g[1], [np.percentile(p[1, :, j, 1], 5) for j in feet])
    for n in range(N):
        assert F.skate(p[n], 24.0, feet, frames=sorted(frames)) == pytest.approx(
            _slow_skate(p[n], 24.0, feet, g[n], frames))
    sums = [F.skate_sums(p[n], 24.0, feet, g[n], sorted(frames)) for n in range(N)]
    pooled = sum(s[0] for s in sums) / sum(s[1] for s in sums)
    assert F.skate(p, 24.0, feet, g, sorted(frames)) == pytest.approx(pooled)


def test_z_up_gives_the_same_skate_as_y_up():
    rng = np.random.default_rng(1)
    p = np.cumsum(rng.normal(0, 1.0, (40, 4, 3)), axis=0)
    z_up = p[..., [0, 2, 1]] * np.array([1.0, -1.0, 1.0])   # Y-up -> Z-up (x, -z, y)
    assert F.skate(z_up, 30.0, [0, 2], up=2) == pytest.approx(F.skate(p, 30.0, [0, 2]))
    assert F.skating_ratio(z_up * 20, 30.0, [0, 2], up=2) == pytest.approx(F.skating_ratio(p * 20, 30.0, [0, 2]))


def _slow_gmd(p: np.ndarray, fps: float, toes: list[int], ground: np.ndarray, frames: set[int]) -> float:
    """GMD's calculate_skating_ratio written out per pair, its running mean by hand."""
    P = len(p) - 1
    size = max(1, int(round(0.25 * fps)) // 2 * 2 + 1)
    v = np.array([[math.hypot(*(p[t + 1, j, [0, 2]] - p[t, j, [0, 2]])) * fps for j in toes] for t in range(P)])
    hits = total = 0
    for t in range(P):
        if t not in frames or t + 1 not in frames:
            continue
        total += 1
        any_foot = False
        for k, j in enumerate(toes):
            window = [v[u, k] if 0 <= u < P else 0.0 for u in range(t - size // 2, t + size // 2 + 1)]
            low = p[t, j, 1] - ground[k] < 5.0 and p[t + 1, j, 1] - ground[k] < 5.0
            any_foot |= low and v[t, k] > 50.0 and sum(window) / size > 50.0
        hits += any_foot
    return hits / total


def test_skating_ratio_counts_pairs_where_a_low_toe_slides_past_50_cm_s():
    T, fps = 60, 30.0
    slow = _track(np.arange(T) * 1.0, np.zeros(T))         # 30 cm/s on the ground: not skating
    fast = _track(np.arange(T) * 2.0, np.zeros(T))         # 60 cm/s: skating
    lifted = _track(np.arange(T) * 3.0, np.full(T, 6.0))   # 90 cm/s 6 cm up: not in contact
    g = np.zeros(1)
    assert F.skating_ratio(slow, fps, [0], g) == 0.0
    assert F.skating_ratio(lifted, fps, [0], g) == 0.0
    inner = np.arange(5, 55)   # away from the clip's ends, where the running mean sees zeros
    assert F.skating_ratio(fast, fps, [0], g, frames=inner) == 1.0
    both = np.concatenate([slow, fast], axis=1)
    assert F.skating_ratio(both, fps, [0, 1], np.zeros(2), frames=inner) == 1.0   # either foot


def test_skating_ratio_matches_gmds_loop():
    rng = np.random.default_rng(2)
    T = 80
    p = np.cumsum(rng.normal(0, 1.5, (T, 3, 3)), axis=0)
    p[..., 1] = np.abs(rng.normal(0, 4.0, (T, 3)))
    for fps, frames in ((20.0, set(range(T))), (30.0, set(range(10, 50))), (120.0, set(range(3, 70)))):
        g = F.ground(p, [0, 2])
        assert F.skating_ratio(p, fps, [0, 2], frames=sorted(frames)) == pytest.approx(
            _slow_gmd(p, fps, [0, 2], g, frames))


def test_contacts_mark_still_low_feet_only():
    T, fps = 30, 30.0
    still = _track(np.zeros(T), np.zeros(T))
    sliding = _track(np.arange(T) * 2.0, np.zeros(T))       # 60 cm/s
    up = _track(np.zeros(T), np.full(T, 6.0))
    p = np.concatenate([still, sliding, up], axis=1)
    c = F.contacts(p, fps, [0, 1, 2], ground=np.zeros(3))
    assert c.shape == (T, 3)
    assert c[:, 0].all() and not c[:, 1].any() and not c[:, 2].any()
    legs = F.leg_contacts(p, fps, [[0, 1], [1, 2]], ground=[np.zeros(2), np.zeros(2)])
    assert legs.shape == (T, 2) and legs[:, 0].all() and not legs[:, 1].any()
    # a foot that stops: in contact from the frame its speed (the mean of the pairs around it) falls under 40
    x = np.concatenate([np.arange(10) * 3.0, np.full(10, 27.0)])   # 90 cm/s, then still
    c = F.contacts(_track(x, np.zeros(20)), fps, [0], ground=np.zeros(1))[:, 0]
    assert not c[:9].any() and c[10:].all()


def test_contact_height_is_the_median_of_the_lowest_toe():
    T = 11
    left = np.where(np.arange(T) < 6, 1.0, 9.0)   # left toe down 6 frames of 11, right 5 (alternating steps)
    right = np.where(np.arange(T) < 6, 9.0, 3.0)
    p = np.concatenate([_track(np.zeros(T), left), _track(np.zeros(T), right)], axis=1)
    assert F.contact_height(p, [0, 1]) == 1.0
    assert F.contact_height(p + np.array([0.0, 5.0, 0.0]), [0, 1]) == 6.0


def test_bad_inputs_name_what_is_wrong():
    p = np.zeros((10, 2, 3))
    with pytest.raises(ValueError, match="feet"):
        F.skate(p, 30.0, [5])
    with pytest.raises(ValueError, match="positions"):
        F.skate(np.zeros((10, 2)), 30.0, [0])
    with pytest.raises(ValueError, match="ground"):
        F.skate(p, 30.0, [0, 1], ground=np.zeros(3))
    with pytest.raises(ValueError, match="differ"):
        F.compare(p, np.zeros((9, 2, 3)), 30.0, [0])


@needs_data
def test_a_real_walk_skates_little_and_a_root_drift_adds_its_speed(bandai_walk):
    from motioncore.io.bvh import read_bvh
    from motioncore.retarget.topology import find_body, foot_joints

    m = read_bvh(bandai_walk)
    _, gp = m.global_transforms()
    sk = m.skeleton
    body = find_body(sk.parents, sk.offsets, sk.names, gp[::10])
    legs = foot_joints(body)
    feet = [j for leg in legs for j in leg]
    assert [sk.names[j] for j in feet] == ["Foot_L", "Toes_L", "Foot_R", "Toes_R"]
    from motioncore.core.kinematics import find_body_joints
    assert tuple(feet) == find_body_joints(sk).feet   # the same joints by name on the model's skeleton
    capture = F.skate(gp, m.fps, feet)
    assert 0.0 < capture < 25.0   # planted feet barely move
    drift = gp + (np.arange(len(gp)) * (60.0 / m.fps))[:, None, None] * np.array([1.0, 0.0, 0.0])
    r = F.compare(drift, gp, m.fps, feet)
    assert r["skate_capture"] == pytest.approx(capture)
    assert r["skate"] > capture + 40.0 and r["skate_ratio"] > 3.0   # the whole body slides 60 cm/s
    assert r["skating_ratio"] > r["skating_ratio_capture"]
    c = F.leg_contacts(gp, m.fps, legs)
    assert 0.3 < c.mean() < 0.9   # a walk: each foot down part of the time, never both all the time
    assert c.any(axis=1).mean() > 0.9
