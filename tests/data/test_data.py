"""Registered datasets over the real mocap: counts, labels, clip-level splits, windows, cache."""
from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.kinematics import facing_directions
from motioncore.data import REGISTRY, load, window_starts
from motioncore.data.cache import unpack
from motioncore.data.windows import TEST, TRAIN, lafan1_windows
from motioncore.errors import DataError

# Frame counts from ../shared/mocap/README.md and each SOURCE.md.
EXPECTED = {"bandai1": (174, 31914, 30, 22), "bandai2": (962, 149239, 30, 22), "dog": (46, 96221, 60, 21),
            "manipnet-left": (8, 35372, 120, 17), "manipnet-right": (8, 35372, 120, 17),
            "cmu01-03": (28, 77754, 120, 31), "cmu05-09": (70, 43598, 120, 31), "cmu": (98, 121352, 120, 31)}


@needs_data
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_and_disjoint_splits(name):
    clips = load(name, progress=False)
    n, frames, fps, joints = EXPECTED[name]
    assert len(clips) == n
    assert sum(c.motion.num_frames for c in clips) == frames
    assert {c.motion.fps for c in clips} == {fps}
    assert {c.motion.skeleton.num_joints for c in clips} == {joints}
    train = {c.name for c in clips if c.split == "train"}
    test = {c.name for c in clips if c.split == "test"}
    assert not (train & test) and len(train) + len(test) == n
    assert train and (test or name == "cmu01-03")  # CMU holds out whole subjects, none of 01-03


@needs_data
def test_cmu_holds_out_whole_subjects_on_one_skeleton():
    """Subjects 05 (dance) and 07 (walks) are test, every other subject train; the cmu05-09 conversion (other
    names, ASF units, other rest pose) comes onto the cmu01-03 skeleton with every bone's direction kept."""
    from motioncore.data.cache import data_root
    from motioncore.data.registry import ASF_UNIT_CM, HAHNE_TO_ASF
    from motioncore.io.bvh import read_bvh
    from motioncore.retarget.cmu import hahne_to_asf as cmu_hahne_to_asf

    clips = load("cmu", progress=False)
    subjects = {s: {c.split for c in clips if c.labels["subject"] == s} for s in {c.labels["subject"] for c in clips}}
    assert subjects == {"01": {"train"}, "02": {"train"}, "03": {"train"}, "05": {"test"}, "06": {"train"},
                        "07": {"test"}, "08": {"train"}, "09": {"train"}}
    names = {c.motion.skeleton.names for c in clips}
    assert len(names) == 1 and set(HAHNE_TO_ASF.values()) == set(next(iter(names)))
    raw = read_bvh(unpack(data_root() / "cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz", progress=False)
                   / "cmu_bvh_hahne" / "07_01.bvh")
    conv = cmu_hahne_to_asf(raw, data_root())
    g0 = raw.global_transforms()[1] * ASF_UNIT_CM
    g1 = conv.global_transforms()[1]
    sk = conv.skeleton
    worst = 0.0
    for j in range(1, sk.num_joints):
        a, b = g0[:, j] - g0[:, sk.parents[j]], g1[:, j] - g1[:, sk.parents[j]]
        ok = (np.linalg.norm(a, axis=-1) > 1e-3) & (np.linalg.norm(b, axis=-1) > 1e-3)
        if ok.any():
            c = np.sum(a[ok] * b[ok], -1) / np.linalg.norm(a[ok], axis=-1) / np.linalg.norm(b[ok], axis=-1)
            worst = max(worst, float(np.degrees(np.arccos(np.clip(c, -1, 1))).max()))
    assert worst < 0.01, worst


@needs_data
def test_bandai_labels_and_every_style_held_out():
    clips = load("bandai2", progress=False)
    c = next(c for c in clips if c.name == "dataset-2_walk-turn-left_feminine_005")
    assert (c.labels["content"], c.labels["style"], c.split) == ("walk-turn-left", "feminine", "test")
    for style in {c.labels["style"] for c in clips}:
        assert any(c.split == "test" and c.labels["style"] == style for c in clips), style
    b1 = load("bandai1", progress=False)
    assert {c.labels["content"] for c in b1} >= {"walk", "run", "bow", "kick"}


@needs_data
def test_hands_have_object_pose_and_held_out_takes():
    clips = load("manipnet-right", progress=False)
    assert {c.labels["take"] for c in clips if c.split == "test"} == {"mug3", "teapot3"}
    for c in clips:
        assert c.extras["object_rotations"].shape == (c.motion.num_frames, 4)
        assert np.isfinite(c.extras["object_positions"]).all()


@needs_data
def test_dog_actions_from_clip_names():
    clips = load("dog", progress=False)
    actions = {c.labels["action"] for c in clips}
    assert {"walk", "run", "sit"} <= actions


@needs_data
def test_lafan1_windows_counts_and_framing():
    clips = load("bandai2", "test", progress=False)[:20]
    w = lafan1_windows(clips, *TEST)
    assert len(w) == sum(len(window_starts(c.motion.num_frames, *TEST)) for c in clips)
    assert w.rotations.shape[1:] == (65, 22, 4)
    _, gp = w.skeleton.forward_kinematics(w.rotations, w.positions)
    np.testing.assert_allclose(facing_directions(gp[:, 9], w.body), np.tile([0, 0, 1.0], (len(w), 1)), atol=1e-6)
    np.testing.assert_allclose(gp[:, :, w.body.root, [0, 2]].mean(1), 0, atol=1e-6)
    assert np.all(np.sum(w.rotations[:, 1:] * w.rotations[:, :-1], -1) >= 0)  # no sign flips
    assert list(window_starts(100, *TRAIN)) == [0, 20, 40]


@needs_data
def test_resampled_load():
    clips = load("dog", "test", fps=30.0, progress=False)
    full = load("dog", "test", progress=False)
    assert clips[0].motion.fps == 30.0
    assert abs(clips[0].motion.num_frames - (full[0].motion.num_frames + 1) // 2) <= 1


def test_unknown_dataset_and_split():
    with pytest.raises(DataError, match="unknown dataset"):
        load("nope")
    with pytest.raises(DataError, match="split"):
        load("bandai2", split="val")
    assert "bandai" in REGISTRY and REGISTRY["bandai"].union == ("bandai1", "bandai2")


def _tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:xz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def test_unpack_is_keyed_by_content_and_refuses_escapes(tmp_path, monkeypatch):
    monkeypatch.setenv("MOTIONCORE_CACHE", str(tmp_path / "cache"))
    a = tmp_path / "a.tar.xz"
    _tar(a, {"x/one.txt": b"1"})
    d1 = unpack(a, progress=False)
    assert (d1 / "x" / "one.txt").read_bytes() == b"1"
    assert unpack(a, progress=False) == d1  # cached
    _tar(a, {"x/one.txt": b"2"})
    d2 = unpack(a, progress=False)
    assert d2 != d1 and (d2 / "x" / "one.txt").read_bytes() == b"2"
    _tar(a, {"../evil.txt": b"x"})
    with pytest.raises(DataError, match="outside the destination"):
        unpack(a, progress=False)
    assert not (tmp_path / "cache" / "raw" / "evil.txt").exists()
    assert not any(p.name.startswith(".unpack-") for p in (tmp_path / "cache" / "raw").iterdir())
    with pytest.raises(DataError, match="not found"):
        unpack(tmp_path / "missing.tar.xz", progress=False)
