"""Skeleton, forward kinematics, mirroring, resampling, trajectory, contacts and re-framing."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from motioncore.core.kinematics import (
    BodyJoints,
    find_body_joints,
    foot_contacts,
    mirror,
    mirror_map,
    reframe,
    resample,
    root_trajectory,
    side_of,
)
from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_angle, quat_normalize
from motioncore.core.skeleton import Skeleton
from motioncore.errors import ShapeError


def wxyz(r: Rotation) -> np.ndarray:
    q = r.as_quat()  # scipy: XYZW
    return np.concatenate([q[..., 3:], q[..., :3]], -1)


def biped() -> Skeleton:
    """A small symmetric biped: Hips, Spine, legs, arms (Bandai-like names)."""
    names = ("Hips", "Spine", "UpperArm_L", "LowerArm_L", "UpperArm_R", "LowerArm_R",
             "UpperLeg_L", "LowerLeg_L", "Foot_L", "Toes_L", "UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")
    parents = (-1, 0, 1, 2, 1, 4, 0, 6, 7, 8, 0, 10, 11, 12)
    off = [(0, 90, 0), (0, 20, 0), (15, 25, 0), (25, 0, 0), (-15, 25, 0), (-25, 0, 0),
           (10, 0, 0), (0, -42, 0), (0, -42, 0), (0, -6, 12), (-10, 0, 0), (0, -42, 0), (0, -42, 0), (0, -6, 12)]
    return Skeleton(names, np.array(parents), np.array(off, float), end_sites=((3, (20, 0, 0)),))


def random_motion(sk: Skeleton, T: int = 40, seed: int = 0) -> Motion:
    rng = np.random.default_rng(seed)
    rot = wxyz(Rotation.from_rotvec(rng.normal(scale=0.4, size=(T * sk.num_joints, 3)))).reshape(T, -1, 4)
    pos = np.broadcast_to(sk.offsets, (T, sk.num_joints, 3)).copy()
    pos[:, 0] += np.cumsum(rng.normal(size=(T, 3)), 0)
    return Motion(sk, rot, pos, 30.0, "rand")


def fk_reference(sk: Skeleton, rot: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Slow, obvious FK with 4x4 matrices, one frame at a time."""
    T, J = rot.shape[:2]
    out = np.zeros((T, J, 3))
    for t in range(T):
        M = [None] * J
        for j in range(J):
            L = np.eye(4)
            L[:3, :3] = Rotation.from_quat(np.r_[rot[t, j, 1:], rot[t, j, 0]]).as_matrix()
            L[:3, 3] = pos[t, j]
            M[j] = L if sk.parents[j] < 0 else M[sk.parents[j]] @ L
            out[t, j] = M[j][:3, 3]
    return out


def test_skeleton_validation():
    with pytest.raises(ShapeError, match="topologically"):
        Skeleton(("a", "b"), np.array([1, -1]), np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="duplicate"):
        Skeleton(("a", "a"), np.array([-1, 0]), np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="offsets"):
        Skeleton(("a", "b"), np.array([-1, 0]), np.zeros((3, 3)))
    with pytest.raises(KeyError, match="nope"):
        biped().index("nope")


def test_fk_matches_matrix_reference_numpy_and_torch():
    sk = biped()
    m = random_motion(sk, T=5)
    gq, gp = sk.forward_kinematics(m.rotations, m.positions)
    np.testing.assert_allclose(gp, fk_reference(sk, m.rotations, m.positions), atol=1e-9)
    tq, tp = sk.forward_kinematics(torch.from_numpy(m.rotations), torch.from_numpy(m.positions))
    np.testing.assert_allclose(tp.numpy(), gp, atol=1e-9)
    np.testing.assert_allclose(tq.numpy(), gq, atol=1e-12)


def test_fk_hand_computed_and_end_site():
    sk = Skeleton(("root", "a", "b"), np.array([-1, 0, 1]), np.array([[0, 0, 0], [0, 10, 0], [5, 0, 0]], float),
                  end_sites=((2, (0, 0, 3)),))
    q = np.zeros((1, 3, 4))
    q[..., 0] = 1
    q[0, 1] = wxyz(Rotation.from_euler("z", 90, degrees=True))  # 'a' turns +X into +Y
    gq, gp = sk.forward_kinematics(q, np.broadcast_to(sk.offsets, (1, 3, 3)))
    np.testing.assert_allclose(gp[0, 2], [0, 15, 0], atol=1e-12)
    np.testing.assert_allclose(sk.end_site_positions(gq, gp)[0, 0], [0, 15, 3], atol=1e-12)


