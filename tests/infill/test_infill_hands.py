"""The deterministic hand in-fill (``infill-hands``, families.hands.fill / hands_gate): the smooth basis, Bezier
parity, keys kept, the left hand by mirroring, the gate and Learn This Action on real ManipNet takes."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.rotations import quat_angle, quat_conj, quat_mul, quat_to_axis_angle
from motioncore.families.hands import fill as hf
from motioncore.families.hands import gate as hg

pytestmark = pytest.mark.usefixtures("one_thread")


def test_basis_is_zero_with_zero_velocity_at_the_keys():
    for n in (5, 34, 90):
        b = hf.gap_basis(n, closed=True)
        # continued to the key frames (s = 0 and 1) the curves and their slopes vanish: O(s^2) near the keys
        s = 1.0 / (n + 1)
        assert np.abs(b[0]).max() < 4 * (np.pi * s) ** 2 * hf.K_BASIS
        assert np.abs(b[-1]).max() < 4 * (np.pi * s) ** 2 * hf.K_BASIS
        o = hf.gap_basis(n, closed=False)
        assert np.abs(o[0]).max() < (np.pi * hf.K_BASIS / (2 * n)) ** 2 + 1e-12
        assert np.linalg.matrix_rank(b) == hf.K_BASIS and np.linalg.matrix_rank(o) == hf.K_BASIS
    assert hf.finger_gaps(np.array([1, 1, 0, 0, 0, 1, 0, 0], bool)) == [(2, 5, True), (6, 8, False)]
    assert hf.finger_gaps(np.array([0, 0, 1, 0, 1], bool)) == []  # before the first key, or 1 frame: Bezier


@needs_data
def test_per_clip_bezier_matches_the_eval_batched_one():
    from motioncore.data import load
    from motioncore.families.anyorder.evaluate_hands import TASKS, bezier_channels, hand_keys

    clip = load("manipnet-right", "test", fps=30.0, progress=False)[0]
    q = clip.motion.rotations[100:140]
    keys = hand_keys(TASKS["wrist-every-10"](), tuple(clip.motion.skeleton.names), 0)[:, :17]
    fast = bezier_channels(q[None], keys)[0]
    slow = hf.bezier_fingers(q, keys)
    assert quat_angle(fast, slow).max() < 1e-9


def _window(side: str = "right", start: int = 300, length: int = 40):
    from motioncore.data import load
    from motioncore.families.anyorder.evaluate_hands import TASKS, hand_keys

    clip = load(f"manipnet-{side}", "test", fps=30.0, progress=False)[0]
    m = clip.motion
    sl = slice(start, start + length)
    keys = hand_keys(TASKS["wrist-every-10"](), tuple(m.skeleton.names), 0)
    obj = (clip.extras["object_rotations"][sl], clip.extras["object_positions"][sl])
    return m.rotations[sl], m.positions[sl, 0], keys, obj


@needs_data
def test_bundled_fill_keeps_keys_and_is_a_smooth_correction_of_bezier():
    from motioncore.infill import fill_clip
    from motioncore.models.checkpoint import load_tensors
    from motioncore.models.registry import load_model, resolve

    model, meta = load_model("infill-hands")
    tensors, _ = load_tensors(resolve("infill-hands"))
    assert all(str(t.dtype) == "torch.float16" for t in tensors.values())
    assert "ManipNet" in meta["training_data"] and "CC BY-NC" in meta["licence"] and meta["kind"] == "infill-hands"
    assert meta["validation"]["takes"] and not {"mug3", "teapot3"} & set(meta["validation"]["takes"])
    q, root, keys, obj = _window()
    out = fill_clip(model, meta, q, root, keys, object_track=obj, n_samples=2)
    base = fill_clip(model, meta, q, root, keys, object_track=obj, residual=0.0)
    assert np.array_equal(out.rotations[0], out.rotations[1])  # deterministic
    k = keys[:, :17]
    assert np.array_equal(out.rotations[0][k], q[k]) and np.array_equal(out.root[0][keys[:, 17]], root[keys[:, 17]])
    assert quat_angle(base.rotations[0], hf.bezier_fingers(q, k)).max() < 1e-9  # weight 0: Blender's Bezier
    (a, b, closed), = hf.finger_gaps(k[:, 1:].all(1))
    delta = quat_to_axis_angle(quat_mul(quat_conj(base.rotations[0][a:b, 1:]), out.rotations[0][a:b, 1:]))
    basis = hf.gap_basis(b - a, closed)
    d = delta.reshape(b - a, -1)
    assert np.abs(d).max() > 1e-4  # the model corrects something ...
    assert np.abs(basis @ hf.project(d, basis) - d).max() < 1e-5  # ... only along the smooth basis curves
    moved = np.degrees(quat_angle(out.rotations[0], base.rotations[0]))
    assert moved[a - 1].max() < 1e-6 and moved[a].max() < 0.2 * moved[a:b].max()  # eases out of the key


@needs_data
def test_left_hand_by_mirroring_equals_filling_its_mirror_image():
    from motioncore.infill import fill_clip, fill_clip_at, mirror_x
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-hands")
    q, root, keys, obj = _window("left")
    out = fill_clip_at(model, meta, q, root, keys, None, mirror=True, object_track=obj)
    mq, mr = mirror_x(q, root)
    ref = fill_clip(model, meta, mq, mr, keys, object_track=mirror_x(*obj))
    back, _ = mirror_x(ref.rotations, ref.root)
    assert quat_angle(out.rotations, back).max() < 1e-9
    assert np.array_equal(out.rotations[0][keys[:, :17]], q[keys[:, :17]])


@needs_data
def test_pseudo_gaps_come_only_from_keyed_frames_and_the_gate_weighs_a_bad_correction_down():
    import torch

    from motioncore.data import load
    from motioncore.families.anyorder.evaluate_hands import TASKS, hand_keys
    from motioncore.models.registry import load_model

    clip = load("manipnet-right", "test", fps=30.0, progress=False)[1]
    m = clip.motion
    free = np.zeros(m.num_frames, bool)
    free[500:900] = True
    shape = hg.gap_shapes(hand_keys(TASKS["wrist-every-10"](), tuple(m.skeleton.names), 0))[0]
    assert shape == (34, True, 10)
    gaps = hg.pseudo_gaps(free, shape, stride=4)
    assert gaps and all(free[a - 1:b + 1].all() for a, b, _ in gaps)
    keys = np.zeros((m.num_frames, 18), bool)
    keys[free] = True
    obj = (clip.extras["object_rotations"], clip.extras["object_positions"])
    ex = hg.gap_examples(m.rotations, m.positions[:, 0], keys, gaps, shape[2], obj)
    assert len(ex) == len(gaps)
    junk = m.rotations.copy()   # frames without keys are never read: scrambling them changes nothing
    junk[~free] = np.random.default_rng(0).normal(size=junk[~free].shape)
    pos = m.positions[:, 0].copy()
    pos[~free] = 9.0
    ex2 = hg.gap_examples(junk, pos, keys, gaps, shape[2], obj)
    assert all(np.array_equal(e["x"], f["x"]) and np.array_equal(e["c"], f["c"]) for e, f in zip(ex, ex2))
    model, meta = load_model("infill-hands")
    bad, _ = load_model("infill-hands")
    with torch.no_grad():
        bad.out.bias.add_(0.3 * torch.sign(torch.randn(bad.out.bias.shape, generator=torch.Generator().manual_seed(0))))
    gate = hg.fit_gate(bad, ex)
    assert set(gate) == {34} and gate[34] <= 0.1
    bezier = hg.gated_error(bad, ex, {34: 0.0})
    assert hg.gated_error(bad, ex, gate) <= bezier < hg.gated_error(bad, ex, {34: 1.0})
    # Learn This Action from the bad map: the fine-tuned copy fills the held-out pseudo-gaps better than it
    net, g, report = hg.learn_take(bad, ex, seconds=3.0)
    assert report["steps"] > 0 and report["held"] and report["fit"]
    assert report["held_error_adapted"] < hg.gated_error(bad, hg.split_examples(ex)[1], {34: 1.0})
    json.dumps(report)  # the report is JSON-ready


@needs_data
def test_adapt_folds_never_cut_pseudo_gaps_from_scored_windows():
    from motioncore.families.hands.evaluate import fold_windows

    starts = np.arange(0, 960, 20)
    folds = fold_windows(starts, 40, 1000)
    assert sum(len(w) for w, _ in folds) >= len(starts) - 2
    for win, free in folds:
        assert win.size
        for s in starts[win]:
            assert not free[s:s + 40].any()
        assert free.sum() >= 400


@needs_data
def test_eval_hands_cli_per_take_json_and_baselines_match_the_window_reference(tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.core.rotations import quat_angle
    from motioncore.data import lafan1_windows, load
    from motioncore.families.anyorder.evaluate_hands import TASKS, bezier_channels, hand_keys
    from motioncore.families.anyorder.model_elements import body_joints
    from motioncore.infill import interp_channels

    out = tmp_path / "hands.json"
    assert main(["eval", "hands", "--task", "wrist-every-10", "--threads", "1", "--quiet", "--json", str(out)]) == 0
    r = json.loads(out.read_text())["wrist-every-10"]
    s = r["summary"]
    assert {"model", "interp", "bezier", "model_no_object", "object_worth_interval"} <= set(s)
    assert set(r["takes"]) == {"mug3", "teapot3"} and s["windows"] == 96
    for v in (s, *r["takes"].values()):
        lo, hi = v["model_interval"]
        assert lo <= v["model"] <= hi
    # the baselines, as families.anyorder.evaluate_hands computes them on its re-framed windows
    clips = load("manipnet-right", "test", fps=30.0, progress=False)
    task = TASKS["wrist-every-10"]()
    w = lafan1_windows(clips, task.window, task.stride, body=body_joints(clips[0].motion.skeleton))
    keys = hand_keys(task, tuple(clips[0].motion.skeleton.names), 0)
    fill = ~keys[:, :17]
    fill[:, 0] = False
    iq, _ = interp_channels(w.rotations, w.positions[:, :, 0], keys)
    bq = bezier_channels(w.rotations, keys)
    assert abs(np.degrees(quat_angle(iq, w.rotations))[:, fill].mean() - s["interp"]) < 1e-6
    assert abs(np.degrees(quat_angle(bq, w.rotations))[:, fill].mean() - s["bezier"]) < 1e-6
    assert "mug3" in capsys.readouterr().out and (tmp_path / "hands.png").stat().st_size > 1000
