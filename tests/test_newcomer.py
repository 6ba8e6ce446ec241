"""Issue 26: what a newcomer hits (wrong skeletons, threads, bad inputs, case of .BVH, skipped tests,
broken pipes, long paths, resampling). One test (or a few) per item of the issue."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from motioncore.cli import main as cli_main

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    """The command's exit code, whether argparse exits or the command returns."""
    try:
        return cli_main.main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "server")])}


# ---------------------------------------------------------------------------------------------- item 6
def test_closed_stdout_is_quiet():
    """`motioncore models | head -1` where head has already gone: exit 0 or 141, nothing on stderr."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write: every write is EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "motioncore.cli", "models"], stdout=w, stderr=subprocess.PIPE,
                           env=_env(), text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode in (0, 141), p.stderr
    assert p.stderr == ""


# ---------------------------------------------------------------------------------------------- item 4
def _tiny_motion(frames: int = 4, fps: float = 30.0):
    import numpy as np

    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton(("root", "a"), np.array([-1, 0]), np.array([[0, 0, 0], [0, 10, 0]], float))
    rng = np.random.default_rng(0)
    q = rng.normal(size=(frames, 2, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return Motion(sk, q, np.broadcast_to(sk.offsets, (frames, 2, 3)).copy(), fps)


def test_folder_inputs_match_bvh_in_any_case(tmp_path, capsys):
    from motioncore.batch.files import discover
    from motioncore.eval.run import _clips_from_files
    from motioncore.io.bvh import write_bvh

    for name in ("walk.BVH", "run.bvh", "sub/jump.Bvh"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        write_bvh(tmp_path / name, _tiny_motion())
    assert [f.name for f in discover(tmp_path)] == ["run.bvh", "jump.Bvh", "walk.BVH"]
    assert len(_clips_from_files(str(tmp_path), progress=False)) == 3    # eval infill --data FOLDER
    assert main(["bvh", "roundtrip", str(tmp_path)]) == 0
    assert "3 files, 0 failed" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- item 3
@pytest.mark.parametrize("argv, accepted", [
    (["retarget", "{d}/walk.bvh", "--target", "{d}/rig.json", "--out", "{d}/o"], "--target {d}/rig.json: expected "
     "a .bvh, .fbx or .blend file, got '.json'"),
    (["retarget", "{d}/walk", "--target", "{d}/walk.bvh", "--out", "{d}/o"], "SRC {d}/walk: expected a .bvh, .fbx "
     "or .blend file, got no extension"),
    (["batch", "infill", "{d}/walk.txt", "--frozen", "3", "--out", "{d}/o"], "SRC {d}/walk.txt: expected a .bvh, "
     ".fbx or .blend file, got '.txt'"),
    (["eval", "infill", "--data", "{d}/walk.txt", "--out", "{d}/o"], "--data {d}/walk.txt: expected a .bvh file, "
     "got '.txt'"),
])
def test_bad_input_extension_says_what_is_accepted(tmp_path, capsys, argv, accepted):
    from motioncore.io.bvh import write_bvh

    write_bvh(tmp_path / "walk.bvh", _tiny_motion())
    for name in ("rig.json", "walk", "walk.txt"):
        (tmp_path / name).write_text((tmp_path / "walk.bvh").read_text())
    assert main([a.format(d=tmp_path) for a in argv] + ["--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"motioncore: error: {accepted.format(d=tmp_path)}\n"
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------- item 1
BODY = ROOT / "src" / "motioncore" / "checkpoints" / "anyorder-body.json"
DOG = "mann_dog/mann_dog_bvh_46clips.tar.xz"


def _body_clip(names: list[str] | None = None, frames: int = 20):
    """A small walk on the bundled body model's 22-joint skeleton, its joints renamed to ``names``."""
    import json

    import numpy as np

    from motioncore.core.motion import Motion
    from motioncore.core.rotations import axis_angle_to_quat
    from motioncore.core.skeleton import Skeleton

    d = json.loads(BODY.read_text())["skeleton"]
    if names is not None:
        d = {**d, "names": names}
    sk = Skeleton.from_dict(d)
    rng = np.random.default_rng(0)
    pos = np.repeat(sk.offsets[None], frames, 0)
    pos[:, 1, 2] += np.linspace(0, 50, frames)
    return Motion(sk, axis_angle_to_quat(np.cumsum(rng.normal(0, 0.01, (frames, sk.num_joints, 3)), 0)), pos, 30.0)


