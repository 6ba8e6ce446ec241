"""Bad inputs (issue 17): every bad input a pipeline TD can give the CLI and the batch jobs gets one line naming the
argument, exit 2 and nothing written, before any work; errors during work are reported per file; no
traceback reaches the user. One test (or parameter) per row of the issue's table."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from motioncore.cli import main as cli_main

pytestmark = pytest.mark.usefixtures("one_thread")
BODY = Path(__file__).resolve().parents[2] / "src" / "motioncore" / "checkpoints" / "anyorder-body.json"


# ---------------------------------------------------------------------------------------------- helpers
def main(argv: list[str]) -> int:
    """The command's exit code, whether argparse exits (bad syntax, ranges) or the command returns."""
    try:
        return cli_main.main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def body_clip(frames: int = 40, seed: int = 0):
    """A small clip on the bundled body model's skeleton (22 joints, 30 fps): rest pose plus small noise."""
    from motioncore.core.motion import Motion
    from motioncore.core.rotations import axis_angle_to_quat
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton.from_dict(json.loads(BODY.read_text())["skeleton"])
    rng = np.random.default_rng(seed)
    aa = np.cumsum(rng.normal(0, 0.01, (frames, sk.num_joints, 3)), 0)
    pos = np.repeat(sk.offsets[None], frames, 0)
    pos[:, 1, 2] += np.linspace(0, 50, frames)
    return Motion(sk, axis_angle_to_quat(aa), pos, 30.0, "clip")


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    for i, name in enumerate(("walk", "run")):
        write_bvh(src / f"{name}.bvh", body_clip(40, i))
    return src


@pytest.fixture
def paths(tmp_path: Path) -> Path:
    src = tmp_path / "paths"
    src.mkdir()
    (src / "straight.json").write_text(json.dumps({"points": [[0, 0], [0, 1]]}))
    return src


def snapshot(root: Path) -> dict[str, float]:
    """Every file and folder under ``root`` with its mtime (nothing written = equal snapshots)."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("motioncore: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


@contextlib.contextmanager
def tmpfs(where: Path, size: str, readonly: bool = False):
    """A small tmpfs at ``where`` (Linux, as root); skips the test where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        if readonly:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def retarget_argv(src: Path, out: Path) -> list[str]:
    return ["retarget", str(src), "--target", str(src / "walk.bvh"), "--out", str(out), "--quiet"]


COMMANDS = {  # command -> argv given the clips folder, the paths folder and --out
    "generate": lambda c, p, o: ["generate", "pfnn-biped", "--path", str(p / "straight.json"), "--out",
                                 str(o / "walk.bvh"), "--threads", "1"],
    "demo": lambda c, p, o: ["demo", "--out", str(o), "--threads", "1"],
    "retarget": lambda c, p, o: retarget_argv(c, o),
    "batch infill": lambda c, p, o: ["batch", "infill", str(c), "--out", str(o), "--frozen", "3", "--quiet"],
    "batch generate": lambda c, p, o: ["batch", "generate", str(p), "--out", str(o), "--quiet"],
}


# ---------------------------------------------------------------------------------------------- rows
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_out_is_an_existing_file(cmd, clips, paths, tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("not a folder")
    before = snapshot(tmp_path)
    assert main(COMMANDS[cmd](clips, paths, f)) == 2
    one_line_error(capsys, "--out", "is an existing file; expected a folder")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_read_only_output_folder_stops_before_any_work(cmd, clips, paths, tmp_path, capsys):
    with tmpfs(tmp_path / "ro", "1m", readonly=True) as ro:
        before = snapshot(tmp_path)
        assert main(COMMANDS[cmd](clips, paths, ro / "out")) == 2
        one_line_error(capsys, "--out", "not writable (Read-only file system)")
        assert snapshot(tmp_path) == before


def test_out_may_not_be_an_input(clips, capsys):
    assert main(["batch", "infill", str(clips), "--out", str(clips), "--frozen", "3"]) == 2
    one_line_error(capsys, "--out", "is an input")


def test_gap_key_may_be_the_file_name(clips, tmp_path, capsys):
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"walk.bvh": [[10, 20]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(clips), "--out", str(out), "--gaps", str(gaps), "--quiet"]) == 0
    rep = json.loads((out / "report.json").read_text())
    by = {Path(r["file"]).stem: r for r in rep["files"]}
    assert by["walk"]["gaps"] == [[10, 20]] and by["walk"]["frames_filled"] == 10
    assert by["run"]["frames_filled"] == 0 and rep["status"] == "finished"


