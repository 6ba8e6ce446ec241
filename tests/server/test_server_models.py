"""The server serves the bundled path controllers (pfnn-biped, mann-dog) through pfnn.rollout / mann.rollout.

One real server subprocess started as ``motioncore serve`` would be (no model arguments: the bundled
checkpoints are registered lazily), with one worker and one torch thread.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import needs_data, server_process

from motioncore.tasks.locomotion import Controller
from motioncore.tasks.paths import Path as RootPath
from motioncore.wire import protocol as P
from motioncore.wire.client import Client

pytestmark = pytest.mark.timeout(60)

STRAIGHT = np.array([[0.0, 0.0], [1.5, 0.0], [3.0, 0.0]], np.float32)   # metres


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with server_process(tmp_path_factory.mktemp("models-srv")) as (p, conn, _), Client(conn, timeout=30) as c:
        yield p, c


def test_models_lists_the_bundled_controllers_lazily(server):
    p, c = server
    assert {"pfnn-biped", "mann-dog"} <= set(c.hello()["models"])
    ms = {m["name"]: m for m in c.models()}
    for name, kind, task, fps in (("pfnn-biped", "pfnn", "pfnn.rollout", 30.0), ("mann-dog", "mann", "mann.rollout", 60.0)):
        m = ms[name]
        assert m["kind"] == kind and m["tasks"] == [task] and m["available"] and m["fps"] == fps
        assert m["licence"] and m["training_data"] and m["skeleton"]["names"]


def test_pfnn_rollout_matches_the_in_process_controller(server):
    p, c = server
    frames = 45
    seen = []
    r = c.call("pfnn.rollout", {"model": "pfnn-biped", "frames": frames}, {"points": STRAIGHT},
               progress=seen.append)
    ref = Controller.load("pfnn-biped").rollout(RootPath(STRAIGHT.astype(np.float64)), frames=frames)
    J = ref.skeleton.num_joints
    a = r.arrays
    assert a["rotations"].shape == (frames, J, 4) and a["rotations"].dtype == np.float32
    assert a["translations"].shape == (frames, J, 3) and a["translations"].dtype == np.float32
    assert a["root"].shape == (frames, 3) and a["contacts"].shape == (frames, 4) and a["phase"].shape == (frames,)
    assert all(np.isfinite(v).all() for v in a.values())
    np.testing.assert_allclose(a["rotations"], ref.rotations[0].astype(np.float32), atol=1e-5)
    np.testing.assert_allclose(a["translations"], ref.positions[0].astype(np.float32), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(a["root"], ref.root[0].astype(np.float32), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(a["contacts"], ref.contacts[0].astype(np.float32), atol=1e-5)
    assert r.content["frames"] == frames and r.content["fps"] == 30.0 and r.content["units"] == "cm"
    assert r.content["skeleton"]["joints"] == list(ref.skeleton.names)
    assert r.content["skeleton"]["parents"] == [int(x) for x in ref.skeleton.parents]
    assert seen and seen[-1]["done"] == frames
    # the character walks forwards along +x
    assert a["root"][-1, 0] > a["root"][0, 0]


def test_mann_rollout_with_gait_names(server):
    p, c = server
    r = c.call("mann.rollout", {"frames": 30, "gait": "trot"}, {"points": STRAIGHT, "speed": np.full(3, 1.8)})
    assert r.content["model"] == "mann-dog" and r.content["fps"] == 60.0
    J = len(r.content["skeleton"]["joints"])
    assert r.arrays["rotations"].shape == (30, J, 4) and np.isfinite(r.arrays["rotations"]).all()
    with pytest.raises(P.InvalidRequest, match="gait"):
        c.call("mann.rollout", {"frames": 5, "gait": "moonwalk"}, {"points": STRAIGHT})


@pytest.mark.parametrize("arrays, content, field", [
    ({"points": np.array([[0, 0], [np.nan, 1]], np.float32)}, {}, "points"),
    ({"points": STRAIGHT[:1]}, {}, "points"),
    ({"points": np.zeros((3, 3), np.float32)}, {}, "points"),
    ({"points": STRAIGHT, "speed": np.ones(2, np.float32)}, {}, "speed"),
    ({"points": STRAIGHT, "speed": -np.ones(3, np.float32)}, {}, "speed"),
    ({"points": STRAIGHT, "wind": np.ones(3, np.float32)}, {}, "wind"),
    ({"points": STRAIGHT}, {"frames": 0}, "frames"),
    ({"points": STRAIGHT}, {"frames": 10**6}, "frames"),
    ({"points": np.zeros((2, 2), np.float32)}, {}, "points"),   # zero length
])
def test_bad_paths_are_invalid_request_naming_the_field(server, arrays, content, field):
    p, c = server
    with pytest.raises(P.InvalidRequest, match=field):
        c.call("pfnn.rollout", {"model": "pfnn-biped", **content}, arrays)


def test_feature_requests_and_wrong_kinds_are_refused_and_the_server_stays_up(server):
    p, c = server
    with pytest.raises(P.ModelUnavailable, match="path form"):
        c.mann_rollout(np.zeros(10, np.float32))
    with pytest.raises(P.InvalidRequest, match="points"):
        c.pfnn_rollout(np.zeros(10, np.float32), 0.0, frames=2, model="pfnn-biped")
    with pytest.raises(P.ModelUnavailable, match="does not serve"):
        c.call("mann.rollout", {"model": "pfnn-biped"}, {"points": STRAIGHT})
    assert p.poll() is None and c.health()["status"] == "ok"
    r = c.call("pfnn.rollout", {"frames": 2}, {"points": STRAIGHT})
    assert r.arrays["rotations"].shape[0] == 2


def test_a_long_rollout_is_cancellable(server):
    p, c = server
    rid = c.submit("pfnn.rollout", {"model": "pfnn-biped", "frames": 10_000},
                   {"points": np.array([[0.0, 0.0], [200.0, 0.0]], np.float32)})
    time.sleep(0.5)
    assert c.call("cancel", {"id": rid}).content["cancelled"]
    # one worker: the next rollout is served at once only if the cancelled one stopped
    t0 = time.perf_counter()
    r = c.call("pfnn.rollout", {"frames": 3}, {"points": STRAIGHT}, timeout=10)
    assert r.arrays["rotations"].shape[0] == 3 and time.perf_counter() - t0 < 5


@needs_data
def test_retarget_cmu_onto_bandai_matches_the_library(server):
    from motioncore.data import load
    from motioncore.retarget import auto_map, retarget

    _, c = server
    src = load("cmu", "test", progress=False)[0].motion.slice(0, 60)
    tgt = load("bandai2", "test", progress=False)[0].motion.skeleton
    wire = lambda sk: {"joints": list(sk.names), "parents": sk.parents.tolist(), "offsets": sk.offsets.tolist()}  # noqa: E731
    r = c.retarget(src.rotations, src.positions[:, 0], wire(src.skeleton), wire(tgt))
    ref = retarget(src, tgt, auto_map(src.skeleton, tgt))
    assert r.arrays["rotations"].shape == (60, tgt.num_joints, 4) and r.content["mapped"] > 10
    np.testing.assert_allclose(r.arrays["translations"], ref.positions, atol=1e-3)
    assert np.abs(np.abs(np.sum(r.arrays["rotations"] * ref.rotations, -1)) - 1).max() < 1e-5
    bad = wire(tgt)
    bad["offsets"][0] = [0.0, 0.0]  # two numbers
    with pytest.raises(P.InvalidRequest, match="offsets"):
        c.retarget(src.rotations, src.positions[:, 0], wire(src.skeleton), bad)


def _bandai_walk(style: str):
    from motioncore.data import load

    return next(c for c in load("bandai2") if c.labels.get("style") == style and c.labels.get("content") == "walk"
                and c.split == "test")


@needs_data
def test_style_adapt_walks_the_path_in_the_exemplars_style(server):
    """learnet-biped: an exemplar clip in the rotation form -> z and a rollout equal to the in-process
    StyleAdapter's (the encoder's code fitted to the exemplar, `StyleAdapter.fit`); the returned z reproduces
    it; two styles give two codes and two walks."""
    from motioncore.families.style.generate import StyleAdapter

    p, c = server
    frames = 60
    ms = {m["name"]: m for m in c.models()}
    assert ms["learnet-biped"]["tasks"] == ["style.adapt"] and ms["learnet-biped"]["kind"] == "learnet-pfnn"
    ad = StyleAdapter.load("learnet-biped")
    walks = {}
    for style in ("elderly", "youthful"):
        ex = _bandai_walk(style).motion
        root = ex.positions[:, ad._base.body.root]
        r = c.style_adapt(STRAIGHT, rotations=ex.rotations, root=root, joints=list(ex.skeleton.names), frames=frames)
        z, rep = ad.fit_report(ad.motion(ex.rotations.astype(np.float32), root.astype(np.float32))[0])
        ref = ad.controller(z).rollout(RootPath(STRAIGHT.astype(np.float64)), frames=frames)
        assert r.content["style_from"] == "exemplar" and r.arrays["z"].shape == (ad.model.pfnn.cfg.style_dim,) and not r.content["missing_joints"]
        np.testing.assert_allclose(r.arrays["z"], z, atol=1e-4)
        assert r.content["code_fit"]["best_step"] > 0    # the fit moved the code on these exemplars
        q = r.content["exemplar_quality"]    # the fit's held-out error and warnings, as in-process
        assert q["held_out_cm"] == pytest.approx(rep["quality"]["held_out_cm"], abs=1e-3) and q["warnings"] == rep["quality"]["warnings"]
        np.testing.assert_allclose(r.arrays["rotations"], ref.rotations[0], atol=1e-4)
        again = c.style_adapt(STRAIGHT, z=r.arrays["z"], frames=frames)           # the code instead of the clip
        assert again.content["style_from"] == "z"
        np.testing.assert_allclose(again.arrays["rotations"], r.arrays["rotations"], atol=1e-6)
        walks[style] = r.arrays
    assert np.abs(walks["elderly"]["z"] - walks["youthful"]["z"]).max() > 0.1
    assert np.abs(walks["elderly"]["translations"] - walks["youthful"]["translations"]).max() > 1.0   # cm


@needs_data
def test_style_adapt_names_what_is_wrong_with_the_exemplar(server):
    p, c = server
    ex = _bandai_walk("elderly").motion
    root = ex.positions[:, 1]
    with pytest.raises(P.InvalidRequest, match=r"at least \d+\.\d s of motion"):
        c.style_adapt(STRAIGHT, rotations=ex.rotations[:40], root=root[:40])
    names = list(ex.skeleton.names)
    with pytest.raises(P.InvalidRequest, match="'Foot_R', 'Toes_R'.*missing"):
        c.style_adapt(STRAIGHT, rotations=ex.rotations[:, :-6], root=root, joints=names[:-6])
    r = c.style_adapt(STRAIGHT, rotations=ex.rotations[:, :-1], root=root, joints=names[:-1], frames=10)
    assert r.content["missing_joints"] == ["Toes_R"]                     # a few: left at the rest pose
    # an exemplar keyed at 60 fps is resampled to the model's 30: the same code as the 30 fps clip
    from motioncore.core.kinematics import resample
    from motioncore.core.motion import Motion

    m60 = resample(Motion(ex.skeleton, ex.rotations, ex.positions, ex.fps), 60.0)
    z30 = c.style_adapt(STRAIGHT, rotations=ex.rotations, root=root, frames=10).arrays["z"]
    z60 = c.style_adapt(STRAIGHT, rotations=m60.rotations, root=m60.positions[:, 1], fps=60.0, frames=10).arrays["z"]
    assert np.abs(z60 - z30).max() < 0.05 * np.abs(z30).max()
    with pytest.raises(P.InvalidRequest, match=r"'z' must have shape \(16,\)"):
        c.style_adapt(STRAIGHT, z=np.zeros(5, np.float32))
    assert p.poll() is None and c.health()["status"] == "ok"
