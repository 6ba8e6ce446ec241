"""`motioncore eval hands`: the key layout, the per-channel Interp, and the benchmark on a tiny model."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core.rotations import quat_angle, quat_normalize, quat_slerp
from motioncore.errors import MotioncoreError
from motioncore.families.anyorder.evaluate_hands import FINGERTIPS, HandsTask, hand_keys
from motioncore.infill import interp_channels

pytestmark = pytest.mark.usefixtures("one_thread")
NAMES = ("WRIST", "THUMB_CMC_FE", "THUMB_CMC_AA", "THUMB_MCP_FE", "THUMB_IP_FE", "INDEX_MCP", "INDEX_PIP_FE",
         "INDEX_DIP_FE", "MIDDLE_MCP", "MIDDLE_PIP_FE", "MIDDLE_DIP_FE", "RING_MCP", "RING_PIP_FE", "RING_DIP_FE",
         "PINKY_MCP", "PINKY_PIP_FE", "PINKY_DIP_FE")


def test_keys_are_context_end_and_the_wrist_track():
    k = hand_keys(HandsTask(every=4, context=3, window=14), NAMES, 0)
    assert k.shape == (14, 18)
    assert k[:3].all() and k[13].all()
    wrist = np.flatnonzero(k[3:13, 0]) + 3
    assert wrist.tolist() == [6, 10] and np.array_equal(np.flatnonzero(k[3:13, 17]) + 3, wrist)
    assert not k[3:13, 1:17].any()  # fingers only at the context and the end
    tips = hand_keys(HandsTask(every=4, context=3, window=14, fingertips=True), NAMES, 0)
    assert tips[6, [NAMES.index(n) for n in FINGERTIPS]].all() and not tips[6, 1]
    with pytest.raises(MotioncoreError, match="fingertips"):
        hand_keys(HandsTask(fingertips=True), NAMES[:5], 0)
    with pytest.raises(ValueError, match="window"):
        HandsTask(window=5)


def test_interp_slerps_each_channel_between_its_own_keys():
    rng = np.random.default_rng(0)
    q = quat_normalize(rng.normal(size=(2, 9, 2, 4)))
    root = rng.normal(size=(2, 9, 3))
    keys = np.zeros((9, 3), dtype=bool)
    keys[[0, 8], 0] = True  # joint 0: keys at 0 and 8
    keys[[2, 4], 1] = True  # joint 1: keys at 2 and 4 (held outside)
    keys[[0, 8], 2] = True
    iq, ir = interp_channels(q, root, keys)
    want = quat_slerp(q[:, 0, 0], q[:, 8, 0], np.full(2, 0.25))
    assert quat_angle(iq[:, 2, 0], want).max() < 1e-9
    assert quat_angle(iq[:, 0, 1], q[:, 2, 1]).max() < 1e-9 and quat_angle(iq[:, 8, 1], q[:, 4, 1]).max() < 1e-9
    assert quat_angle(iq[:, 3, 1], quat_slerp(q[:, 2, 1], q[:, 4, 1], np.full(2, 0.5))).max() < 1e-9
    np.testing.assert_allclose(ir[:, 4], 0.5 * (root[:, 0] + root[:, 8]))
    assert quat_angle(iq[:, keys[:, 0]][:, :, 0], q[:, keys[:, 0]][:, :, 0]).max() < 1e-9  # keys kept


@needs_data
def test_benchmark_on_a_tiny_model(tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.families.anyorder.evaluate_hands import evaluate_hands
    from motioncore.families.anyorder.train import AnyOrderRecipe, train_anyorder
    from motioncore.train.loop import TrainConfig

    torch.set_num_threads(1)
    recipe = AnyOrderRecipe(data="manipnet", d_model=16, n_layers=1, n_heads=2, d_ff=32, num_mixtures=2, window=12,
                            max_windows=8, max_val_windows=2, prior=True, track_wrist=True)
    train_anyorder(recipe, TrainConfig(epochs=1, batch_size=4, threads=1, device="cpu"), tmp_path, progress=False)
    ckpt = str(tmp_path / "anyorder.json")
    task = HandsTask(every=3, context=2, window=12)
    res = evaluate_hands(ckpt, task, n_samples=3, max_windows=2, progress=False)
    assert res["windows"] == 2 and res["filled_finger_elements_per_window"] == 16 * 9
    a = res["anyorder"]
    assert 0 < res["interp"]["finger_deg"] < 90 and 0 < a["finger_deg"] < 180 and a["diversity_deg"] > 0
    assert res == evaluate_hands(ckpt, task, n_samples=3, max_windows=2, progress=False)  # seeded
    out = tmp_path / "out"
    assert main(["eval", "hands", "--model", ckpt, "--every", "3", "--window", "12", "--samples", "2",
                 "--max-windows", "1", "--quiet", "--out", str(out), "--json", str(tmp_path / "h.json")]) == 0
    assert "finger error Interp" in capsys.readouterr().out
    assert (tmp_path / "h.png").stat().st_size > 10_000   # the plot follows --json's stem
    assert json.loads((tmp_path / "h.json").read_text())["windows"] == 1
    assert main(["eval", "hands", "--model", ckpt, "--every", "3", "--window", "12", "--samples", "2",
                 "--max-windows", "1", "--quiet", "--out", str(out)]) == 0
    assert (out / "eval_hands_every3.png").stat().st_size > 10_000   # no --json, no --plot: --out/<fixed name>


def test_the_three_tasks_keys():
    from motioncore.families.anyorder.evaluate_hands import TASKS

    a, b, c = (hand_keys(TASKS[t](), NAMES, 0) for t in ("wrist-every-10", "fingers-every-30", "wrist-only"))
    assert np.flatnonzero(a[:, 0]).tolist() == [0, 1, 2, 3, 4, 14, 24, 34, 39]
    assert b[:, 0].all() and b[:, 17].all() and np.flatnonzero(b[:, 5]).tolist() == [0, 1, 2, 3, 4, 34, 64]
    assert c[:, 0].all() and np.flatnonzero(c[:, 5]).tolist() == [0, 1, 2, 3, 4]


def test_bezier_channels_hit_the_keys_and_hold_outside():
    from motioncore.families.anyorder.evaluate_hands import bezier_channels

    rng = np.random.default_rng(0)
    q = quat_normalize(rng.normal(size=(2, 20, 2, 4)))
    keys = np.zeros((20, 3), bool)
    keys[[2, 9, 15], 0] = True
    keys[:3, 1] = True
    b = bezier_channels(q, keys)
    assert quat_angle(b[:, keys[:, :2]], q[:, keys[:, :2]]).max() < 1e-9
    assert quat_angle(b[:, 18, 0], q[:, 15, 0]).max() < 1e-9 and quat_angle(b[:, 10, 1], q[:, 2, 1]).max() < 1e-9


def test_grasp_closings_are_upward_crossings():
    from motioncore.families.anyorder.evaluate_hands import grasp_closings

    curl = np.array([0, 1, 5, 9, 4, 2, 8, 9.0])
    assert grasp_closings(curl, 5.0, 1) == [2, 6] and grasp_closings(curl, 5.0, 4) == [6]
