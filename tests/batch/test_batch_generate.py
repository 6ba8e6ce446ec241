"""``motioncore batch generate``: path files in, BVH out (atomic, resumable, report.json); a bad file is
reported and the batch goes on; the same per-file function as Ray tasks gives the same files. Also
``batch infill`` under Ray."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data

from motioncore.batch.generate import run_batch_generate
from motioncore.io.bvh import read_bvh

HAVE_RAY = importlib.util.find_spec("ray") is not None
CLI = [sys.executable, "-m", "motioncore.cli.main"]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def paths(tmp_path: Path) -> Path:
    src = tmp_path / "paths"
    (src / "day2").mkdir(parents=True)
    (src / "straight.json").write_text(json.dumps({"points": [[0, 0], [0, 2]]}))
    (src / "day2" / "turn_run.json").write_text(json.dumps({"points": [[0, 0], [1, 2], [3, 3]], "gait": "run",
                                                            "speed": 3.0}))
    (src / "broken.json").write_text('{"points": [[0, 0]')   # not JSON
    (src / "bad_gait.json").write_text(json.dumps({"points": [[0, 0], [0, 2]], "gait": "moonwalk"}))
    return src


def test_batch_generate_writes_reports_and_resumes(paths: Path, tmp_path: Path, one_thread) -> None:
    out = tmp_path / "out"
    rep = run_batch_generate(str(paths), str(out), progress=False)
    assert rep["counts"] == {"total": 4, "ok": 2, "skipped": 0, "failed": 2, "not_run": 0}
    errs = {Path(e["file"]).name: e for e in rep["errors"]}
    assert errs["broken.json"]["stage"] == "read" and "not valid JSON" in errs["broken.json"]["error"]
    assert errs["bad_gait.json"]["stage"] == "model" and "moonwalk" in errs["bad_gait.json"]["error"]
    for name in ("straight", "turn_run"):
        m = read_bvh(out / f"{name}.bvh")
        assert m.num_frames > 30 and m.skeleton.num_joints == 22 and np.isfinite(m.rotations).all()
    ok = {Path(r["file"]).stem: r for r in rep["files"] if r["status"] == "ok"}
    assert ok["straight"]["path_error_cm"] < 10.0 and ok["turn_run"]["path_error_cm"] < 30.0
    assert json.loads((out / "report.json").read_text())["counts"]["ok"] == 2
    assert not list(out.glob(".*tmp"))                                    # no temporaries left
    before = (out / "straight.bvh").read_bytes()
    rep = run_batch_generate(str(paths), str(out), progress=False)          # resumable
    assert rep["counts"]["skipped"] == 2 and (out / "straight.bvh").read_bytes() == before


@pytest.mark.skipif(not HAVE_RAY, reason="ray not installed (the 'scale' extra)")
def test_batch_generate_on_ray_matches_in_process(paths: Path, tmp_path: Path, one_thread) -> None:
    local, remote = tmp_path / "local", tmp_path / "ray"
    run_batch_generate(str(paths), str(local), progress=False)
    r = subprocess.run(CLI + ["batch", "generate", str(paths), "--out", str(remote), "--ray", "--workers", "2",
                              "--chunk", "1", "--quiet"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 1 and "moonwalk" in r.stderr, r.stderr[-2000:]   # the bad files, reported
    for p in local.glob("*.bvh"):
        assert (remote / p.name).read_bytes() == p.read_bytes(), p.name
    rep = json.loads((remote / "report.json").read_text())
    assert rep["run"] == "ray" and rep["chunk"] == 1 and rep["ray_init_s"] > 0 and rep["counts"]["ok"] == 2


@needs_data
@pytest.mark.skipif(not HAVE_RAY, reason="ray not installed (the 'scale' extra)")
def test_batch_infill_on_ray_matches_in_process(tmp_path: Path, one_thread) -> None:
    from motioncore.batch.infill import run_batch_infill
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    src = tmp_path / "src"
    src.mkdir()
    for c in load("bandai", "test", fps=30, progress=False)[:2]:
        m = c.motion.slice(0, 60)
        m.rotations[20:30] = m.rotations[19]          # a frozen capture: 10 frames equal to frame 19
        m.positions[20:30] = m.positions[19]
        write_bvh(src / f"{c.name}.bvh", m)
    local = run_batch_infill(str(src), str(tmp_path / "local"), frozen=5, progress=False)
    remote = run_batch_infill(str(src), str(tmp_path / "ray"), frozen=5, progress=False, use_ray=True, workers=2,
                              chunk=1)
    assert local["counts"]["ok"] == remote["counts"]["ok"] == 2 and remote["mode"] == "ray"
    for p in (tmp_path / "local").glob("*.bvh"):
        assert (tmp_path / "ray" / p.name).read_bytes() == p.read_bytes(), p.name


def test_scripts_entry_points_run_the_batch_jobs(tmp_path: Path) -> None:
    src = tmp_path / "paths"
    src.mkdir()
    (src / "a.json").write_text(json.dumps({"points": [[0, 0], [0, 1.5]]}))
    root = Path(__file__).resolve().parents[2] / "scripts"
    r = subprocess.run([sys.executable, str(root / "batch_generate.py"), str(src), "--out", str(tmp_path / "out"),
                        "--quiet"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and (tmp_path / "out" / "a.bvh").exists(), r.stderr[-2000:]
    for script in ("batch_infill.py", "batch_retarget.py"):
        h = subprocess.run([sys.executable, str(root / script), "--help"], capture_output=True, text=True, timeout=120)
        assert h.returncode == 0 and "--out" in h.stdout, script