@pytest.mark.parametrize("argv,needles", [
    (["batch", "infill", "{c}", "--out", "{o}", "--frozen", "3", "--model", "mann-dog"],
     ["--model mann-dog: a model of kind mann (task controller); this command needs an in-filling model "
      "(kind anyorder or infill-body or infill-hands, e.g. anyorder-body, anyorder-hands, infill-body"]),
    (["batch", "generate", "{p}", "--out", "{o}", "--mode", "bogus"], ["argument --mode: invalid choice: 'bogus'"]),
    (["batch", "generate", "{p}", "--out", "{o}", "--model", "mann-dog", "--mode", "cubic"],
     ["--mode cubic: mann checkpoints run in ['outputs', 'weights']"]),
    (["batch", "generate", "{p}", "--out", "{o}", "--model", "anyorder-body"],
     ["--model anyorder-body: a model of kind anyorder (task infill); this command needs a path-controller model"]),
    (["eval", "hands", "--every", "0"], ["argument --every: expected a positive integer, got '0'"]),
    (["train", "pfnn", "--epochs", "0"], ["argument --epochs: expected a positive integer, got '0'"]),
    (["train", "pfnn", "--data", "bogus", "--out", "{o}"], ["--data bogus: no such registered set; registered: bandai"]),
    (["train", "pfnn", "--config", "/missing.json", "--out", "{o}"], ["--config /missing.json: No such file or directory"]),
    (["generate", "pfnn-biped", "--path", "{p}/straight.json", "--out", "{o}/w.bvh", "--threads", "0"],
     ["argument --threads: expected a positive integer, got '0'"]),
    (["batch", "infill", "{c}", "--out", "{o}", "--frozen", "-1"], ["argument --frozen: expected an integer >= 0, got '-1'"]),
    (["batch", "infill", "{c}", "--out", "{o}", "--frozen", "3", "--model", "{t}/notes.txt"],
     ["notes.txt: not a checkpoint (a checkpoint is NAME.json with NAME.safetensors beside it"]),
    (["generate", "{t}/notes.txt", "--path", "{p}/straight.json", "--out", "{o}/w.bvh"], ["notes.txt: not a checkpoint"]),
    (["eval", "infill", "--model", "mann-dog", "--out", "{o}"], ["--model mann-dog: a model of kind mann"]),
    (["data", "list", "bogus"], ["unknown set(s) ['bogus']"]),
])
def test_bad_arguments_one_line_exit_2_nothing_written(argv, needles, clips, paths, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("my notes, not a model\n")
    out = tmp_path / "out"
    argv = [a.format(c=clips, p=paths, o=out, t=tmp_path) for a in argv]
    before = snapshot(tmp_path)
    assert main(argv) == 2
    one_line_error(capsys, *needles)
    assert snapshot(tmp_path) == before


def zero_frame_bvh(path: Path) -> Path:
    from motioncore.io.bvh import write_bvh

    write_bvh(path, body_clip(3))
    text = path.read_text()
    head = text[:text.index("Frames:")]
    path.write_text(head + "Frames: 0\nFrame Time: 0.0333333\n")
    return path


def test_a_zero_frame_bvh_is_invalid(clips, tmp_path, capsys):
    from motioncore.errors import BVHError
    from motioncore.io.bvh import read_bvh

    empty = zero_frame_bvh(clips / "empty.bvh")
    with pytest.raises(BVHError, match=r"empty.bvh:\d+: Frames: 0: the clip has no frames"):
        read_bvh(empty)
    assert main(["bvh", "roundtrip", str(empty)]) == 1
    assert "ERROR:" in capsys.readouterr().out
    for cmd in (retarget_argv(clips, tmp_path / "r"),
                ["batch", "infill", str(clips), "--out", str(tmp_path / "i"), "--frozen", "3", "--quiet"]):
        assert main(cmd) == 1
        out = Path(cmd[cmd.index("--out") + 1])
        rep = json.loads((out / "report.json").read_text())
        (e,) = rep["errors"]
        assert e["stage"] == "read" and "the clip has no frames" in e["error"]
        assert not (out / "empty.bvh").exists() and (out / "walk.bvh").exists()
        assert "failed [read]" in capsys.readouterr().err


def test_a_binary_file_named_bvh_names_the_offset_never_the_bytes(clips, tmp_path, capsys):
    junk = bytes(range(256)) * 4
    (clips / "junk.bvh").write_bytes(b"HIERARCHY\n" + junk)
    assert main(["bvh", "roundtrip", str(clips / "junk.bvh")]) == 1
    out = capsys.readouterr().out
    assert "junk.bvh: not a text BVH file: binary byte 0x00 at byte offset 10" in out
    assert all(ch.isprintable() or ch == "\n" for ch in out)
    assert main(retarget_argv(clips, tmp_path / "r")) == 1
    err = capsys.readouterr().err
    assert "byte offset 10" in err and all(ch.isprintable() or ch == "\n" for ch in err)


# ---------------------------------------------------------------------------------------------- report.json
def test_report_is_marked_running_at_the_start_and_replaces_the_previous_one(clips, tmp_path):
    from motioncore.batch.run import run_batch

    out = tmp_path / "out"
    run_batch(clips, clips / "walk.bvh", out, progress=False)
    assert json.loads((out / "report.json").read_text())["status"] == "finished"
    (out / "walk.bvh").unlink()
    (out / ".report.json.stale123.tmp").write_text("{")   # left by a killed run
    seen = []

    def stop(res):  # the report as a killed run would leave it, then a Ctrl-C
        seen.append(json.loads((out / "report.json").read_text()))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(clips, clips / "walk.bvh", out, progress=False, on_result=stop)
    assert seen[0]["status"] == "running" and seen[0]["finished"] is None and "counts" not in seen[0]
    rep = json.loads((out / "report.json").read_text())
    assert rep["status"] == "interrupted" and rep["interrupted"] is True
    assert not list(out.glob(".*.tmp"))


def test_sigterm_writes_the_report(tmp_path):
    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    clip = body_clip(30)
    for i in range(400):
        write_bvh(src / f"c{i:03d}.bvh", clip)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-m", "motioncore.cli", "retarget", str(src), "--target",
                          str(src / "c000.bvh"), "--out", str(out), "--quiet"], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not list(out.glob("c*.bvh")):  # work has started
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() is not None else ""
        time.sleep(0.01)
    p.terminate()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip().splitlines()[-1] == "motioncore: terminated"
    rep = json.loads((out / "report.json").read_text())
    assert rep["status"] == "interrupted" and rep["counts"]["not_run"] > 0
    assert rep["counts"]["ok"] == len(list(out.glob("c*.bvh")))
    assert not list(out.glob(".*"))


