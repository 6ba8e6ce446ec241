""".fbx and .blend through bpy (motioncore.io.blender), run in the real-Blender venv of
tests/blender/test_blender_real.py (bpy 5.0.1) with motioncore's src on PYTHONPATH: a Bandai clip written to
.blend and .fbx and read back; a retarget batch reading .bvh and .fbx, targeting a .blend, writing .fbx.
Skipped with MOTIONCORE_SKIP_BLENDER=1, like the other real-Blender tests."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import needs_data
from helpers.blender import ROOT, bpy_python

pytestmark = [pytest.mark.timeout(600), pytest.mark.blender]


def _py() -> Path:
    py = bpy_python("5.0.1")
    if subprocess.run([str(py), "-c", "import tqdm"], capture_output=True).returncode:   # the batch's progress bar
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", "tqdm"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    return py


def _run(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([str(_py()), str(ROOT / "tests" / "blender" / script), *args[:-1], args[-1]],
                       capture_output=True, text=True, env=env, timeout=500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(Path(args[-1]).read_text())


@needs_data
def test_blend_and_fbx_round_trip_a_bandai_clip(tmp_path):
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    write_bvh(tmp_path / "in.bvh", load("bandai2", "test")[0].motion.slice(0, 40))
    res = _run("io_roundtrip.py", str(tmp_path / "in.bvh"), str(tmp_path), str(tmp_path / "res.json"))
    assert res[".blend"]["same_layout"] and res[".blend"]["max_pos_err_cm"] < 1e-3, res
    assert res[".fbx"]["same_layout"] and res[".fbx"]["max_pos_err_cm"] < 1e-2, res
    assert res[".blend"]["fps"] == res[".fbx"]["fps"] == 30.0
    assert res[".blend"]["leftovers"] == [] and res[".fbx"]["leftovers"] == []   # atomic: no temporaries


@needs_data
def test_retarget_batch_reads_and_writes_fbx_and_blend(tmp_path):
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    write_bvh(tmp_path / "bandai.bvh", load("bandai2", "test")[0].motion.slice(0, 30))
    cmu = load("cmu", progress=False)[0].motion
    write_bvh(tmp_path / "cmu.bvh", cmu.slice(0, 2))
    (tmp_path / "src").mkdir()
    res = _run("batch_formats.py", str(tmp_path), str(tmp_path / "res.json"))
    assert res["counts"] == {"total": 3, "ok": 2, "skipped": 0, "failed": 1, "not_run": 0}, res
    assert res["errors"][0]["stage"] == "read" and "broken.fbx" in res["errors"][0]["file"]
    assert res["outputs"] == ["as_bvh.fbx", "as_fbx.fbx", "report.json"]
    assert res["joints"] == cmu.skeleton.num_joints and res["frames"] == 30
    assert res["inputs_fbx_vs_bvh_cm"] < 0.01 and res["same_skeleton_out"]   # the same world motion in
    assert res["again"]["skipped"] == 2                      # resumable
