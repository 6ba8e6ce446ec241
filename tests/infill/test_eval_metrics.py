"""LaFAN1 in-betweening metrics, baselines and benchmark runner: hand-computed cases."""
from __future__ import annotations

import json

import numpy as np
import pytest

from motioncore.core.rotations import axis_angle_to_quat
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError, ShapeError
from motioncore.eval import (
    BASELINES,
    evaluate_infill,
    format_table,
    interp,
    l2p,
    l2p_frames,
    l2q,
    l2q_frames,
    npss,
    plot_results,
    position_stats,
    results_to_markdown,
    write_json,
    zerovel,
)
from motioncore.eval.metrics import STD_EPS

LENGTHS = ("5", "15", "30", "45")


# --- helpers -------------------------------------------------------------------------------------


def chain(J: int = 4) -> Skeleton:
    offsets = np.array([[0.0, 0.0, 0.0]] + [[0.0, 10.0, 0.0]] * (J - 1))
    return Skeleton(tuple(f"j{i}" for i in range(J)), np.arange(-1, J - 1), offsets)


def smooth_windows(N: int = 8, T: int = 56, J: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each joint turns about a fixed axis at ~constant angular velocity (plus a small wobble), the root
    walks on a gentle curve. Total angle stays below 180 deg, so the quaternions are continuous."""
    rng = np.random.default_rng(seed)
    t = np.arange(T, dtype=np.float64)[None, :, None]  # (1, T, 1)
    axes = rng.normal(size=(N, 1, J, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    omega = np.radians(rng.uniform(0.5, 2.0, size=(N, 1, J)))
    angle = omega * t + 0.05 * np.sin(0.2 * t + rng.uniform(0, 6, size=(N, 1, J)))
    rotations = axis_angle_to_quat(axes * angle[..., None])
    positions = np.broadcast_to(chain(J).offsets, (N, T, J, 3)).copy()
    vel = rng.normal(size=(N, 1, 3))
    positions[:, :, 0] = vel * t + 0.01 * t**2
    return rotations, positions


def stats_for(skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray):
    return position_stats(skeleton.forward_kinematics(rotations, positions)[1])


def y_quat(deg: float) -> np.ndarray:
    h = np.radians(deg) / 2
    return np.array([np.cos(h), 0.0, np.sin(h), 0.0])


# --- metrics -------------------------------------------------------------------------------------


def test_identical_motion_scores_zero():
    rng = np.random.default_rng(1)
    q, p = rng.normal(size=(3, 7, 5, 4)), rng.normal(size=(3, 7, 5, 3))
    assert l2q(q, q) == 0.0
    assert l2p(p, p, rng.normal(size=15), np.full(15, 0.5)) == 0.0
    assert npss(q, q) == 0.0


def test_l2q_constant_quaternion_offset():
    gt = np.zeros((2, 3, 3, 4))
    gt[..., 0] = 1.0
    d = np.array([0.1, -0.2, 0.3, 0.4])
    pred = gt.copy()
    pred[:, :, 1] += d
    np.testing.assert_allclose(l2q_frames(pred, gt), np.full((2, 3), np.linalg.norm(d)))
    assert l2q(pred, gt) == pytest.approx(np.sqrt(0.3))
    pred[:, :, 2] += 2 * d  # two joints: sqrt(|d|^2 + |2d|^2)
    assert l2q(pred, gt) == pytest.approx(np.sqrt(5 * 0.3))


def test_l2p_constant_offset_with_std_two():
    rng = np.random.default_rng(2)
    gt = rng.normal(size=(2, 4, 3, 3))
    pred = gt.copy()
    pred[:, :, 2] += [3.0, 4.0, 0.0]
    mean = rng.normal(size=9)
    np.testing.assert_allclose(l2p_frames(pred, gt, mean, np.full(9, 2.0)), 2.5)
    # LaFAN1's stats shape (1, J*3, 1) is accepted as well
    assert l2p(pred, gt, mean.reshape(1, 9, 1), np.full((1, 9, 1), 2.0)) == pytest.approx(2.5)
    with pytest.raises(ShapeError, match="x_mean"):
        l2p(pred, gt, np.zeros(8), np.ones(9))


def test_metric_shape_mismatch_raises():
    with pytest.raises(ShapeError):
        l2q(np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 2, 4)))
    with pytest.raises(ShapeError):
        npss(np.zeros((1, 4)), np.zeros((1, 4)))


def test_npss_phase_shift_is_zero():
    n = np.arange(16)
    gt = np.cos(2 * np.pi * 2 * n / 16)[None, :, None]
    pred = np.cos(2 * np.pi * 2 * n / 16 + np.pi / 3)[None, :, None]
    assert npss(pred, gt) == pytest.approx(0.0, abs=1e-12)


def test_npss_hand_computed_t4():
    # T=4. Low frequency [1,0,-1,0]: real(fft) [0,2,0,2], power [0,4,0,4] (total 8), cdf [0,.5,.5,1].
    # High frequency [1,-1,1,-1]: real(fft) [0,0,4,0], cdf [0,0,1,1]. EMD = 0 + .5 + .5 + 0 = 1.
    low, high = np.array([1.0, 0.0, -1.0, 0.0]), np.array([1.0, -1.0, 1.0, -1.0])
    assert npss(high[None, :, None], low[None, :, None]) == pytest.approx(1.0)
    # Add an identical constant channel: power [16,0,0,0] (total 16), EMD 0 -> (8*1 + 16*0) / 24.
    const = np.ones(4)
    gt = np.stack([low, const], -1)[None]
    pred = np.stack([high, const], -1)[None]
    assert npss(pred, gt) == pytest.approx(1.0 / 3.0)


def test_npss_zero_power_channel_is_defined():
    low, high = np.array([1.0, 0.0, -1.0, 0.0]), np.array([1.0, -1.0, 1.0, -1.0])
    gt = np.stack([low, np.zeros(4)], -1)[None]  # second channel: zero power -> zero weight
    pred = np.stack([high, np.ones(4)], -1)[None]
    with np.errstate(all="raise"):
        assert npss(pred, gt) == pytest.approx(1.0)
        zero = np.zeros((1, 4, 2))
        # a zero-power prediction has the all-zero cdf: |[0,.5,.5,1] - 0| summed = 2
        assert npss(zero, gt) == pytest.approx(2.0)
        # every weight zero: plain mean of the EMDs, |[0,0,1,1]| = 2 and |[1,1,1,1]| = 4
        assert npss(pred, zero) == pytest.approx(3.0)


def test_npss_matches_loop_reference():
    rng = np.random.default_rng(3)
    pred, gt = rng.normal(size=(3, 6, 5)), rng.normal(size=(3, 6, 5))
    emd, w = [], []
    for i in range(3):
        for d in range(5):
            pp = np.real(np.fft.fft(pred[i, :, d])) ** 2
            gp = np.real(np.fft.fft(gt[i, :, d])) ** 2
            emd.append(np.abs(np.cumsum(pp / pp.sum()) - np.cumsum(gp / gp.sum())).sum())
            w.append(gp.sum())
    assert npss(pred, gt) == pytest.approx(np.average(emd, weights=w))


def test_position_stats_matches_numpy():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 7, 3, 3)) * [1.0, 2.0, 3.0] + 10.0
    x[:, :, 1, 2] = 4.0  # a constant channel
    mean, std = position_stats(x)
    flat = x.reshape(5, 7, -1).transpose(0, 2, 1)
    np.testing.assert_allclose(mean, np.mean(flat, axis=(0, 2)))
    expect = np.std(flat, axis=(0, 2))
    expect[5] = STD_EPS
    np.testing.assert_allclose(std, expect)
    assert mean.shape == std.shape == (9,)


# --- baselines -----------------------------------------------------------------------------------


def test_zerovel_copies_last_context_frame():
    rng = np.random.default_rng(5)
    q, p = rng.normal(size=(2, 9, 3, 4)), rng.normal(size=(2, 9, 3, 3))
    q_in, p_in = q.copy(), p.copy()
    q_in[:, 3:6] = np.nan
    p_in[:, 3:6] = np.nan
    rq, rp = zerovel(chain(3), q_in, p_in, 3, 3)
    for f in (3, 4, 5):
        np.testing.assert_array_equal(rq[:, f], q[:, 2])
        np.testing.assert_array_equal(rp[:, f], p[:, 2])
    np.testing.assert_array_equal(rq[:, [0, 1, 2, 6, 7, 8]], q[:, [0, 1, 2, 6, 7, 8]])
    assert np.isnan(q_in).any()  # the input is left alone


def test_interp_hand_computed_slerp_and_lerp():
    n_past, n_trans = 2, 2
    q = np.tile(y_quat(0.0), (1, 6, 2, 1))
    q[:, n_past + n_trans :] = y_quat(90.0)  # target frame 4 (and after)
    p = np.zeros((1, 6, 2, 3))
    p[:, :, 1] = [0.0, 10.0, 0.0]
    p[:, n_past + n_trans :, 0] = [3.0, 6.0, 9.0]
    p[:, n_past + n_trans :, 1] = [0.0, 10.0, 3.0]
    q[:, n_past : n_past + n_trans] = np.nan
    p[:, n_past : n_past + n_trans] = np.nan
    rq, rp = interp(chain(2), q, p, n_past, n_trans)
    np.testing.assert_allclose(rq[0, 2], [y_quat(30.0)] * 2, atol=1e-12)
    np.testing.assert_allclose(rq[0, 3], [y_quat(60.0)] * 2, atol=1e-12)
    np.testing.assert_allclose(rq[0, 4], q[0, 4])
    np.testing.assert_allclose(rp[0, 2:4, 0], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]], atol=1e-12)
    np.testing.assert_allclose(rp[0, 2:4, 1], [[0.0, 10.0, 1.0], [0.0, 10.0, 2.0]], atol=1e-12)
    np.testing.assert_array_equal(rp[0, 4:], p[0, 4:])


def test_interp_takes_short_path():
    q = np.tile(y_quat(0.0), (1, 4, 1, 1))
    q[:, 3] = -y_quat(60.0)  # same rotation as +60 deg, opposite hemisphere
    rq, _ = interp(chain(1), q, np.zeros((1, 4, 1, 3)), 1, 2)
    assert abs(np.dot(rq[0, 1, 0], y_quat(20.0))) == pytest.approx(1.0)
    assert abs(np.dot(rq[0, 2, 0], y_quat(40.0))) == pytest.approx(1.0)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_never_read_transition_frames(name):
    rotations, positions = smooth_windows(N=3, T=20)
    q, p = rotations.copy(), positions.copy()
    q[:, 10:17] = np.nan
    p[:, 10:17] = np.nan
    rq, rp = BASELINES[name](chain(), q, p, 10, 7)
    assert rq.shape == q.shape and rp.shape == p.shape
    assert np.isfinite(rq).all() and np.isfinite(rp).all()


def test_baseline_rejects_missing_target():
    q, p = smooth_windows(N=1, T=12)
    with pytest.raises(ShapeError, match="target"):
        interp(chain(), q, p, 10, 2)


# --- benchmark runner ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench():
    sk = chain()
    rotations, positions = smooth_windows()
    mean, std = stats_for(sk, *smooth_windows(N=16, seed=9))
    two = {n: BASELINES[n] for n in ("zerovel", "interp")}  # the LaFAN1 pair (Bezier: tests/core/test_bezier.py)
    res = evaluate_infill(two, sk, rotations, positions, mean, std, progress=False)
    return sk, rotations, positions, mean, std, res


def test_evaluate_infill_structure_and_interp_beats_zerovel(bench):
    *_, res = bench
    assert set(res) == {"zerovel", "interp"}
    for model in res.values():
        assert set(model) == {"L2Q", "L2P", "NPSS", "Jerk"}
        for per_len in model.values():
            assert tuple(per_len) == LENGTHS
            assert all(type(v) is float and np.isfinite(v) for v in per_len.values())
    for metric in ("L2Q", "L2P", "NPSS"):
        for n in LENGTHS:
            assert res["interp"][metric][n] < res["zerovel"][metric][n], (metric, n)
    json.dumps(res)


def test_evaluate_infill_matches_direct_computation(bench):
    sk, rotations, positions, mean, std, res = bench
    n = 15
    q, p = rotations[:, : 10 + n + 1], positions[:, : 10 + n + 1]
    zq, zp = zerovel(sk, q, p, 10, n)
    gq, gp = sk.forward_kinematics(q[:, 10:25], p[:, 10:25])
    pq, pp = sk.forward_kinematics(zq[:, 10:25], zp[:, 10:25])
    assert res["zerovel"]["L2Q"]["15"] == pytest.approx(l2q(pq, gq), rel=1e-12)
    assert res["zerovel"]["L2P"]["15"] == pytest.approx(l2p(pp, gp, mean, std), rel=1e-12)
    assert res["zerovel"]["NPSS"]["15"] == pytest.approx(npss(pq, gq), rel=1e-12)


def test_evaluate_infill_batching_and_sign_flips_do_not_change_results(bench):
    sk, rotations, positions, mean, std, res = bench
    flipped = rotations.copy()
    rng = np.random.default_rng(6)
    mask = rng.random(flipped.shape[:3]) < 0.3
    mask[:, 0] = False  # continuity keeps frame 0's sign
    flipped[mask] *= -1
    res2 = evaluate_infill(BASELINES, sk, flipped, positions, mean, std, progress=True, batch_size=3)
    for m in res:
        for k in res[m]:
            for n in LENGTHS:
                assert res2[m][k][n] == pytest.approx(res[m][k][n], rel=1e-9, abs=1e-12), (m, k, n)


def test_evaluate_infill_oracle_scores_zero(bench):
    sk, rotations, positions, mean, std, _ = bench

    def oracle(skeleton, q, p, n_past, n_trans):
        return rotations[:, : q.shape[1]], positions[:, : p.shape[1]]

    res = evaluate_infill({"oracle": oracle}, sk, rotations, positions, mean, std, lengths=(5, 30),
                          progress=False)
    assert res == {"oracle": {**{k: {"5": 0.0, "30": 0.0} for k in ("L2Q", "L2P", "NPSS")},
                              "Jerk": {"5": 1.0, "30": 1.0}}}   # the truth's own jerk


def test_jerk_is_the_third_difference_over_the_gap_and_three_keys_each_side(bench):
    from motioncore.eval.infill import jerk_sum

    sk, rotations, positions, mean, std, res = bench
    n = 15
    q, p = rotations[:, : 10 + n + 1], positions[:, : 10 + n + 1]
    zq, zp = zerovel(sk, q, p, 10, n)
    tail_q, tail_p = rotations[:, 26:28], positions[:, 26:28]   # keys past the window's target frame
    _, mine = sk.forward_kinematics(np.concatenate([zq[:, 7:26], tail_q], 1), np.concatenate([zp[:, 7:26], tail_p], 1))
    _, true = sk.forward_kinematics(rotations[:, 7:28], positions[:, 7:28])
    slow = sum(np.linalg.norm(mine[w, t + 3] - 3 * mine[w, t + 2] + 3 * mine[w, t + 1] - mine[w, t], axis=-1).sum()
               for w in range(len(q)) for t in range(mine.shape[1] - 3))
    assert jerk_sum(mine) == pytest.approx(slow, rel=1e-9)
    assert res["zerovel"]["Jerk"]["15"] == pytest.approx(jerk_sum(mine) / jerk_sum(true), rel=1e-9)
    assert res["zerovel"]["Jerk"]["15"] > 1.0   # holding the pose, then a jump to the target: jerkier than the truth


def test_evaluate_infill_rejects_peeking_or_misshapen_models(bench):
    sk, rotations, positions, mean, std, _ = bench

    def peeker(skeleton, q, p, n_past, n_trans):
        return q, p  # the transition frames are NaN

    def cropper(skeleton, q, p, n_past, n_trans):
        return q[:, :-1], p[:, :-1]

    with pytest.raises(MotioncoreError, match="peeker"):
        evaluate_infill({"interp": interp, "peeker": peeker}, sk, rotations, positions, mean, std,
                        progress=False)
    with pytest.raises(MotioncoreError, match="cropper"):
        evaluate_infill({"cropper": cropper}, sk, rotations, positions, mean, std, progress=False)
    with pytest.raises(ShapeError, match="56"):
        evaluate_infill(BASELINES, sk, rotations[:, :40], positions[:, :40], mean, std, progress=False)


def test_reports_table_markdown_json_plot(bench, tmp_path):
    *_, res = bench
    table = format_table(res)
    lines = table.splitlines()
    assert len(lines) == 4 and "L2Q@5" in lines[0] and "NPSS@45" in lines[0]
    assert lines[2].startswith("zerovel") and lines[3].startswith("interp")
    assert f"{res['interp']['L2P']['30']:.3f}" in lines[3]
    assert f"{res['interp']['NPSS']['45']:.4f}" in lines[3]
    md = results_to_markdown(res).splitlines()
    assert len(md) == 4 and all(line.startswith("|") and line.endswith("|") for line in md)
    assert md[1].startswith("|:---|") and md[0].count("|") == 1 + 1 + 16
    write_json(res, tmp_path / "res.json")
    assert json.loads((tmp_path / "res.json").read_text()) == res
    plot_results(res, tmp_path / "res.png")
    data = (tmp_path / "res.png").read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 1000
    assert sorted(f.name for f in tmp_path.iterdir()) == ["res.json", "res.png"]  # no temp files left


def test_keys_saved_is_the_sparsest_spacing_at_or_below_bezier_every_8():
    from motioncore.eval.keyed import format_keys_saved, keys_saved

    res = {"bezier": {"L2Q": {"8": 0.355, "12": 0.5, "16": 0.7}},
           "infill-body": {"L2Q": {"8": 0.2, "12": 0.35, "16": 0.36}},
           "interp": {"L2Q": {"8": 0.4, "12": 0.6, "16": 0.8}}}
    saved = keys_saved(res)
    assert saved["infill-body"] == {"every": 12, "fewer_keys": 1.5, "l2q": 0.35, "reference_l2q": 0.355}
    assert saved["interp"]["every"] is None
    text = format_keys_saved(saved)
    assert "infill-body with a key every 12 frames" in text and "1.50x fewer keys" in text
    assert "interp never reaches" in text
    assert keys_saved({"infill-body": {"L2Q": {"8": 0.2}}}) == {}
