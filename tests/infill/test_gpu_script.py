"""scripts/gpu_infill_body.sh, the lent GPU's script, as a one-minute dry run on this CPU: from a data pack it
continues training from the bundled weights, exports an fp16 checkpoint that names its device, draws the curve
and runs the server's device test on the same device."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(600), needs_data]


def test_the_gpu_script_dry_run_on_cpu_trains_exports_and_tests_the_server(tmp_path):
    from motioncore.data import load
    from motioncore.data.windows import TEST, lafan1_windows
    from motioncore.families.body.train_pack import load_pack, write_pack

    clips = load("bandai", "test", fps=30, progress=False)[:6]
    ms = [c.motion for c in clips]
    lens = np.array([m.num_frames for m in ms])
    data = {"rotations": np.concatenate([m.rotations for m in ms]).astype(np.float32),
            "positions": np.concatenate([m.positions for m in ms]).astype(np.float32),
            "bounds": np.stack([np.r_[0, lens.cumsum()[:-1]], lens.cumsum()], 1), "source": np.zeros(len(ms), int),
            "skeleton": ms[0].skeleton, "convention": np.tile([1.0, 0, 0, 0], (ms[0].skeleton.num_joints, 1)),
            "describe": "6 Bandai test clips (a test pack)"}
    w = lafan1_windows(clips, *TEST)
    val = {"sets": {"bandai": (w.rotations[:8], w.positions[:8])}, "mean": np.zeros(66), "std": np.ones(66)}
    pack = tmp_path / "pack.npz"
    write_pack(data, val, pack)
    back, vb = load_pack(pack)   # the round trip: rotations to float16, translations exactly
    assert np.abs(back["rotations"] - data["rotations"]).max() < 2e-3
    np.testing.assert_allclose(back["positions"], data["positions"], atol=1e-4)   # rest offsets, once per clip
    assert len(vb["sets"]["bandai"][0]) == 8
    out, run = tmp_path / "out", tmp_path / "run"
    env = {**os.environ, "DEVICE": "cpu", "TOKENS": "512", "PACK": str(pack), "OUT": str(out), "RUN": str(run),
           "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_infill_body.sh"), "0.1"], env=env, capture_output=True,
                       text=True, timeout=540)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in ("infill-body-gpu.safetensors", "infill-body-gpu.json", "curve.png", "train.log", "device.txt",
              "server_device.log"):
        assert (out / f).is_file(), f
    meta = json.loads((out / "infill-body-gpu.json").read_text())
    assert meta["device"].startswith("cpu") and meta["steps"] >= 1 and meta["warm_start"]["from"] == "infill-body"
    assert "1 passed" in (out / "server_device.log").read_text()
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_infill_body.sh"), "0.1"], capture_output=True, text=True,
                       env={**env, "PACK": str(tmp_path / "none.npz")}, timeout=60)
    assert r.returncode == 2 and "no data pack" in r.stderr
