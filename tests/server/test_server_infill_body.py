"""The deterministic body in-fill behind the server: a request naming no model at temperature 0 gets
infill-body, the keys come back bit-exact, the reply carries the model's base (Blender's Bezier of the keys in
the model's space) for the add-on's correction, and variations (temperature > 0) go to the any-order model."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data, server_process

from motioncore.core.rotations import quat_angle
from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(180), needs_data]
T = 40


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from motioncore.data import load
    from motioncore.families.body.fill import BodyLayout
    from motioncore.families.body.model import InfillBody, InfillBodyConfig
    from motioncore.models.checkpoint import save_model

    clip = load("bandai", "test", fps=30, progress=False)[1].motion
    sk = clip.skeleton
    lay = BodyLayout.of(sk)
    torch.manual_seed(0)
    cfg = InfillBodyConfig(lay.num_model_joints, d_model=32, n_layers=1, n_heads=2, d_ff=64)
    model = InfillBody(cfg)
    with torch.no_grad():
        model.out.bias.normal_(0.0, 0.05)   # a network that moves every joint, so answer and base differ
    folder = tmp_path_factory.mktemp("body-srv")
    save_model(folder / "infill-body", model, "infill-body", cfg.to_dict(),
               {"skeleton": sk.to_dict(), "fps": 30.0, "root_joint": 1, "training_data": "none (test model)",
                "licence": "CC BY-NC 4.0 (skeleton only)"})
    with server_process(folder, "--no-bundled", "--model", str(folder / "infill-body")) as (p, conn, _), \
            Client(conn, timeout=60) as c:
        yield c, clip.rotations[:T].astype(np.float32), clip.positions[:T, 1].astype(np.float32), model, sk


def test_temperature_zero_gets_the_deterministic_model_with_its_base(served):
    from motioncore.families.body.fill import BodyLayout, prepare, run_model

    c, q, root, model, sk = served
    known = np.zeros(T, bool)
    known[:10] = known[-1] = True
    r = c.infill_rotations(q, root, known)   # no model named
    assert r.content["model"] == "infill-body"
    out, rt = r.arrays["rotations"], r.arrays["root"]
    np.testing.assert_array_equal(out[0, known], q[known])
    np.testing.assert_array_equal(rt[0, known], root[known])
    pos = np.broadcast_to(sk.offsets, (T, sk.num_joints, 3)).copy()
    pos[:, 1] = root
    kn = np.repeat(known[:, None], sk.num_joints + 1, 1)[None]
    from motioncore.tasks.infill import fill_clip

    # sparse keys: the gate leaves the key next to the gap out and predicts it from frames 8 and 39
    assert [g["method"] for g in r.content["gate"]] == ["leave-one-key-out"]
    lib = fill_clip(model, _meta_of(served), q.astype(np.float64), root.astype(np.float64), known)
    assert lib.gate.summary()[0]["rot"] == r.content["gate"][0]["rot"]
    assert np.degrees(quat_angle(out[0], lib.rotations[0])).max() < 1e-2   # the library's answer (float32 on the wire)
    ref_q, _ = run_model(model, BodyLayout.of(sk), q[None].astype(np.float64), pos[None], kn,
                         confidence=np.array([[r.content["gate"][0]["rot"], r.content["gate"][0]["root"]]]))
    assert np.degrees(quat_angle(out[0], ref_q[0])).max() < 1e-2   # = the network with the gate's weights
    # sparse keys: no fully keyed stretch to test planting on, so the feet are left as filled, and it says why
    assert r.content["plant"] is None and not r.content["gate"][0]["plant"]
    assert "unjudged" in r.content["gate"][0]["plant_error"]
    base = prepare(BodyLayout.of(sk), q[None].astype(np.float64), pos[None], kn)
    assert np.degrees(quat_angle(r.arrays["base_rotations"][0], base.rotations[0])).max() < 1e-2
    assert np.abs(r.arrays["base_root"][0] - base.positions[0, :, 1]).max() < 1e-2
    off = c.infill_rotations(q, root, known, gate=False)   # the network as trained (this one: random) moves
    assert "gate" not in off.content
    assert np.degrees(quat_angle(off.arrays["rotations"][0], r.arrays["base_rotations"][0])).max() > 1.0


def test_samples_of_the_deterministic_model_repeat_its_one_answer(served):
    c, q, root, _, _ = served
    known = np.zeros(T, bool)
    known[:10] = known[-1] = True
    r = c.infill_rotations(q, root, known, model="infill-body", temperature=1.0, samples=2)
    assert r.arrays["rotations"].shape[0] == 2   # deterministic: the one answer, repeated
    np.testing.assert_array_equal(r.arrays["rotations"][0], r.arrays["rotations"][1])


@pytest.fixture(scope="module")
def long_clip(served):
    """300 frames keyed at every frame but two 15-frame gaps: room for the gate's pseudo-gaps."""
    from motioncore.data import load

    clip = max(load("bandai", "test", fps=30, progress=False)[:40], key=lambda c: len(c.motion.rotations)).motion
    n = min(300, len(clip.rotations))
    assert n == 300
    known = np.ones(n, bool)
    known[80:95] = known[200:215] = False
    return clip.rotations[:n].astype(np.float32), clip.positions[:n, 1].astype(np.float32), known


