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
    from motioncore.batch.run import discover
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
