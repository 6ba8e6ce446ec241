"""A failed In-fill or Learn This Action never reads as a result in the real-Blender benchmarks: the error is
printed instead of a ratio and the script exits non-zero (bench/blender_clips.py, bench/blender_infill.py)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return mod


def test_failure_names_every_way_a_run_is_not_a_result():
    bi = _bench("blender_infill")
    ok = {"reports": ["In-fill: filled 12 gaps"]}
    assert bi.failure(ok) is None
    assert bi.failure({"error": "Traceback ...\nModuleNotFoundError: No module named 'zmq'"}) == \
        "ModuleNotFoundError: No module named 'zmq'"
    assert bi.failure({"reports": ["ERROR: the server is not running"]}) == "ERROR: the server is not running"
    assert "did not finish" in bi.failure({"reports": [""]})
    assert "did not finish" in bi.failure({"reports": ["In-fill: filled 12 gaps"], "adapt_report": None})


def test_blender_clips_prints_the_error_and_exits_1_when_an_infill_failed(tmp_path):
    """The earlier run's files re-read with --table-from (no Blender): one clip whose In-fill failed on a missing
    pyzmq. Before the fix this printed '1.00x Bezier'."""
    clip = {"name": "07_01-15-default", "path": str(tmp_path / "none.bvh"), "subject": "07", "length": 15,
            "mode": "default", "gaps": [[10, 25]], "fps": 120.0, "unit_cm": 2.54 / 0.45}
    (tmp_path / "spec.json").write_text(json.dumps({"clips": [clip]}))
    np.savez(tmp_path / "out.npz", dummy=np.zeros(1))
    (tmp_path / "out.npz.json").write_text(json.dumps(
        {clip["name"]: {"error": "Traceback (most recent call last):\nModuleNotFoundError: No module named 'zmq'",
                        "reports": [], "bones": []}}))
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "blender_clips.py"), "--table-from", str(tmp_path),
                        "--subject", "07", "--adapt", "0"], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'server'}", "PATH": "/usr/bin:/bin"})
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "FAILED" in out and "No module named 'zmq'" in out
    assert "x Bezier" not in out   # no ratio for it
    assert json.loads((tmp_path / "results.json").read_text())[0]["error"].endswith("No module named 'zmq'")
