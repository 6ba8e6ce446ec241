"""motioncore.features: root frames, phase, normaliser, PFNN / MANN layouts, encode -> decode, labels."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core.kinematics import find_body_joints
from motioncore.core.motion import Motion
from motioncore.core.rotations import axis_angle_to_quat, quat_angle
from motioncore.core.skeleton import Skeleton
from motioncore.errors import DataError, ShapeError
from motioncore.families.mann.features import (
    ACTIONS,
    dog_actions,
    find_paws,
    mann_clip,
    mann_dataset,
    mann_decode,
    mann_encode,
    mann_layout,
)
from motioncore.families.pfnn.features import (
    GAITS,
    advance_phase,
    gait_labels,
    pfnn_clip,
    pfnn_dataset,
    pfnn_decode,
    pfnn_encode,
    pfnn_layout,
    rotation_encoding,
)
from motioncore.features import (
    Normaliser,
    Pose,
    RootFrame,
    Trajectory,
    clip_features,
    foot_phase,
    layout_normalisers,
    local_pose,
    phase_from_onsets,
    root_frames,
    sample_range,
    trajectory_offsets,
)
from motioncore.features.root_frame import wrap_angle

# Tolerances. Y is float32: a value v carries ~6e-8 * |v| of rounding, i.e. <= 2e-5 cm for the <= 300 cm
# positions here and ~1e-7 rad per rotation; FK through the 8-joint leg chains (bones <= 50 cm) adds at most
# 8 * 1e-7 * 50 cm = 4e-5 cm. 1e-3 cm (10 micrometres) leaves a 20x margin and is far below visible.
POS_TOL = 1e-3  # cm
ROT_TOL = 1e-5  # rad


# ----------------------------------------------------------------------------- synthetic rigs
def biped() -> Skeleton:
    """Bandai-like: a static ground joint above Hips, 2 legs with toes, a spine and 2 arms."""
    names = ("joint_Root", "Hips", "Spine", "UpperArm_L", "UpperArm_R", "UpperLeg_L", "LowerLeg_L", "Foot_L",
             "Toes_L", "UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")
    parents = (-1, 0, 1, 2, 2, 1, 5, 6, 7, 1, 9, 10, 11)
    offsets = [[0, 0, 0], [0, 90, 0], [0, 20, 0], [15, 25, 0], [-15, 25, 0], [10, 0, 0], [0, -42, 0],
               [0, -40, 0], [0, -8, 12], [-10, 0, 0], [0, -42, 0], [0, -40, 0], [0, -8, 12]]
    return Skeleton(names, np.array(parents), np.array(offsets, float))


def random_motion(sk: Skeleton, T: int = 90, fps: float = 30.0, seed: int = 0) -> Motion:
    """Smooth random rotations, the body root translating and turning; the ground joint stays at rest."""
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None, None] / fps
    aa = 0.4 * np.sin(2 * np.pi * (rng.uniform(0.5, 1.5, (1, sk.num_joints, 3)) * t + rng.uniform(0, 1, (1, sk.num_joints, 3))))
    body = find_body_joints(sk)
    aa[:, body.root] += np.array([0.0, 1.0, 0.0]) * (0.8 * t[:, 0])  # turning
    aa[:, :body.root] = 0.0
    pos = np.broadcast_to(sk.offsets, (T, sk.num_joints, 3)).copy()
    pos[:, body.root] += np.concatenate([100 * t[:, 0], 3 * np.sin(5 * t[:, 0]), 40 * t[:, 0]], -1)
    return Motion(sk, axis_angle_to_quat(aa), pos, fps, "synthetic")


# ----------------------------------------------------------------------------- root frames
def test_root_frame_round_trips_and_advance():
    rng = np.random.default_rng(1)
    fr = RootFrame(rng.normal(size=(5, 3)) * [1, 0, 1], rng.uniform(-np.pi, np.pi, 5))
    p = rng.normal(size=(5, 7, 3))
    assert np.allclose(fr.points_to_world(fr.points_to_local(p)), p)
    assert np.allclose(fr.dirs_to_local(fr.forward), [0, 0, 1])  # +Z is the facing
    q = axis_angle_to_quat(rng.normal(size=(5, 7, 3)))
    assert np.allclose(quat_angle(fr.rots_to_world(fr.rots_to_local(q)), q), 0, atol=1e-7)
    other = RootFrame(rng.normal(size=(5, 3)) * [1, 0, 1], rng.uniform(-np.pi, np.pi, 5))
    delta, dyaw = fr.relative(other)
    back = fr.advance(delta, dyaw)
    assert np.allclose(back.position, other.position) and np.allclose(wrap_angle(back.yaw - other.yaw), 0)
    with pytest.raises(ShapeError):
        fr.points_to_local(np.zeros((4, 3)))


def test_root_frames_follow_hips_and_smoothed_facing():
    sk = biped()
    m = random_motion(sk)
    _, gp = m.global_transforms()
    fr = root_frames(gp, find_body_joints(sk), m.fps)
    assert np.allclose(fr.position[:, 1], 0) and np.allclose(fr.position[:, [0, 2]], gp[:, 1, [0, 2]])
    raw = root_frames(gp, find_body_joints(sk), m.fps, sigma_s=0.0)
    assert np.abs(np.diff(np.unwrap(fr.yaw))).max() < np.abs(np.diff(np.unwrap(raw.yaw))).max()  # smoother


def test_local_rotations_from_root_relative_reproduce_the_pose():
    sk = biped()
    m = random_motion(sk)
    cf = clip_features(m)
    rot, pos = local_pose(sk, cf.rotations, cf.positions, cf.frames)
    _, gp = sk.forward_kinematics(rot, pos)
    _, gp0 = m.global_transforms()
    assert np.abs(gp - gp0).max() < 1e-9
    assert np.allclose(quat_angle(rot, m.rotations), 0, atol=1e-7)  # the same local rotations as the file
    assert np.allclose(cf.positions[:, 0], 0) and np.allclose(quat_angle(cf.rotations[:, 0], np.array([1.0, 0, 0, 0])), 0)


# ----------------------------------------------------------------------------- phase
def test_phase_zero_at_left_pi_at_right_and_monotone():
    left, right, T, fps = [10, 42, 75], [26, 58], 100, 30.0
    ph, dph = phase_from_onsets(T, left, right, fps)
    assert np.allclose(ph[left], 0, atol=1e-9) and np.allclose(ph[right], np.pi)
    assert ((ph >= 0) & (ph < 2 * np.pi)).all()
    assert (dph > 0).all()
    u = np.unwrap(ph)
    assert np.allclose(np.diff(u), dph[:-1])
    assert np.allclose(dph[:10], np.pi / 16) and np.allclose(dph[76:], np.pi / 17)  # neighbouring rates
    assert np.allclose(dph[10:26], np.pi / 16) and np.allclose(dph[58:75], np.pi / 17)  # linear in between


def test_phase_default_rate_when_standing():
    fps = 30.0
    rate = 2 * np.pi / (1.1 * fps)
    ph, dph = phase_from_onsets(60, [], [], fps)
    assert np.allclose(dph, rate) and ph[0] == 0
    _, dph = phase_from_onsets(300, [10, 43], [26, 200], fps)  # a 5 s stand between R(26)... L(43), R(200)
    assert np.allclose(dph[43:199], dph[43], atol=1e-12)
    assert abs(dph[43] / rate - 1) < 0.2  # whole cycles were added: near the default rate, not 5x slower
    _, dph = phase_from_onsets(60, [20], [], fps)  # one onset: default rate both ways
    assert np.allclose(dph, rate)


def test_foot_phase_from_synthetic_contacts():
    fps, T = 30.0, 120
    t = np.arange(T)
    gp = np.zeros((T, 4, 3))  # left foot, left toe, right foot, right toe, all on the ground
    left_swing = (t % 32) >= 16  # a swinging foot moves forward at 100 cm/s (> the 50 cm/s contact speed)
    for f, swing in ((0, left_swing), (1, left_swing), (2, ~left_swing), (3, ~left_swing)):
        gp[:, f, 2] = np.cumsum(np.where(swing, 100.0 / fps, 0.0))
    ph, dph = foot_phase(gp, [0, 1], [2, 3], fps)  # left lands at 32, 64, 96; right at 16, 48, 80, 112
    assert np.allclose(ph[[32, 64, 96]], 0, atol=1e-9) and np.allclose(ph[[16, 48, 80, 112]], np.pi)
    assert np.allclose(dph, np.pi / 16)


@needs_data
def test_phase_on_a_real_walk(bandai1_train):
    from motioncore.core.kinematics import foot_contacts
    from motioncore.features.phase import contact_onsets, side_contacts

    c = next(c for c in bandai1_train if c.labels["content"] == "walk")
    _, gp = c.motion.global_transforms()
    ph, dph = foot_phase(gp, [16, 17], [20, 21], 30.0)
    ct = foot_contacts(gp, (16, 17, 20, 21), 30.0, 8.0, 50.0)
    left, right = contact_onsets(side_contacts(ct[:, :2], 30.0)), contact_onsets(side_contacts(ct[:, 2:], 30.0))
    assert len(left) >= 3 and len(right) >= 3
    assert np.allclose(np.sin(ph[left]), 0, atol=1e-9) and np.allclose(np.cos(ph[left]), 1)
    assert np.allclose(ph[right], np.pi) and (dph > 0).all()
    assert 0.7 < 2 * np.pi / np.median(dph) / 30.0 < 1.6  # a walking cycle, seconds


def test_advance_phase():
    assert np.isclose(advance_phase(0.0, 0.25), np.pi / 2)
    assert np.isclose(advance_phase(0.0, 0.25, stand=1.0), 0.1 * np.pi / 2)
    assert np.isclose(advance_phase(6.0, 0.1), np.mod(6.0 + 0.2 * np.pi, 2 * np.pi))


# ----------------------------------------------------------------------------- normaliser
def test_normaliser_block_mean_std_and_round_trip():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, 6)) * [1, 2, 3, 5, 1, 1] + [0, 1, 2, 3, 4, 5]
    x[:, 5] = 7.0  # a constant column of its own group
    groups = {"a": np.arange(3), "b": slice(3, 4), "c": np.array([5])}
    n = Normaliser.fit(x, groups)
    col = x.std(0)
    assert np.allclose(n.std[:3], col[:3].mean()) and np.isclose(n.std[3], col[3]) and np.isclose(n.std[4], col[4])
    assert n.std[5] == 1.0
    assert np.allclose(n.inverse(n.transform(x)), x)
    z = n.transform(x)
    assert np.allclose(z[:, :5].mean(0), 0, atol=1e-12)
    back = Normaliser.from_dict(json.loads(json.dumps(n.to_dict())))
    assert np.array_equal(back.mean, n.mean) and np.array_equal(back.std, n.std)
    xt = torch.tensor(x, dtype=torch.float32)
    assert torch.allclose(back.inverse(back.transform(xt)), xt, atol=1e-4)
    w = Normaliser.fit(x, groups, weights=np.array([1, 0.5, 1, 1, 1, 1]))
    assert np.isclose(w.std[1], 2 * n.std[1]) and np.isclose(w.std[0], n.std[0])
    with pytest.raises(ShapeError):
        n.transform(np.zeros((2, 5)))


# ----------------------------------------------------------------------------- layouts
def _check_layout(layout, d_in, d_out):
    for blocks, d in ((layout.inputs, d_in), (layout.outputs, d_out)):
        assert blocks[0].start == 0 and all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))
        assert sum(b.size for b in blocks) == d
    for groups, d in ((layout.in_groups, d_in), (layout.out_groups, d_out)):
        cols = np.concatenate(list(groups.values()))
        assert sorted(cols.tolist()) == list(range(d))  # every column in exactly one group
    assert (layout.d_in, layout.d_out) == (d_in, d_out)


def test_pfnn_layout_widths():
    sk = biped()
    J, G = sk.num_joints, len(GAITS)
    layout = pfnn_layout(sk)
    _check_layout(layout, 12 * (4 + G) + 6 * J, 8 + 24 + 12 * J)
    assert layout.input_block("joint_pos").size == 3 * J and layout.output_block("joint_axes").size == 6 * J
    legacy = pfnn_layout(sk, rotations="logmap")  # checkpoints from before issue 27
    _check_layout(legacy, 12 * (4 + G) + 6 * J, 8 + 24 + 9 * J)
    assert legacy.output_block("joint_rot").size == 3 * J
    assert rotation_encoding(layout) == "axes" and rotation_encoding(legacy.to_dict()) == "logmap"
    assert "phase" not in [b.name for b in layout.inputs]
    assert "terrain" not in " ".join(b.name for b in layout.inputs)
    assert json.loads(json.dumps(layout.to_dict()))["d_in"] == layout.d_in


def test_mann_layout_widths_and_gating():
    names = ("Hips", "Spine", "Head", "LeftArm", "LeftHand", "RightArm", "RightHand", "LeftUpLeg", "LeftFoot",
             "RightUpLeg", "RightFoot")
    parents = (-1, 0, 1, 1, 3, 1, 5, 0, 7, 0, 9)
    offs = np.array([[0, 40, 0], [20, 0, 0], [20, 5, 0], [20, -3, 5], [0, -30, 0], [20, -3, -5], [0, -30, 0],
                     [0, -3, 5], [0, -30, 0], [0, -3, -5], [0, -30, 0]], float)
    sk = Skeleton(names, np.array(parents), offs, end_sites=((2, (5, 0, 0)), (4, (0, -5, 0)), (6, (0, -5, 0)),
                                                              (8, (0, -5, 0)), (10, (0, -5, 0))))
    assert find_paws(sk) == (1, 2, 3, 4)
    layout = mann_layout(sk)
    P = sk.num_joints + 4
    _check_layout(layout, 12 * 13 + 12 * P, 6 * 6 + 12 * P + 3)
    g = layout.gating
    assert len(g) == 19 and len(set(g.tolist())) == 19
    assert g[12:].tolist() == list(range(84, 91))  # speed + 6 actions of sample k = 0, as in MANN
    assert set(g[:12]) <= set(layout.in_groups["joint_vel"].tolist())
    assert layout.joints[-4:] == ("LeftHand_paw", "RightHand_paw", "LeftFoot_paw", "RightFoot_paw")


# ----------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def bandai1_train():
    from motioncore.data import load

    return load("bandai1", "train", progress=False)


@pytest.fixture(scope="module")
def dog_train():
    from motioncore.data import load

    return load("dog", "train", progress=False)


def _pfnn_rows(clip):
    m = clip.motion
    layout = pfnn_layout(m.skeleton)
    cf = clip_features(m)
    gid = gait_labels(cf.frames, m.fps, clip.labels["content"])
    return layout, cf, gid, pfnn_clip(layout, m, gid, cf=cf)


@needs_data
def test_pfnn_dataset_shapes(bandai1_train):
    clips = [c for c in bandai1_train if c.labels["content"] in ("walk", "run", "bow", "kick")][:12]
    d = pfnn_dataset(clips)
    layout = pfnn_layout(clips[0].motion.skeleton)
    N = len(d["X"])
    assert d["X"].shape == (N, layout.d_in) == (N, 216) and d["Y"].shape == (N, layout.d_out) == (N, 296)
    assert d["X"].dtype == d["Y"].dtype == np.float32
    assert ((d["phase"] >= 0) & (d["phase"] < 1)).all()
    assert d["clip"].shape == d["style"].shape == d["gait"].shape == (N,)
    assert set(d["skipped"]) == {c.name for c in clips if c.labels["content"] == "kick"}
    expected = sum(len(sample_range(c.motion.num_frames, c.motion.fps)) for c in clips if c.labels["content"] != "kick")
    assert N == expected
    nx, ny = layout_normalisers(layout, d["X"], d["Y"], {"joint_Root": 1e-3})
    jp = layout.input_block("joint_pos").slice
    assert np.isclose(nx.std[jp][0], 1e3 * nx.std[jp][3])  # weighted joint_Root; one std for the block
    assert np.allclose(nx.std[jp][3:], nx.std[jp][3]) and np.isfinite(ny.transform(d["Y"])).all()


@needs_data
def test_pfnn_rotation_targets_are_continuous(bandai1_train):
    """Issue 27: Bandai's right limbs sit at 100-180 degrees from the root frame, so their log-map targets
    (the pre-issue-27 encoding) jump by ~2 pi between frames where they cross 180 degrees although the
    rotation itself moves a few degrees; a net trained on them learned a blur of the two and flipped the
    right limbs. The forward / up axes move by at most the chord of the rotation's own change."""
    clips = [c for c in bandai1_train if c.labels["content"] in ("walk", "run", "walk-turn-left")][:12]
    sk = clips[0].motion.skeleton
    J = sk.num_joints
    right = np.array([n.endswith("_R") for n in sk.names])
    for enc in ("axes", "logmap"):
        layout = pfnn_layout(sk, rotations=enc)
        blk = layout.output_block("joint_axes" if enc == "axes" else "joint_rot").slice
        moved, coded = [], []
        for c in clips:
            cf = clip_features(c.motion)
            r = pfnn_clip(layout, c.motion, gait_labels(cf.frames, c.motion.fps, c.labels["content"]), cf=cf)
            q = cf.rotations[r["frame"], :J]  # (N, J, 4) the targets' rotations
            moved.append(quat_angle(q[1:], q[:-1]))  # (N - 1, J) radians the rotation itself turned
            y = r["Y"][:, blk].astype(np.float64).reshape(len(q), J, -1, 3)  # (N, J, 1 | 2, 3)
            coded.append(np.linalg.norm(np.diff(y, axis=0), axis=-1).max(-1))  # (N - 1, J) largest vector change
        moved_all, coded_all = np.concatenate(moved), np.concatenate(coded)
        assert moved_all.max() < np.radians(60)  # real motion: no joint turns more than 60 degrees in a frame
        if enc == "axes":  # |R a - R' a| = 2 sin(angle / 2) at most, for the unit axes a
            assert (coded_all <= 2 * np.sin(moved_all / 2) + 1e-5).all()
        else:  # the cause of the flips, still in old checkpoints
            assert coded_all[:, right].max() > np.pi


