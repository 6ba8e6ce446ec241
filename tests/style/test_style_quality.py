"""The exemplar's quality report (`motioncore.families.style.generate_quality`, `StyleAdapter.fit_report`'s ``quality``):
a real training-style walk passes, the same walk cut short is "too short", real non-walking Bandai clips (a
dance, a kick) are "unlike any training style", with the fit's held-out error measured on the exemplar's
last quarter against the truth; the add-on's line says the same."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.families.style.generate_quality import assess

TRAIN = {"p50": 1.2, "p99": 2.5, "max": 2.9, "clips": 426}


def test_assess_names_each_problem_once():
    good = assess(5.0, 2.0, {"fitted": 1.4, "encoder": 1.5, "no_style": 1.6}, 1.0, 3.0, TRAIN)
    assert good["ok"] and good["warnings"] == [] and good["held_out_cm"]["fitted"] == 1.4
    short = assess(1.5, 2.0, {"fitted": 1.4, "encoder": 1.5, "no_style": 1.6}, 1.0, 3.0, TRAIN)
    assert not short["ok"] and len(short["warnings"]) == 1 and short["warnings"][0].startswith("too short: 1.5 s")
    unlike = assess(9.0, 2.0, {"fitted": 12.0, "encoder": 12.1, "no_style": 11.9}, 1.0, 3.0, TRAIN)
    assert len(unlike["warnings"]) == 1 and "unlike any training style" in unlike["warnings"][0] and "12.0 cm" in unlike["warnings"][0]
    empty = assess(9.0, 2.0, {"fitted": 2.0, "encoder": 2.0, "no_style": 1.9}, 1.0, 3.0, TRAIN)
    assert len(empty["warnings"]) == 1 and "means nothing" in empty["warnings"][0]
    old = assess(9.0, 2.0, {"fitted": 12.0, "encoder": 12.1, "no_style": 12.5}, 1.0, 3.0, None)  # no training errors stored
    assert old["ok"]


@pytest.fixture(scope="module")
def adapter():
    from motioncore.families.style.generate import StyleAdapter

    torch.set_num_threads(1)
    return StyleAdapter.load("learnet-biped")


@pytest.fixture(scope="module")
def bandai():
    from motioncore.data import load

    return {c.name: c for c in load("bandai", None, progress=False)}


def _truth_cm(adapter, motion, rows: list[int], z) -> float:
    """The held-out error recomputed the slow way: decode each prediction, compare with the clip's own rows."""
    data = adapter.exemplar_data(motion)
    xn = adapter._base.x_norm.transform(data["X"][rows])
    with torch.no_grad():
        pred = adapter.model.pfnn(torch.as_tensor(xn, dtype=torch.float32), torch.as_tensor(data["phase"][rows], dtype=torch.float32),
                                  torch.as_tensor(np.asarray(z, np.float32))[None].expand(len(rows), -1))
    cols = adapter.layout.output_block("joint_pos").slice
    raw = adapter._base.y_norm.inverse(pred.double().numpy())[:, cols].reshape(len(rows), -1, 3)
    true = data["Y"][rows][:, cols].reshape(len(rows), -1, 3)
    return float(np.linalg.norm(raw - true, axis=-1)[:, 1:].mean())  # joint 0: Bandai's static ground joint


@needs_data
def test_a_training_style_walk_passes_and_its_held_out_error_is_the_truths(adapter, bandai):
    assert "exemplar_error_cm" in adapter.meta  # written by families.style.train_heldout.fit_metadata
    walk = bandai["dataset-1_walk_happy_001"].motion
    z, rep = adapter.fit_report(walk)
    q = rep["quality"]
    assert q["ok"], q["warnings"]
    assert q["held_out_cm"]["fitted"] < q["held_out_cm"]["no_style"] < adapter.meta["exemplar_error_cm"]["max"]
    assert q["held_out_cm"]["fitted"] == pytest.approx(_truth_cm(adapter, walk, rep["held_back_rows"], z), abs=2e-3)
    assert len(rep["held_back_rows"]) == pytest.approx(rep["rows"] / 4, abs=1)  # the fit's last quarter


@needs_data
def test_a_cut_walk_is_too_short(adapter, bandai):
    cut = bandai["dataset-1_walk_happy_001"].motion.slice(0, 105)  # 3.5 s: 1.5 s of rows after the +-1 s window
    q = adapter.fit_report(cut)[1]["quality"]
    assert not q["ok"] and q["warnings"][0].startswith("too short: 1.")


@needs_data
@pytest.mark.parametrize("name", ["dataset-1_dance-short_normal_001", "dataset-1_kick_normal_001"])
def test_a_clip_that_does_not_walk_is_unlike_any_training_style(adapter, bandai, name):
    q = adapter.fit_report(bandai[name].motion)[1]["quality"]
    assert not q["ok"] and any("unlike any training style" in w for w in q["warnings"]), q
    assert q["held_out_cm"]["fitted"] > 2 * adapter.meta["exemplar_error_cm"]["max"]


def test_the_addon_line_carries_the_warnings_and_the_error():
    from helpers.addon import addon_module

    note = addon_module("core.quality").quality_note
    ok = assess(5.0, 2.0, {"fitted": 1.4, "encoder": 1.5, "no_style": 1.6}, 1.0, 3.0, TRAIN)
    assert note(ok) == "example OK: held-out error 1.40 cm (no style 1.60)"
    bad = assess(1.5, 2.0, {"fitted": 12.0, "encoder": 12.1, "no_style": 11.9}, 1.0, 3.0, TRAIN)
    line = note(bad)
    assert line.startswith("check the Style Example: too short: 1.5 s") and "unlike any training style" in line
    assert line.endswith("held-out error 12.00 cm (no style 11.90)")
