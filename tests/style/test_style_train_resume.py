"""The style model's training with the continuity costs (`families.style.train_heldout.train`, tiny sizes, a few real Bandai
clips): it writes its checkpoints, the continuity settings reach the checkpoint, a run killed mid-epoch
resumes to exactly the weights of the run that was never killed, and a warm start reproduces the weights
it starts from."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from conftest import needs_data

from motioncore.families.style import train_heldout as style_train
from motioncore.families.style.train_heldout import StyleConfig, train
from motioncore.models.checkpoint import load_tensors, read_meta

pytestmark = [needs_data, pytest.mark.data]

TINY = StyleConfig(holdouts=("proud",), hidden_dim=8, style_rank=2, z_dim=3, encoder_channels=4, epochs=2, base_epochs=1,
                   batch_size=256, window_min_s=0.5, window_max_s=1.0, z_noise=0.3, code_dropout=0.3, turn_weight=5.0,
                   vel_weight=0.5, turn_mix=0.5, turn_rows=32, input_noise=0.1, threads=1, progress=False)


@pytest.fixture(scope="module")
def clips():
    """Four train locomotion clips each of three training styles, and two of the held-out one."""
    from motioncore.data import load

    every = [c for c in load("bandai", None, progress=False)
             if c.labels.get("content") in ("walk", "walk-left", "walk-right", "run") and c.split == "train"]
    pick = lambda s, n: [c for c in every if c.labels.get("style") == s][:n]  # noqa: E731
    return pick("happy", 4) + pick("sad", 4) + pick("angry", 4) + pick("proud", 2)


@pytest.fixture(scope="module")
def uninterrupted(clips, tmp_path_factory):
    torch.set_num_threads(1)
    cfg = replace(TINY, out=str(tmp_path_factory.mktemp("style_a")))
    train(cfg, clips)
    return cfg


def test_training_writes_the_continuity_settings_and_turn_limits(uninterrupted):
    meta = read_meta(f"{uninterrupted.out}/learnet")
    assert meta["kind"] == "learnet-pfnn" and meta["experiment"]["turn_weight"] == 5.0
    assert len(meta["turn_limits_deg"]) == len(meta["skeleton"]["names"]) and max(meta["turn_limits_deg"]) > 5.0
    assert "code_prior" in meta and len(meta["history"]) == 2


def test_a_run_killed_mid_epoch_resumes_to_the_same_weights(uninterrupted, clips, tmp_path, monkeypatch):
    cfg = replace(TINY, out=str(tmp_path / "style_b"))
    calls, cost = {"n": 0}, style_train.Smoothness.cost
    steps = None

    def dying(self, m, b, z):
        calls["n"] += 1
        if steps is not None and calls["n"] == steps + 2:  # the 2nd batch of the 2nd epoch
            raise RuntimeError("killed")
        return cost(self, m, b, z)

    prep = style_train.prepare(cfg, clips)
    steps = -(-len(prep.train_idx) // cfg.batch_size)
    monkeypatch.setattr(style_train.Smoothness, "cost", dying)
    with pytest.raises(RuntimeError, match="killed"):
        train(cfg, clips)
    monkeypatch.setattr(style_train.Smoothness, "cost", cost)
    train(cfg, clips)  # resumes from the end of epoch 1
    a, _ = load_tensors(f"{uninterrupted.out}/learnet")
    b, _ = load_tensors(f"{cfg.out}/learnet")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_a_warm_start_begins_at_the_given_learnet(uninterrupted, clips, tmp_path):
    from motioncore.families.style.train import load_learnet

    cfg = replace(TINY, out=str(tmp_path / "style_c"), init_learnet=f"{uninterrupted.out}/learnet",
                  base_from=f"{uninterrupted.out}/base", lr=1e-12, epochs=1, roll_weight=1.0, roll_clips=3, roll_mix=1,
                  roll_paths=2, roll_frames=20)
    train(cfg, clips)
    start, _ = load_learnet(f"{uninterrupted.out}/learnet")
    got, meta = load_learnet(f"{cfg.out}/learnet")
    assert meta["init_learnet"] == cfg.init_learnet
    for (k, v), w in zip(start.state_dict().items(), got.state_dict().values(), strict=True):
        torch.testing.assert_close(v, w, atol=1e-6, rtol=0, msg=k)  # lr 1e-12: one epoch barely moves it
