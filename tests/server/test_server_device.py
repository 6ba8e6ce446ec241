"""The body in-fill served on a GPU (``--device cuda``) gives the CPU library's answer. Skips without CUDA;
``scripts/gpu_infill_body.sh`` runs it on a lent GPU (``MOTIONCORE_TEST_DEVICE``, default cuda) against the
checkpoint it trained (``MOTIONCORE_TEST_CHECKPOINT``, default the bundled infill-body); with
``MOTIONCORE_TEST_DEVICE=cpu`` it runs here too (the script's dry run)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from conftest import needs_data, server_process

from motioncore.core.rotations import quat_angle
from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(300), pytest.mark.gpu, needs_data]
DEVICE = os.environ.get("MOTIONCORE_TEST_DEVICE", "cuda")


def test_the_served_body_infill_on_the_device_matches_the_cpu_library(tmp_path):
    from motioncore.data import load
    from motioncore.infill import fill_clip
    from motioncore.models.registry import load_model, resolve

    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("no CUDA device (GPU) on this machine")
    ckpt = os.environ.get("MOTIONCORE_TEST_CHECKPOINT") or str(resolve("infill-body"))
    clip = max(load("bandai", "test", fps=30, progress=False)[:40], key=lambda c: len(c.motion.rotations)).motion
    q, root = clip.rotations[:300].astype(np.float32), clip.positions[:300, 1].astype(np.float32)
    known = np.ones(len(q), bool)
    known[60:75] = known[150:180] = known[240:245] = False
    with server_process(tmp_path, "--no-bundled", "--model", ckpt, "--device", DEVICE) as (_, conn, _), \
            Client(conn, timeout=120) as c:
        assert str(c.hello()["device"]).startswith(DEVICE.split(":")[0])   # the server says where it runs
        info = next(m for m in c.models() if "adapt" in m["tasks"])   # the body in-fill
        r = c.infill_rotations(q, root, known, model=info["name"])
    model, meta = load_model(ckpt, "cpu")
    lib = fill_clip(model, meta, q.astype(np.float64), root.astype(np.float64), known)
    assert [g["rot"] for g in r.content["gate"]] == [g["rot"] for g in lib.gate.summary()]
    assert np.degrees(quat_angle(r.arrays["rotations"][0], lib.rotations[0])).max() < 0.05
    np.testing.assert_array_equal(r.arrays["rotations"][0, known], q[known])
