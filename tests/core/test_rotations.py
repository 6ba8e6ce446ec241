"""motioncore.core.rotations against independent references (scipy, explicit matrix products), numpy and torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.rotations import BACKENDS, Backend, N, assert_rotation, rand_euler, rand_quat, sign_free_err, sp_quat
from scipy.spatial.transform import Rotation

from motioncore.core.euler import euler_to_matrix, euler_to_quat, matrix_to_euler, quat_to_euler
from motioncore.core.rotations import (
    EULER_ORDERS,
    axis_angle_to_matrix,
    axis_angle_to_quat,
    matrix_to_axis_angle,
    matrix_to_quat,
    matrix_to_rot6d,
    quat_angle,
    quat_apply,
    quat_conj,
    quat_identity,
    quat_inv,
    quat_mul,
    quat_normalize,
    quat_to_axis_angle,
    quat_to_matrix,
    quat_to_rot6d,
    rot6d_to_matrix,
    rot6d_to_quat,
)


@pytest.fixture(params=BACKENDS, ids=[f"{n}-{d.__name__}" for n, d in BACKENDS])
def B(request) -> Backend:
    return Backend(*request.param)


# --- quaternion algebra --------------------------------------------------------------------------


def test_identity_type_and_dtype():
    q = quat_identity((2, 3))
    assert q.shape == (2, 3, 4) and q.dtype == np.float64
    np.testing.assert_array_equal(q[..., 0], 1.0)
    np.testing.assert_array_equal(q[..., 1:], 0.0)
    t = quat_identity(5, like=torch.zeros(1, dtype=torch.float32))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.shape == (5, 4)
    assert quat_identity(1, like=np.zeros(1, np.float32)).dtype == np.float32


def test_mul_matches_matrix_product(B):
    a, b = rand_quat(seed=1), rand_quat(seed=2)
    out = B.np(quat_mul(B(a), B(b)))
    ref = sp_quat(a).as_matrix() @ sp_quat(b).as_matrix()
    np.testing.assert_allclose(sp_quat(out).as_matrix(), ref, atol=B.atol)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=B.atol)


def test_mul_broadcasts():
    a, b = rand_quat(5, 1).reshape(5, 1, 4), rand_quat(7, 2).reshape(1, 7, 4)
    out = quat_mul(a, b)
    assert out.shape == (5, 7, 4)
    np.testing.assert_allclose(out[3, 4], quat_mul(a[3, 0], b[0, 4]), atol=1e-15)


def test_apply_matches_matrix(B):
    q, v = rand_quat(seed=3), np.random.default_rng(4).standard_normal((N, 3))
    out = B.np(quat_apply(B(q), B(v)))
    np.testing.assert_allclose(out, np.einsum("nij,nj->ni", sp_quat(q).as_matrix(), v), atol=5 * B.atol)
    np.testing.assert_allclose(out, (B.np(quat_to_matrix(B(q))) @ v[..., None])[..., 0], atol=5 * B.atol)


def test_apply_broadcasts():
    q, v = rand_quat(5, 1).reshape(5, 1, 4), np.random.default_rng(2).standard_normal((1, 7, 3))
    out = quat_apply(q, v)
    assert out.shape == (5, 7, 3)
    np.testing.assert_allclose(out[2, 6], sp_quat(q[2, 0]).apply(v[0, 6]), atol=1e-12)


def test_conj_inv_normalize(B):
    q = rand_quat(seed=5) * np.random.default_rng(6).uniform(0.5, 2.0, (N, 1))  # not unit
    ident = np.broadcast_to([1.0, 0, 0, 0], (N, 4))
    np.testing.assert_allclose(B.np(quat_mul(B(q), quat_inv(B(q)))), ident, atol=5 * B.atol)
    qn = B.np(quat_normalize(B(q)))
    np.testing.assert_allclose(np.linalg.norm(qn, axis=-1), 1.0, atol=B.atol)
    np.testing.assert_allclose(B.np(quat_conj(B(qn))), qn * [1, -1, -1, -1], atol=0)
    z = B.np(quat_normalize(B(np.zeros((2, 4)))))
    np.testing.assert_array_equal(z, 0.0)


# --- conversions: references and round trips ----------------------------------------------------


def test_quat_to_matrix_matches_scipy(B):
    q = rand_quat(seed=7)
    m = B.np(quat_to_matrix(B(q * 3.0)))  # scaled: normalised implicitly
    np.testing.assert_allclose(m, sp_quat(q).as_matrix(), atol=B.atol)
    assert_rotation(m, 2 * B.atol)


def test_matrix_to_quat_matches_scipy(B):
    q = rand_quat(seed=8)
    out = B.np(matrix_to_quat(B(sp_quat(q).as_matrix())))
    assert sign_free_err(out, q) < B.atol
    assert np.all(out[:, 0] >= 0)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=B.atol)


def test_matrix_to_quat_all_branches(B):
    # near-180-degree rotations about each axis and about diagonals exercise every Shepperd branch
    axes = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, -1], [1, 1, 1], [0.3, 0.2, 0.1]], float)
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    angles = np.array([0.0, 1e-8, 0.5, np.pi - 1e-6, np.pi])
    rv = (axes[:, None] * angles[None, :, None]).reshape(-1, 3)
    m = Rotation.from_rotvec(rv).as_matrix()
    out = B.np(matrix_to_quat(B(m)))
    assert sign_free_err(out, Rotation.from_rotvec(rv).as_quat(scalar_first=True)) < B.atol
    np.testing.assert_allclose(sp_quat(out).as_matrix(), m, atol=2 * B.atol)


def test_axis_angle_matches_scipy(B):
    q = rand_quat(seed=9)
    q[0] = [1, 0, 0, 0]
    q[1] = [0, 0, 1, 0]  # 180 degrees
    rv = sp_quat(q).as_rotvec()  # angle in [0, pi]
    out = B.np(quat_to_axis_angle(B(-q)))  # sign must not matter
    np.testing.assert_allclose(np.abs(out[1]), [0, np.pi, 0], atol=B.atol)
    np.testing.assert_allclose(out[2:], rv[2:], atol=5 * B.atol)
    assert np.all(np.linalg.norm(out, axis=-1) <= np.pi + B.atol)
    back = B.np(axis_angle_to_quat(B(rv)))
    assert sign_free_err(back, q) < B.atol


def test_axis_angle_small_angles_precise():
    rv = np.random.default_rng(10).standard_normal((N, 3)) * np.logspace(-12, -2, N)[:, None]
    q = axis_angle_to_quat(rv)
    np.testing.assert_allclose(q, Rotation.from_rotvec(rv).as_quat(scalar_first=True), rtol=1e-14, atol=1e-17)
    np.testing.assert_allclose(quat_to_axis_angle(q), rv, rtol=1e-12, atol=1e-20)


def test_axis_angle_matrix_round_trip(B):
    m = Rotation.random(N, random_state=11).as_matrix()
    rv = B.np(matrix_to_axis_angle(B(m)))
    np.testing.assert_allclose(Rotation.from_rotvec(rv).as_matrix(), m, atol=5 * B.atol)
    np.testing.assert_allclose(B.np(axis_angle_to_matrix(B(rv))), m, atol=5 * B.atol)


def test_rot6d(B):
    m = Rotation.random(N, random_state=12).as_matrix()
    d = B.np(matrix_to_rot6d(B(m)))
    np.testing.assert_array_equal(d[:, :3], m[:, :, 0].astype(B.dtype))
    np.testing.assert_array_equal(d[:, 3:], m[:, :, 1].astype(B.dtype))
    np.testing.assert_allclose(B.np(rot6d_to_matrix(B(d))), m, atol=2 * B.atol)
    q = rand_quat(seed=13)
    assert sign_free_err(B.np(rot6d_to_quat(quat_to_rot6d(B(q)))), q) < B.atol


def test_rot6d_gram_schmidt_of_arbitrary_input(B):
    d = np.random.default_rng(14).standard_normal((N, 6)) * 3.0
    m = B.np(rot6d_to_matrix(B(d)))
    assert_rotation(m, 5 * B.atol)
    a1, a2 = d[:, :3], d[:, 3:]
    np.testing.assert_allclose(m[:, :, 0], a1 / np.linalg.norm(a1, axis=-1, keepdims=True), atol=B.atol)
    # second column lies in span(a1, a2) on a2's side
    assert np.all(np.einsum("ni,ni->n", m[:, :, 1], a2) > 0)
    np.testing.assert_allclose(np.einsum("ni,ni->n", m[:, :, 2], a2), 0.0, atol=10 * B.atol)


@pytest.mark.parametrize("conv", ["matrix", "axis_angle", "rot6d", "euler"])
def test_quat_round_trips_up_to_sign(B, conv):
    q = rand_quat(seed=15)
    q[:3] = [[1, 0, 0, 0], [0, 1, 0, 0], [-0.5, 0.5, 0.5, 0.5]]
    there, back = {
        "matrix": (quat_to_matrix, matrix_to_quat),
        "axis_angle": (quat_to_axis_angle, axis_angle_to_quat),
        "rot6d": (quat_to_rot6d, rot6d_to_quat),
        "euler": (lambda x: quat_to_euler(x, "ZXY"), lambda x: euler_to_quat(x, "ZXY")),
    }[conv]
    out = back(there(B(q)))
    assert B.np(quat_angle(out, B(q))).max() < 10 * B.atol
    assert sign_free_err(B.np(out), q) < B.atol


# --- Euler ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", EULER_ORDERS)
def test_euler_to_matrix_matches_scipy(B, order):
    a = rand_euler(seed=16)
    ref = Rotation.from_euler(order, a)
    np.testing.assert_allclose(B.np(euler_to_matrix(B(a), order)), ref.as_matrix(), atol=B.atol)
    q = B.np(euler_to_quat(B(np.degrees(a)), order, degrees=True))
    assert sign_free_err(q, ref.as_quat(scalar_first=True)) < B.atol


def test_euler_order_is_bvh_intrinsic():
    a = np.array([0.3, -0.7, 1.1])
    def R(axis: str, t: float) -> np.ndarray:
        return Rotation.from_euler(axis.lower(), t).as_matrix()
    expect = R("Z", a[0]) @ R("X", a[1]) @ R("Y", a[2])
    np.testing.assert_allclose(euler_to_matrix(a, "ZXY"), expect, atol=1e-15)
    np.testing.assert_allclose(quat_to_matrix(euler_to_quat(a, "ZXY")), expect, atol=1e-15)


@pytest.mark.parametrize("order", EULER_ORDERS)
def test_matrix_to_euler_matches_scipy(B, order):
    a = rand_euler(seed=17)
    m = Rotation.from_euler(order, a).as_matrix()
    out = B.np(matrix_to_euler(B(m), order))
    tol = 1e-3 if B.dtype == np.float32 else 1e-9  # Euler angles are ill-conditioned near +-90 deg
    np.testing.assert_allclose(out, Rotation.from_matrix(m).as_euler(order), atol=tol)
    np.testing.assert_allclose(out, a, atol=tol)
    np.testing.assert_allclose(B.np(euler_to_matrix(B(out), order)), m, atol=2 * B.atol)
    deg = B.np(quat_to_euler(euler_to_quat(B(a), order), order, degrees=True))
    np.testing.assert_allclose(deg, np.degrees(a), atol=tol * 60)


@pytest.mark.parametrize("order", EULER_ORDERS)
def test_quat_to_euler_agrees_with_matrix_to_euler(B, order):
    q = rand_quat(seed=18)
    e_q = B.np(quat_to_euler(B(q), order))
    e_m = B.np(matrix_to_euler(B(sp_quat(q).as_matrix()), order))
    tol = 1e-3 if B.dtype == np.float32 else 1e-9
    np.testing.assert_allclose(np.angle(np.exp(1j * (e_q - e_m))), 0.0, atol=tol)
    assert np.all(np.abs(e_q[:, 1]) <= np.pi / 2 + B.atol) and np.all(np.abs(e_q) <= np.pi + B.atol)


@pytest.mark.parametrize("order", EULER_ORDERS)
def test_euler_gimbal_lock(B, order):
    a = rand_euler(seed=19, gimbal=True)
    m = Rotation.from_euler(order, a).as_matrix()
    for fn, x in ((matrix_to_euler, m), (quat_to_euler, Rotation.from_matrix(m).as_quat(scalar_first=True))):
        out = B.np(fn(B(x), order))
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(np.abs(out[:, 1]), np.pi / 2, atol=1e-3 if B.dtype == np.float32 else 1e-7)
        np.testing.assert_allclose(Rotation.from_euler(order, out).as_matrix(), m, atol=20 * B.atol)
        np.testing.assert_allclose(out[:, 0], 0.0, atol=1e-6)  # convention: first angle 0, third carries it


@pytest.mark.parametrize("bad", ["xyz", "zxy", "XYX", "ZXZ", "XY", "ABC", "", 123, None])
def test_bad_euler_order_raises(bad):
    a, q = np.zeros((2, 3)), quat_identity(2)
    for call in (lambda: euler_to_quat(a, bad), lambda: euler_to_matrix(a, bad),
                 lambda: quat_to_euler(q, bad), lambda: matrix_to_euler(quat_to_matrix(q), bad)):
        with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(")):
            call()


# --- outputs are rotations -----------------------------------------------------------------------


def test_outputs_are_rotations(B):
    rng = np.random.default_rng(20)
    for m in (quat_to_matrix(B(rng.standard_normal((N, 4)))),
              rot6d_to_matrix(B(rng.standard_normal((N, 6)))),
              euler_to_matrix(B(rng.uniform(-4, 4, (N, 3))), "YZX"),
              axis_angle_to_matrix(B(rng.standard_normal((N, 3)) * 3))):
        assert_rotation(B.np(m), 5 * B.atol)


