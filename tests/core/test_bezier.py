"""Bezier baselines: core.fcurve against a slow per-key, per-run transcription of Blender's handle rules,
its properties, the bezier / bezier-quat fills, and real Blender (bpy 5.0.1) as the truth."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.euler import euler_to_quat, quat_to_euler
from motioncore.core.fcurve import fcurve_evaluate, fcurve_handles
from motioncore.core.rotations import quat_normalize
from motioncore.eval.baselines import BASELINES, bezier, bezier_quat, interp
from motioncore.eval.run import resolve_models

# ----------------------------------------------------------------------------- slow reference


def _ref_key(xs, ys, i, smoothing):
    """One key's handles (calchandleNurb_intern, F-curve, Auto Clamped) -> (lx, ly, rx, ry, locked)."""
    K = len(xs)
    p2 = (xs[i], ys[i])
    p1 = (xs[i - 1], ys[i - 1]) if i > 0 else (2 * xs[i] - xs[i + 1], 2 * ys[i] - ys[i + 1])
    p3 = (xs[i + 1], ys[i + 1]) if i < K - 1 else (2 * xs[i] - p1[0], 2 * ys[i] - p1[1])
    len_a, len_b = (p2[0] - p1[0]) or 1.0, (p3[0] - p2[0]) or 1.0
    tv = ((p3[0] - p2[0]) / len_b + (p2[0] - p1[0]) / len_a, (p3[1] - p2[1]) / len_b + (p2[1] - p1[1]) / len_a)
    if smoothing == "CONT_ACCEL":
        ln = 6.0
    else:
        ln = tv[0] * 2.5614
        len_a = min(len_a, 5 * len_b)
        len_b = min(len_b, 5 * len_a)
    lx, ly = p2[0] - tv[0] * len_a / ln, p2[1] - tv[1] * len_a / ln
    rx, ry = p2[0] + tv[0] * len_b / ln, p2[1] + tv[1] * len_b / ln
    if i == 0 or i == K - 1:  # constant extrapolation: flat end keys
        return lx, p2[1], rx, p2[1], True
    d1, d2 = p1[1] - p2[1], p3[1] - p2[1]
    if (d1 <= 0 and d2 <= 0) or (d1 >= 0 and d2 >= 0):
        return lx, p2[1], rx, p2[1], True
    lv = (p1[1] > ly) if d1 <= 0 else (p1[1] < ly)
    rv = (p3[1] < ry) if d1 <= 0 else (p3[1] > ry)
    ly, ry = (p1[1] if lv else ly), (p3[1] if rv else ry)
    if lv:
        ry = p2[1] + (p2[1] - ly) / (lx - p2[0]) * (p2[0] - rx)
    elif rv:
        ly = p2[1] + (p2[1] - ry) / (p2[0] - rx) * (lx - p2[0])
    return lx, ly, rx, ry, False


def _ref_limits_solve(A, d, hmin, hmax):
    """tridiagonal_solve_with_limits on one run, with dense numpy solves."""
    A0, d0 = A.copy(), d.copy()
    n = len(d)
    locked, unlocks = np.zeros(n, bool), np.zeros(n, int)
    while True:
        h = np.linalg.solve(A, d)
        h[locked] = d[locked]  # a lock row h = target is exact (as in Blender's Thomas solve), not LU-rounded
        overshoot = locked_now = False
        for all_ in (False, True):
            for i in range(n):
                if hmin[i] <= h[i] <= hmax[i]:
                    continue
                overshoot = True
                target = hmax[i] if h[i] > hmax[i] else hmin[i]
                if target != 0.0 or all_:
                    locked[i], locked_now = True, True
                    A[i], d[i] = 0.0, target
                    A[i, i] = 1.0
            if not overshoot or locked_now:
                break
        unlocked = False
        if not locked_now:
            for i in range(n):
                if locked[i] and unlocks[i] < 2:
                    relax = -(A0[i] @ h - d0[i]) * A0[i, i]
                    if (relax > 0 and h[i] < hmax[i]) or (relax < 0 and h[i] > hmin[i]):
                        A[i], d[i] = A0[i], d0[i]
                        locked[i], unlocks[i], unlocked = False, unlocks[i] + 1, True
        if not (overshoot or unlocked):
            return h


