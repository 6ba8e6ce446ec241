"""Any biped under any naming and rest pose (retarget.topology, retarget.mapping): a real Bandai clip renamed into
each common name set and retargeted back onto the original skeleton comes back exact; sides from the pose;
spines of other lengths by chain; a degenerate rest pose (every bone along its parent's +x, LAFAN1-style) is
accepted by retarget and eval infill, the dog is still refused."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from conftest import needs_data
from helpers.rigs import BANDAI, NAME_SETS, renamed

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_apply, quat_between, quat_inv, quat_mul
from motioncore.core.skeleton import Skeleton
from motioncore.retarget import SkeletonMismatch, auto_map, check_map, clip_poses, retarget


def angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle of the rotation between unit quaternions (up to q == -q)."""
    return np.degrees(2 * np.arccos(np.clip(np.abs((a * b).sum(-1)), 0.0, 1.0)))


@pytest.fixture(scope="module")
def walk() -> Motion:
    from motioncore.data import load

    clip = next(c for c in load("bandai2", "test", progress=False) if "walk" in c.name)
    return clip.motion


def assert_same(out: Motion, ref: Motion, tol_deg: float = 0.01) -> float:
    """Every joint's local rotation within tol at every frame; world positions within 1e-3 cm. The worst angle."""
    assert out.skeleton.names == ref.skeleton.names and out.num_frames == ref.num_frames
    worst = float(angle_deg(out.rotations, ref.rotations).max())
    assert worst < tol_deg, worst
    np.testing.assert_allclose(out.global_transforms()[1], ref.global_transforms()[1], atol=1e-3)
    return worst


# ------------------------------------------------------------------------------------- name sets
@needs_data
@pytest.mark.parametrize("name_set", sorted(NAME_SETS))
def test_each_name_set_retargets_back_exactly(walk, name_set):
    src = renamed(walk, NAME_SETS[name_set])
    t0 = time.perf_counter()
    jm = auto_map(src.skeleton, walk.skeleton, source_poses=clip_poses(src), target_poses=clip_poses(walk))
    took = time.perf_counter() - t0
    assert jm.unmapped == () and len(jm.pairs) == 22, jm.unmapped
    assert jm.pairs == {n: NAME_SETS[name_set][n] for n in BANDAI}
    assert jm.sides_from == "pose"
    out = retarget(src, walk.skeleton, check_map(jm, src.skeleton, walk.skeleton, source_poses=clip_poses(src)))
    worst = assert_same(out, walk)
    print(f"{name_set}: 22/22 joints, worst {worst:.2e} deg, map {took * 1e3:.1f} ms")


@needs_data
def test_helper_bones_beside_the_body_are_left_alone(walk):
    """Unreal's mannequin carries IK helpers under its root (ik_foot_root -> ik_foot_l/r, ik_hand_root ->
    ik_hand_gun -> ik_hand_l/r) and twist bones on its limbs: the root is no hips, the pelvis is."""
    ue = renamed(walk, NAME_SETS["unreal"])
    sk = ue.skeleton
    extra = [("ik_foot_root", "root"), ("ik_foot_l", "ik_foot_root"), ("ik_foot_r", "ik_foot_root"),
             ("ik_hand_root", "root"), ("ik_hand_gun", "ik_hand_root"), ("ik_hand_l", "ik_hand_gun"),
             ("ik_hand_r", "ik_hand_gun"), ("upperarm_twist_01_l", "upperarm_l"), ("thigh_twist_01_r", "thigh_r")]
    names = list(sk.names) + [n for n, _ in extra]
    parents = list(sk.parents) + [names.index(p) for _, p in extra]
    off = np.concatenate([sk.offsets, np.tile([[5.0, 1.0, 0.0]], (len(extra), 1))])
    big = Skeleton(tuple(names), np.array(parents), off)
    T = ue.num_frames
    q = np.concatenate([ue.rotations, np.tile([1.0, 0, 0, 0], (T, len(extra), 1))], 1)
    pos = np.concatenate([ue.positions, np.broadcast_to(off[22:], (T, len(extra), 3))], 1)
    src = Motion(big, q, pos, ue.fps, ue.name)
    jm = auto_map(big, walk.skeleton, source_poses=clip_poses(src), target_poses=clip_poses(walk))
    assert jm.pairs == {n: NAME_SETS["unreal"][n] for n in BANDAI}
    assert_same(retarget(src, walk.skeleton, jm), walk)