def test_to_dict_round_trip_and_subset():
    sk = biped()
    back = Skeleton.from_dict(sk.to_dict())
    assert back.same_topology(sk) and np.array_equal(back.offsets, sk.offsets) and back.end_sites == sk.end_sites
    sub, idx = sk.subset(["Hips", "UpperLeg_L", "Foot_L"])
    assert list(sub.parents) == [-1, 0, 1]
    np.testing.assert_allclose(sub.offsets[2], sk.offsets[7] + sk.offsets[8])  # LowerLeg folded in
    np.testing.assert_allclose(sub.rest_positions()[2], sk.rest_positions()[8])


def test_side_and_mirror_map_on_several_naming_schemes():
    assert [side_of(n) for n in ("Foot_L", "LeftFoot", "lfemur", "Hand.R", "RightArm", "Spine")] == \
        ["L", "L", "L", "R", "R", None]
    sk = Skeleton(("root", "lfemur", "rfemur", "LeftArm", "RightArm"), np.array([-1, 0, 0, 0, 0]), np.zeros((5, 3)))
    assert list(mirror_map(sk)) == [0, 2, 1, 4, 3]


def test_mirror_is_a_reflection_of_global_positions():
    sk = biped()
    m = random_motion(sk)
    m.positions[:] = m.positions  # symmetric skeleton: exact
    _, gp = m.global_transforms()
    mm = mirror(m)
    _, gpm = mm.global_transforms()
    pairs = mirror_map(sk)
    np.testing.assert_allclose(gpm, gp[:, pairs] * [-1, 1, 1], atol=1e-9)
    back = mirror(mm)
    assert quat_angle(back.rotations, m.rotations).max() < 1e-9


def test_resample_keeps_keyframes_and_halves_frames():
    m = random_motion(biped(), T=61)
    m60 = Motion(m.skeleton, m.rotations, m.positions, 60.0)
    r = resample(m60, 30.0)
    assert r.num_frames == 31 and r.fps == 30.0
    assert quat_angle(r.rotations, m.rotations[::2]).max() < 1e-9
    np.testing.assert_allclose(r.positions, m.positions[::2], atol=1e-12)
    up = resample(r, 60.0)  # midpoints are slerps of neighbours
    mid = quat_normalize(r.rotations[0] + r.rotations[1])
    assert quat_angle(up.rotations[1], mid).max() < 1e-6


def test_root_trajectory_facing_and_contacts():
    sk = biped()
    T = 30
    q = np.zeros((T, sk.num_joints, 4))
    q[..., 0] = 1
    yaw = Rotation.from_euler("y", 90, degrees=True)  # faces +Z at rest; +90 deg about Y faces +X
    q[:, 0] = wxyz(yaw)
    pos = np.broadcast_to(sk.offsets, (T, sk.num_joints, 3)).copy()
    pos[:, 0, 0] = np.linspace(0, 100, T)
    m = Motion(sk, q, pos, 30.0)
    ground, fwd = root_trajectory(m)
    np.testing.assert_allclose(ground[:, 1], 0)
    np.testing.assert_allclose(fwd, np.tile([1.0, 0, 0], (T, 1)), atol=1e-9)
    body = find_body_joints(sk)
    _, gp = m.global_transforms()
    c = foot_contacts(gp, body.feet, fps=30.0, speed=30.0)
    assert c.shape == (T, 4) and not c.any()  # sliding at 100 cm/s: never in contact
    still = Motion(sk, q, np.broadcast_to(sk.offsets, pos.shape).copy(), 30.0)
    assert foot_contacts(still.global_transforms()[1], body.feet, fps=30.0).all()


def test_find_body_joints_on_biped():
    b = find_body_joints(biped())
    sk = biped()
    assert sk.names[b.root] == "Hips"
    assert (sk.names[b.hips[0]], sk.names[b.hips[1]]) == ("UpperLeg_L", "UpperLeg_R")
    assert [sk.names[f] for f in b.feet] == ["Foot_L", "Toes_L", "Foot_R", "Toes_R"]


def test_reframe_is_rigid_and_faces_plus_z():
    sk = biped()
    m = random_motion(sk, T=20)
    body: BodyJoints = find_body_joints(sk)
    rot, pos = reframe(m.rotations[None], m.positions[None], sk, body, frame=9)
    _, gp0 = sk.forward_kinematics(m.rotations, m.positions)
    _, gp1 = sk.forward_kinematics(rot[0], pos[0])
    d0 = np.linalg.norm(gp0[:, :, None] - gp0[:, None], axis=-1)
    d1 = np.linalg.norm(gp1[:, :, None] - gp1[:, None], axis=-1)
    np.testing.assert_allclose(d0, d1, atol=1e-9)  # rigid
    from motioncore.core.kinematics import facing_directions
    np.testing.assert_allclose(facing_directions(gp1[9], body), [0, 0, 1], atol=1e-9)
    np.testing.assert_allclose(gp1[:, body.root, [0, 2]].mean(0), 0, atol=1e-9)  # centred
