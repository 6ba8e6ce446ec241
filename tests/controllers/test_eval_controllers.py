"""Controller evaluation: the metrics on hand-built cases, the runner on tiny checkpoints (test split,
small caps), `motioncore eval controllers --json` and `motioncore demo`."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.cli.controllers import run_demo
from motioncore.cli.main import main
from motioncore.errors import MotioncoreError
from motioncore.eval.controllers import (
    ControllerEvalConfig,
    evaluate_controllers,
    foot_contacts,
    foot_skating,
    format_table,
    joint_position_error,
    path_error,
    skating_terms,
)
from motioncore.io.bvh import read_bvh

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- metrics on hand-built cases
def _feet(T: int = 40) -> np.ndarray:
    """(T, 2, 3): foot 0 planted at the origin, foot 1 on the ground sliding 0.5 cm per frame along x."""
    p = np.zeros((T, 2, 3))
    p[:, 1, 0] = 0.5 * np.arange(T)
    p[:, 1, 2] = 30.0
    return p


def test_a_foot_sliding_at_a_known_speed_gives_that_skating():
    p = _feet()
    assert foot_skating(p[:, 1:], 30.0, 5.0, 50.0) == pytest.approx(0.5)  # 15 cm/s: still "in contact"
    assert foot_skating(p[:, :1], 30.0, 5.0, 50.0) == pytest.approx(0.0)
    total, pairs, frames_in_contact, frames = skating_terms(p, 30.0, 5.0, 50.0)
    assert (total, pairs, frames_in_contact, frames) == (pytest.approx(0.5 * 39), 78, 80, 80)


def test_no_contact_when_lifted_or_fast():
    p = _feet()
    p[20:, 1, 1] = 20.0  # lifted after frame 20: its slide there is not skating
    c = foot_contacts(p, 30.0, 5.0, 50.0)
    assert c[:20, 1].all() and not c[20:, 1].any() and c[:, 0].all()
    assert foot_skating(p[:, 1:], 30.0, 5.0, 50.0) == pytest.approx(0.5)  # the 19 ground pairs only
    assert foot_skating(p[:, 1:], 30.0, 5.0, 10.0) is None  # 15 cm/s is too fast for contact at 10 cm/s


def test_path_error_is_zero_on_the_path_and_the_offset_beside_it():
    path = np.array([[0.0, 0.0], [0.0, 100.0], [100.0, 100.0]])
    on = np.stack([np.zeros(50), np.zeros(50), np.linspace(0, 100, 50)], 1)  # (T, 3) along the first leg
    assert path_error(on, path) == pytest.approx(0.0, abs=1e-12)
    beside = on + np.array([-3.0, 0.0, 0.0])
    assert path_error(beside, path) == pytest.approx(3.0)
    assert path_error(np.array([[50.0, 103.0]]), path) == pytest.approx(3.0)  # ground points (T, 2)


def test_joint_position_error():
    a = np.zeros((4, 3, 3))
    b = a.copy()
    b[..., 1] = 2.0
    assert joint_position_error(a, b) == pytest.approx(2.0)
    with pytest.raises(MotioncoreError):
        joint_position_error(a, b[:2])


def test_config_checks():
    with pytest.raises(MotioncoreError, match="modes"):
        ControllerEvalConfig(modes=("fast",))
    with pytest.raises(MotioncoreError, match="max_clips"):
        ControllerEvalConfig(max_clips=0)


# ----------------------------------------------------------------------------- runner
@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from motioncore.train.controllers import ControllerRecipe, train_controller
    from motioncore.train.loop import TrainConfig

    root = tmp_path_factory.mktemp("ckpt")
    for model in ("pfnn", "phase-mlp", "mann"):
        train_controller(ControllerRecipe(model=model, max_clips=8, hidden_dim=32),
                         TrainConfig(epochs=1, batch_size=256, threads=1), root / model, progress=False)
    return {m: str(root / m / m) for m in ("pfnn", "phase-mlp", "mann")}


@needs_data
def test_evaluate_controllers_on_tiny_checkpoints(ckpt):
    cfg = ControllerEvalConfig(max_clips=2, max_frames=30, max_rows=400)
    res = evaluate_controllers([ckpt["pfnn"], ckpt["phase-mlp"], ckpt["mann"]], cfg)
    pf, mlp, dog = res
    for r in res:
        assert r["test_rows"] == 400 and r["clips"] == 2 and r["frames"] == 60
        for key in ("next_frame_cm", "path_error_cm", "tracking_cm", "gt_skate_cm"):
            assert np.isfinite(r[key]) and r[key] >= 0, key
    assert pf["gt_skate_cm"] == mlp["gt_skate_cm"]  # same clips, same frames, same rule
    assert set(pf["modes"]) == {"weights", "constant", "linear", "cubic"} and "modes" not in mlp and "modes" not in dog
    assert pf["modes"]["cubic"]["max_abs"] < 1e-4 and pf["modes"]["weights"]["max_abs"] < 1e-4
    assert pf["modes"]["constant"]["max_abs"] > pf["modes"]["cubic"]["max_abs"]
    table = format_table(res)
    assert "| pfnn | pfnn |" in table and "| phase-mlp | phase-mlp |" in table and "| pfnn | cubic |" in table


@needs_data
def test_cli_eval_controllers_writes_json(ckpt, tmp_path, capsys):
    out = tmp_path / "ctl.json"
    assert main(["eval", "controllers", "--model", ckpt["mann"], "--max-clips", "1", "--max-frames", "30",
                 "--max-rows", "200", "--json", str(out), "--threads", "1", "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert len(res) == 1 and res[0]["kind"] == "mann" and res[0]["frames"] == 30
    assert "path error (cm)" in capsys.readouterr().out


@needs_data
def test_demo_writes_bvh_and_png(ckpt, tmp_path):
    s = run_demo(tmp_path, {"biped": ckpt["pfnn"], "dog": ckpt["mann"]})
    for character, fps in (("biped", 30.0), ("dog", 60.0)):
        m = read_bvh(s[character]["bvh"])
        assert m.num_frames == s[character]["frames"] > 100 and m.fps == pytest.approx(fps)
        assert np.isfinite(s[character]["path_error_cm"])
    assert (tmp_path / "demo.png").stat().st_size > 20_000
    if "infill" in s:   # the bundled in-filling model re-fills the walk: its joint angle curves
        assert (tmp_path / "demo_infill.png").stat().st_size > 20_000 and s["infill"]["plot"].endswith("demo_infill.png")


def test_demo_names_the_missing_bundled_model(tmp_path, capsys, monkeypatch):
    import motioncore.models.registry as registry

    monkeypatch.setattr(registry, "bundled_names", lambda: ["pfnn-biped"])  # as if mann-dog were not shipped
    assert main(["demo", "--out", str(tmp_path / "demo"), "--threads", "1"]) == 2
    assert "mann-dog" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


@pytest.mark.slow
def test_bundled_demo_infill_is_single_digit_and_below_interp(tmp_path):
    """Issue 27 item 2: on the bundled biped's clean walk the demo's in-fill line means something: the
    in-fill model's and Interp's mean joint errors over the filled frames are single-digit degrees and the
    model's is the lower. (On the log-map biped, whose right limbs flipped, both were ~26 degrees.)"""
    s = run_demo(tmp_path)["infill"]
    assert s["model_deg"] < s["interp_deg"] < 10.0, s


def test_demo_json_is_checked_before_any_work(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--json", str(tmp_path / "demo.txt"), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "--json" in err and ".json" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "demo").exists() and not (tmp_path / "demo.txt").exists()