@needs_data
def test_sides_come_from_the_pose_not_the_names(walk):
    """Left and right swapped in the names (the left leg called 'Right...'): the map follows the body."""
    swap = {n: n[:-1] + {"L": "R", "R": "L"}[n[-1]] if n[-2:] in ("_L", "_R") else n for n in BANDAI}
    src = renamed(walk, NAME_SETS["lafan1"] | {k: NAME_SETS["lafan1"][swap[k]] for k in BANDAI})
    jm = auto_map(src.skeleton, walk.skeleton, source_poses=clip_poses(src), target_poses=clip_poses(walk))
    assert jm.pairs["Foot_L"] == "RightFoot" and jm.pairs["Hand_R"] == "LeftHand" and jm.sides_from == "pose"
    assert_same(retarget(src, walk.skeleton, jm), walk)


def test_names_break_ties_when_the_pose_cannot_tell():
    """A rest pose with straight legs and no toes gives no forward: the names decide."""
    names = ["Hips", "Spine", "Chest", "Neck", "Head", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
             "RightShoulder", "RightArm", "RightForeArm", "RightHand", "LeftUpLeg", "LeftLeg", "LeftFoot",
             "RightUpLeg", "RightLeg", "RightFoot"]
    parents = [-1, 0, 1, 2, 3, 2, 5, 6, 7, 2, 9, 10, 11, 0, 13, 14, 0, 16, 17]
    off = [(0, 95, 0), (0, 12, 0), (0, 15, 0), (0, 18, 0), (0, 9, 0), (4, 14, 0), (13, 0, 0), (27, 0, 0), (24, 0, 0),
           (-4, 14, 0), (-13, 0, 0), (-27, 0, 0), (-24, 0, 0), (-9, -6, 0), (0, -42, 0), (0, -41, 0), (9, -6, 0),
           (0, -42, 0), (0, -41, 0)]   # "Left" placed at -x: only the names can say which is which
    sk = Skeleton(tuple(names), np.array(parents), np.array(off, float))
    jm = auto_map(sk, sk)
    assert jm.sides_from == "names" and jm.pairs["LeftFoot"] == "LeftFoot" and jm.pairs["RightHand"] == "RightHand"


# ------------------------------------------------------------------------------------- spines by chain
def _three_spine(m: Motion) -> Motion:
    """``m`` with Spine -> Chest split in two at its middle by a joint of identity rotation (world motion
    unchanged); the new middle joint is named 'Chest' and the old Chest 'UpperChest', so names would pair
    them wrongly."""
    sk = m.skeleton
    at = sk.index("Chest")
    names = list(sk.names[:at]) + ["Chest", "UpperChest"] + list(sk.names[at + 1:])
    parents = [p + (p >= at) for p in sk.parents[:at]] + [sk.parents[at], at] + [
        p + (p >= at) for p in sk.parents[at + 1:]]
    off = np.insert(sk.offsets, at, sk.offsets[at] / 2, axis=0)
    off[at + 1] = sk.offsets[at] / 2
    chans = sk.channels[:at] + (sk.channels[at],) + sk.channels[at:]
    q = np.insert(m.rotations, at, [1.0, 0, 0, 0], axis=1)
    pos = np.insert(m.positions, at, m.positions[:, at] / 2, axis=1)
    pos[:, at + 1] = m.positions[:, at] / 2
    new = Skeleton(tuple(names), np.array(parents), off, chans, ())
    return Motion(new, q, pos, m.fps, m.name)


@needs_data
def test_spines_of_two_and_three_bones_map_by_chain(walk):
    three = _three_spine(walk)
    same = [three.skeleton.index("UpperChest" if n == "Chest" else n) for n in BANDAI]
    np.testing.assert_allclose(three.global_transforms()[1][:, same],
                               walk.global_transforms()[1], atol=1e-9)   # the same motion
    down = auto_map(three.skeleton, walk.skeleton, source_poses=clip_poses(three))      # 3 bones onto 2
    assert down.pairs["Chest"] == "UpperChest" and down.pairs["Spine"] == "Spine" and down.unmapped == ()
    assert_same(retarget(three, walk.skeleton, down), walk)
    up = auto_map(walk.skeleton, three.skeleton, source_poses=clip_poses(walk))          # 2 bones onto 3
    assert up.pairs["UpperChest"] == "Chest" and up.pairs["Spine"] == "Spine" and up.unmapped == ("Chest",)
    assert_same(retarget(walk, three.skeleton, up), three)


