"""Any-order transformer on real mocap: training recipe, checkpoint metadata, the in-betweening Fill."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.families.anyorder.train import AnyOrderRecipe, train_anyorder_from_args
from motioncore.train.loop import TrainConfig

TINY = dict(data="bandai", d_model=16, n_layers=1, n_heads=2, d_ff=32, num_mixtures=2, window=12, offset=20,
            max_clips=10, max_windows=16, max_val_windows=4)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from motioncore.families.anyorder.train import train_anyorder

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("anyorder")
    model, meta = train_anyorder(AnyOrderRecipe(**TINY), TrainConfig(epochs=1, batch_size=8, threads=1, device="cpu"),
                                 out, progress=False)
    return out / "anyorder", model, meta


@pytest.fixture(scope="module")
def bandai_windows():
    from motioncore.data import lafan1_windows, load

    w = lafan1_windows(load("bandai", "test", fps=30, progress=False)[:3], 20, 40)
    return w.skeleton, w.rotations[:4], w.positions[:4]


def test_recipe_validates():
    with pytest.raises(ValueError, match="data"):
        AnyOrderRecipe(data="dog")
    with pytest.raises(ValueError, match="window"):
        AnyOrderRecipe(window=8)
    assert AnyOrderRecipe(data="manipnet").dataset == "manipnet-right"
    cfg = AnyOrderRecipe(d_model=32, n_heads=2).model_config(22)
    assert cfg["num_channels"] == 23 and cfg["channel_kinds"][-1] == "vec3"


@needs_data
def test_training_writes_a_loadable_checkpoint(trained):
    from motioncore.data import get_spec
    from motioncore.families.anyorder.model import AnyOrderTransformer
    from motioncore.models.registry import load_model

    path, _, meta = trained
    model, m = load_model(path)
    assert isinstance(model, AnyOrderTransformer)
    assert m["kind"] == "anyorder" and m["config"]["num_channels"] == 23 and m["config"]["d_model"] == 16
    assert len(m["skeleton"]["names"]) == 22 and m["fps"] == 30.0
    assert len(m["root_norm"]["mean"]) == 3 and min(m["root_norm"]["std"]) > 0
    spec = get_spec("bandai")
    assert m["licence"] == spec.licence and m["citation"] == spec.citation
    assert "bandai train split" in m["training_data"] and "16 windows" in m["training_data"]
    assert len(m["history"]) == 1 and np.isfinite(m["history"][0]["val_loss"])
    assert m["history"][0]["val_loss"] != 0.0  # a validation set exists
    assert (path.parent / "loss.png").is_file()


def _masked(rot, pos, n_past, n_trans):
    q, p = rot.copy(), pos.copy()
    q[:, n_past:n_past + n_trans] = np.nan  # as evaluate_infill: the fill must not read these
    p[:, n_past:n_past + n_trans] = np.nan
    return q, p


@needs_data
def test_fill_fills_only_the_transition(trained, bandai_windows):
    from motioncore.families.anyorder.evaluate import is_anyorder_checkpoint, load_fill

    path = trained[0]
    sk, rot, pos = bandai_windows
    n_past, n_trans = 10, 5
    end = n_past + n_trans
    assert is_anyorder_checkpoint(path)
    fill = load_fill(path, temperature=0.5, seed=3, batch_size=3)  # two batches of windows
    q_in, p_in = _masked(rot, pos, n_past, n_trans)
    q, p = fill(sk, q_in, p_in, n_past, n_trans)
    assert q.shape == rot.shape and p.shape == pos.shape
    keep = np.ones(rot.shape[1], dtype=bool)
    keep[n_past:end] = False
    np.testing.assert_array_equal(q[:, keep], rot[:, keep])
    np.testing.assert_array_equal(p[:, keep], pos[:, keep])
    assert np.isfinite(q).all() and np.isfinite(p).all()
    np.testing.assert_allclose(np.linalg.norm(q[:, n_past:end], axis=-1), 1.0, atol=1e-6)
    rj = trained[2]["root_joint"]
    assert rj == 1  # Bandai: Hips carries the motion, joint_Root only the re-framing
    other = [j for j in range(sk.num_joints) if j != rj]
    np.testing.assert_array_equal(p[:, n_past:end][:, :, other],
                                  np.broadcast_to(pos[:, n_past - 1:n_past][:, :, other], p[:, n_past:end][:, :, other].shape))
    q2, p2 = load_fill(path, temperature=0.5, seed=3)(sk, q_in, p_in, n_past, n_trans)
    np.testing.assert_array_equal(q, q2)
    np.testing.assert_array_equal(p, p2)
    q3, _ = load_fill(path, temperature=0.5, seed=4)(sk, q_in, p_in, n_past, n_trans)
    assert not np.array_equal(q, q3)


@needs_data
def test_fill_matches_sampling_sample(trained, bandai_windows):
    """The batched fill equals ``sampling.sample`` on one window (temperature 0, bisection, one frame/step)."""
    from motioncore.families.anyorder.evaluate import load_fill
    from motioncore.families.anyorder.model_elements import elements_to_motion, to_elements
    from motioncore.families.anyorder.model_sampling import sample

    path, _, meta = trained
    sk, rot, pos = bandai_windows
    n_past, n_trans = 10, 6
    end = n_past + n_trans
    fill = load_fill(path)
    q, p = fill(sk, *_masked(rot[:, :end + 1], pos[:, :end + 1], n_past, n_trans), n_past, n_trans)
    grid = to_elements(rot[1:2, :end + 1], pos[1:2, :end + 1], meta["root_norm"], meta["root_joint"])[0].to(torch.float64)
    known = torch.ones(end + 1, 23, dtype=torch.bool)
    known[n_past:end] = False
    out = sample(fill.model, grid.to(torch.float32), known, order="bisection", temperature=0.0, k=23)[0]
    sq, sr = elements_to_motion(out.to(torch.float64))
    dots = np.abs((sq[n_past:end].numpy() * q[1, n_past:end]).sum(-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-5)
    root = sr[n_past:end].numpy() * np.asarray(meta["root_norm"]["std"]) + np.asarray(meta["root_norm"]["mean"])
    np.testing.assert_allclose(p[1, n_past:end, meta["root_joint"]], root, atol=1e-4)


@needs_data
def test_fill_runs_in_the_benchmark(trained, bandai_windows):
    from motioncore.eval.baselines import BASELINES
    from motioncore.eval.infill import evaluate_infill
    from motioncore.families.anyorder.evaluate import load_fill

    sk, rot, pos = bandai_windows
    J = sk.num_joints
    res = evaluate_infill({"anyorder": load_fill(trained[0]), **BASELINES}, sk, rot, pos, np.zeros(J * 3),
                          np.ones(J * 3), lengths=(3, 5), progress=False)
    assert all(np.isfinite(v) for m in res.values() for per in m.values() for v in per.values())


@needs_data
def test_skeleton_mismatch_is_a_clear_error(trained):
    from motioncore.families.anyorder.evaluate import load_fill

    sk = Skeleton(("a", "b", "c"), np.array([-1, 0, 1]), np.zeros((3, 3)))
    rot = np.tile(np.array([1.0, 0, 0, 0]), (2, 8, 3, 1))
    with pytest.raises(MotioncoreError, match="22-joint skeleton .* has 3 joints"):
        load_fill(trained[0])(sk, rot, np.zeros((2, 8, 3, 3)), 3, 2)


def test_load_fill_rejects_other_kinds(tmp_path):
    from motioncore.families.anyorder.evaluate import is_anyorder_checkpoint, load_fill
    from motioncore.models.checkpoint import save_model
    from motioncore.models.registry import build

    cfg = {"input_dim": 4, "output_dim": 3, "hidden_dim": 8}
    save_model(tmp_path / "pf", build("pfnn", cfg), "pfnn", cfg, {"training_data": "none", "licence": "none"})
    assert not is_anyorder_checkpoint(tmp_path / "pf") and not is_anyorder_checkpoint(tmp_path / "missing")
    with pytest.raises(MotioncoreError, match="expected 'anyorder'"):
        load_fill(tmp_path / "pf")


@needs_data
def test_train_from_cli_args(tmp_path, capsys):
    args = argparse.Namespace(model="anyorder", data="bandai", epochs=1, batch_size=8, lr=None, device="cpu",
                              threads=1, max_minutes=None, out=str(tmp_path), restart=False, quiet=True, config=None,
                              max_clips=10, d_model=16, n_layers=1, n_heads=2, d_ff=16, num_mixtures=1, window=11,
                              max_windows=8, hidden=None, baseline=False)
    assert train_anyorder_from_args(args) == 0
    assert (tmp_path / "anyorder.safetensors").is_file() and "anyorder (bandai)" in capsys.readouterr().out


@needs_data
def test_manipnet_right_hand_windows():
    """ManipNet has 6 training takes (< 10): validation is the last tenth of each take's windows."""
    from motioncore.families.anyorder.model_elements import root_stats
    from motioncore.families.anyorder.train import build_windows

    w, tr, va, clips = build_windows(AnyOrderRecipe(data="manipnet"), progress=False)
    assert w.skeleton.num_joints == 17 and w.skeleton.names[0] == "WRIST" and w.body.root == 0
    assert len(tr) > 0 and len(va) > 0 and not set(tr) & set(va)
    assert set(w.clip_index[va]) == set(w.clip_index[tr])
    assert np.isfinite(root_stats(w.positions[tr], 0)["std"]).all()
