"""motioncore.core.rotations against independent references (scipy, explicit matrix products), numpy and torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation, Slerp

from motioncore.core.rotations import (
    EULER_ORDERS,
    axis_angle_to_matrix,
    axis_angle_to_quat,
    euler_to_matrix,
    euler_to_quat,
    matrix_to_axis_angle,
    matrix_to_euler,
    matrix_to_quat,
    matrix_to_rot6d,
    quat_angle,
    quat_apply,
    quat_between,
    quat_conj,
    quat_continuity,
    quat_identity,
    quat_inv,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_axis_angle,
    quat_to_euler,
    quat_to_matrix,
    quat_to_rot6d,
    rot6d_to_matrix,
    rot6d_to_quat,
)
from motioncore.errors import ShapeError

N = 64


# --- helpers -------------------------------------------------------------------------------------


class Backend:
    """Converts float64 numpy references to one backend/dtype and checks outputs come back the same way."""

    def __init__(self, name: str, dtype: type):
        self.name, self.dtype = name, dtype
        self.atol = 5e-5 if dtype == np.float32 else 1e-9

    def __call__(self, x):
        a = np.asarray(x, dtype=self.dtype)
        return torch.from_numpy(a.copy()) if self.name == "torch" else a

    def np(self, y) -> np.ndarray:
        """Output back to float64 numpy, after checking its type and dtype match the input's."""
        if self.name == "torch":
            assert isinstance(y, torch.Tensor)
            assert y.dtype == (torch.float32 if self.dtype == np.float32 else torch.float64)
            return y.detach().numpy().astype(np.float64)
        assert isinstance(y, np.ndarray) and y.dtype == self.dtype
        return y.astype(np.float64)


BACKENDS = [("numpy", np.float32), ("numpy", np.float64), ("torch", np.float32), ("torch", np.float64)]


@pytest.fixture(params=BACKENDS, ids=[f"{n}-{d.__name__}" for n, d in BACKENDS])
def B(request) -> Backend:
    return Backend(*request.param)


def rand_quat(n: int = N, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal((n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def sp_quat(q: np.ndarray) -> Rotation:
    return Rotation.from_quat(np.asarray(q, dtype=np.float64), scalar_first=True)


def sign_free_err(a: np.ndarray, b: np.ndarray) -> float:
    """max(1 - |<a, b>|) over unit quaternions: 0 iff a == +-b."""
    return float(np.max(1.0 - np.abs(np.sum(a * b, axis=-1))))


def assert_rotation(m: np.ndarray, atol: float) -> None:
    eye = np.broadcast_to(np.eye(3), m.shape)
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), eye, atol=atol)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=atol)


def rand_euler(n: int = N, seed: int = 1, gimbal: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-np.pi, np.pi, (n, 3))
    a[:, 1] = np.where(rng.random(n) < 0.5, -np.pi / 2, np.pi / 2) if gimbal else a[:, 1] * 0.49
    return a


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


# --- gradients -----------------------------------------------------------------------------------


def _grad_inputs() -> dict[str, list[np.ndarray]]:
    r180 = Rotation.from_rotvec([[np.pi, 0, 0], [0, 0, np.pi], np.pi * np.array([1, 1, 0]) / np.sqrt(2)])
    eye = np.eye(3)
    return {
        "axis_angle_to_quat": [np.zeros(3), np.array([np.pi, 0, 0]), r180.as_rotvec()[2]],
        "quat_to_axis_angle": [np.array([1.0, 0, 0, 0]), np.array([0.0, 1, 0, 0]), np.array([0, 0.6, 0.8, 0])],
        "rot6d_to_matrix": [np.r_[eye[:, 0], eye[:, 1]]] + [np.r_[m[:, 0], m[:, 1]] for m in r180.as_matrix()],
        "matrix_to_quat": [eye, *r180.as_matrix()],
        "quat_to_matrix": [np.array([1.0, 0, 0, 0]), np.array([0.0, 0, 0, 1]), r180.as_quat(scalar_first=True)[2]],
    }