def test_retarget_refuses_a_dog_for_a_biped_target(tmp_path, capsys, raw):
    import json
    import shutil

    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], src / "dog.bvh")
    write_bvh(src / "walk.bvh", _body_clip())
    write_bvh(tmp_path / "target.bvh", _body_clip())
    out = tmp_path / "out"
    assert main(["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(out), "--quiet"]) == 2
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

    target = _body_clip()
    names = [f"bone_{i:02d}" for i in range(target.skeleton.num_joints)]
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "renamed.bvh", _body_clip(names))
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
    write_bvh(src / "renamed2.bvh", _body_clip(names))   # a later run into the same folder, without --map
    capsys.readouterr()
    assert main(argv + ["--out", str(out)]) == 0
    assert "using the bone map saved by an earlier run" in capsys.readouterr().err
    assert (out / "renamed2.bvh").is_file()


def test_eval_infill_refuses_a_dog_for_a_biped_model(tmp_path, capsys, raw):
    import shutil

    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], tmp_path / "dog.bvh")
    assert main(["eval", "infill", "--model", "anyorder-body", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()   # a note on the resampling, then the refusal
    assert len(err) == 2 and err[1].startswith("motioncore: error: ") and "dog" in err[1], err
    assert "another shape" in err[1] and not (tmp_path / "o").exists()


def test_batch_infill_fills_clips_on_another_skeleton_and_refuses_a_dog_before_any_work(tmp_path, capsys, raw):
    import json
    import shutil

    from motioncore.io.bvh import read_bvh, write_bvh

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", _body_clip())
    write_bvh(src / "renamed.bvh", _body_clip(["bone_00", *_body_clip().skeleton.names[1:]]))
    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], src / "dog.bvh")
    out = tmp_path / "out"
    assert main(["batch", "infill", str(src), "--out", str(out), "--frozen", "3", "--quiet"]) == 2
    [e] = json.loads((out / "report.json").read_text())["errors"]
    assert e["stage"] == "map" and e["file"].endswith("dog.bvh") and "another shape" in e["error"]
    assert e["error"] in capsys.readouterr().err
    assert (out / "walk.bvh").is_file() and not (out / "dog.bvh").exists()
    assert read_bvh(out / "renamed.bvh").skeleton.names[0] == "bone_00"   # on its own skeleton


# ---------------------------------------------------------------------------------------------- item 8
def _quat_angle_deg(a, b):
    import numpy as np

    return np.degrees(2 * np.arccos(np.clip(np.abs((a * b).sum(-1)), 0, 1)))   # q == -q


def test_bvh_resample_round_trip_and_folders(tmp_path, capsys):
    """30 -> 120 -> 30 fps gives the clip back (each 30 fps frame is a 120 fps frame); a folder is mirrored,
    .BVH included."""
    import numpy as np

    from motioncore.io.bvh import read_bvh, write_bvh

    clip = _body_clip(frames=31)
    (tmp_path / "in" / "day2").mkdir(parents=True)
    write_bvh(tmp_path / "in" / "walk.bvh", clip)
    write_bvh(tmp_path / "in" / "day2" / "run.BVH", clip)
    assert main(["bvh", "resample", str(tmp_path / "in"), str(tmp_path / "hi"), "--fps", "120"]) == 0
    hi = read_bvh(tmp_path / "hi" / "day2" / "run.bvh")
    assert hi.fps == 120 and hi.num_frames == 121
    assert main(["bvh", "resample", str(tmp_path / "hi" / "walk.bvh"), str(tmp_path / "back.bvh"), "--fps", "30"]) == 0
    back, orig = read_bvh(tmp_path / "back.bvh"), read_bvh(tmp_path / "in" / "walk.bvh")
    assert back.fps == 30 and back.num_frames == orig.num_frames
    assert _quat_angle_deg(back.rotations, orig.rotations).max() < 1e-3
    assert np.abs(back.positions - orig.positions).max() < 1e-4
    assert "121 frames at 120 fps -> 31 at 30" in capsys.readouterr().out