def test_disk_full_reports_the_files_leaves_no_half_file_and_resumes(clips, tmp_path, capsys):
    from motioncore.io.bvh import read_bvh, write_bvh

    for i in range(6):
        write_bvh(clips / f"long{i}.bvh", body_clip(400, i))
    size = (clips / "long0.bvh").stat().st_size
    total = (8 * size + 256 * 1024) // 4096 * 4096   # all 8 outputs fit once the filler is gone
    with tmpfs(tmp_path / "small", str(total)) as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (total - 3 * size - 64 * 1024))   # room for the report and ~2-3 clips
        out = disk / "out"
        assert main(retarget_argv(clips, out)) == 1
        rep = json.loads((out / "report.json").read_text())
        failed = rep["counts"]["failed"]
        assert rep["status"] == "finished" and failed >= 1 and rep["counts"]["ok"] >= 1
        for e in rep["errors"]:
            assert e["stage"] == "write" and "No space left on device" in e["error"]
            assert not (out / Path(e["file"]).name).exists()
        assert not list(out.glob(".*"))                       # no half file, no temporary
        for f in out.glob("*.bvh"):                           # every output whole
            assert read_bvh(f).num_frames == read_bvh(clips / f.name).num_frames
        assert "No space left on device" in capsys.readouterr().err
        filler.unlink()
        assert main(retarget_argv(clips, out)) == 0
        rep = json.loads((out / "report.json").read_text())
        assert rep["counts"] == {"total": 8, "ok": failed, "skipped": 8 - failed, "failed": 0, "not_run": 0}
        assert len(list(out.glob("*.bvh"))) == 8