@needs_data
def test_pfnn_encode_decode_reproduces_next_frame(bandai1_train):
    clip = next(c for c in bandai1_train if c.labels["content"] == "walk-left")
    layout, cf, gid, rows = _pfnn_rows(clip)
    m, fr, i = clip.motion, cf.frames, rows["frame"]
    out = pfnn_decode(layout, rows["Y"].astype(np.float32), fr[i])
    rot, pos = local_pose(m.skeleton, out.pose.rotations, out.pose.positions, fr[i])
    _, gp = m.skeleton.forward_kinematics(rot, pos)
    _, gp0 = m.global_transforms()
    assert np.abs(gp - gp0[i]).max() < POS_TOL  # local rotations via FK give the frame's global positions
    assert np.abs(out.next_frame.position - fr.position[i + 1]).max() < POS_TOL
    assert np.abs(wrap_angle(out.next_frame.yaw - fr.yaw[i + 1])).max() < ROT_TOL
    fut = i[:, None] + 1 + np.arange(6) * 5
    assert np.abs(out.future.positions - fr.position[fut]).max() < POS_TOL
    # the decoded pose is the previous pose of the next row: the runtime loop needs no re-framing
    jp, jv = layout.input_block("joint_pos").slice, layout.input_block("joint_vel").slice
    assert np.abs(out.pose.positions[:-1].reshape(len(i) - 1, -1) - rows["X"][1:, jp]).max() < POS_TOL
    assert np.abs(out.pose.velocities[:-1].reshape(len(i) - 1, -1) - rows["X"][1:, jv]).max() < POS_TOL
    # runtime encode of one character state == the dataset row
    k = 7
    ti = i[k] + trajectory_offsets(30.0)
    traj = Trajectory(fr.position[ti], fr.forward[ti], np.eye(3)[gid[ti]])
    x = pfnn_encode(layout, fr[i[k]], traj, Pose(out.pose.positions[k - 1], out.pose.velocities[k - 1]))
    assert np.abs(x - rows["X"][k]).max() < POS_TOL


