"""Tests for motioncore.io.bvh: parsing, Euler conventions, FK, write/read round trips, error messages
and real mocap files (skipped only when the mocap folder is absent)."""
from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_angle
from motioncore.core.skeleton import Skeleton
from motioncore.errors import BVHError
from motioncore.io.bvh import format_bvh, read_bvh, write_bvh
from motioncore.io.bvh_roundtrip import RoundtripResult, roundtrip, roundtrip_main

ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
POS = ("Xposition", "Yposition", "Zposition")
REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("MOTIONCORE_DATA", REPO.parent / "shared" / "mocap"))


def rot(order: str) -> tuple[str, ...]:
    return tuple(f"{a}rotation" for a in order)


def scipy_wxyz(order: str, deg: list[float]) -> np.ndarray:
    return Rotation.from_euler(order, deg, degrees=True).as_quat(scalar_first=True)


def same_rotation(a: np.ndarray, b: np.ndarray, tol: float = 1e-12) -> bool:
    return bool(np.all(quat_angle(a, b) < tol))


# Line numbers matter for the error tests: line 1 is HIERARCHY.
CHAIN = """HIERARCHY
ROOT Hips
{
\tOFFSET 0.0 0.0 0.0
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
\tJOINT Spine
\t{
\t\tOFFSET 0.0 10.0 0.0
\t\tCHANNELS 3 Yrotation Xrotation Zrotation
\t\tJOINT Head
\t\t{
\t\t\tOFFSET 5.0 0.0 0.0
\t\t\tCHANNELS 3 Zrotation Yrotation Xrotation
\t\t\tEnd Site
\t\t\t{
\t\t\t\tOFFSET 0.0 0.0 2.0
\t\t\t}
\t\t}
\t}
}
MOTION
Frames: 3
Frame Time: 0.0333333
1 2 3 90 0 0 90 0 0 0 0 0
1.5 2 3 10 20 30 40 50 60 70 80 -170
2 2 3 0 0 0 0 0 0 0 0 0
"""
# MOTION is line 21, Frames 22, Frame Time 23, frames on lines 24-26.


# ---------------------------------------------------------------------------------------- parsing
def test_parse_chain_structure():
    m = read_bvh(CHAIN)
    s = m.skeleton
    assert s.names == ("Hips", "Spine", "Head")
    assert s.parents.tolist() == [-1, 0, 1]
    np.testing.assert_array_equal(s.offsets, [[0, 0, 0], [0, 10, 0], [5, 0, 0]])
    assert s.channels == (POS + rot("ZXY"), rot("YXZ"), rot("ZYX"))
    assert [s.rotation_order(j) for j in range(3)] == ["ZXY", "YXZ", "ZYX"]
    assert s.end_sites == ((2, (0.0, 0.0, 2.0)),)
    assert m.fps == 30.0 and m.num_frames == 3 and m.name == ""
    assert m.rotations.dtype == np.float64 and m.positions.dtype == np.float64


def test_euler_frames_match_scipy():
    m = read_bvh(CHAIN)
    assert same_rotation(m.rotations[1, 0], scipy_wxyz("ZXY", [10, 20, 30]))
    assert same_rotation(m.rotations[1, 1], scipy_wxyz("YXZ", [40, 50, 60]))
    assert same_rotation(m.rotations[1, 2], scipy_wxyz("ZYX", [70, 80, -170]))
    # positions: root from its channels (they replace the offset), others their offsets
    np.testing.assert_array_equal(m.positions[:, 0], [[1, 2, 3], [1.5, 2, 3], [2, 2, 3]])
    np.testing.assert_array_equal(m.positions[:, 1], np.broadcast_to([0, 10, 0], (3, 3)))