@pytest.mark.parametrize("name", list(_grad_inputs()))
def test_finite_gradients_at_identity_and_180(name):
    fn = globals()[name]
    for x in _grad_inputs()[name]:
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        y = fn(t)
        w = torch.from_numpy(np.random.default_rng(21).standard_normal(tuple(y.shape)))
        (y * w).sum().backward()
        assert torch.isfinite(y).all() and torch.isfinite(t.grad).all(), (name, x)


def test_finite_gradients_when_equal():
    # a geodesic loss at a perfect prediction, and slerp between equal keys, must not give NaN
    q = torch.tensor(rand_quat(4, 41), requires_grad=True)
    for y in (quat_angle(q, q.detach()), quat_slerp(q, q.detach(), 0.3), quat_slerp(q, -q.detach(), 0.3)):
        (gq,) = torch.autograd.grad(y.sum(), q)
        assert torch.isfinite(gq).all()


def test_gradient_values_at_identity():
    v = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    jac = torch.autograd.functional.jacobian(axis_angle_to_quat, v)
    np.testing.assert_allclose(jac.numpy(), np.r_[np.zeros((1, 3)), 0.5 * np.eye(3)], atol=1e-15)
    q = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(quat_to_axis_angle, q)
    np.testing.assert_allclose(jac.numpy(), np.c_[np.zeros((3, 1)), 2.0 * np.eye(3)], atol=1e-15)


def test_gradcheck():
    rng = np.random.default_rng(22)
    def t(x):
        return torch.tensor(x, dtype=torch.float64, requires_grad=True)
    m = t(Rotation.random(4, random_state=23).as_matrix())
    for fn, x in ((axis_angle_to_quat, t(rng.standard_normal((4, 3)))),
                  (axis_angle_to_quat, t(rng.standard_normal((4, 3)) * 1e-5)),  # Taylor branch
                  (quat_to_axis_angle, t(rand_quat(4, 24))),
                  (quat_to_axis_angle, t(np.c_[np.ones(4), rng.standard_normal((4, 3)) * 1e-5])),
                  (matrix_to_quat, m), (matrix_to_quat, t(np.eye(3))), (rot6d_to_matrix, t(rng.standard_normal((4, 6)))),
                  (lambda e: euler_to_quat(e, "YXZ"), t(rng.standard_normal((4, 3))))):
        assert torch.autograd.gradcheck(fn, (x,))


# --- slerp ---------------------------------------------------------------------------------------


def test_slerp_matches_scipy_and_endpoints(B):
    q0, q1 = rand_quat(8, 25), rand_quat(8, 26)
    ts = np.linspace(0, 1, 7)
    out = B.np(quat_slerp(B(q0), B(q1), B(ts[:, None])))  # (7, 8, 4)
    assert out.shape == (7, 8, 4)
    for n in range(8):
        ref = Slerp([0, 1], Rotation.from_quat(np.stack([q0[n], q1[n]]), scalar_first=True))(ts)
        assert sign_free_err(out[:, n], ref.as_quat(scalar_first=True)) < B.atol
    np.testing.assert_allclose(out[0], q0, atol=B.atol)
    assert sign_free_err(out[-1], q1) < B.atol
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=B.atol)


