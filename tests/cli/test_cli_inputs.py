"""What a newcomer hits at the command line: a closed stdout, .BVH in any case, a wrong file extension, a
clip on another skeleton for `eval infill`, resampling notes, a path over the length cap, threads, and help
texts that give no unmeasured time."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import needs_data
from helpers.cli import DOG, body_clip, main, src_env, tiny_motion

pytestmark = pytest.mark.usefixtures("one_thread")


def test_closed_stdout_is_quiet():
    """`motioncore models | head -1` where head has already gone: exit 0 or 141, nothing on stderr."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write: every write is EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "motioncore.cli", "models"], stdout=w, stderr=subprocess.PIPE,
                           env=src_env(), text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode in (0, 141), p.stderr
    assert p.stderr == ""


def test_folder_inputs_match_bvh_in_any_case(tmp_path, capsys):
    from motioncore.batch.files import discover
    from motioncore.eval.run import _clips_from_files
    from motioncore.io.bvh import write_bvh

    for name in ("walk.BVH", "run.bvh", "sub/jump.Bvh"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        write_bvh(tmp_path / name, tiny_motion())
    assert [f.name for f in discover(tmp_path)] == ["run.bvh", "jump.Bvh", "walk.BVH"]
    assert len(_clips_from_files(str(tmp_path), progress=False)) == 3    # eval infill --data FOLDER
    assert main(["bvh", "roundtrip", str(tmp_path)]) == 0
    assert "3 files, 0 failed" in capsys.readouterr().out


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

    write_bvh(tmp_path / "walk.bvh", tiny_motion())
    for name in ("rig.json", "walk", "walk.txt"):
        (tmp_path / name).write_text((tmp_path / "walk.bvh").read_text())
    assert main([a.format(d=tmp_path) for a in argv] + ["--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"motioncore: error: {accepted.format(d=tmp_path)}\n"
    assert not (tmp_path / "o").exists()


def test_eval_infill_refuses_a_dog_for_a_biped_model(tmp_path, capsys, raw):
    import shutil

    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], tmp_path / "dog.bvh")
    assert main(["eval", "infill", "--model", "anyorder-body", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()   # a note on the resampling, then the refusal
    assert len(err) == 2 and err[1].startswith("motioncore: error: ") and "dog" in err[1], err
    assert "another shape" in err[1] and not (tmp_path / "o").exists()


def test_eval_infill_says_it_resamples(tmp_path, capsys):
    from motioncore.core.motion import Motion
    from motioncore.eval.run import _clips_from_files
    from motioncore.io.bvh import write_bvh

    c = body_clip(frames=41)
    write_bvh(tmp_path / "a.bvh", Motion(c.skeleton, c.rotations, c.positions, 60.0, "a"))
    write_bvh(tmp_path / "b.bvh", c)
    clips = _clips_from_files(str(tmp_path), progress=False)
    assert [k.motion.fps for k in clips] == [30.0, 30.0] and clips[0].motion.num_frames == 21
    assert capsys.readouterr().err == f"{tmp_path}: resampled 1 of 2 clips from 60 fps to 30 fps first\n"


def test_generate_refuses_a_path_over_the_cap_instead_of_cutting_it(tmp_path, capsys):
    import json

    (tmp_path / "long.json").write_text(json.dumps({"points": [[0, 0], [0, 150]]}))   # 150 m: minutes of walking
    assert main(["generate", "pfnn-biped", "--path", str(tmp_path / "long.json"), "--out", str(tmp_path / "w.bvh"),
                 "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over the 60 s a default length may have; give its length (--frames" in err[0], err
    assert not (tmp_path / "w.bvh").exists()


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
        write_bvh(tmp_path / f"walk{i}.bvh", body_clip(frames=140))
    assert main(["eval", "infill", "--data", str(tmp_path), "--model", "interp", "--lengths", "5", "--threads", "2",
                 "--out", str(tmp_path / "o")]) == 0
    assert torch.get_num_threads() == 2
    assert re.search(r"\d\d:\d\d<\d\d:\d\d", capsys.readouterr().err)   # tqdm's elapsed<remaining: the ETA



@needs_data
def test_data_rig_writes_a_target_for_retarget(tmp_path, capsys):
    """`motioncore data rig bandai bandai_rig.bvh`, the TD quick start's first line: a 22-joint rig that
    `retarget --target` takes; a name that is no set stops with one line, exit 2."""
    from motioncore.io.bvh import read_bvh

    out = tmp_path / "bandai_rig.bvh"
    assert main(["data", "rig", "bandai", str(out)]) == 0
    rig = read_bvh(out)
    assert rig.skeleton.num_joints == 22 and rig.num_frames == 2 and rig.skeleton.names[0] == "joint_Root"
    assert main(["data", "rig", "no-such-set", str(tmp_path / "x.bvh")]) == 2
    assert "unknown set" in capsys.readouterr().err and not (tmp_path / "x.bvh").exists()
