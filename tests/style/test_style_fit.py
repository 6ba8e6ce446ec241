"""Request-time style code fitting (`motioncore.families.style.adapt`) on the bundled learnet-biped and real
Bandai clips of its held-out styles: the fit starts at the encoder's code, moves only z, ignores the
exemplar's stance height, and its code predicts the style's OTHER clips better than the encoder's."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data
from scipy.spatial.distance import mahalanobis

from motioncore.core.motion import Motion
from motioncore.errors import MotioncoreError
from motioncore.families.style.adapt import CodePrior, FitConfig, fit_code, foot_floor, level_stance

pytestmark = [needs_data, pytest.mark.data]


@pytest.fixture(scope="module")
def adapter():
    from motioncore.families.style.generate import StyleAdapter

    torch.set_num_threads(1)
    return StyleAdapter.load("learnet-biped")


@pytest.fixture(scope="module")
def proud():
    """A held-out style's walk (Bandai test split), as a user would send it."""
    from motioncore.data import load

    return next(c for c in load("bandai", "test", progress=False)
                if c.labels.get("style") == "proud" and c.labels.get("content") == "walk").motion


def test_prior_cost_is_the_mahalanobis_distance_over_z():
    rng = np.random.default_rng(0)
    codes = rng.normal(size=(400, 5)) @ rng.normal(size=(5, 5)) + 2.0
    prior = CodePrior.from_dict(CodePrior.from_codes(codes).to_dict())  # through its JSON form
    z = rng.normal(size=5)
    want = mahalanobis(z, prior.mean, prior.precision) ** 2 / 5   # scipy, with the same precision
    assert float(prior.cost(torch.tensor(z)[None])) == pytest.approx(want, rel=1e-9)
    typical = np.mean([float(prior.cost(torch.tensor(c)[None])) for c in codes])
    assert 0.8 < typical < 1.2   # about 1 for the codes it came from


def test_nearest_code_cost_is_a_soft_minimum_over_the_codes():
    """Against the obvious reference: every code's distance, then -tau log sum exp(-d / tau) in numpy."""
    rng = np.random.default_rng(1)
    codes = rng.normal(size=(50, 4))
    prior = CodePrior.from_codes(codes)
    z = rng.normal(size=4)
    d = np.array([(z - c) @ prior.precision @ (z - c) / 4 for c in codes])
    tau = 0.1
    want = -tau * (np.log(np.exp(-(d - d.min()) / tau).sum()) - d.min() / tau)
    assert float(prior.nearest_cost(torch.tensor(z)[None], tau)) == pytest.approx(want, rel=1e-9)
    assert float(prior.nearest_cost(torch.tensor(codes[7])[None], 0.01)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(MotioncoreError, match="no codes stored"):
        CodePrior(prior.mean, prior.cov).nearest_cost(torch.tensor(z)[None], tau)


def test_no_steps_returns_the_encoders_code_and_the_weights_never_move(adapter, proud):
    before = {k: v.clone() for k, v in adapter.model.state_dict().items()}
    z0 = adapter.code(proud)
    z, rep = adapter.fit_report(proud, FitConfig(steps=0))
    np.testing.assert_array_equal(z, z0)
    np.testing.assert_array_equal(rep["z_encoder"], z0)
    z, rep = adapter.fit_report(proud)
    assert rep["best_step"] > 0 and np.abs(z - z0).max() > 0.05   # the fit moved the code
    assert all(torch.equal(before[k], v) for k, v in adapter.model.state_dict().items())
    assert all(p.grad is None for p in adapter.model.parameters())


def test_the_fit_lowers_the_error_on_the_exemplars_held_back_rows(adapter, proud):
    """The rows the fit never sees (its last quarter) pick the step: the kept code beats the encoder's there."""
    _, rep = adapter.fit_report(proud)
    mse = rep["held_back_mse"]
    assert min(mse) < 0.95 * mse[0], (mse[0], min(mse))


def test_the_stance_height_does_not_move_the_code(adapter, proud):
    """The same clip with the hips 5 cm higher (another actor, a rig's object location): the same codes."""
    from motioncore.core.kinematics import find_body_joints

    pos = proud.positions.copy()
    pos[:, find_body_joints(proud.skeleton).root, 1] += 5.0
    higher = Motion(proud.skeleton, proud.rotations, pos, proud.fps, "higher")
    assert foot_floor(higher) == pytest.approx(foot_floor(proud) + 5.0, abs=1e-6)
    assert foot_floor(level_stance(higher, adapter.floor_cm)) == pytest.approx(adapter.floor_cm, abs=1e-6)
    np.testing.assert_allclose(adapter.code(higher), adapter.code(proud), atol=1e-4)
    np.testing.assert_allclose(adapter.fit(higher), adapter.fit(proud), atol=1e-3)
    adapter.floor_cm, floor = None, adapter.floor_cm   # without levelling the offset does move it
    try:
        assert np.abs(adapter.code(higher) - adapter.code(proud)).max() > 0.05
    finally:
        adapter.floor_cm = floor


def test_bad_rows_and_a_model_without_prior_are_named(adapter, proud):
    x = torch.zeros(4, 216)
    with pytest.raises(MotioncoreError, match="need N >= 8 rows"):
        fit_code(adapter.model.pfnn, x, torch.zeros(4, 296), torch.zeros(4), torch.zeros(1, 16), adapter.prior)
    prior, adapter.prior = adapter.prior, None
    try:
        with pytest.raises(MotioncoreError, match="no code_prior in its metadata .run scripts/style_code_prior.py"):
            adapter.fit(proud)
    finally:
        adapter.prior = prior


@pytest.mark.slow
def test_the_fitted_code_predicts_the_styles_other_clips_better_than_the_encoders(adapter):
    """As `motioncore eval style` scores it: fit on one exemplar clip, score next frames on every OTHER clip
    of the held-out style; mean over the three held-out styles' first two exemplars."""
    from motioncore.data import load
    from motioncore.families.pfnn.features import rotation_encoding
    from motioncore.families.style.evaluate import pick_exemplars, prediction_errors
    from motioncore.families.style.train_heldout import StyleConfig, prepare

    exp = adapter.meta["experiment"]
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in StyleConfig.__dataclass_fields__ and k != "rotations"},
                      rotations=rotation_encoding(adapter.meta["layout"]))
    prep = prepare(cfg, load(cfg.data, None, progress=False))
    err = {"encoder": [], "fitted": []}
    for h in cfg.holdouts:
        for ex in pick_exemplars(prep, h, 2, adapter.min_rows * 2):
            z, rep = adapter.fit_report(prep.clips[ex].motion)
            rows = np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c])
                                   for c in prep.heldout_by_style[h] if c != ex])
            for key, code in (("encoder", rep["z_encoder"]), ("fitted", z)):
                zt = torch.as_tensor(code, dtype=torch.float32)[None]
                err[key].append(prediction_errors(adapter.model, prep, rows, zt)["joint_cm"])
    assert np.mean(err["fitted"]) < 0.98 * np.mean(err["encoder"]), err
