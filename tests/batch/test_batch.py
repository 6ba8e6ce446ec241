"""Batch retargeting (motioncore.batch.run, `motioncore retarget`): outputs, report, resume, interruption,
inputs untouched, Ray kept optional and matching the in-process run byte for byte."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_data

from motioncore.batch.errors import BatchError
from motioncore.batch.report import REPORT_NAME
from motioncore.batch.run import parse_scale, run_batch
from motioncore.cli.main import main as cli_main
from motioncore.core.motion import Motion
from motioncore.io.bvh import read_bvh, write_bvh

pytestmark = needs_data
HAVE_RAY = importlib.util.find_spec("ray") is not None
CLI = [sys.executable, "-m", "motioncore.cli", "retarget"]


def _trim(m: Motion, n: int, name: str | None = None) -> Motion:
    return Motion(m.skeleton, m.rotations[:n], m.positions[:n], m.fps, name or m.name)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """4 Bandai clips and 2 short CMU clips in src/ (one in a sub-folder), a corrupt file, a CMU target."""
    from motioncore.data import load

    root = tmp_path_factory.mktemp("batch")
    src = root / "src"
    (src / "cmu").mkdir(parents=True)
    cmu, bandai = load("cmu", progress=False), load("bandai2", progress=False)
    write_bvh(root / "target.bvh", _trim(cmu[0].motion, 2, "target"))
    for c in bandai[:4]:
        write_bvh(src / f"{c.name}.bvh", c.motion)
    for c in cmu[1:3]:
        write_bvh(src / "cmu" / f"{c.name}.bvh", _trim(c.motion, 60))
    (src / "corrupt.bvh").write_text("HIERARCHY\nROOT Hips\n{\n\tOFFSET 0 0\n")
    return {"root": root, "src": src, "target": root / "target.bvh", "bandai": bandai, "cmu": cmu}


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _good_names(src: Path) -> set[str]:
    return {p.name for p in src.rglob("*.bvh") if p.name != "corrupt.bvh"}


def test_outputs_report_exit_code_and_inputs_untouched(clips: dict, tmp_path: Path, capsys) -> None:
    before = _hashes(clips["src"])
    out = tmp_path / "out"
    rc = cli_main(["retarget", str(clips["src"]), "--target", str(clips["target"]), "--out", str(out), "--quiet"])
    assert rc == 1  # the corrupt file failed, the rest were written
    assert _hashes(clips["src"]) == before
    assert {p.name for p in out.glob("*.bvh")} == _good_names(clips["src"])  # base names kept, flattened
    target = read_bvh(clips["target"]).skeleton
    for p in clips["src"].rglob("*.bvh"):
        if p.name == "corrupt.bvh":
            continue
        m = read_bvh(out / p.name)
        assert m.skeleton.names == target.names
        assert m.num_frames == read_bvh(p).num_frames
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["counts"] == {"total": 7, "ok": 6, "skipped": 0, "failed": 1, "not_run": 0}
    assert report["interrupted"] is False and report["mode"] == "in-process"
    assert [(Path(e["file"]).name, e["stage"]) for e in report["errors"]] == [("corrupt.bvh", "read")]
    assert "corrupt.bvh:4" in report["errors"][0]["error"]
    assert report["timings"]["wall_s"] > 0 and report["timings"]["files_per_s"] > 0
    assert "failed [read]" in capsys.readouterr().err
    assert not list(out.glob(".*"))  # no temporaries left


def test_resume_skips_finished_outputs(clips: dict, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_batch(clips["src"], clips["target"], out, progress=False)
    missing = sorted(out.glob("*.bvh"))[1]
    missing.unlink()
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.bvh")}
    report = run_batch(clips["src"], clips["target"], out, progress=False)
    assert report["counts"]["ok"] == 1 and report["counts"]["skipped"] == 5 and report["counts"]["failed"] == 1
    assert missing.exists()
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.bvh") if p != missing} == mtimes


def test_interrupt_writes_report_and_rerun_completes(clips: dict, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done: list[dict] = []

    def stop_after_two(res: dict) -> None:
        done.append(res)
        if len(done) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(clips["src"], clips["target"], out, progress=False, on_result=stop_after_two)
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["interrupted"] is True
    assert report["counts"]["ok"] + report["counts"]["failed"] == 2 and report["counts"]["not_run"] == 5
    assert len(list(out.glob("*.bvh"))) == report["counts"]["ok"]
    assert not list(out.glob(".*"))
    report = run_batch(clips["src"], clips["target"], out, progress=False)
    assert {p.name for p in out.glob("*.bvh")} == _good_names(clips["src"])
    assert report["interrupted"] is False and report["counts"]["not_run"] == 0


def test_killed_run_leaves_no_partial_files(clips: dict, tmp_path: Path) -> None:
    src, out = tmp_path / "many", tmp_path / "out"
    src.mkdir()
    for i, c in enumerate(clips["bandai"][:40]):
        write_bvh(src / f"clip{i:03d}.bvh", c.motion)
    args = CLI + [str(src), "--target", str(clips["target"]), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and not list(out.glob("*.bvh")):
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert len(list(out.glob("*.bvh"))) < 40  # killed mid-batch
    for p in out.glob("*.bvh"):  # whatever was written is complete
        assert read_bvh(p).num_frames > 0
    rc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert rc.returncode == 0, rc.stderr
    assert len(list(out.glob("*.bvh"))) == 40
    assert not list(out.glob(".*"))  # stale temporaries of the killed run are cleaned up


def test_plan_stage_name_clash_and_bad_arguments(clips: dict, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    m = clips["bandai"][0].motion
    write_bvh(src / "a" / "take.bvh", m)
    write_bvh(src / "b" / "take.bvh", m)
    report = run_batch(src, clips["target"], tmp_path / "out", progress=False)
    assert report["counts"]["ok"] == 1 and [e["stage"] for e in report["errors"]] == ["plan"]
    with pytest.raises(BatchError, match="source folder"):
        run_batch(src, clips["target"], src, progress=False)
    with pytest.raises(BatchError, match="no .bvh"):
        run_batch(str(tmp_path / "nothing*.bvh"), clips["target"], tmp_path / "o2", progress=False)
    assert parse_scale("legs") == "legs" and parse_scale("none") is None and parse_scale("0.5") == 0.5
    with pytest.raises(BatchError):
        parse_scale("-1")
    # a glob as SRC, a fixed scale and an override file that names an unknown target joint (map stage)
    (tmp_path / "ov.toml").write_text('[map]\nNoSuchJoint = "Hips"\n')
    report = run_batch(str(src / "a" / "*.bvh"), clips["target"], tmp_path / "o3", progress=False, scale="1.0",
                       overrides=tmp_path / "ov.toml")
    assert [e["stage"] for e in report["errors"]] == ["map"] and "NoSuchJoint" in report["errors"][0]["error"]


def test_without_ray_flag_ray_is_never_imported(clips: dict, tmp_path: Path) -> None:
    code = ("import sys; from motioncore.cli.main import main; "
            f"rc = main(['retarget', {str(clips['src'])!r}, '--target', {str(clips['target'])!r}, "
            f"'--out', {str(tmp_path / 'out')!r}, '--quiet']); print(rc, 'ray' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split()[-2:] == ["1", "False"], r.stderr


def test_missing_ray_names_the_scale_extra(clips: dict, tmp_path: Path) -> None:
    code = ("import sys; sys.modules['ray'] = None; from motioncore.cli.main import main; "
            f"sys.exit(main(['retarget', {str(clips['src'])!r}, '--target', {str(clips['target'])!r}, "
            f"'--out', {str(tmp_path / 'out')!r}, '--ray']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "pip install -e '.[scale]'" in r.stderr
    assert not (tmp_path / "out").exists()  # nothing started


@pytest.mark.skipif(not HAVE_RAY, reason="ray not installed (the 'scale' extra)")
def test_ray_run_matches_in_process(clips: dict, tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "ray"
    run_batch(clips["src"], clips["target"], local, progress=False)
    r = subprocess.run(CLI + [str(clips["src"]), "--target", str(clips["target"]), "--out", str(remote),
                              "--ray", "--workers", "2", "--chunk", "2", "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr  # the corrupt file
    assert _hashes(remote).keys() == _hashes(local).keys()
    for p in local.glob("*.bvh"):
        assert (remote / p.name).read_bytes() == p.read_bytes(), p.name
    a, b = (json.loads((d / REPORT_NAME).read_text()) for d in (local, remote))
    assert a["counts"] == b["counts"] and a["errors"] == b["errors"]
    assert b["mode"] == "ray" and b["chunk"] == 2 and b["timings"]["ray_init_s"] > 0
    # resumable under Ray too: a re-run skips everything written
    r = subprocess.run(CLI + [str(clips["src"]), "--target", str(clips["target"]), "--out", str(remote),
                              "--ray", "--workers", "2", "--quiet"], capture_output=True, text=True, timeout=120)
    assert json.loads((remote / REPORT_NAME).read_text())["counts"]["skipped"] == 6


@needs_data
def test_match_model_gives_the_checkpoints_twists_with_the_same_joints(tmp_path: Path) -> None:
    import numpy as np

    from motioncore.data import load
    from motioncore.io.bvh import read_bvh, write_bvh
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve

    src = tmp_path / "src"
    src.mkdir()
    for c in [c for c in load("cmu", progress=False) if c.name in ("02_01", "02_02")]:
        write_bvh(src / f"{c.name}.bvh", c.motion.slice(0, 240))
    bandai = load("bandai", "test", fps=30, progress=False)[0].motion
    write_bvh(tmp_path / "bandai.bvh", bandai.slice(0, 2))
    plain = run_batch(src, tmp_path / "bandai.bvh", tmp_path / "plain", progress=False)
    match = run_batch(src, tmp_path / "bandai.bvh", tmp_path / "match", progress=False, match_model="anyorder-body")
    assert plain["counts"]["ok"] == match["counts"]["ok"] == 2 and match["match_model"] == "anyorder-body"
    ref = np.asarray(read_meta(resolve("anyorder-body"))["convention"]["mean_local_rotations"])
    for name in ("02_01.bvh", "02_02.bvh"):
        a, b = read_bvh(tmp_path / "plain" / name), read_bvh(tmp_path / "match" / name)
        np.testing.assert_allclose(a.global_transforms()[1], b.global_transforms()[1], atol=1e-3)   # same joints
        d = [np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(m.rotations * ref, -1)), 0, 1))).mean() for m in (a, b)]
        assert d[1] < 0.5 * d[0], d
    with pytest.raises(BatchError, match="target's skeleton"):
        run_batch(src, clips_target_cmu(tmp_path), tmp_path / "bad", progress=False, match_model="anyorder-body")


def clips_target_cmu(tmp_path: Path) -> Path:
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    p = tmp_path / "cmu_target.bvh"
    write_bvh(p, load("cmu", progress=False)[0].motion.slice(0, 2))
    return p


def test_fbx_without_bpy_stops_before_any_work_naming_the_extra(clips: dict, tmp_path: Path) -> None:
    code = ("import sys; sys.modules['bpy'] = None; from motioncore.cli.main import main; "
            f"sys.exit(main(['retarget', {str(clips['src'])!r}, '--target', {str(clips['target'])!r}, "
            f"'--out', {str(tmp_path / 'out')!r}, '--format', 'fbx', '--quiet']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "pip install -e '.[blender]'" in r.stderr, r.stderr[-1000:]
    assert not (tmp_path / "out").exists()
