"""The learnet style experiment on a handful of real Bandai-2 clips with tiny sizes: end to end with
its outputs, the held-out style kept out of training, the exemplar kept out of evaluation, and z."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.families.pfnn.model import PFNN
from motioncore.families.style.model import LearnetPFNN
from motioncore.families.style.train import ExemplarSampler, encode_spans, load_learnet, model_configs
from motioncore.families.style.train_data import LearnetStyleConfig, clip_rows, eval_rows, prepare
from motioncore.models.checkpoint import read_meta

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # the experiment lives in scripts/
from learnet_style import CONDITIONS, exemplar_code, main  # noqa: E402

pytestmark = [needs_data, pytest.mark.data]

TINY = dict(hidden_dim=8, style_rank=2, z_dim=3, encoder_channels=4, epochs=1, batch_size=128, finetune_epochs=1,
            n_exemplars=2, window_min_s=0.5, window_max_s=1.0, threads=1, progress=False)


@pytest.fixture(scope="module")
def clips():
    """Per style: the first two train walks, the first train left turn and the first test walk (28 clips)."""
    from motioncore.data import load

    every = load("bandai2", None, progress=False)

    def pick(style: str, content: str, split: str, n: int) -> list:
        return [c for c in every if (c.labels["style"], c.labels["content"], c.split) == (style, content, split)][:n]

    return [c for style in sorted({c.labels["style"] for c in every})
            for c in pick(style, "walk", "train", 2) + pick(style, "walk-turn-left", "train", 1) + pick(style, "walk", "test", 1)]


@pytest.fixture(scope="module")
def run(clips, tmp_path_factory):
    cfg = LearnetStyleConfig(out=str(tmp_path_factory.mktemp("learnet")), **TINY)
    torch.set_num_threads(1)
    return cfg, main(cfg, clips)


def test_pipeline_writes_its_outputs_and_resumes(run, clips, capsys):
    cfg, res = run
    out = Path(cfg.out)
    for name in ("results.json", "results.md", "learnet_style.png", "base.safetensors", "learnet.safetensors",
                 "finetuned_0.safetensors", "finetuned_1.json"):
        assert (out / name).stat().st_size > 0, name
    assert json.loads((out / "results.json").read_text())["summary"] == res["summary"]
    for c in CONDITIONS:
        assert np.isfinite(res["summary"]["heldout"][c]["z_mse"]["mean"]) and res["summary"]["heldout"][c]["joint_cm"]["mean"] > 0
        assert len(res["summary"]["heldout"][c]["z_mse"]["values"]) == 2
    for name in ("base", "learnet", "finetuned_0"):
        meta = read_meta(out / name)
        assert meta["training_data"].startswith("bandai2 (6 styles, held out: elderly)")
        assert meta["licence"] == "CC BY-NC 4.0"
    assert "| base PFNN (no style input) |" in (out / "results.md").read_text()
    again = main(cfg, clips)  # finished stages are reloaded, not retrained
    assert again["stages_loaded"] == {"base": True, "learnet": True}
    assert again["summary"] == res["summary"]
    assert "loaded" in capsys.readouterr().out


@pytest.mark.parametrize("holdout, control", [("elderly", "normal"), ("youthful", "active")])
def test_held_out_style_never_in_training_rows(clips, holdout, control):
    cfg = LearnetStyleConfig(holdout=holdout, control_style=control, **TINY)
    prep = prepare(cfg, clips)
    seen = {prep.styles[s] for s in prep.style[torch.from_numpy(np.concatenate([prep.train_idx, prep.val_idx]))].tolist()}
    assert holdout not in seen and len(seen) == 6
    assert all(prep.styles[s] != holdout for s in prep.bank)
    assert all(prep.clips[c].labels["style"] != holdout for pool in prep.bank.values() for c in pool)
    held_rows = sum(len(clip_rows(prep, c)) for c in prep.heldout)
    assert held_rows > 0 and all(prep.clips[c].labels["style"] == holdout for c in prep.heldout)


def test_exemplar_excluded_from_evaluation(clips):
    prep = prepare(LearnetStyleConfig(**TINY), clips)
    assert len(prep.exemplars) == 2 and {prep.clips[c].labels["style"] for c in prep.exemplars} == {"elderly"}
    splits = {prep.clips[c].split for c in prep.heldout}
    assert splits == {"train", "test"}  # both splits are evaluated
    for ex in prep.exemplars:
        used = set(prep.clip[torch.from_numpy(eval_rows(prep, ex))].tolist())
        assert ex not in used and used == set(prep.heldout) - {ex}


def test_training_exemplar_windows_are_other_clips_of_the_same_style(clips):
    cfg = LearnetStyleConfig(**TINY)
    prep = prepare(cfg, clips)
    _, lcfg, ecfg = model_configs(cfg, prep)
    model = LearnetPFNN(lcfg, ecfg)
    sampler = ExemplarSampler(prep, cfg)
    for c in prep.bank[0]:
        start, n = sampler.random_span(c)
        assert sampler.min_rows <= n <= sampler.max_rows and prep.starts[c] <= start
        assert start + n <= prep.starts[c] + prep.counts[c]
    rows = torch.from_numpy(prep.train_idx)
    z = sampler.train_codes(model, prep.style[rows], prep.clip[rows])  # (B, Z), one code per row
    assert z.shape == (len(rows), cfg.z_dim)
    for s in torch.unique(prep.style[rows]).tolist():  # rows of one style share at most 2 codes
        assert len(torch.unique(z[prep.style[rows] == s], dim=0)) <= 2


def test_z_changes_trained_output_and_untrained_adapter_is_the_base(run, clips):
    cfg, _ = run
    prep = prepare(cfg, clips)
    rows = torch.from_numpy(eval_rows(prep, prep.exemplars[0]))[:50]
    x, phase = prep.x[rows], prep.phase[rows]
    max_rows = int(round(cfg.window_max_s * prep.layout.fps))
    trained, _ = load_learnet(f"{cfg.out}/learnet")
    with torch.no_grad():
        z_ex, z_other = (exemplar_code(trained, prep, c, max_rows) for c in (prep.exemplars[0], prep.controls[0]))
        y_none = trained(x, phase)
        y_ex = trained(x, phase, z_ex.expand(len(x), -1))
        assert (y_ex - y_none).abs().max() > 1e-6
        assert (y_ex - trained(x, phase, z_other.expand(len(x), -1))).abs().max() > 1e-6
    base_cfg, lcfg, ecfg = model_configs(cfg, prep)
    torch.manual_seed(1)
    fresh = LearnetPFNN(lcfg, ecfg).eval()
    plain = PFNN(base_cfg).eval()
    plain.load_state_dict({k: v for k, v in fresh.pfnn.state_dict().items() if "adapters" not in k})
    with torch.no_grad():
        z = encode_spans(fresh, prep.x, [(int(prep.starts[prep.exemplars[0]]), 20)])
        assert not torch.equal(z, torch.zeros_like(z))
        assert torch.equal(fresh(x, phase, z.expand(len(x), -1)), fresh(x, phase))
        assert torch.equal(fresh(x, phase), plain(x, phase))


def test_config_rejects_control_equal_to_holdout():
    with pytest.raises(ValueError, match="control_style"):
        replace(LearnetStyleConfig(), control_style="elderly")
