"""The bundled deterministic hand in-fill (``infill-hands``) behind the server: a real held-out ManipNet window
with its object, the keys back bit-exact, the library's answer, Bezier as the base for the add-on's correction,
the left hand by mirroring, and ``models`` listing it with the object and the right hand."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data, server_process

from motioncore.core.rotations import quat_angle
from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(180), needs_data]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from motioncore.models.registry import resolve

    folder = tmp_path_factory.mktemp("hands-srv")
    with server_process(folder, "--no-bundled", "--model", str(resolve("infill-hands"))) as (p, conn, _), \
            Client(conn, timeout=60) as c:
        yield c


def _window(side: str):
    from motioncore.data import load
    from motioncore.families.anyorder.evaluate_hands import TASKS, hand_keys

    clip = load(f"manipnet-{side}", "test", fps=30.0, progress=False)[1]
    m = clip.motion
    sl = slice(200, 240)
    keys = hand_keys(TASKS["wrist-every-10"](), tuple(m.skeleton.names), 0)
    obj = (clip.extras["object_rotations"][sl], clip.extras["object_positions"][sl])
    return m.rotations[sl], m.positions[sl, 0], keys, obj


@pytest.mark.parametrize("side", ["right", "left"])
def test_hands_request_gets_the_library_answer_and_bezier_as_base(served, side):
    from motioncore.families.hands.fill import bezier_fingers
    from motioncore.infill import fill_clip_at
    from motioncore.models.registry import load_model

    c = served
    q, root, keys, obj = _window(side)
    mirror = side == "left"
    r = c.infill_rotations(q, root, keys, model="infill-hands", object_track=obj, mirror=mirror)
    assert r.content["model"] == "infill-hands" and r.content["object"]
    out = r.arrays["rotations"][0]
    k = keys[:, :17]
    np.testing.assert_array_equal(out[k], q[k].astype(np.float32))
    model, meta = load_model("infill-hands")
    f32 = (q.astype(np.float32).astype(np.float64), root.astype(np.float32).astype(np.float64))
    o32 = tuple(np.asarray(a, np.float32).astype(np.float64) for a in obj)
    ref = fill_clip_at(model, meta, *f32, keys, None, mirror=mirror, object_track=o32)
    assert np.degrees(quat_angle(out, ref.rotations[0])).max() < 1e-2
    assert np.degrees(quat_angle(r.arrays["base_rotations"][0], bezier_fingers(f32[0], k))).max() < 1e-2
    assert np.degrees(quat_angle(out, r.arrays["base_rotations"][0])).max() > 0.05   # the correction moved


def test_models_lists_it_with_the_object_and_its_hand(served):
    info = next(m for m in served.call("models").content["models"] if m["name"] == "infill-hands")
    assert info["object_cond"] and info["kind"] == "infill-hands" and info["hand"] == "r"
    from helpers.addon import addon_module  # the add-on mirrors a left hand onto it

    model_side = addon_module("core.requests").model_side

    assert model_side(info) == "r" and model_side({"training_data": "ManipNet manipnet-left"}) == "l"


def test_learn_gates_on_the_takes_own_keyed_fingers_as_the_library_does(served):
    from motioncore.data import load
    from motioncore.families.hands.gate import learn_and_fill
    from motioncore.models.registry import load_model

    clip = load("manipnet-right", "test", fps=30.0, progress=False)[0]
    m = clip.motion
    q, root = m.rotations[:360].astype(np.float32), m.positions[:360, 0].astype(np.float32)
    keys = np.ones((360, 18), bool)   # finger capture with two dropouts of 30 frames; the wrist every 10 there
    for a in (120, 250):
        keys[a:a + 30, 1:17] = False
        keys[a:a + 30, [0, 17]] = (np.arange(30) % 10 == 9)[:, None]
    r = served.infill_rotations(q, root, keys, model="infill-hands", learn=0)
    model, meta = load_model("infill-hands")
    todo = ~keys
    ref, _, report = learn_and_fill(model, meta, q.astype(np.float64), root.astype(np.float64), keys, todo)
    assert report["pseudo_gaps"] > 10 and set(report["gate"]) == {30}
    assert np.degrees(quat_angle(r.arrays["rotations"][0], ref)).max() < 1e-2
    np.testing.assert_array_equal(r.arrays["rotations"][0][keys[:, :17]], q[keys[:, :17]])
    with pytest.raises(Exception, match="learn"):
        served.infill_rotations(q, root, keys, model="infill-hands", learn=-1)