def _ref_smooth_run(xs, ys, ry, ly, s, e):
    """bezier_handle_calc_smooth_fcurve on keys s..e (s, e locked and flat, the rest free)."""
    idx = list(range(s, e + 1))
    n = len(idx)
    if n <= 2:
        return
    dx = [np.nan] + [xs[idx[k]] - xs[idx[k - 1]] for k in range(1, n)]
    dy = [np.nan] + [ys[idx[k]] - ys[idx[k - 1]] for k in range(1, n)]
    lk = [1.0] + [dx[k + 1] / dx[k] for k in range(1, n - 1)] + [1.0]
    A, d = np.zeros((n, n)), np.zeros(n)
    hmin, hmax = np.full(n, -np.inf), np.full(n, np.inf)
    A[0, 0], A[-1, -1] = 1.0, 1.0  # locked ends, flat: h = 0
    for k in range(1, n - 1):
        A[k, k - 1], A[k, k], A[k, k + 1] = lk[k] ** 2, 2 * (lk[k] + 1), 1 / lk[k + 1]
        d[k] = dy[k] * lk[k] ** 2 + dy[k + 1]
    for k in range(1, n):
        for i, v in ((k - 1, dy[k]), (k, dy[k] * lk[k])):
            if v > 0:
                hmax[i], hmin[i] = min(hmax[i], v), 0.0
            elif v < 0:
                hmax[i], hmin[i] = 0.0, max(hmin[i], v)
            else:
                hmax[i] = hmin[i] = 0.0
    h = _ref_limits_solve(A, d, hmin, hmax)
    for k in range(1, n - 1):
        ly[idx[k]], ry[idx[k]] = ys[idx[k]] - h[k] / lk[k], ys[idx[k]] + h[k]


def ref_handles(xs, ys, smoothing="CONT_ACCEL"):
    """One channel, key by key and run by run, as Blender walks it."""
    res = [_ref_key(xs, ys, i, smoothing) for i in range(len(xs))]
    lx, ly, rx, ry, locked = (list(c) for c in zip(*res, strict=True))
    if smoothing == "CONT_ACCEL":
        bounds = [i for i in range(len(xs)) if locked[i]]
        for s, e in zip(bounds[:-1], bounds[1:], strict=True):
            _ref_smooth_run(xs, ys, ry, ly, s, e)
    return np.array(lx), np.array(rx), np.array(ly), np.array(ry)


def ref_evaluate(xs, ys, frame, smoothing="CONT_ACCEL"):
    """Bezier value at ``frame``: the cubic x(u) = frame solved with numpy.roots."""
    lx, rx, ly, ry = ref_handles(xs, ys, smoothing)
    k = min(int(np.searchsorted(xs, frame, side="right")) - 1, len(xs) - 2)
    if frame == xs[k]:
        return ys[k]
    px, py = (xs[k], rx[k], lx[k + 1], xs[k + 1]), (ys[k], ry[k], ly[k + 1], ys[k + 1])
    coef = [-px[0] + 3 * px[1] - 3 * px[2] + px[3], 3 * px[0] - 6 * px[1] + 3 * px[2], -3 * px[0] + 3 * px[1],
            px[0] - frame]
    roots = [r.real for r in np.roots(coef) if abs(r.imag) < 1e-9 and -1e-9 <= r.real <= 1 + 1e-9]
    u = min(roots)
    return float(np.polyval([-py[0] + 3 * py[1] - 3 * py[2] + py[3], 3 * py[0] - 6 * py[1] + 3 * py[2],
                             -3 * py[0] + 3 * py[1], py[0]], u))


def _random_keys(rng, C=40, K=11):
    x = np.r_[np.arange(K - 1, dtype=float), K - 1 + rng.integers(3, 40)]
    y = np.cumsum(rng.normal(size=(C, K)), axis=1)
    y[:3, 4:6] = y[:3, 3:4]  # plateaus: equal neighbours are extrema
    y[3:6] = np.linspace(0, 1, K) ** 2 * rng.normal(size=(3, 1))  # monotone: long free runs
    return x, y


# ----------------------------------------------------------------------------- parity and properties


