"""The in-fill request's plan (``motioncore.infill``): built once per request from the keys, it holds the gaps with
their lengths in the clip's and the model's frames and their gate bucket, the route a clip at another rate takes,
the masks at the model's rate, and after the fill one fit row per gap (the reply's ``gaps`` table). Checked on a
real Bandai walk (30 fps) seen at the importer's 24 fps and at 60 fps, against obvious per-frame references, and
the table against the gate the fill actually used."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def walk(raw_file):
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-body")
    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    rj = int(meta["root_joint"])
    q, root = mo.rotations[:300], mo.positions[:300, rj]
    keys = np.ones((len(q), q.shape[1] + 1), bool)
    for s, e in ((40, 55), (120, 124), (200, 230)):
        keys[s:e] = False
    return model, meta, q, root, keys


def test_resample_is_the_obvious_per_frame_rule():
    """The one resampling (``infill.rate``) against a loop: each new frame at time i / fps_to between the clip frames
    around it, a new frame keyed where both are (or it falls on one)."""
    from motioncore.infill.rate import Resample

    rng = np.random.default_rng(3)
    for n, f0, f1 in ((53, 24.0, 30.0), (120, 60.0, 30.0), (40, 30.0, 24.0), (9, 120.0, 30.0)):
        rs = Resample.of(n, f0, f1)
        keys = rng.random((n, 3)) < 0.7
        for i in range(rs.size):
            x = min(i * f0 / f1, n - 1)
            lo = int(np.floor(x + 1e-6))
            assert rs.i0[i] == min(lo, n - 1) and rs.i1[i] == min(lo + 1, n - 1)
            assert abs(rs.w[i] - (0.0 if abs(x - lo) < 1e-6 else x - lo)) < 1e-12
            want = keys[rs.i0[i]] & (keys[rs.i1[i]] | (rs.w[i] == 0))
            np.testing.assert_array_equal(rs.keys(keys)[i], want)
        assert abs(rs.at[-1] - (n - 1)) < 1.0   # the last new frame reaches the clip's end


@needs_data
def test_the_plans_gaps_lengths_and_routes(walk):
    from motioncore.infill import InfillPlan

    _, meta, q, root, keys = walk
    same = InfillPlan.of(meta, q, root, keys, 30.0)
    assert same.route == "same" and [(g.start, g.end, g.length) for g in same.gaps] == [(40, 55, 15), (120, 124, 4),
                                                                                         (200, 230, 30)]
    assert [g.bucket for g in same.gaps] == [12, 4, 24]
    slow = InfillPlan.of(meta, q, root, keys, 24.0)   # a 24 fps scene: through the model's rate and back
    assert slow.route == "through" and slow.model is not None and slow.model.route == "same"
    rs = slow.to_model
    np.testing.assert_array_equal(slow.model.keys, keys[rs.i0] & (keys[rs.i1] | (rs.w == 0)[:, None]))
    assert [g.frames for g in slow.gaps] == [15, 4, 30]
    fast = InfillPlan.of(meta, q, root, keys, 60.0, own_rate=True)   # faster than the model: at its own rate
    assert fast.route == "own"
    assert [g.length for g in fast.gaps] == [max(1, round(g.frames * 30 / 60)) for g in fast.gaps]
    with pytest.raises(Exception, match="no key"):
        InfillPlan.of(meta, q, root, np.zeros_like(keys), 30.0)


@needs_data
@pytest.mark.parametrize("fps", [30.0, 24.0])
def test_each_gaps_row_is_the_gates_fit_for_its_length(walk, fps):
    """The reply's table gives each gap the weights the fill used: the gate's fit for the gap's bucket at the model's
    rate (at 24 fps: the model-rate gap over the same frames)."""
    from motioncore.infill import Request, family_for, fill

    model, meta, q, root, keys = walk
    out = fill(Request(model, meta, q, root, keys, fps, plant_feet=False, family=family_for(meta)))
    rows = out.plan.table()
    assert [(r["start"], r["end"]) for r in rows] == [(40, 55), (120, 124), (200, 230)]
    for r in rows:
        assert (r["rot"], r["root"]) == out.gate.weights(r["length"])
        assert r["blend"] == out.gate.blend(r["length"]) and r["plant"] is False
        if fps == 24.0:   # the model's frames over the same stretch of time
            assert abs(r["length"] - r["frames"] * 30 / 24) <= 2