def test_bvh_resample_is_quaternion_correct(tmp_path):
    """A joint turning 160 deg about a tilted axis between two frames: the frame halfway is the 80 deg
    rotation about that axis (slerp), where interpolating BVH Euler angles is not."""
    import numpy as np

    from motioncore.core.rotations import axis_angle_to_quat
    from motioncore.io.bvh import read_bvh, write_bvh

    m = _tiny_motion(frames=2, fps=10.0)
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    m.rotations[:, 1] = axis_angle_to_quat(np.stack([0 * axis, np.radians(160) * axis]))
    write_bvh(tmp_path / "a.bvh", m)
    assert main(["bvh", "resample", str(tmp_path / "a.bvh"), str(tmp_path / "b.bvh"), "--fps", "20"]) == 0
    mid = read_bvh(tmp_path / "b.bvh").rotations[1, 1]
    assert _quat_angle_deg(mid, axis_angle_to_quat(np.radians(80) * axis)) < 1e-3


def test_bvh_resample_bad_inputs(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("x")
    assert main(["bvh", "resample", str(tmp_path / "a.txt"), str(tmp_path / "b.bvh"), "--fps", "30"]) == 2
    assert capsys.readouterr().err.strip().endswith("expected a .bvh file, got '.txt'")


def test_batch_infill_keeps_the_clips_own_rate(tmp_path, capsys):
    """A 60 fps clip with a gap given in its own frames: filled through the model's 30 fps and back, written at
    60 fps with all its frames, every frame outside the gap as it was (byte for byte)."""
    import json

    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh

    c = _body_clip(frames=81)
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
    assert _quat_angle_deg(got.rotations[30:50], had.rotations[30:50]).max() > 1e-3   # the gap was filled


def test_eval_infill_says_it_resamples(tmp_path, capsys):
    from motioncore.core.motion import Motion
    from motioncore.eval.run import _clips_from_files
    from motioncore.io.bvh import write_bvh

    c = _body_clip(frames=41)
    write_bvh(tmp_path / "a.bvh", Motion(c.skeleton, c.rotations, c.positions, 60.0, "a"))
    write_bvh(tmp_path / "b.bvh", c)
    clips = _clips_from_files(str(tmp_path), progress=False)
    assert [k.motion.fps for k in clips] == [30.0, 30.0] and clips[0].motion.num_frames == 21
    assert capsys.readouterr().err == f"{tmp_path}: resampled 1 of 2 clips from 60 fps to 30 fps first\n"


# ---------------------------------------------------------------------------------------------- item 7
def test_generate_refuses_a_path_over_the_cap_instead_of_cutting_it(tmp_path, capsys):
    import json

    (tmp_path / "long.json").write_text(json.dumps({"points": [[0, 0], [0, 150]]}))   # 150 m: minutes of walking
    assert main(["generate", "pfnn-biped", "--path", str(tmp_path / "long.json"), "--out", str(tmp_path / "w.bvh"),
                 "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over the 60 s a default length may have; give its length (--frames" in err[0], err
    assert not (tmp_path / "w.bvh").exists()


# ---------------------------------------------------------------------------------------------- item 5
def test_cache_follows_motioncore_cache_then_xdg(monkeypatch, tmp_path):
    from motioncore.data.cache import cache_root

    monkeypatch.setenv("MOTIONCORE_CACHE", str(tmp_path / "mc"))
    assert cache_root() == tmp_path / "mc"
    monkeypatch.delenv("MOTIONCORE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "motioncore"


def test_no_test_hard_codes_the_data_cache():
    """Tests find the unpacked mocap through the `raw` fixtures (cache_root(), unpacked on demand)."""
    hits = [f"{f.name}:{i}" for f in sorted((ROOT / "tests").rglob("*.py")) if f.name != "test_newcomer.py"
            for i, line in enumerate(f.read_text().splitlines(), 1)
            if "motioncore/raw" in line or '"motioncore" / "raw"' in line]
    assert hits == []


@pytest.mark.parametrize("reason, status", [("MOTIONCORE_SKIP_BLENDER=1", 0),
                                            ("the archive is not unpacked in the data cache", 1)])
def test_with_the_mocap_present_only_blender_or_gpu_skips_pass(tmp_path, reason, status):
    """The session check of tests/conftest.py, run on a one-test suite beside a copy of it."""
    import shutil

    from motioncore.data import data_root

    if not data_root().is_dir():
        pytest.skip(f"mocap folder {data_root()} absent (set MOTIONCORE_DATA)")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text(f"import pytest\n\n\ndef test_one():\n    pytest.skip({reason!r})\n")
    env = {**_env(), "MOTIONCORE_DATA": str(data_root())}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == status, p.stdout[-2000:] + p.stderr[-2000:]
    assert ("skipped although the mocap is present" in p.stderr) == bool(status)


# ---------------------------------------------------------------------------------------------- item 2
THREADED = (["eval", "infill"], ["eval", "hands"], ["eval", "controllers"], ["train", "pfnn"],
             ["retarget", "s", "--target", "t.bvh", "--out", "o"], ["batch", "infill", "s", "--out", "o"],
             ["batch", "generate", "s", "--out", "o"])


@pytest.mark.parametrize("argv", THREADED, ids=lambda a: " ".join(a[:2]))
def test_heavy_commands_take_threads(argv):
    from motioncore.cli.main import build_parser

    p = build_parser()
    assert p.parse_args(argv + ["--threads", "3"]).threads == 3
    assert p.parse_args(argv).threads in (None, 1, 2)   # train: None = its config's 2


def _walk_help(parser):
    import argparse

    yield parser.format_help()
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from _walk_help(sub)


def test_help_texts_give_no_unmeasured_time_estimates():
    """Every time estimate in a help text says where it was measured, and the heavy evaluations give one."""
    import re

    from motioncore.cli.main import build_parser

    timed = set()
    for text in _walk_help(build_parser()):
        flat = " ".join(text.split())   # argparse wraps lines
        for m in re.finditer(r"~\s*\d+(\.\d+)?\s*(min|minutes|s|h)\b", flat):
            assert "measured on a " in flat[m.start():m.start() + 200], flat[max(0, m.start() - 200):m.end()]
            timed.add(flat.split()[1:3] == ["motioncore", "eval"] and flat.split()[3])
    assert {"infill", "hands", "controllers"} <= timed


def test_eval_infill_threads_and_eta(tmp_path, capsys):
    import re

    import torch

    from motioncore.io.bvh import write_bvh

    for i in range(2):
        write_bvh(tmp_path / f"walk{i}.bvh", _body_clip(frames=140))
    assert main(["eval", "infill", "--data", str(tmp_path), "--model", "interp", "--lengths", "5", "--threads", "2",
                 "--out", str(tmp_path / "o")]) == 0
    assert torch.get_num_threads() == 2
    assert re.search(r"\d\d:\d\d<\d\d:\d\d", capsys.readouterr().err)   # tqdm's elapsed<remaining: the ETA