def test_a_report_that_cannot_be_written_leaves_no_stale_success(clips, tmp_path, capsys):
    with tmpfs(tmp_path / "small", "256k") as disk:
        out = disk / "out"
        out.mkdir()
        (out / "report.json").write_text(json.dumps({"status": "finished", "counts": {"failed": 0}}))
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        assert main(retarget_argv(clips, out)) == 2
        one_line_error(capsys, "cannot write report.json (No space left on device); nothing was processed")
        assert not (out / "report.json").exists() and not list(out.glob("*.bvh"))


def test_unexpected_errors_are_one_line_without_debug(monkeypatch, capsys, tmp_path):
    cli = cli_main

    def boom(args):
        raise OSError(5, "Input/output error")

    parser = cli.build_parser

    def patched():
        p = parser()
        p._subparsers._group_actions[0].choices["models"].set_defaults(func=boom)
        return p

    monkeypatch.setattr(cli, "build_parser", patched)
    assert main(["models"]) == 1
    one_line_error(capsys, "OSError: [Errno 5] Input/output error (run with --debug for the traceback)")
    with pytest.raises(OSError):
        main(["--debug", "models"])


# ---------------------------------------------------------------------------------------------- training
def test_ctrl_c_in_the_first_epoch_saves_the_weights_and_resumes(tmp_path, capsys):
    import torch

    from motioncore.train.loop import TrainConfig, fit

    x = torch.randn(256, 4, generator=torch.Generator().manual_seed(0))
    data = {"x": x, "y": x @ torch.ones(4, 1)}
    calls = {"n": 0}

    def loss(model, b):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return ((model(b["x"]) - b["y"]) ** 2).mean()

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    w0 = model.weight.detach().clone()
    cfg = TrainConfig(epochs=2, batch_size=32, lr=1e-2)
    with pytest.raises(KeyboardInterrupt):
        fit(model, loss, data, data, cfg, tmp_path, progress=False)
    assert "interrupted: saved the weights after 0 full epoch(s)" in capsys.readouterr().out
    from motioncore.models.checkpoint import load_tensors

    tensors, meta = load_tensors(tmp_path / "train.state")
    assert meta["history"] == [] and torch.equal(tensors["model/weight"], model.weight.detach().cpu())
    assert not torch.equal(tensors["model/weight"], w0)   # 4 steps were taken and kept
    resumed = torch.nn.Linear(4, 1)
    hist = fit(resumed, loss, data, data, cfg, tmp_path, progress=False)
    assert [h["epoch"] for h in hist] == [1, 2]