@needs_data
def test_pfnn_trajectory_columns_match_a_direct_computation(bandai1_train):
    clip = next(c for c in bandai1_train if c.labels["content"] == "walk")
    layout, cf, _, rows = _pfnn_rows(clip)
    k = 20
    i = rows["frame"][k]
    _, gp = clip.motion.global_transforms()
    fwd = cf.frames.forward[i]
    left = np.cross([0.0, 1.0, 0.0], fwd)  # root-frame +X is the character's left: up x forward
    d = gp[i + trajectory_offsets(30.0), 1] - gp[i, 1]
    x = rows["X"][k]
    assert np.allclose(x[layout.input_block("traj_pos_x").slice], d @ left, atol=1e-9)
    assert np.allclose(x[layout.input_block("traj_pos_z").slice], d @ fwd, atol=1e-9)
    hips_prev = x[layout.input_block("joint_pos").slice].reshape(-1, 3)[1]
    assert np.isclose(hips_prev[1], gp[i - 1, 1, 1]) and np.allclose(hips_prev[[0, 2]], 0, atol=1e-9)


@needs_data
def test_gaits_walk_and_run(bandai1_train):
    from motioncore.data import load

    clips = load("bandai2", "train", progress=False)
    for content, gait in (("walk", "walk"), ("walk-turn-left", "walk"), ("run", "run")):
        for c in [c for c in clips if c.labels["content"] == content][:5]:
            cf = clip_features(c.motion)
            g = gait_labels(cf.frames, 30.0, content)
            assert (g == GAITS.index(gait)).mean() > 0.95, c.name
    bow = next(c for c in bandai1_train if c.labels["content"] == "bow")
    assert (gait_labels(clip_features(bow.motion).frames, 30.0, "bow") == 0).all()
    with pytest.raises(DataError):
        gait_labels(clip_features(bow.motion).frames, 30.0, "kick")