def test_forward_kinematics_hand_computed():
    m = read_bvh(CHAIN)
    gq, gp = m.global_transforms()
    # frame 0: root at (1,2,3) turned 90 deg about Z; Spine turned 90 deg about Y (its first channel).
    # Spine = root + Rz90 (0,10,0) = (-9, 2, 3); Head = Spine + Rz90 Ry90 (5,0,0) = Spine + Rz90 (0,0,-5)
    np.testing.assert_allclose(gp[0], [[1, 2, 3], [-9, 2, 3], [-9, 2, -2]], atol=1e-12)
    # End Site (0,0,2) of Head: Rz90 Ry90 (0,0,2) = Rz90 (2,0,0) = (0,2,0)
    np.testing.assert_allclose(m.skeleton.end_site_positions(gq, gp)[0], [[-9, 4, -2]], atol=1e-12)


def test_position_channels_replace_offset_and_partial_channels():
    text = """HIERARCHY
ROOT r
{
  OFFSET 100 200 300
  CHANNELS 4 Yposition Xrotation Xposition Zrotation
  JOINT c
  {
    OFFSET 1 2 3
    CHANNELS 1 Yrotation
    End Site
    {
      OFFSET 0 1 0
    }
  }
}
MOTION
Frames: 1
Frame Time: 0.01
5 30 7 40 25
"""
    m = read_bvh(text)
    np.testing.assert_array_equal(m.positions[0, 0], [7, 5, 300])  # Z keeps the offset: no Zposition channel
    assert same_rotation(m.rotations[0, 0], scipy_wxyz("XZY", [30, 40, 0]))
    assert same_rotation(m.rotations[0, 1], scipy_wxyz("Y", [25]))
    assert m.fps == 100.0
    back = read_bvh(format_bvh(m))
    assert back.skeleton.channels == m.skeleton.channels
    assert same_rotation(back.rotations, m.rotations, 1e-8)
    np.testing.assert_allclose(back.positions, m.positions, atol=1e-6)


def test_whitespace_crlf_tabs_and_path_source(tmp_path):
    text = CHAIN.replace("Frames: 3", "Frames:\t3").replace("Frame Time: ", "Frame Time:\t")
    text = text.replace("\n", "\r\n").replace(" 2 3 ", "\t 2  3\t") + "\r\n\r\n  \r\n"
    f = tmp_path / "clip_01.bvh"
    f.write_bytes(text.encode())
    m = read_bvh(f)
    ref = read_bvh(CHAIN)
    assert m.name == "clip_01" and read_bvh(str(f), name="x").name == "x"
    np.testing.assert_array_equal(m.rotations, ref.rotations)
    np.testing.assert_array_equal(m.positions, ref.positions)


# ---------------------------------------------------------------------------------------- writing
def random_motion(T: int = 40, seed: int = 0) -> Motion:
    """6 joints, one per Euler order, assorted channel layouts (positions first, last, or none)."""
    layouts = [POS + rot("XYZ"), rot("XZY"), rot("YXZ") + POS, rot("YZX"), POS + rot("ZXY"), rot("ZYX")]
    offsets = np.random.default_rng(seed).normal(size=(6, 3)) * 10
    skel = Skeleton(tuple(f"j{i}" for i in range(6)), np.array([-1, 0, 1, 0, 3, 4]), offsets, tuple(layouts),
                    ((2, (0.0, 1.0, 0.0)),))
    q = Rotation.random(T * 6, random_state=seed).as_quat(scalar_first=True).reshape(T, 6, 4)
    p = np.repeat(skel.offsets[None], T, axis=0)
    p[:, [0, 2, 4]] = np.random.default_rng(seed + 1).normal(size=(T, 3, 3)) * 100
    return Motion(skel, q, p, 60.0, "synthetic")