# ------------------------------------------------------------------------------------- degenerate rest
def degenerate_rest(m: Motion) -> Motion:
    """``m`` re-expressed in joint frames where every joint's first child lies along its local +x (LAFAN1's
    rest pose: the rotations alone stand the body up), Euler channels ZYX. Per joint j a constant frame
    change C_j: offsets o'_j = C_p^-1 o_j, rotations q'_j = C_p^-1 q_j C_j; the world motion is identical."""
    sk = m.skeleton
    J = sk.num_joints
    C = np.tile([1.0, 0, 0, 0], (J, 1))
    for j in range(J):
        kids = sk.children(j)
        if kids and np.linalg.norm(sk.offsets[kids[0]]) > 1e-9:
            C[j] = quat_between(np.array([1.0, 0, 0]), sk.offsets[kids[0]] / np.linalg.norm(sk.offsets[kids[0]]))
    Cp = np.array([C[p] if p >= 0 else [1.0, 0, 0, 0] for p in sk.parents])
    off = quat_apply(quat_inv(Cp), sk.offsets)
    q = quat_mul(quat_mul(quat_inv(Cp)[None], m.rotations), C[None])
    pos = quat_apply(quat_inv(Cp)[None], m.positions)
    chans = tuple(tuple(c for c in ch if "position" in c) + ("Zrotation", "Yrotation", "Xrotation")
                  for ch in sk.channels)
    new = Skeleton(sk.names, sk.parents, off, chans, tuple((j, tuple(quat_apply(quat_inv(C[j]), np.array(o))))
                                                           for j, o in sk.end_sites))
    return Motion(new, q, pos, m.fps, m.name)


@needs_data
def test_a_degenerate_rest_pose_is_read_from_the_motion(walk):
    lafan = renamed(degenerate_rest(walk), NAME_SETS["lafan1"])
    sk = lafan.skeleton
    np.testing.assert_allclose(lafan.global_transforms()[1], walk.global_transforms()[1], atol=1e-6)
    along_x = [j for j in range(sk.num_joints) if len(sk.children(j)) == 1]
    for j in along_x:   # every single child's offset on its parent's +x
        o = sk.offsets[sk.children(j)[0]]
        assert np.allclose(o[1:], 0, atol=1e-9) and o[0] > 0
    jm = auto_map(sk, walk.skeleton, source_poses=clip_poses(lafan))
    assert jm.unmapped == ()
    with pytest.raises(SkeletonMismatch, match="another shape"):   # the rest pose alone says "not a biped"
        check_map(jm, sk, walk.skeleton)
    check_map(jm, sk, walk.skeleton, source_poses=clip_poses(lafan))   # its frames say biped
    out = retarget(lafan, walk.skeleton, jm)
    # every bone keeps its direction, so every joint its place (the free twist of the leaves may differ)
    np.testing.assert_allclose(out.global_transforms()[1], walk.global_transforms()[1], atol=1e-3)


@needs_data
def test_retarget_and_eval_infill_accept_a_degenerate_rest_and_refuse_the_dog(walk, tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.data import load
    from motioncore.io.bvh import read_bvh, write_bvh

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "lafan_like.bvh", renamed(degenerate_rest(walk), NAME_SETS["lafan1"]))
    write_bvh(tmp_path / "bandai.bvh", walk)
    assert main(["retarget", str(src), "--target", str(tmp_path / "bandai.bvh"), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    out = read_bvh(tmp_path / "out" / "lafan_like.bvh")
    np.testing.assert_allclose(out.global_transforms()[1], walk.global_transforms()[1], atol=0.05)  # BVH: 6 digits
    assert json.loads((tmp_path / "out" / "report.json").read_text())["unmapped"] == {}

    assert main(["eval", "infill", "--data", str(src / "*.bvh"), "--model", "infill-body", "--quiet",
                 "--out", str(tmp_path / "eval")]) == 0
    capsys.readouterr()

    dog = tmp_path / "dog"
    dog.mkdir()
    write_bvh(dog / "dog.bvh", load("dog", progress=False)[0].motion.slice(0, 300))
    code = main(["retarget", str(dog), "--target", str(tmp_path / "bandai.bvh"), "--out", str(tmp_path / "dogout"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "another shape" in err and "quadruped" in err, err
    assert main(["eval", "infill", "--data", str(dog / "*.bvh"), "--model", "infill-body", "--quiet"]) == 2
    assert "another shape" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- nothing left in silence
@needs_data
def test_retarget_names_unmapped_joints_and_toes_below_the_floor(walk, tmp_path, capsys):
    """CMU 08_01 (subject 08, a walk) onto Bandai: joint_Root has no source joint (held at rest) and the toes go
    below the floor (height 0); both are printed and listed per file in report.json."""
    from motioncore.cli.main import main
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    clip = next(c for c in load("cmu", progress=False) if c.name == "08_01").motion.slice(0, 240)
    write_bvh(src / "08_01.bvh", clip)
    write_bvh(tmp_path / "bandai.bvh", walk)
    assert main(["retarget", str(src), "--target", str(tmp_path / "bandai.bvh"), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "1 file(s) left 1 target joint(s) unmapped, held at rest: joint_Root" in err, err
    assert "Toes_L" in err and "below the floor" in err, err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    key = str(src / "08_01.bvh")
    assert rep["unmapped"] == {key: ["joint_Root"]}
    low = rep["below_ground"][key]
    assert 2.0 < low["Toes_L"] < 6.0 and 2.0 < low["Toes_R"] < 6.0, low   # measured 4.5 and 4.6 cm (full clip)