def test_gait_stand_override_and_speed_fallback():
    T, fps = 200, 30.0
    x = np.cumsum(np.r_[np.zeros(60), np.full(70, 120.0), np.full(70, 300.0)] / fps)  # still, 1.2 m/s, 3 m/s
    fr = RootFrame(np.stack([x, np.zeros(T), np.zeros(T)], -1), np.zeros(T))
    g = gait_labels(fr, fps, "walk")
    assert (g[:50] == 0).all() and (g[70:] == 1).all()  # stand while still, then the content's gait
    g = gait_labels(fr, fps, None)
    assert (g[:50] == 0).all() and (g[80:120] == 1).all() and (g[150:] == 2).all()


@needs_data
def test_mann_dataset_and_encode_decode(dog_train):
    clip = next(c for c in dog_train if c.labels["clip_name"] == "dog_walk09")
    m, sk = clip.motion, clip.motion.skeleton
    d = mann_dataset([clip])
    layout = mann_layout(sk)
    N, P = len(d["X"]), sk.num_joints + 4
    assert (layout.d_in, layout.d_out, len(d["gating"])) == (456, 339, 19)
    assert d["X"].shape == (N, 456) and d["Y"].shape == (N, 339) and N == len(sample_range(m.num_frames, 60.0))
    paws = find_paws(sk)
    cf = clip_features(m, per_second=True, sites=paws)
    i = d["frame"]
    out = mann_decode(layout, d["Y"], cf.frames[i])
    J = sk.num_joints
    rot, pos = local_pose(sk, out.pose.rotations[:, :J], out.pose.positions[:, :J], cf.frames[i])
    gq, gp = sk.forward_kinematics(rot, pos)
    assert np.abs(gp - m.global_transforms()[1][i]).max() < POS_TOL
    assert np.abs(quat_angle(rot, m.rotations[i])).max() < 1e-4  # float32 forward/up axes
    paw_world = sk.end_site_positions(gq, gp)[:, list(paws)]
    assert np.abs(cf.frames[i].points_to_local(paw_world) - out.pose.positions[:, J:]).max() < POS_TOL
    assert np.abs(out.next_frame.position - cf.frames.position[i + 1]).max() < POS_TOL
    # gating columns: paw velocities of frame i - 1 (cm/s, root frame i - 1), speed and actions at frame i
    g = d["X"][:, d["gating"]]
    assert np.allclose(g[:, :12], cf.velocities[i - 1, J:].reshape(N, 12), atol=1e-2)
    _, soft = dog_actions(m)
    assert np.allclose(g[:, 13:], soft[i], atol=1e-6)
    # decoded pose feeds the next row unchanged
    x2 = mann_encode(layout, cf.frames[i[1:]], _dog_traj(cf, soft, i[1:]),
                     Pose(out.pose.positions[:-1], out.pose.velocities[:-1], out.pose.rotations[:-1]))
    assert np.abs(x2 - d["X"][1:]).max() < 1e-2  # cm/s velocities of a few hundred: float32 rounding
    assert P == len(layout.joints)