def test_cli_exits_130_on_ctrl_c(monkeypatch, capsys):
    cli = cli_main

    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.build_parser

    def patched():
        p = parser()
        p._subparsers._group_actions[0].choices["train"].set_defaults(func=interrupted)
        return p

    monkeypatch.setattr(cli, "build_parser", patched)
    assert main(["train", "pfnn"]) == 130
    assert capsys.readouterr().err == "motioncore: interrupted\n"


# ---------------------------------------------------------------------------------------------- smaller things
def test_version_help_on_every_option_and_one_error_prefix(capsys):
    import argparse

    from motioncore import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"motioncore {__version__}"
    missing = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, path + [name])
            elif not a.help and path != ["serve"]:   # serve's pass-through arguments: wire/client.py (issue 18)
                missing.append((" ".join(path), a.option_strings or a.dest))

    walk(cli_main.build_parser(), [])
    assert missing == []
    assert main(["bvh", "roundtrip", "--tol", "-1", "x.bvh"]) == 2
    one_line_error(capsys, "bvh roundtrip: argument --tol: expected a number >= 0, got '-1'")


def test_data_list_shows_every_set_unions_included(monkeypatch, capsys):
    import motioncore.data as data
    from motioncore.data import REGISTRY

    monkeypatch.setattr(data, "summary", lambda n: {"name": n, "clips": 1, "train": 1, "test": 0, "frames": 1,
                                                   "fps": 30.0, "joints": 1, "licence": "x"})
    assert main(["data", "list", "--json"]) == 0
    names = [r["name"] for r in json.loads(capsys.readouterr().out)]
    assert names == list(REGISTRY) and "bandai" in names and REGISTRY["bandai"].union


def test_eval_plot_names_follow_json_or_plot(tmp_path):
    import argparse

    from motioncore.cli.evaluate import _plot_path, _safe_stem

    ns = lambda **kw: argparse.Namespace(**{"json": None, "plot": None, "out": str(tmp_path), **kw})  # noqa: E731
    assert _plot_path(ns(json=str(tmp_path / "run7.json")), "x") == tmp_path / "run7.png"
    assert _plot_path(ns(plot=str(tmp_path / "p.png"), json=str(tmp_path / "r.json")), "x") == tmp_path / "p.png"
    assert _plot_path(ns(), "eval_infill_bandai") == tmp_path / "eval_infill_bandai.png"
    assert _safe_stem("clips/*.bvh") == "clips" and _safe_stem("bandai") == "bandai"
    assert _safe_stem("cmu_bvh/0[23]_0[1-4].bvh") == "cmu_bvh_0_23_0_1-4"


def test_user_outputs_take_the_umask_mode(tmp_path):
    from motioncore.cli.controllers import plot_demo
    from motioncore.eval.controllers import write_json

    old = os.umask(0o022)
    try:
        write_json([{"a": 1}], tmp_path / "controllers.json")
        s = {"model": "m", "path_error_cm": 1.0, "path": np.zeros((3, 2)), "root": np.zeros((3, 2)),
             "contacts": np.zeros((3, 4), bool), "fps": 30.0}
        plot_demo({"biped": s}, tmp_path / "demo.png")
    finally:
        os.umask(old)
    for f in ("controllers.json", "demo.png"):
        assert (tmp_path / f).stat().st_mode & 0o777 == 0o644, f


def test_demo_infill_plot(tmp_path):
    from motioncore.cli.controllers import plot_infill

    walk = body_clip(90)
    known = np.zeros(90, bool)
    known[:10] = known[39::30] = known[-1] = True
    noisy = walk.rotations + np.random.default_rng(1).normal(0, 0.01, walk.rotations.shape)
    noisy /= np.linalg.norm(noisy, axis=-1, keepdims=True)
    png = plot_infill(walk, walk.rotations, noisy, known, "anyorder-body", tmp_path / "demo_infill.png")
    assert png.stat().st_size > 20_000