def test_slerp_half_angle_short_path_constant_velocity(B):
    q0 = rand_quat(N, 27)
    q1 = quat_mul(q0, axis_angle_to_quat(np.random.default_rng(28).standard_normal((N, 3))))
    q1 = np.where(np.arange(N)[:, None] % 2 == 0, -q1, q1)  # dot < 0 for many: must take the short path
    theta = quat_angle(q0, q1)  # in [0, pi]
    mid = quat_slerp(B(q0), B(q1), 0.5)
    np.testing.assert_allclose(B.np(quat_angle(B(q0), mid)), theta / 2, atol=5 * B.atol)
    np.testing.assert_allclose(B.np(quat_angle(mid, B(q1))), theta / 2, atol=5 * B.atol)
    ts = np.linspace(0, 1, 11)
    seq = B.np(quat_slerp(B(q0), B(q1), B(ts[:, None])))
    steps = quat_angle(seq[1:], seq[:-1])
    np.testing.assert_allclose(steps, np.broadcast_to(theta / 10, steps.shape), atol=10 * B.atol)
    np.testing.assert_allclose(quat_angle(q0, seq), ts[:, None] * theta, atol=10 * B.atol)


def test_slerp_nearly_parallel(B):
    q0 = rand_quat(N, 29)
    q1 = quat_mul(q0, axis_angle_to_quat(np.random.default_rng(30).standard_normal((N, 3)) * 1e-9))
    for a, b in ((q0, q1), (q0, q0), (q0, -q0)):
        out = B.np(quat_slerp(B(a), B(b), 0.3))
        assert np.all(np.isfinite(out))
        assert sign_free_err(out, q0) < B.atol


# --- continuity, angle, between ------------------------------------------------------------------


def _smooth_seq(T: int, J: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rv = np.cumsum(rng.standard_normal((T, J, 3)) * 0.05, axis=0)
    return Rotation.from_rotvec(rv.reshape(-1, 3)).as_quat(scalar_first=True).reshape(T, J, 4)


def test_continuity(B):
    q = _smooth_seq(2000, 3, 31)
    flip = np.random.default_rng(32).random((2000, 3, 1)) < 0.5
    noisy = np.where(flip, -q, q)
    out = B.np(quat_continuity(B(noisy), axis=0))
    assert np.all(np.sum(out[1:] * out[:-1], axis=-1) >= 0)
    np.testing.assert_array_equal(out[0], noisy[0].astype(B.dtype))  # first frame kept
    np.testing.assert_allclose(np.abs(out), np.abs(noisy), atol=0)  # same rotations (sign only)
    assert sign_free_err(out, q) < B.atol
    ref = q * np.sign(np.sum(q[:1] * noisy[:1], axis=-1, keepdims=True))  # continuous q, matched at frame 0
    np.testing.assert_allclose(out, ref, atol=B.atol)


@pytest.mark.parametrize("axis", [1, -2])
def test_continuity_other_axis(axis):
    q = np.swapaxes(_smooth_seq(50, 4, 33), 0, 1)  # (J, T, 4)
    noisy = q * np.where(np.random.default_rng(34).random((4, 50, 1)) < 0.5, -1.0, 1.0)
    out = quat_continuity(noisy, axis=axis)
    assert np.all(np.sum(out[:, 1:] * out[:, :-1], axis=-1) >= 0)
    np.testing.assert_allclose(np.abs(out), np.abs(noisy), atol=0)
    with pytest.raises(ValueError):
        quat_continuity(noisy, axis=-1)
    assert quat_continuity(noisy[:, :1], axis=1).shape == (4, 1, 4)


def test_quat_angle(B):
    a, b = rand_quat(N, 35), rand_quat(N, 36)
    ref = (sp_quat(a).inv() * sp_quat(b)).magnitude()
    np.testing.assert_allclose(B.np(quat_angle(B(a), B(b))), ref, atol=5 * B.atol)
    np.testing.assert_allclose(B.np(quat_angle(B(a), B(-b))), ref, atol=5 * B.atol)
    np.testing.assert_allclose(B.np(quat_angle(B(a), B(a))), 0.0, atol=B.atol)


def test_quat_angle_tiny_precise():
    a = rand_quat(N, 37)
    small = np.logspace(-10, -3, N)
    rv = np.random.default_rng(38).standard_normal((N, 3))
    rv *= (small / np.linalg.norm(rv, axis=-1))[:, None]
    b = quat_mul(a, axis_angle_to_quat(rv))
    np.testing.assert_allclose(quat_angle(a, b), small, rtol=1e-5)
    np.testing.assert_allclose(quat_angle(np.float32([1, 0, 0, 0]), np.float32([1, 1e-6, 0, 0])), 2e-6, rtol=1e-5)


def test_quat_between(B):
    rng = np.random.default_rng(39)
    u, v = rng.standard_normal((N, 3)) * 2.0, rng.standard_normal((N, 3)) * 0.5
    v[0], v[1], v[2] = -u[0] * 3.0, u[1], [-1e-20, 0, 0]  # antiparallel, parallel, degenerate-ish
    u[2] = [1.0, 0, 0]
    q = B.np(quat_between(B(u), B(v)))
    assert np.all(np.isfinite(q))
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=B.atol)
    uh, vh = u / np.linalg.norm(u, axis=-1, keepdims=True), v / np.linalg.norm(v, axis=-1, keepdims=True)
    np.testing.assert_allclose(sp_quat(q).apply(uh), vh, atol=5 * B.atol)
    arc = np.arccos(np.clip(np.sum(uh * vh, axis=-1), -1, 1))  # shortest arc: rotation angle = angle(u, v)
    np.testing.assert_allclose(sp_quat(q).magnitude(), arc, atol=1e-3 if B.dtype == np.float32 else 1e-7)
    np.testing.assert_allclose(q[1], [1, 0, 0, 0], atol=B.atol)