@pytest.mark.parametrize("precision, rot_tol, pos_tol", [(7, 1e-6, 1e-5), (6, 1.6e-6, 1e-5)])
def test_write_read_roundtrip_all_orders(tmp_path, precision, rot_tol, pos_tol):
    # precision 6 rounds each of 3 angles by <= 5e-7 deg: worst case 1.5e-6 deg, so 1e-6 needs 7 decimals
    m = random_motion()
    f = tmp_path / "out.bvh"
    write_bvh(f, m, precision=precision)
    b = read_bvh(f)
    assert b.skeleton.names == m.skeleton.names and b.skeleton.channels == m.skeleton.channels
    assert b.skeleton.parents.tolist() == m.skeleton.parents.tolist()
    assert b.skeleton.end_sites == m.skeleton.end_sites and b.fps == 60.0
    assert {b.skeleton.rotation_order(j) for j in range(6)} == set(ORDERS)
    assert np.degrees(quat_angle(m.rotations, b.rotations)).max() < rot_tol
    assert np.abs(m.positions - b.positions).max() < pos_tol
    assert [p.name for p in tmp_path.iterdir()] == ["out.bvh"]  # no temporary file left behind


def test_write_non_dfs_joint_order():
    # joints listed breadth first: the file lists them depth first, the data columns must follow
    skel = Skeleton(("root", "a", "b", "a1", "b1"), np.array([-1, 0, 0, 1, 2]), np.arange(15.0).reshape(5, 3),
                    (POS + rot("ZXY"), rot("ZXY"), rot("YXZ"), rot("ZYX"), rot("XYZ")))
    q = Rotation.random(20, random_state=3).as_quat(scalar_first=True).reshape(4, 5, 4)
    p = np.repeat(skel.offsets[None], 4, axis=0)
    m = Motion(skel, q, p, 24.0)
    b = read_bvh(format_bvh(m))
    assert b.skeleton.names == ("root", "a", "a1", "b", "b1")
    idx = [b.skeleton.index(n) for n in skel.names]
    assert np.degrees(quat_angle(q, b.rotations[:, idx])).max() < 2e-6
    gp_a, gp_b = m.global_transforms()[1], b.global_transforms()[1][:, idx]
    np.testing.assert_allclose(gp_a, gp_b, atol=1e-4)


