"""core.keyfit: the fewest Bezier keys that hold a filled span, and Blender's Bezier with explicit handles, on
captured motion (the LAFAN1 clip: evaluation and tests only). Blender's own evaluate() is the truth for
`bezier_evaluate` in tests/blender/test_blender_reduced_keys.py."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import keyfit


@pytest.fixture(scope="module")
def lafan_channels():
    """(T, C) Euler angles (radians, ZYX as Blender's importer keys them) of every joint of the LAFAN1 clip's
    first 600 frames."""
    from motioncore.core.euler import quat_to_euler
    from motioncore.data.cache import data_root, unpack
    from motioncore.io.bvh import read_bvh
    path = unpack(data_root() / "lafan1_sample" / "lafan1_sample.tar.xz", progress=False) / "lafan1_walk_7184f.bvh"
    mo = read_bvh(path)
    q = np.asarray(mo.rotations[:600], np.float64)
    e = np.unwrap(quat_to_euler(q, "ZYX"), axis=0)
    return e.reshape(e.shape[0], -1)


def test_third_handles_make_the_hermite_curve_blender_evaluates():
    rng = np.random.default_rng(1)
    y = np.cumsum(rng.normal(0, 0.1, 40))
    idx = np.array([0, 7, 19, 20, 33, 39])
    m = rng.normal(0, 0.2, idx.size)
    lx, ly, rx, ry = keyfit.third_handles(idx.astype(float), y[idx], m)
    f = np.linspace(0, 39, 157)
    ref = keyfit.bezier_evaluate(idx.astype(float), y[idx], lx, ly, rx, ry, f)
    on = keyfit.hermite_values(y, idx, m)
    assert np.allclose(ref[np.isin(f, np.arange(40))], on[np.isin(np.arange(40), f)], atol=1e-12)
    assert np.allclose(keyfit.bezier_evaluate(idx.astype(float), y[idx], lx, ly, rx, ry, np.arange(40.0)), on,
                       atol=1e-12)


def test_a_handle_longer_than_its_segment_is_shortened_to_it_as_blender_does():
    # keys 4 frames apart; the first key's handle reaches 6 frames: scaled by 4 / 6 towards its key, the other kept
    hx1, hy1, hx2, hy2 = keyfit.correct_bezpart(np.array(0.0), np.array(6.0), np.array(3.0), np.array(3.0),
                                                np.array(2.0), np.array(4.0), np.array(0.0), np.array(1.0))
    assert np.allclose([hx1, hy1, hx2, hy2], [4.0, 2.0, 3.0, 2.0])
    v = keyfit.bezier_evaluate(np.array([0.0, 4.0]), np.array([0.0, 1.0]), np.array([-1.0, 4.0]),
                               np.array([0.0, 1.0]), np.array([6.0, 5.0]), np.array([3.0, 1.0]),
                               np.linspace(0, 4, 41))
    assert np.isfinite(v).all() and v[0] == 0.0 and v[-1] == 1.0 and v.max() <= 2.0


def test_one_cubic_needs_two_keys_and_a_kink_gets_a_key():
    t = np.arange(21.0)
    cubic = 0.002 * (t - 5) ** 3 - 0.01 * t
    idx, m = keyfit.fit_span(cubic, 1e-5)   # exact but for the weak pull of the slopes (REG)
    assert idx.tolist() == [0, 20]
    kink = np.abs(t - 13.0) * 0.1
    idx, m = keyfit.fit_span(kink, 1e-3)
    assert 13 in idx.tolist()
    assert np.abs(keyfit.hermite_values(kink, idx, m) - kink).max() <= 1e-3


@needs_data
@pytest.mark.parametrize("length", [15, 30])
def test_captured_spans_are_held_within_the_tolerance_with_few_keys(lafan_channels, length):
    """Every channel of a walk, cut into spans of ``length`` frames: the keys hold every frame within the
    tolerance (0.05 degrees), the span's first and last frames are keys, and a walk needs far fewer keys than frames."""
    tol = np.radians(0.05)
    kept = total = 0
    for c in range(lafan_channels.shape[1]):
        for s in range(0, lafan_channels.shape[0] - length, length):
            y = lafan_channels[s:s + length, c]
            idx, m = keyfit.fit_span(y, tol)
            assert idx[0] == 0 and idx[-1] == length - 1
            assert np.abs(keyfit.hermite_values(y, idx, m) - y).max() <= tol + 1e-12
            kept += idx.size
            total += length
    print(f"{length}-frame spans: {kept} keys of {total} frames ({kept / total:.3f})")
    assert kept <= 0.5 * total


@needs_data
def test_dropping_any_one_inner_key_breaks_the_tolerance(lafan_channels):
    """The pruning pass leaves no key that the fit could do without."""
    tol = np.radians(0.05)
    checked = 0
    for c in range(0, lafan_channels.shape[1], 5):
        y = lafan_channels[100:130, c]
        idx, _ = keyfit.fit_span(y, tol)
        for i in range(1, idx.size - 1):
            j = np.delete(idx, i)
            assert np.abs(keyfit.hermite_values(y, j, keyfit.fit_slopes(y, j)) - y).max() > tol
            checked += 1
    assert checked > 5


@needs_data
@pytest.mark.parametrize("length", [15, 30, 120])
def test_batched_spans_take_the_same_keys_as_one_span_at_a_time(lafan_channels, length):
    """`fit_spans` (the channels and gaps of one length in a few batched solves) against `fit_span` on each: the
    same key frames and the same slopes, on every channel of the walk, at tolerances from tight to loose (so the
    key counts, and the batches of one count, differ)."""
    cols = np.stack([lafan_channels[s:s + length, c] for c in range(lafan_channels.shape[1])
                     for s in range(0, lafan_channels.shape[0] - length, max(length, 60))], axis=1)
    tol = np.radians(np.geomspace(0.005, 0.5, cols.shape[1]))
    tol[::17] = -1.0   # a key on every frame
    got = keyfit.fit_spans(cols, tol)
    sizes = set()
    for i, (idx, m) in enumerate(got):
        ref_idx, ref_m = keyfit.fit_span(cols[:, i], float(tol[i]))
        assert idx.tolist() == ref_idx.tolist()
        assert np.allclose(m, ref_m, rtol=1e-9, atol=1e-12)
        sizes.add(idx.size)
    assert len(sizes) >= 3 and length in sizes


def test_banded_normal_equations_are_the_dense_ones():
    """`_fit_keys` assembles each span's normal equations in their bands (O(n) a span) and solves key sets of several
    sizes in one padded batch; `_fit` builds them from the dense design and jerk matrices: the same slopes and curve,
    for spans of 15 to 240 frames, key sets from the two ends to every frame, keys one frame apart among them."""
    rng = np.random.default_rng(7)
    for n in (15, 48, 240):
        y = np.cumsum(np.cumsum(rng.normal(size=(6, n)), 1), 1) * 1e-3
        keys = np.zeros((6, n), bool)
        keys[:, [0, n - 1]] = True
        for g, count in enumerate((0, 1, 3, n // 5, n // 2, n - 2)):
            keys[g, 1 + rng.choice(n - 2, count, replace=False)] = True
        keys[3, 5:8] = True   # keys on consecutive frames
        m, fitted, pos = keyfit._fit_keys(y, keys, keyfit.edge_weights(n))
        for g in range(6):
            idx = np.flatnonzero(keys[g])
            ref_m, ref_fit = keyfit._fit(y[g], idx)
            assert pos[g, :idx.size].tolist() == idx.tolist()
            assert np.allclose(m[g, :idx.size], ref_m, rtol=1e-8, atol=1e-12), (n, g)
            assert np.allclose(fitted[g], ref_fit, rtol=1e-9, atol=1e-12), (n, g)
            assert not m[g, idx.size:].any()


@needs_data
def test_no_jerkier_adds_keys_where_the_curve_is_jerkier_and_batched_agrees(lafan_channels):
    """`no_jerkier_spans` (batched) against `no_jerkier` on each span: the same keys and slopes. A span the keys
    leave jerkier than the fill (mean |third difference| over it and the three frames either side) gets keys, is
    then less jerky than before, and keeps every key it had; `hermite_spans` is `hermite_values` span by span."""
    length = 30
    cols = np.stack([lafan_channels[s - 3:s + length + 3, c] for c in range(0, lafan_channels.shape[1], 3)
                     for s in range(3, lafan_channels.shape[0] - length - 3, 90)])   # (G, n + 6)
    fits = keyfit.fit_spans(cols[:, 3:-3].T, np.full(cols.shape[0], np.radians(0.2)))
    curves = keyfit.hermite_spans(cols[:, 3:-3], fits)
    for i, (idx, m) in enumerate(fits):
        assert np.allclose(curves[i], keyfit.hermite_values(cols[i, 3:-3], idx, m), atol=1e-12)
    got = keyfit.no_jerkier_spans(cols, fits, 4)

    def jerk(ext, idx, m):
        red = ext.copy()
        red[3:-3] = keyfit.hermite_values(ext[3:-3], idx, m)
        return np.abs(np.diff(red, 3)).mean()

    grown = 0
    for i, ((idx, m), (idx0, m0)) in enumerate(zip(got, fits)):
        ref_idx, ref_m = keyfit.no_jerkier(cols[i], idx0, m0, 4)
        assert idx.tolist() == ref_idx.tolist() and np.allclose(m, ref_m, rtol=1e-9, atol=1e-12)
        want = np.abs(np.diff(cols[i], 3)).mean()
        if idx.size > idx0.size:
            grown += 1
            assert set(idx0.tolist()) <= set(idx.tolist()) and idx.size <= idx0.size + 4
            assert jerk(cols[i], idx, m) < jerk(cols[i], idx0, m0)
        else:
            assert jerk(cols[i], idx, m) <= want
    assert grown > 0
