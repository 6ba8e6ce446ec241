"""addon/rigclip.py without Blender: rotation modes in and out (continuous), root motion through a bone
chain and back, and the frame windows an in-fill sends (issue 12)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers.addon import addon_module

rc = addon_module("core.rigclip")
rm = addon_module("core.rigmap")
gp = addon_module("vendor.gaps")   # the library's core/gaps.py, as the add-on holds it
qn = addon_module("vendor.quat_np")   # the library's core/quat_np.py: Euler angles of Blender's modes


def _rand_quats(n: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _same_rotation(a: np.ndarray, b: np.ndarray, tol: float = 1e-9) -> bool:
    return bool(np.all(np.abs(np.abs(np.sum(a * b, -1)) - 1) < tol))


@pytest.mark.parametrize("order", rc.EULER_ORDERS)
def test_euler_round_trip_every_order(order):
    q = _rand_quats(200)
    e = qn.blender_quat_to_euler(q, order)
    assert _same_rotation(rc.to_quat(e, order), q)
    # the matrix of the Euler angles is R = R_last ... R_first
    m = np.eye(3)
    for a in order:
        ang = e[0, rc.AXIS[a]]
        turn = np.zeros(4)
        turn[0], turn[1 + rc.AXIS[a]] = np.cos(ang / 2), np.sin(ang / 2)
        r = rc.quat_to_matrix(turn)
        m = r @ m
    assert np.allclose(m, rc.quat_to_matrix(q[0]))


@pytest.mark.parametrize("mode", ["QUATERNION", "AXIS_ANGLE", *rc.EULER_ORDERS])
def test_from_quat_is_continuous_and_exact(mode):
    t = np.linspace(0, 6 * np.pi, 400)   # three full turns about a tilted axis: Euler must not jump 360
    axis = np.array([0.3, 0.8, 0.52]) / np.linalg.norm([0.3, 0.8, 0.52])
    q = np.concatenate([np.cos(t / 2)[:, None], np.sin(t / 2)[:, None] * axis], -1)
    q[::3] *= -1                                              # sign flips as the BVH importer writes them
    prev = {"QUATERNION": [1.0, 0, 0, 0], "AXIS_ANGLE": [0.0, *axis]}.get(mode, [0.0, 0, 0])
    v = rc.from_quat(q, mode, np.array(prev))
    assert _same_rotation(rc.to_quat(v, mode), q, 1e-9)
    assert np.abs(np.diff(v, axis=0)).max() < 0.2               # no sign flip, no 2 pi jump


def test_root_through_a_chain_and_back():
    rng = np.random.default_rng(1)

    def rest(q, head):
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = rc.quat_to_matrix(q), head
        return m
    rests = [rest(_rand_quats(1, 2)[0], [0.1, 0.2, 0.3]), rest(_rand_quats(1, 3)[0], [0.5, -0.2, 1.0])]
    T = 7
    locs = [rng.normal(size=(T, 3)), rng.normal(size=(T, 3))]
    quats = [_rand_quats(T, 4), _rand_quats(T, 5)]
    off = rng.normal(size=(T, 3))
    rel = rc.root_in_parent(rests, locs, quats, off)
    assert np.allclose(rc.root_location(rests, locs, quats, rel, off), locs[1])
    # no parent: the head in armature space
    rel1 = rc.root_in_parent(rests[1:], locs[1:], quats[1:])
    assert np.allclose(rc.root_location(rests[1:], locs[1:], quats[1:], rel1), locs[1])


def test_windows_and_units():
    m = np.zeros(100, bool)
    m[20:25] = m[40:45] = m[90:95] = True
    assert gp.windows(m) == [(10, 54), (80, 99)]
    assert gp.runs(m) == [(20, 25), (40, 45), (90, 95)]
    assert gp.gap_windows(m) == [(20, 25, 10, 35), (40, 45, 30, 55), (90, 95, 80, 100)]
    assert gp.context_frames(120) == 40 and gp.context_frames(24) == 8 and gp.context_frames(None) == 10
    assert rc.units_scale(np.array([50.0, 40.0]), np.array([0.5, 0.41])) == 100.0
    assert rc.units_scale(np.array([50.0, 40.0]), np.array([48.0, 43.0])) == 1.0
    assert rc.units_scale(np.array([50.0, 40.0]), np.array([9.0, 7.0])) == pytest.approx(90.0 / 16.0)  # ASF units