@pytest.mark.parametrize("smoothing", ["CONT_ACCEL", "NONE"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_handles_and_values_match_slow_reference(smoothing, seed):
    rng = np.random.default_rng(seed)
    x, y = _random_keys(rng)
    x[5] += 0.4  # uneven spacing
    lx, rx, ly, ry = fcurve_handles(x, y, smoothing)
    frames = np.linspace(x[0], x[-1], 97)
    fast = fcurve_evaluate(x, y, frames, smoothing)
    for c in range(y.shape[0]):
        rlx, rrx, rly, rry = ref_handles(x, y[c], smoothing)
        np.testing.assert_allclose(lx, rlx, atol=1e-12)
        np.testing.assert_allclose(rx, rrx, atol=1e-12)
        np.testing.assert_allclose(ly[c], rly, atol=1e-9)
        np.testing.assert_allclose(ry[c], rry, atol=1e-9)
        slow = [ref_evaluate(x, y[c], f, smoothing) for f in frames]
        np.testing.assert_allclose(fast[c], slow, atol=1e-8)


def test_passes_through_keys_and_flat_at_extrema():
    rng = np.random.default_rng(3)
    x, y = _random_keys(rng)
    np.testing.assert_array_equal(fcurve_evaluate(x, y, x), y)
    lx, rx, ly, ry = fcurve_handles(x, y)
    d1, d2 = y[:, :-2] - y[:, 1:-1], y[:, 2:] - y[:, 1:-1]
    ext = np.zeros(y.shape, bool)
    ext[:, 1:-1] = ((d1 <= 0) & (d2 <= 0)) | ((d1 >= 0) & (d2 >= 0))
    ext[:, [0, -1]] = True
    assert ext[:, 1:-1].any() and (~ext).any()
    np.testing.assert_array_equal(ly[ext], y[ext])
    np.testing.assert_array_equal(ry[ext], y[ext])
    # Continuous Acceleration: handles at 1/3 of each interval, so x(u) is linear
    np.testing.assert_allclose(rx[:-1], x[:-1] + np.diff(x) / 3, atol=1e-12)
    np.testing.assert_allclose(lx[1:], x[1:] - np.diff(x) / 3, atol=1e-12)


def test_two_keys_is_blender_ease():
    x, y = np.array([3.0, 15.0]), np.array([[1.0, -2.0], [0.5, 0.5]])
    f = np.linspace(3, 15, 25)
    t = (f - 3) / 12
    ease = 3 * t**2 - 2 * t**3
    np.testing.assert_allclose(fcurve_evaluate(x, y, f), y[:, :1] + (y[:, 1:] - y[:, :1]) * ease, atol=1e-12)


# ----------------------------------------------------------------------------- the fills


def _windows(rng, N=6, T=30, J=3):
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton(("a", "b", "c"), np.array([-1, 0, 1]), np.ones((J, 3)),
                  (("Xposition", "Yposition", "Zposition", "Zrotation", "Xrotation", "Yrotation"),
                   ("Yrotation", "Xrotation", "Zrotation"), ("Xrotation", "Yrotation", "Zrotation")))
    ang = np.cumsum(rng.normal(scale=0.3, size=(N, T, J, 3)), axis=1)
    q = np.stack([euler_to_quat(ang[:, :, j], sk.rotation_order(j)) for j in range(J)], axis=2)
    return sk, q, np.cumsum(rng.normal(size=(N, T, J, 3)), axis=1)


@pytest.mark.parametrize("fill", [bezier, bezier_quat])
def test_fills_keep_keys_ignore_transition_and_after_target(fill):
    rng = np.random.default_rng(4)
    sk, q, p = _windows(rng)
    n_past, n = 10, 12
    q_in, p_in = q.copy(), p.copy()
    q_in[:, n_past:n_past + n] = np.nan
    p_in[:, n_past:n_past + n] = np.nan
    rq, rp = fill(sk, q_in, p_in, n_past, n)
    q_in[:, n_past + n + 1:] *= -3.0  # frames after the target do not matter
    rq2, rp2 = fill(sk, q_in, p_in, n_past, n)
    np.testing.assert_array_equal(rq[:, n_past:n_past + n], rq2[:, n_past:n_past + n])
    assert np.isfinite(rq).all() and np.isfinite(rp).all()
    np.testing.assert_array_equal(rq[:, :n_past], q[:, :n_past])
    np.testing.assert_allclose(np.linalg.norm(rq, axis=-1), 1.0, atol=1e-12)
    # the root's location channels follow the same curve as core.fcurve
    x = np.r_[np.arange(n_past), n_past + n].astype(float)
    want = fcurve_evaluate(x, p[:, x.astype(int), 0, 0], np.arange(n_past, n_past + n, dtype=float))
    np.testing.assert_allclose(rp[:, n_past:n_past + n, 0, 0], want, atol=1e-12)


def test_bezier_euler_channels_are_unwrapped():
    """A joint turning steadily through +-180 degrees about Z: its unwrapped Euler curve is a straight
    line, so the fill is (up to the eased ends) a steady turn, never a spin the other way."""
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton(("r",), np.array([-1]), np.zeros((1, 3)), (("Zrotation", "Xrotation", "Yrotation"),))
    T, n_past, n = 25, 10, 8
    a = np.linspace(2.0, 2.0 + 0.25 * (T - 1), T)  # crosses pi at frame ~4.6
    q = euler_to_quat(np.stack([a, 0 * a, 0 * a], -1), "ZXY")[None, :, None]  # (1, T, 1, 4)
    rq, _ = bezier(sk, q, np.zeros((1, T, 1, 3)), n_past, n)
    got = np.unwrap(quat_to_euler(rq[0, :, 0], "ZXY")[:, 0])
    assert np.all(np.diff(got[n_past - 1:n_past + n + 1]) > 0)


def test_registered_and_resolved():
    assert BASELINES["bezier"] is bezier and BASELINES["bezier-quat"] is bezier_quat
    assert set(resolve_models(["bezier", "bezier-quat", "interp"])) == {"bezier", "bezier-quat", "interp"}
    assert BASELINES["interp"] is interp


# ----------------------------------------------------------------------------- real Blender


@needs_data
@pytest.mark.blender
@pytest.mark.timeout(600)
def test_matches_real_blender_fcurves(tmp_path):
    """Blender 5.0.1 evaluates the same keys: inserted keys (the animator keying the context and the
    target) on a real Bandai test clip's BVH Euler channels and root location, and the BVH importer's own
    curves with all keys but the context and target deleted (set to Bezier: the importer makes them Linear)."""
    from helpers.blender import bpy_python

    from motioncore.core.motion import Motion
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    m = load("bandai", "test", fps=30.0, progress=False)[0].motion
    n_past, n = 10, 30
    x = np.r_[np.arange(n_past), n_past + n]  # 0-based clip frames of the keys
    sk = m.skeleton
    eul = np.stack([np.unwrap(quat_to_euler(quat_normalize(m.rotations[x, j]), sk.rotation_order(j)), axis=0)
                    for j in range(sk.num_joints)], axis=1)  # (K, J, 3)
    y = np.concatenate([eul.reshape(len(x), -1), m.positions[x, 0]], axis=1).T  # (C, K)
    frames = np.arange(n_past, n_past + n) + 1.0  # Blender frames start at 1
    bvh = tmp_path / "clip.bvh"
    write_bvh(bvh, Motion(sk, m.rotations[: n_past + n + 1], m.positions[: n_past + n + 1], m.fps, "clip"))
    req = {"keys": (x + 1.0).tolist(), "values": y.tolist(), "frames": frames.tolist(), "bvh": str(bvh),
           "bvh_keep": (x + 1).tolist()}
    (tmp_path / "in.json").write_text(json.dumps(req))
    r = subprocess.run([str(bpy_python("5.0.1")), str(__import__("pathlib").Path(__file__).parents[1] / "blender" /
                        "bezier_parity.py"), str(tmp_path / "in.json"), str(tmp_path / "out.json")],
                       capture_output=True, text=True, timeout=500,
                       env={**os.environ, "BLENDER_USER_RESOURCES": str(tmp_path / "user")})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "out.json").read_text())
    assert res["fcurve_new_auto_smoothing"] == "CONT_ACCEL" and res["keyframe_new_handle_type"] == "AUTO_CLAMPED"
    assert res["inserted_info"]["auto_smoothing"] == "CONT_ACCEL"
    blender = np.array(res["inserted"])  # (C, F)
    diff = np.abs(fcurve_evaluate(x + 1.0, y, frames) - blender).max()
    print(f"inserted keys: {y.shape[0]} channels, max |numpy - Blender| = {diff:.2e}")
    assert diff < 1e-4
    # the whole bezier fill: Blender's Euler curves back to quaternions == the baseline's rotations
    rq, rp = bezier(sk, m.rotations[None, : n_past + n + 1], m.positions[None, : n_past + n + 1], n_past, n)
    J = sk.num_joints
    b_eul = blender[: 3 * J].reshape(J, 3, n).transpose(2, 0, 1)  # (F, J, 3)
    b_q = np.stack([euler_to_quat(b_eul[:, j], sk.rotation_order(j)) for j in range(J)], axis=1)
    assert np.abs(rq[0, n_past:n_past + n] - b_q).max() < 1e-4
    assert np.abs(rp[0, n_past:n_past + n, 0] - blender[3 * J:].T).max() < 1e-4
    # the BVH importer's curves: Continuous Acceleration, Auto Clamped, Linear keys
    curves, worst = res["bvh"], 0.0
    assert len(curves) >= 3 * J
    for cv in curves:
        assert cv["before"]["auto_smoothing"] == "CONT_ACCEL" and cv["before"]["interpolation"] == "LINEAR"
        assert cv["before"]["handles"] == ["AUTO_CLAMPED", "AUTO_CLAMPED"]
        keys = np.array(cv["keys"])
        assert keys.shape == (len(x), 2)
        got = fcurve_evaluate(keys[:, 0], keys[None, :, 1], np.array(cv["frames"], float))[0]
        np.testing.assert_allclose(got, cv["values"], atol=1e-4, err_msg=cv["path"])
        worst = max(worst, float(np.abs(got - cv["values"]).max()))
    print(f"BVH importer: {len(curves)} curves, max |numpy - Blender| = {worst:.2e}")