def _dog_traj(cf, soft, i):
    from motioncore.families.mann.features import TRAJ_VEL_SIGMA_S
    from motioncore.features import ground_velocity

    v = ground_velocity(cf.frames, 60.0, TRAJ_VEL_SIGMA_S)
    ti = i[:, None] + trajectory_offsets(60.0)
    return Trajectory(cf.frames.position[ti], cf.frames.forward[ti], soft[ti], v[ti], np.linalg.norm(v[ti], axis=-1))


@needs_data
def test_dog_actions_are_plausible(dog_train):
    share = {}
    for c in dog_train:
        ids, soft = dog_actions(c.motion)
        assert np.allclose(soft.sum(1), 1) and (ids == soft.argmax(1)).all()
        share[c.labels["clip_name"]] = Counter(ACTIONS[k] for k in ids)
        if "jump" not in c.labels["action"]:
            assert share[c.labels["clip_name"]]["jump"] == 0, c.labels["clip_name"]  # jumps only in jump clips
    frac = lambda name, a: share[name][a] / sum(share[name].values())  # noqa: E731
    assert frac("dog_sit00", "sit") > 0.9
    assert frac("dog_run01", "canter") > 0.9
    assert frac("dog_walk04", "trot") > 0.4  # the fast diagonal gait
    assert frac("dog_walk09", "walk") + frac("dog_walk09", "idle") > 0.95
    assert sum(share[n]["jump"] > 0 for n in share if "jump" in n) >= 4
    assert frac("dog_sit_stand00", "idle") > 0.8


