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
    assert main(["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    rep = json.loads((out / "report.json").read_text())
    assert rep["counts"]["ok"] == 1 and rep["counts"]["failed"] == 1
    [e] = rep["errors"]
    assert e["stage"] == "map" and e["file"].endswith("dog.bvh") and "\n" not in e["error"]
    assert "unmapped: joint_Root, Chest, Toes_L, Toes_R" in e["error"] and "--map" in e["error"]
    assert e["error"] in err
    assert (out / "walk.bvh").is_file() and not (out / "dog.bvh").exists()


def test_retarget_refuses_unknown_names_until_a_bone_map_is_given_and_reuses_it(tmp_path, capsys):
    import json

    from motioncore.io.bvh import read_bvh, write_bvh

    target = body_clip()
    names = [f"bone_{i:02d}" for i in range(target.skeleton.num_joints)]
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "renamed.bvh", body_clip(names))
    write_bvh(tmp_path / "target.bvh", target)
    out = tmp_path / "out"
    argv = ["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "only 0 of 22 target joints found; unmapped: joint_Root, Hips," in err
    assert not (out / "renamed.bvh").exists()
    bone_map = tmp_path / "map.json"   # the add-on's form: {target joint: source joint}
    bone_map.write_text(json.dumps(dict(zip(target.skeleton.names, names, strict=True))))
    assert main(argv + ["--map", str(bone_map)]) == 0
    moved = read_bvh(out / "renamed.bvh")
    assert list(moved.skeleton.names) == list(target.skeleton.names)
    write_bvh(src / "renamed2.bvh", body_clip(names))   # a later run into the same folder, without --map
    capsys.readouterr()
    assert main(argv) == 0
    assert "using the bone map saved by an earlier run" in capsys.readouterr().err
    assert (out / "renamed2.bvh").is_file()