def test_the_gate_is_fitted_on_the_requests_own_keys_as_the_library_fits_it(served, long_clip):
    from motioncore.tasks.infill import fill_clip

    c, _, _, model, _ = served
    q, root, known = long_clip
    r = c.infill_rotations(q, root, known)
    (g,) = r.content["gate"]
    assert g["method"] == "pseudo-gaps" and g["pseudo"] >= 4 and g["length"] == 15
    assert 0.0 <= g["rot"] <= 1.0 and 0.0 <= g["root"] <= 1.0
    lib = fill_clip(model, _meta_of(served), q.astype(np.float64), root.astype(np.float64), known)
    assert lib.gate.summary()[0]["rot"] == g["rot"] and lib.gate.summary()[0]["root"] == g["root"]
    assert np.degrees(quat_angle(r.arrays["rotations"][0], lib.rotations[0])).max() < 1e-2
    np.testing.assert_array_equal(r.arrays["rotations"][0, known], q[known])
    # planting, judged on the same test gaps: as the library judges it; "judge" judges without planting
    assert g["plant"] == lib.gate.summary()[0]["plant"] and set(g["plant_error"]) == {
        "unplanted", "planted", "truth_skate", "bezier", "strength", "tried"}
    assert g["plant_error"]["strength"] == lib.gate.summary()[0]["plant_error"]["strength"]
    assert (r.content["plant"] is not None) == g["plant"]
    j = c.infill_rotations(q, root, known, plant_feet="judge")
    assert j.content["gate"][0]["plant"] == g["plant"] and (j.content["plant"] is not None) == g["plant"]
    assert not g["plant"] or j.content["plant"]["judged_only"]
    flat = c.infill_rotations(q, root, known, plant_feet=False)
    np.testing.assert_array_equal(j.arrays["rotations"], flat.arrays["rotations"])   # judged: not planted
    with pytest.raises(Exception, match="plant_feet"):
        c.infill_rotations(q, root, known, plant_feet="maybe")


def _meta_of(served):
    c, _, _, _, sk = served
    return {"skeleton": sk.to_dict(), "fps": 30.0, "root_joint": 1, "kind": "infill-body"}


def test_learn_this_action_adapts_a_copy_that_infill_then_uses_until_the_keys_change(served, long_clip):
    c, _, _, _, _ = served
    q, root, known = long_clip
    a = c.adapt(q, root, known, seconds=2.0)
    ad = a.content["adapted"]
    assert a.content["cached"] is False and ad["steps"] >= 1 and set(ad["before_cm"]) == {"15"}
    assert all(np.isfinite(v) for v in ad["after_cm"].values())
    assert c.adapt(q, root, known, seconds=2.0).content["cached"] is True   # the same keys: learnt already
    r = c.infill_rotations(q, root, known)
    assert r.content["adapted"]["key"] == ad["key"]
    np.testing.assert_array_equal(r.arrays["rotations"][0, known], q[known])
    moved = q.copy()
    moved[10, 3] = moved[10, 3][[1, 0, 2, 3]]   # another key: not this action any more
    assert "adapted" not in c.infill_rotations(moved, root, known).content
