"""The `motioncore` command end to end: eval infill on the Bandai test split, bvh roundtrip, listings."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data

from motioncore.cli.main import main
from motioncore.core.motion import Motion
from motioncore.core.skeleton import Skeleton
from motioncore.io.bvh import read_bvh, write_bvh


@needs_data
def test_eval_infill_interp_beats_zerovel_on_bandai(tmp_path, capsys):
    out = tmp_path / "res.json"
    assert main(["eval", "infill", "--data", "bandai", "--json", str(out), "--out", str(tmp_path),
                 "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert set(res) == {"zerovel", "interp"}
    for metric in ("L2Q", "L2P", "NPSS"):
        for n in ("5", "15", "30", "45"):
            assert 0 < res["interp"][metric][n] < res["zerovel"][metric][n], (metric, n)
    assert (tmp_path / "res.png").stat().st_size > 10_000  # the plot follows --json's stem
    assert "interp" in capsys.readouterr().out


@needs_data
def test_eval_infill_on_a_folder_of_bvh(tmp_path):
    from motioncore.data import load

    for c in load("cmu", "test", progress=False)[:2]:
        write_bvh(tmp_path / f"{c.name}.bvh", c.motion)
    out = tmp_path / "cmu.json"
    assert main(["eval", "infill", "--data", str(tmp_path), "--json", str(out), "--out", str(tmp_path),
                 "--quiet", "--lengths", "5", "15"]) == 0
    assert set(json.loads(out.read_text())["interp"]["L2Q"]) == {"5", "15"}


@needs_data
def test_eval_infill_baseline_rows_do_not_depend_on_the_models(tmp_path):
    """CMU clips scored with anyorder-body (a Bandai-skeleton model): the model fills through a retarget and back
    (eval.keyed.on_skeleton), the data is scored on its own skeleton, so Interp's row is the same whichever
    models are asked for."""
    from motioncore.data import load

    for c in load("cmu", "test", progress=False)[:2]:
        write_bvh(tmp_path / f"{c.name}.bvh", c.motion.slice(0, 400))
    out, raw = tmp_path / "moved.json", tmp_path / "raw.json"
    assert main(["eval", "infill", "--data", str(tmp_path), "--model", "interp", "--model", "anyorder-body",
                 "--json", str(out), "--out", str(tmp_path), "--quiet", "--lengths", "5"]) == 0
    assert main(["eval", "infill", "--data", str(tmp_path), "--model", "interp", "--json", str(raw), "--out",
                 str(tmp_path), "--quiet", "--lengths", "5"]) == 0
    moved, base = json.loads(out.read_text()), json.loads(raw.read_text())
    assert set(moved) == {"interp", "anyorder-body"} and moved["interp"] == base["interp"]
    assert moved["anyorder-body"]["L2Q"]["5"] < 1.0   # 0.72 (Interp 0.17): the likelihood model is poor at 5 frames


def _tiny_motion() -> Motion:
    sk = Skeleton(("root", "a"), np.array([-1, 0]), np.array([[0, 0, 0], [0, 10, 0]], float))
    rng = np.random.default_rng(0)
    q = rng.normal(size=(4, 2, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return Motion(sk, q, np.broadcast_to(sk.offsets, (4, 2, 3)).copy(), 30.0)


def test_bvh_roundtrip_exit_codes(tmp_path, capsys):
    good = tmp_path / "good.bvh"
    write_bvh(good, _tiny_motion())
    assert main(["bvh", "roundtrip", str(good)]) == 0
    bad = tmp_path / "bad.bvh"
    bad.write_text(good.read_text().replace("Frames: 4", "Frames: 5"))
    assert main(["bvh", "roundtrip", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "2 files, 1 failed" in out
    assert read_bvh(good).num_frames == 4  # the input is untouched


def test_models_json_and_unknown_model(capsys):
    assert main(["models", "--json"]) == 0
    names = {m["name"] for m in json.loads(capsys.readouterr().out)}
    assert {"zerovel", "interp"} <= names
    assert main(["eval", "infill", "--model", "nope", "--quiet"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err


@needs_data
def test_data_list_json(capsys):
    assert main(["data", "list", "cmu", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["clips"], row["train"], row["test"], row["fps"], row["joints"]) == (98, 66, 32, 120.0, 31)
    assert "CMU" in row["licence"]


def test_help_exits_cleanly():
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
