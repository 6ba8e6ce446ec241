"""Path-driven controllers: rollout shapes, batching, evaluation forms, `generate` BVH output, path.json
validation, and an untrained model (no data needed) staying finite."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.cli.main import main
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.families.mann.features import mann_layout
from motioncore.families.mann.model import MANN, MANNConfig
from motioncore.families.pfnn.features import pfnn_layout
from motioncore.families.pfnn.model import PFNN, PFNNConfig
from motioncore.features import Normaliser
from motioncore.io.bvh import read_bvh
from motioncore.tasks.locomotion import Controller, MANNController, PFNNController
from motioncore.tasks.path_follow import blend_scale
from motioncore.tasks.paths import Path, PathError, PathTrack, load_path, parse_path
from motioncore.tasks.rollout import stack_states

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """Tiny checkpoints (hidden 32, one epoch on 8 clips) of the four controller recipes."""
    from motioncore.train.controllers import ControllerRecipe, train_controller
    from motioncore.train.loop import TrainConfig

    root = tmp_path_factory.mktemp("ckpt")
    for model in ("pfnn", "phase-mlp", "mann", "mann-1"):
        train_controller(ControllerRecipe(model=model, max_clips=8, hidden_dim=32),
                         TrainConfig(epochs=1, batch_size=256, threads=1), root / model, progress=False)
    return {m: str(root / m / m) for m in ("pfnn", "phase-mlp", "mann", "mann-1")}


def s_curve(n: int = 30, speed: float | list[float] = 1.2, **kw) -> Path:
    z = np.linspace(0.0, 4.0, n)
    return Path(np.stack([np.sin(z), z], 1), speed=speed, **kw)


# ----------------------------------------------------------------------------- untrained models (no data)
def _biped() -> Skeleton:
    names = ("Hips", "Spine", "Head", "UpperLeg_L", "LowerLeg_L", "Foot_L", "Toes_L",
             "UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")
    parents = [-1, 0, 1, 0, 3, 4, 5, 0, 7, 8, 9]
    offsets = [[0, 90, 0], [0, 20, 0], [0, 40, 0], [10, 0, 0], [0, -40, 0], [0, -40, 0], [0, -8, 10],
               [-10, 0, 0], [0, -40, 0], [0, -40, 0], [0, -8, 10]]
    return Skeleton(names, np.array(parents), np.array(offsets, float))


def _quadruped() -> Skeleton:
    names = ("Hips", "Spine", "Head", "LeftArm", "LeftHand", "RightArm", "RightHand",
             "LeftUpLeg", "LeftFoot", "RightUpLeg", "RightFoot")
    parents = [-1, 0, 1, 1, 3, 1, 5, 0, 7, 0, 9]
    offsets = [[0, 45, 0], [0, 0, 40], [0, 10, 15], [6, 0, 0], [0, -35, 0], [-6, 0, 0], [0, -35, 0],
               [6, 0, 0], [0, -35, 0], [-6, 0, 0], [0, -35, 0]]
    ends = [(4, (0.0, -8.0, 0.0)), (6, (0.0, -8.0, 0.0)), (8, (0.0, -8.0, 0.0)), (10, (0.0, -8.0, 0.0))]
    return Skeleton(names, np.array(parents), np.array(offsets, float), end_sites=ends)


def _untrained(kind: str) -> Controller:
    """A randomly initialised controller with identity normalisers: valid, but never trained."""
    torch.manual_seed(0)
    sk = _biped() if kind == "pfnn" else _quadruped()
    layout = pfnn_layout(sk) if kind == "pfnn" else mann_layout(sk)
    if kind == "pfnn":
        model: torch.nn.Module = PFNN(PFNNConfig(layout.d_in, layout.d_out, hidden_dim=16))
    else:
        model = MANN(MANNConfig(layout.d_in, layout.d_out, len(layout.gating), hidden_dim=16, num_experts=2))
    ident = lambda d: Normaliser(np.zeros(d), np.ones(d)).to_dict()  # noqa: E731
    meta = {"kind": kind, "layout": layout.to_dict(), "x_norm": ident(layout.d_in), "y_norm": ident(layout.d_out),
            "skeleton": sk.to_dict(), "fps": layout.fps}
    return Controller.from_model(model, meta)


@pytest.mark.parametrize("kind", ["pfnn", "mann"])
def test_untrained_model_gives_a_finite_animation(kind):
    ctl = _untrained(kind)
    assert isinstance(ctl, PFNNController if kind == "pfnn" else MANNController)
    ro = ctl.rollout([s_curve(), s_curve(speed=3.0)], 150)
    J = ctl.skeleton.num_joints
    assert ro.rotations.shape == (2, 150, J, 4) and ro.positions.shape == (2, 150, J, 3)
    for a in (ro.rotations, ro.positions, ro.root, ro.yaw):
        assert np.isfinite(a).all()
    assert np.allclose(np.linalg.norm(ro.rotations, axis=-1), 1.0, atol=1e-6)
    assert ro.motion(1).num_frames == 150


def test_blend_scale_follows_holdens_bias():
    s = blend_scale(1.5)
    assert s[0] == 0.0 and np.all(np.diff(s) > 0) and s[-1] < 1.0
    assert s[3] == pytest.approx(1 - 0.5 ** 1.5)


def test_align_bones_points_each_bone_at_its_child_and_keeps_twist():
    from motioncore.core.rotations import axis_angle_to_quat, quat_apply, quat_mul
    from motioncore.tasks.rollout import align_bones

    ctl = _untrained("pfnn")
    sk, rng = ctl.skeleton, np.random.default_rng(0)
    local = axis_angle_to_quat(rng.normal(scale=0.5, size=(3, sk.num_joints, 3)))  # (3, J, 4)
    gq, gp = sk.forward_kinematics(local, np.broadcast_to(sk.offsets, (3, sk.num_joints, 3)))
    noisy = quat_mul(axis_angle_to_quat(rng.normal(scale=0.4, size=gq.shape[:-1] + (3,))), gq)  # wrong swings
    j, off, c = ctl.bones
    assert j.tolist() == [1, 3, 4, 5, 7, 8, 9]  # spine and legs; not the hips (3 children) nor the leaves
    fixed = align_bones(noisy, gp, ctl.bones)
    bone = quat_apply(fixed[:, j], np.broadcast_to(off, (3, len(j), 3)))
    want = gp[:, c] - gp[:, j]
    np.testing.assert_allclose(bone, want, atol=1e-9)  # the rest offsets have the FK lengths
    np.testing.assert_allclose(align_bones(gq, gp, ctl.bones), gq, atol=1e-9)  # already right: unchanged
    untouched = [k for k in range(sk.num_joints) if k not in j]
    np.testing.assert_allclose(fixed[:, untouched], noisy[:, untouched])


def test_mode_errors_name_the_mode():
    with pytest.raises(MotioncoreError, match="mode"):
        Controller.from_model(_untrained("mann").model, _untrained("mann").meta, "cubic")
    ctl = _untrained("pfnn")
    with pytest.raises(MotioncoreError, match="mode"):
        Controller.from_model(ctl.model, ctl.meta, "fastest")


# ----------------------------------------------------------------------------- paths (no data)
@pytest.mark.parametrize("doc, field", [
    ({}, "points"),
    ({"points": [[0, 0]]}, "points"),
    ({"points": [[0, 0], [1, 2, 3]]}, "points"),
    ({"points": [[0, 0], ["a", 1]]}, "points"),
    ({"points": [[0, 0], [0, 0]]}, "points"),
    ({"points": [[0, 0], [1, float("nan")]]}, "points"),
    ({"points": [[0, 0], [1, 1]], "speed": [1.0]}, "speed"),
    ({"points": [[0, 0], [1, 1]], "speed": [1.0, -2.0]}, "speed"),
    ({"points": [[0, 0], [1, 1]], "speed": "fast"}, "speed"),
    ({"points": [[0, 0], [1, 1]], "gait": ["walk", 3]}, "gait"),
    ({"points": [[0, 0], [1, 1]], "gait": ["walk"]}, "gait"),
    ({"points": [[0, 0], [1, 1]], "facing": [0, float("inf")]}, "facing"),
    ({"points": [[0, 0], [1, 1]], "fps": -30}, "fps"),
    ({"points": [[0, 0], [1, 1]], "speeds": [1, 1]}, "speeds"),
])
def test_path_json_errors_name_the_field(doc, field):
    with pytest.raises(PathError, match=field):
        parse_path(doc)


def test_load_path_reports_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"points": [[0, 0], [1, 1]],}')
    with pytest.raises(PathError, match="bad.json.*not valid JSON"):
        load_path(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"points": [[0, 0], [0, 2]], "fps": 24, "speed": 1.5, "gait": "walk", "facing": 0}))
    p = load_path(good)
    assert p.fps == 24 and p.speed.tolist() == [1.5, 1.5] and p.gait == ("walk", "walk")


def test_path_track_walks_at_the_speed_and_projects():
    tr = PathTrack(np.array([[0.0, 0.0], [0.0, 10.0], [5.0, 10.0]]), np.full(3, 2.0), np.ones((3, 1)), None, 100.0)
    assert tr.length == pytest.approx(1500.0)
    assert tr.walk(100.0, np.array([0.0, 1.0, 2.0])) == pytest.approx([100.0, 300.0, 500.0], rel=1e-6)
    assert tr.walk(1400.0, np.array([5.0]))[0] == pytest.approx(1500.0)  # clamped at the end
    assert tr.project(np.array([30.0, 420.0]), 400.0) == pytest.approx(420.0)
    assert np.degrees(tr.yaw(np.array(200.0))) == pytest.approx(0.0, abs=1e-9)  # facing +Z along the first leg
    assert np.degrees(tr.yaw(np.array(1300.0))) == pytest.approx(90.0)  # then +X


def test_unknown_gait_names_the_gait_and_the_known_ones():
    ctl = _untrained("pfnn")
    with pytest.raises(PathError, match=r"gait: point 1 is 'trot'.*stand"):
        ctl.track(s_curve(3, gait=("walk", "trot", "run")))
    ctl.track(s_curve(3, gait=("walk", "idle", "run")))  # an alias


# ----------------------------------------------------------------------------- trained tiny checkpoints
@needs_data
def test_load_picks_the_controller_from_the_checkpoint(ckpt):
    kinds = {m: type(Controller.load(p)) for m, p in ckpt.items()}
    assert kinds == {"pfnn": PFNNController, "phase-mlp": PFNNController, "mann": MANNController,
                     "mann-1": MANNController}


@needs_data
@pytest.mark.parametrize("model", ["pfnn", "phase-mlp", "mann", "mann-1"])
def test_rollout_shapes_and_finite(ckpt, model):
    ctl = Controller.load(ckpt[model])
    ro = ctl.rollout([s_curve(), s_curve(speed=2.5, gait="run" if ctl.kind != "mann" else "canter")], 25)
    J = ctl.skeleton.num_joints
    assert ro.rotations.shape == (2, 25, J, 4) and ro.positions.shape == (2, 25, J, 3) and ro.root.shape == (2, 25, 3)
    assert np.isfinite(ro.rotations).all() and np.isfinite(ro.positions).all()
    assert (ro.phase is None) == (ctl.kind == "mann")


@needs_data
@pytest.mark.parametrize("model", ["pfnn", "mann"])
def test_batch_rollout_equals_single_rollouts(ckpt, model):
    ctl = Controller.load(ckpt[model])
    p1, p2 = s_curve(speed=[1.0] * 15 + [2.5] * 15), Path(np.array([[2.0, 0.0], [2.0, -4.0]]), speed=0.8, facing=[180, 90])
    both, one, two = ctl.rollout([p1, p2], 40), ctl.rollout(p1, 40), ctl.rollout([p2], 40)
    for a, b in ((both.positions[0], one.positions[0]), (both.positions[1], two.positions[0]),
                 (both.rotations[1], two.rotations[0]), (both.root[1], two.root[0])):
        np.testing.assert_allclose(a, b, atol=1e-4)


@needs_data
def test_every_mode_runs_and_cubic_matches_the_exact_model(ckpt):
    path = s_curve(speed=[1.0] * 15 + [2.5] * 15)
    exact = Controller.load(ckpt["pfnn"]).rollout([path], 40)
    for mode in ("weights", "constant", "linear", "cubic"):
        ro = Controller.load(ckpt["pfnn"], mode).rollout([path], 40)
        assert np.isfinite(ro.positions).all(), mode
        if mode in ("weights", "cubic"):
            np.testing.assert_allclose(ro.positions, exact.positions, atol=1e-3)
            np.testing.assert_allclose(ro.root, exact.root, atol=1e-3)
    mann = Controller.load(ckpt["mann"]).rollout([path], 40)
    np.testing.assert_allclose(Controller.load(ckpt["mann"], "weights").rollout([path], 40).positions, mann.positions,
                               atol=1e-3)


@needs_data
def test_start_from_a_clip_continues_it(ckpt):
    from motioncore.data import load

    ctl = Controller.load(ckpt["pfnn"])
    clip = next(c for c in load("bandai", "test", progress=False) if c.labels.get("content") == "walk")
    a = ctl.state_from_clip(clip.motion, 40)
    b = stack_states([a, a])
    assert b.batch == 2 and b.past.positions.shape == (2, 30, 3)
    ro = ctl.rollout([s_curve(), s_curve()], 5, b)
    np.testing.assert_allclose(ro.root[0, 0], a.frame.position[0])


def generate(*args: str) -> int:
    """``motioncore generate ARGS`` on one CPU thread (the CLI's default of 2 would stay set for later tests)."""
    return main(["generate", *args, "--threads", "1"])


@needs_data
def test_generate_writes_a_bvh_that_reimports(ckpt, tmp_path, capsys):
    path = tmp_path / "path.json"
    path.write_text(json.dumps({"points": [[0, 0], [0.5, 2], [0, 4]], "fps": 24, "speed": [1.0, 1.5, 2.0],
                                "gait": ["walk", "walk", "run"], "facing": [0, 10, 0]}))
    out = tmp_path / "sub" / "walk.bvh"
    assert generate(ckpt["pfnn"], "--path", str(path), "--out", str(out), "--frames", "30", "--mode", "cubic") == 0
    m = read_bvh(out)
    ctl = Controller.load(ckpt["pfnn"])
    assert m.num_frames == 30 and m.fps == pytest.approx(24.0) and m.skeleton.names == ctl.skeleton.names
    assert "30 frames at 24 fps" in capsys.readouterr().out
    dog = tmp_path / "dog.bvh"  # the dog takes the biped's names too ('run' is its canter)
    assert generate(ckpt["mann"], "--path", str(path), "--out", str(dog), "--frames", "12") == 0
    assert read_bvh(dog).num_frames == 12 and read_bvh(dog).fps == pytest.approx(24.0)
    path.write_text(json.dumps({"points": [[0, 0], [0, 4]], "gait": "sit"}))
    assert generate(ckpt["mann"], "--path", str(path), "--out", str(dog), "--frames", "12") == 0
    assert read_bvh(dog).fps == pytest.approx(60.0)
    assert generate(ckpt["pfnn"], "--path", str(path), "--out", str(out), "--frames", "12") == 2
    assert "gait: point 0 is 'sit'" in capsys.readouterr().err and read_bvh(out).num_frames == 30  # untouched
    path.write_text(json.dumps({"points": [[0, 0], [0, 4]], "speed": [1, 2, 3]}))
    assert generate(ckpt["pfnn"], "--path", str(path), "--out", str(tmp_path / "no.bvh")) == 2
    assert "speed" in capsys.readouterr().err and not (tmp_path / "no.bvh").exists()
