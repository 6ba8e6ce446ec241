"""The body in-fill's request fields for imported mocap, through the real server with the shipped ``infill-body``:
``rate: "best"`` fills a 30 fps walk sent at the importer's 24 fps at the rate test gaps cut from its keys choose (the
library's fill at that rate, keys on their frames), and ``curve`` makes the gate weigh the fill against the user's
linear curve (``blend``, ``curve_error``), leaving the fill itself as it is."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data, server_process

from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(600), needs_data, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def served(tmp_path_factory, raw_file):
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model, resolve

    model, meta = load_model("infill-body")
    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    q, root = mo.rotations, mo.positions[:, int(meta["root_joint"])]
    keys = np.ones((len(q), q.shape[1] + 1), bool)
    for s in range(30, len(q) - 30, 60):
        keys[s:s + 15] = False
    folder = tmp_path_factory.mktemp("rate-srv")
    with server_process(folder, "--no-bundled", "--model", str(resolve("infill-body"))) as (_, conn, _), \
            Client(conn, timeout=300) as c:
        yield c, model, meta, q, root, keys


def test_best_rate_fills_at_the_rate_the_test_gaps_choose_and_keeps_the_keys(served):
    from motioncore.infill import fill_clip_at

    c, model, meta, q, root, keys = served
    r = c.infill_rotations(q, root, keys, model="infill-body", fps=24.0, rate="best", plant_feet=False)
    rate = r.content["rate"]
    assert rate["best"] == 30.0 and rate["filled_at"] == 30.0, rate
    lib = fill_clip_at(model, meta, q, root, keys, 30.0, plant_feet=False)
    np.testing.assert_allclose(r.arrays["rotations"][0], lib.rotations[0], atol=2e-6)
    np.testing.assert_array_equal(r.arrays["rotations"][0][keys[:, :-1]], q.astype(np.float32)[keys[:, :-1]])
    scene = c.infill_rotations(q, root, keys, model="infill-body", fps=24.0, plant_feet=False)   # the default: 24
    assert "filled_at" not in scene.content["rate"] and scene.content["rate"]["best"] == 30.0
    at24 = fill_clip_at(model, meta, q, root, keys, 24.0, plant_feet=False)
    np.testing.assert_allclose(scene.arrays["rotations"][0], at24.rotations[0], atol=2e-6)


def test_the_gate_weighs_the_fill_against_the_users_linear_curve(served):
    c, model, meta, q, root, keys = served
    lin = c.infill_rotations(q, root, keys, model="infill-body", fps=30.0, curve="linear", plant_feet=False)
    bez = c.infill_rotations(q, root, keys, model="infill-body", fps=30.0, plant_feet=False)
    (g,) = lin.content["gate"]
    assert g["curve"] == "linear" and 0.0 <= g["blend"] <= 1.0
    ce = g["curve_error"]
    # the blend scores no worse than the linear curve on the test gaps (weight 0, the curve itself, is a candidate)
    assert ce["blended"][0] / ce["curve"][0] + ce["blended"][1] / ce["curve"][1] <= 2.0 + 1e-9, ce
    assert ce["fill"][0] < ce["curve"][0], ce   # a walk: the model's fill beats linear interpolation by far
    (gb,) = bez.content["gate"]
    assert gb["curve"] == "bezier" and gb["blend"] == 1.0 and not gb["curve_error"]
    np.testing.assert_array_equal(lin.arrays["rotations"], bez.arrays["rotations"])   # the fill is the same
