"""`motioncore batch infill` on inputs unlike its model: clips on another biped skeleton are filled on their own
skeleton, a dog is refused before any work; clips at another rate come back at their own rate."""
from __future__ import annotations

import pytest
from helpers.cli import DOG, body_clip, main, quat_angle_deg

pytestmark = pytest.mark.usefixtures("one_thread")


def test_batch_infill_fills_clips_on_another_skeleton_and_refuses_a_dog_before_any_work(tmp_path, capsys, raw):
    import json
    import shutil

    from motioncore.io.bvh import read_bvh, write_bvh

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", body_clip())
    write_bvh(src / "renamed.bvh", body_clip(["bone_00", *body_clip().skeleton.names[1:]]))
    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], src / "dog.bvh")
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--frozen", "3", "--quiet"]) == 1   # a file failed
    [e] = json.loads((out / "report.json").read_text())["errors"]
    assert e["stage"] == "map" and e["file"].endswith("dog.bvh") and "another shape" in e["error"]
    assert e["error"] in capsys.readouterr().err
    assert (out / "walk.bvh").is_file() and not (out / "dog.bvh").exists()
    assert read_bvh(out / "renamed.bvh").skeleton.names[0] == "bone_00"   # on its own skeleton


def test_batch_infill_keeps_the_clips_own_rate(tmp_path, capsys):
    """A 60 fps clip with a gap given in its own frames: filled through the model's 30 fps and back, written at
    60 fps with all its frames, every frame outside the gap as it was (byte for byte)."""
    import json

    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh

    c = body_clip(frames=81)
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", Motion(c.skeleton, c.rotations, c.positions, 60.0, "walk"))
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[30, 50]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"), "--quiet"]) == 0
    got, had = read_bvh(out / "walk.bvh"), read_bvh(src / "walk.bvh")
    assert got.fps == 60 and got.num_frames == 81
    [r] = json.loads((out / "report.json").read_text())["files"]
    assert r["gaps"] == [[30, 50]] and r["fps"] == 60
    a, b = (src / "walk.bvh").read_text().splitlines(), (out / "walk.bvh").read_text().splitlines()
    first = next(i for i, line in enumerate(a) if line.startswith("Frame Time")) + 1
    assert [i - first for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y] == list(range(30, 50))
    assert quat_angle_deg(got.rotations[30:50], had.rotations[30:50]).max() > 1e-3   # the gap was filled


def test_batch_infill_keeps_crlf_inputs_byte_for_byte(tmp_path):
    """A BVH with Windows line endings: every line outside the gaps comes back as its own bytes (CRLF kept, the
    filled lines end in CRLF too), and a clip with nothing to fill is copied exactly."""
    import json

    from motioncore.io.bvh import format_bvh, read_bvh

    src = tmp_path / "src"
    src.mkdir()
    text = format_bvh(body_clip(frames=81)).replace("\n", "\r\n").encode()
    (src / "walk.bvh").write_bytes(text)
    (src / "still.bvh").write_bytes(text)
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[30, 45]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(tmp_path / "gaps.json"), "--quiet"]) == 0
    assert (out / "still.bvh").read_bytes() == text
    a, b = text.split(b"\r\n"), (out / "walk.bvh").read_bytes().split(b"\r\n")
    assert len(a) == len(b) and b"\n" not in b"".join(b)
    first = next(i for i, line in enumerate(a) if line.startswith(b"Frame Time")) + 1
    assert [i - first for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y] == list(range(30, 45))
    assert read_bvh(out / "walk.bvh").num_frames == 81