# --- batching, types, errors ---------------------------------------------------------------------


def test_arbitrary_leading_dims(B):
    shape = (2, 3, 5)
    q = rand_quat(30, 40).reshape(*shape, 4)
    flat = rand_quat(30, 40)
    cases = [
        (quat_to_matrix, (3, 3)), (quat_to_axis_angle, (3,)), (quat_to_rot6d, (6,)),
        (lambda x: quat_to_euler(x, "XZY"), (3,)), (quat_normalize, (4,)), (quat_conj, (4,)),
        (lambda x: quat_mul(x, x), (4,)), (lambda x: quat_apply(x, x[..., 1:]), (3,)),
        (lambda x: quat_slerp(x, quat_identity(1, like=x), 0.25), (4,)), (lambda x: quat_angle(x, quat_identity((), like=x)), ()),
        (lambda x: matrix_to_quat(quat_to_matrix(x)), (4,)), (lambda x: rot6d_to_matrix(quat_to_rot6d(x)), (3, 3)),
        (lambda x: euler_to_quat(quat_to_euler(x, "YXZ"), "YXZ"), (4,)),
        (lambda x: axis_angle_to_quat(quat_to_axis_angle(x)), (4,)),
        (lambda x: matrix_to_euler(quat_to_matrix(x), "ZYX"), (3,)),
        (lambda x: quat_between(x[..., 1:], x[..., :3]), (4,)),
    ]
    for fn, tail in cases:
        out = B.np(fn(B(q)))
        assert out.shape == shape + tail
        np.testing.assert_allclose(out.reshape(30, *tail), B.np(fn(B(flat))), atol=B.atol)


def test_array_likes_and_mixed_inputs():
    q = quat_to_matrix([[1, 0, 0, 0]])  # list of ints -> numpy float64
    assert isinstance(q, np.ndarray) and q.dtype == np.float64
    out = quat_mul(np.array([1.0, 0, 0, 0]), torch.tensor([0.0, 1, 0, 0]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), [0, 1, 0, 0])


def test_shape_errors():
    with pytest.raises(ShapeError):
        quat_to_matrix(np.zeros(3))
    with pytest.raises(ShapeError):
        matrix_to_quat(np.zeros((3, 4)))
    with pytest.raises(ShapeError):
        rot6d_to_matrix(np.zeros(5))
    with pytest.raises(ShapeError):
        euler_to_quat(np.zeros(4), "XYZ")
