"""motioncore.core.rotations, continued: gradients, slerp, continuity, angles and the rotation between two
vectors, batching, array types and errors, against independent references (scipy), numpy and torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.rotations import BACKENDS, Backend, N, rand_quat, sign_free_err, sp_quat
from scipy.spatial.transform import Rotation, Slerp

from motioncore.core.euler import euler_to_quat, matrix_to_euler, quat_to_euler
from motioncore.core.rotations import (
    axis_angle_to_quat,
    matrix_to_quat,
    quat_angle,
    quat_apply,
    quat_between,
    quat_conj,
    quat_continuity,
    quat_identity,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_axis_angle,
    quat_to_matrix,
    quat_to_rot6d,
    rot6d_to_matrix,
)
from motioncore.errors import ShapeError


@pytest.fixture(params=BACKENDS, ids=[f"{n}-{d.__name__}" for n, d in BACKENDS])
def B(request) -> Backend:
    return Backend(*request.param)


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