def test_mann_clip_on_synthetic_dog_is_finite():
    sk = Skeleton(("Hips", "Spine", "LeftArm", "LeftHand", "RightArm", "RightHand", "LeftUpLeg", "LeftFoot",
                   "RightUpLeg", "RightFoot"), np.array([-1, 0, 1, 2, 1, 4, 0, 6, 0, 8]),
                  np.array([[0, 45, 0], [30, 0, 0], [10, -3, 5], [0, -35, 0], [10, -3, -5], [0, -35, 0],
                            [0, -3, 5], [0, -35, 0], [0, -3, -5], [0, -35, 0]], float),
                  end_sites=((3, (0, -8, 0)), (5, (0, -8, 0)), (7, (0, -8, 0)), (9, (0, -8, 0))))
    m = random_motion(sk, T=180, fps=60.0)
    paws = find_paws(sk)
    ids, soft = dog_actions(m)
    rows = mann_clip(mann_layout(sk), m, soft, paws)
    assert rows["X"].shape == (len(sample_range(180, 60.0)), 12 * 13 + 12 * 14)
    assert np.isfinite(rows["X"]).all() and np.isfinite(rows["Y"]).all()


@needs_data
@pytest.mark.parametrize("name", ["bandai1", "bandai2", "dog"])
def test_whole_train_split_has_no_nan(name):
    from motioncore.data import load

    clips = load(name, "train", progress=False)
    d = mann_dataset(clips) if name == "dog" else pfnn_dataset(clips)
    assert len(d["X"]) > 10000
    for k in ("X", "Y"):
        assert np.isfinite(d[k]).all(), k
    if name != "dog":
        assert np.isfinite(d["phase"]).all() and ((d["phase"] >= 0) & (d["phase"] < 1)).all()


@needs_data
def test_docs_tables_match_the_layouts(bandai1_train, dog_train):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "features.md").read_text()
    assert pfnn_layout(bandai1_train[0].motion.skeleton).markdown() in doc
    layout = mann_layout(dog_train[0].motion.skeleton)
    assert layout.markdown() in doc
    assert "No terrain heights" in doc