def test_write_is_atomic(tmp_path, monkeypatch):
    f = tmp_path / "keep.bvh"
    f.write_text("old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_bvh(f, random_motion(5))
    assert f.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["keep.bvh"]


def test_roundtrip_and_main(tmp_path, capsys):
    good = tmp_path / "chain.bvh"
    good.write_text(CHAIN)
    r = roundtrip(good)
    assert isinstance(r, RoundtripResult) and (r.frames, r.joints) == (3, 3)
    assert r.max_rot_err_deg < 1e-6 and r.max_pos_err < 1e-6
    assert roundtrip_main([str(good)]) == 0
    bad = tmp_path / "broken.bvh"
    bad.write_text(CHAIN[:CHAIN.index("\t\tJOINT Head")])
    assert roundtrip_main([str(good), str(bad), str(tmp_path / "missing.bvh")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("chain") and out[1].endswith("OK")
    assert any(line.startswith("broken") and "ERROR" in line and "truncated" in line for line in out)
    assert any(line.startswith("missing") and "ERROR" in line for line in out)
    assert out[-1].startswith("3 files, 2 failed")


# ---------------------------------------------------------------------------------------- errors
def lines_replaced(lineno: int, new: str, text: str = CHAIN) -> str:
    """CHAIN with 1-based line ``lineno`` replaced by ``new`` (may hold several lines, or be empty)."""
    lines = text.split("\n")
    lines[lineno - 1:lineno] = new.split("\n") if new else []
    return "\n".join(lines)


def check_error(text: str, line: int, match: str) -> BVHError:
    with pytest.raises(BVHError, match=match) as info:
        read_bvh(text)
    assert info.value.line == line, str(info.value)
    return info.value


R = lines_replaced
MALFORMED = [  # (id, text, line the error must name, regex on the message)
    ("truncated-hierarchy", CHAIN[:CHAIN.index("\t\tJOINT Head")], 9, "truncated.*'Spine' .*not closed"),
    ("missing-motion", CHAIN[:CHAIN.index("MOTION")], 20, "missing MOTION"),
    ("missing-frames", CHAIN[:CHAIN.index("Frames")], 21, "missing 'Frames:'"),
    ("missing-frame-time", CHAIN[:CHAIN.index("Frame Time")], 22, "missing 'Frame Time:'"),
    ("bad-frames-line", R(22, "Frames 3"), 22, "expected 'Frames: N'"),
    ("non-integer-frames", R(22, "Frames: 2.5"), 22, "whole number"),
    ("zero-frame-time", R(23, "Frame Time: 0"), 23, "Frame Time must be a positive"),
    ("negative-frame-time", R(23, "Frame Time: -0.01"), 23, "positive.*'-0.01'"),
    ("fewer-frames", R(26, ""), 26, "only 2 motion lines; frame 3 missing"),
    ("frames-says-more", R(22, "Frames: 5"), 27, "'Frames: 5' .*only 3 motion lines"),
    ("more-frames", R(22, "Frames: 2"), 26, "more motion lines than 'Frames: 2'"),
    ("channels-count", R(9, "\t\tCHANNELS 3 Yrotation Xrotation"), 9, "channel count mismatch: CHANNELS 3"),
    ("unknown-channel", R(9, "\t\tCHANNELS 3 Yrotation Wrotation Zrotation"), 9,
     "unknown channel name 'Wrotation'"),
    ("short-line", R(25, "1.5 2 3 10 20 30 40 50 60 70 80"), 25, "expected 12 .*got 11"),
    ("compensating-lines", R(24, "1 2 3 90 0 0 90 0 0 0 0 0 7\n1.5 2 3 10 20 30 40 50 60 70 80"), 24,
     "expected 12 .*got 13"),
    ("nan", R(25, "1.5 2 3 10 nan 30 40 50 60 70 80 -170"), 25, "non-finite value 'nan'"),
    ("inf", R(25, "1.5 2 3 10 20 30 40 -inf 60 70 80 -170"), 25, "non-finite value '-inf'"),
    ("text-in-data", R(26, "2 2 3 0 0 0 abc 0 0 0 0 0"), 26, "not a number: 'abc'"),
    ("extra-brace", R(19, "\t}\n\t}"), 21, "unbalanced braces: '}' without"),
    ("missing-brace", R(18, ""), 20, "unbalanced braces: 'Hips' .*not closed before MOTION"),
    ("duplicate-joint", R(10, "\t\tJOINT Hips"), 10, "duplicate joint name 'Hips' .first on line 2"),
    ("two-roots", CHAIN.replace("MOTION", "ROOT Other\n{\nOFFSET 0 0 0\nCHANNELS 0\n}\nMOTION"), 21,
     "several ROOTs"),
    ("bad-offset", R(8, "\t\tOFFSET 0.0 ten 0.0"), 8, "OFFSET of 'Spine' needs 3 finite numbers"),
    ("missing-offset", R(8, ""), 18, "'Spine' .line 6. has no OFFSET"),
    ("bad-keyword", R(1, "HIERARCHIE"), 1, "unexpected 'HIERARCHIE'"),
]


@pytest.mark.parametrize("text, line, match", [pytest.param(*c[1:], id=c[0]) for c in MALFORMED])
def test_malformed(text, line, match):
    check_error(text, line, match)


def test_error_names_the_file(tmp_path):
    f = tmp_path / "bad.bvh"
    f.write_text(lines_replaced(25, "1.5 2 3 10 20 30 40 50 60 70 80"))
    err = check_error(str(f), 25, "got 11")
    assert err.path == str(f) and str(err).startswith(f"{f}:25: ")
    # hierarchy errors are cached per header text; the path must still be the file's
    check_error(R(10, "\t\tJOINT Hips"), 10, "duplicate")
    f.write_text(R(10, "\t\tJOINT Hips"))
    assert check_error(str(f), 10, "duplicate").path == str(f)


def test_empty_and_not_bvh():
    check_error("HIERARCHY\n\n", 1, "no ROOT")
    with pytest.raises(FileNotFoundError):
        read_bvh("/nonexistent/clip.bvh")


# ---------------------------------------------------------------------------------------- real data
def first_member(archive: Path, suffix: str) -> str:
    """Text of the first archive member whose name ends with ``suffix`` (streamed: stops there)."""
    with tarfile.open(archive, "r|xz") as tf:
        for info in tf:
            if info.isfile() and info.name.endswith(suffix):
                return tf.extractfile(info).read().decode()  # type: ignore[union-attr]
    raise AssertionError(f"no member *{suffix} in {archive}")


@pytest.fixture(scope="module")
def mocap() -> dict[str, str]:
    if not DATA.is_dir():
        pytest.skip(f"needs the mocap (folder {DATA} absent; set MOTIONCORE_DATA)")
    archives = {
        "bandai": ("bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz", ".bvh"),
        "cmu": ("cmu_01-03/cmu_bvh_converted_subjects_01-03.tar.xz", ".bvh"),
        "dog": ("mann_dog/mann_dog_bvh_46clips.tar.xz", ".bvh"),
        "hand": ("manipnet_hands/manipnet_8takes_hands_objects.tar.xz", "rightHand.bvh"),
    }
    return {key: first_member(DATA / archive, suffix) for key, (archive, suffix) in archives.items()}


@pytest.mark.data
@pytest.mark.parametrize("key, joints, fps, orders", [
    ("bandai", 22, 30.0, {"ZXY"}), ("cmu", 31, 120.0, {"ZYX"}),
    ("dog", 21, 60.0, {"ZXY"}), ("hand", 17, 120.0, {"YXZ"}),
])
def test_real_files_parse_and_roundtrip(mocap, tmp_path, key, joints, fps, orders):
    f = tmp_path / f"{key}.bvh"
    f.write_text(mocap[key])
    m = read_bvh(f)
    s = m.skeleton
    assert s.num_joints == joints and m.fps == fps and m.num_frames > 10
    assert {s.rotation_order(j) for j in range(joints)} == orders
    assert np.isfinite(m.rotations).all() and np.allclose(np.linalg.norm(m.rotations, axis=-1), 1.0)
    r = roundtrip(f)
    assert r.ok(1e-4), r


@pytest.mark.data
def test_real_skeleton_details(mocap):
    bandai, dog, hand = read_bvh(mocap["bandai"]), read_bvh(mocap["dog"]), read_bvh(mocap["hand"])
    assert all(ch == POS + rot("ZXY") for ch in bandai.skeleton.channels)
    assert bandai.skeleton.names[:2] == ("joint_Root", "Hips")
    # Bandai: non-root position channels hold the offsets
    np.testing.assert_allclose(bandai.positions[:, 2:] - bandai.skeleton.offsets[2:], 0.0, atol=1e-4)
    assert len(dog.skeleton.end_sites) == 6 and dog.skeleton.names[0] == "Hips"
    assert hand.skeleton.names[0] == "WRIST" and hand.skeleton.channels[0] == POS + rot("YXZ")
    assert len(hand.skeleton.end_sites) == 5


@pytest.mark.data
def test_real_fk_matches_bvhio(mocap, tmp_path):
    bvhio = pytest.importorskip("bvhio")
    f = tmp_path / "cmu.bvh"
    f.write_text(mocap["cmu"])
    m = read_bvh(f)
    gp = m.global_transforms()[1]
    root = bvhio.readAsHierarchy(str(f))
    for frame in (0, m.num_frames - 1):
        root.loadPose(frame)
        ref = np.array([np.array(root.filter(n)[0].PositionWorld) for n in m.skeleton.names])
        np.testing.assert_allclose(gp[frame], ref, atol=1e-3)  # bvhio computes in float32
