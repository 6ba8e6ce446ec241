"""The shared training loop: it learns, resumes exactly, saves safetensors + JSON state and a plot."""
from __future__ import annotations

import torch

from motioncore.models.checkpoint import CheckpointError, load_state_into, load_tensors, save_model
from motioncore.train.loop import TrainConfig, fit


def _data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return {"x": x, "y": x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1}


def _loss(model, b):
    return torch.nn.functional.mse_loss(model(b["x"]), b["y"])


def test_fit_learns_and_writes_state_and_plot(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    cfg = TrainConfig(epochs=6, batch_size=16, lr=0.2, restart_epochs=3, threads=1)
    hist = fit(model, _loss, _data(), _data(64, 1), cfg, tmp_path, progress=False)
    assert len(hist) == 6 and hist[-1]["val_loss"] < 0.1 * hist[0]["val_loss"]
    assert (tmp_path / "loss.png").stat().st_size > 5000
    tensors, meta = load_tensors(tmp_path / "train.state")
    assert meta["kind"] == "train_state" and len(meta["history"]) == 6


def test_resume_continues_exactly(tmp_path):
    cfg4 = TrainConfig(epochs=4, batch_size=16, lr=1e-2, restart_epochs=2, threads=1)
    torch.manual_seed(0)
    straight = torch.nn.Linear(4, 1)
    fit(straight, _loss, _data(), _data(64, 1), cfg4, tmp_path / "a", progress=False)
    torch.manual_seed(0)
    resumed = torch.nn.Linear(4, 1)
    cfg2 = TrainConfig(epochs=2, batch_size=16, lr=1e-2, restart_epochs=2, threads=1)
    fit(resumed, _loss, _data(), _data(64, 1), cfg2, tmp_path / "b", progress=False)
    fresh = torch.nn.Linear(4, 1)  # a new process: different init, state comes from disk
    hist = fit(fresh, _loss, _data(), _data(64, 1), cfg4, tmp_path / "b", progress=False)
    assert [h["epoch"] for h in hist] == [1, 2, 3, 4]
    torch.testing.assert_close(fresh.weight, straight.weight, rtol=1e-6, atol=1e-7)


def test_checkpoint_rejects_mismatched_tensors(tmp_path):
    model = torch.nn.Linear(4, 2)
    save_model(tmp_path / "m", model, "linear", {"in": 4, "out": 2}, {"training_data": "none", "licence": "MIT"})
    tensors, meta = load_tensors(tmp_path / "m")
    assert meta["kind"] == "linear" and meta["licence"] == "MIT"
    load_state_into(torch.nn.Linear(4, 2), tensors, "m")
    try:
        load_state_into(torch.nn.Linear(4, 3), tensors, "m")
    except CheckpointError as e:
        assert "shape" in str(e)
    else:
        raise AssertionError("a shape mismatch was accepted")
    tensors["weight"] = torch.full((2, 4), float("nan"))
    try:
        load_state_into(torch.nn.Linear(4, 2), tensors, "m")
    except CheckpointError as e:
        assert "NaN" in str(e)
    else:
        raise AssertionError("NaN weights were accepted")
    (tmp_path / "m.json").write_text("{not json")
    try:
        load_tensors(tmp_path / "m")
    except CheckpointError as e:
        assert "JSON" in str(e)
    else:
        raise AssertionError("bad JSON was accepted")
