"""`motioncore retarget` refuses a clip it cannot map (a dog onto a biped, unknown joint names) in one line
per file, and takes, saves and reuses a bone map."""
from __future__ import annotations

import pytest
from helpers.cli import DOG, body_clip, main

pytestmark = pytest.mark.usefixtures("one_thread")


def test_retarget_refuses_a_dog_for_a_biped_target(tmp_path, capsys, raw):
    import json
    import shutil

    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], src / "dog.bvh")
    write_bvh(src / "walk.bvh", body_clip())
    write_bvh(tmp_path / "target.bvh", body_clip())
    out = tmp_path / "out"
    assert main(["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(out), "--quiet"]) == 1   # a file failed
    err = capsys.readouterr().err
    rep = json.loads((out / "report.json").read_text())
    assert rep["counts"]["ok"] == 1 and rep["counts"]["failed"] == 1
    [e] = rep["errors"]
    assert e["stage"] == "map" and e["file"].endswith("dog.bvh") and "\n" not in e["error"]
    assert "another shape" in e["error"] and "unmapped: joint_Root, Toes_L, Toes_R" in e["error"]  # by topology
    assert "--map" in e["error"]
    assert e["error"] in err
    assert (out / "walk.bvh").is_file() and not (out / "dog.bvh").exists()


def test_retarget_maps_unknown_names_by_topology_and_a_bone_map_overrides_and_is_reused(tmp_path, capsys):
    import json

    import numpy as np

    from motioncore.io.bvh import read_bvh, write_bvh

    target = body_clip()
    names = [f"bone_{i:02d}" for i in range(target.skeleton.num_joints)]
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "renamed.bvh", body_clip(names))
    write_bvh(tmp_path / "target.bvh", target)
    argv = ["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--quiet"]
    assert main(argv + ["--out", str(tmp_path / "auto")]) == 0   # names unknown: the hierarchy maps all 22
    assert json.loads((tmp_path / "auto" / "report.json").read_text())["unmapped"] == {}
    np.testing.assert_allclose(read_bvh(tmp_path / "auto" / "renamed.bvh").rotations, target.rotations, atol=1e-5)
    out = tmp_path / "out"
    bone_map = tmp_path / "map.json"   # the add-on's form: {target joint: source joint}; Head from the neck
    bone_map.write_text(json.dumps(dict(zip(target.skeleton.names, names, strict=True)) | {"Head": "bone_04"}))
    assert main(argv + ["--out", str(out), "--map", str(bone_map)]) == 0   # a map over a complete map: its word goes
    moved = read_bvh(out / "renamed.bvh")
    assert list(moved.skeleton.names) == list(target.skeleton.names)
    head, neck = target.skeleton.index("Head"), target.skeleton.index("Neck")
    assert not np.allclose(moved.rotations[:, head], read_bvh(tmp_path / "auto" / "renamed.bvh").rotations[:, head],
                           atol=1e-3)
    assert neck == 4
    write_bvh(src / "renamed2.bvh", body_clip(names))   # a later run into the same folder, without --map
    capsys.readouterr()
    assert main(argv + ["--out", str(out)]) == 0
    assert "using the bone map saved by an earlier run" in capsys.readouterr().err
    assert (out / "renamed2.bvh").is_file()
