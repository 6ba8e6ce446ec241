"""The add-on's correction of the user's curves by a deterministic model's answer (addon/core/correct.py):
the model's change goes on Blender's default Bezier of the keys (the model's base), and the result is blended from
the curve the user has (LINEAR from Blender's BVH importer, CONSTANT, or Bezier with any handles) by the gate's
weight per gap, read from the server's per-gap table (correct.table_blend)."""
from __future__ import annotations

import numpy as np
from helpers.addon import addon_module, same_rotation, unit_quat

correct = addon_module("core.correct")
rigmap = addon_module("core.rigmap")


def _seg(T: int = 20, B: int = 4, seed: int = 0) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    known = np.ones((T, B + 1), bool)
    known[5:9] = known[13:17] = False
    seg = {"bezier": unit_quat(rng.normal(size=(T, B, 4))), "bezier_root": rng.normal(size=(T, 3)),
           "keys_bezier": unit_quat(rng.normal(size=(T, B, 4))), "keys_bezier_root": rng.normal(size=(T, 3))}
    return seg, known


def test_weight_zero_gives_the_users_curve_exactly_and_full_weight_the_change_on_the_bezier_of_the_keys():
    rng = np.random.default_rng(1)
    seg, known = _seg()
    T, B = known.shape[0], known.shape[1] - 1
    out, root = unit_quat(rng.normal(size=(T, B, 4))), rng.normal(size=(T, 3))
    base = (unit_quat(rng.normal(size=(T, B, 4))), rng.normal(size=(T, 3)))
    todo = ~known.all(1)
    q0, r0 = correct.correct(out, root, base, seg, known, np.zeros(T))
    np.testing.assert_array_equal(q0[todo], seg["bezier"][todo])   # the user's own curve, bit for bit
    np.testing.assert_array_equal(r0[todo], seg["bezier_root"][todo])
    np.testing.assert_array_equal(q0[~todo], out[~todo])   # keyed frames as the answer (the keys) gives them
    q1, r1 = correct.correct(out, root, base, seg, known, np.ones(T))
    want = rigmap.quat_mul(rigmap.quat_mul(out, rigmap.quat_conj(base[0])), seg["keys_bezier"])
    assert same_rotation(q1[todo], unit_quat(want[todo]), atol=1e-9)
    np.testing.assert_allclose(r1[todo], (seg["keys_bezier_root"] + root - base[1])[todo])
    qn, rn = correct.correct(out, root, base, seg, known)   # no blend: full weight
    assert same_rotation(qn, q1, atol=1e-9)
    np.testing.assert_allclose(rn, r1)
    # a model that returns its base gives Blender's Bezier of the keys at full weight, whatever the user's curve
    qb, _ = correct.correct(base[0], base[1], base, seg, known, np.ones(T))
    assert same_rotation(qb[todo], seg["keys_bezier"][todo], atol=1e-9)
    # half way: between the two, on the same side as the user's curve
    qh, rh = correct.correct(out, root, base, seg, known, np.full(T, 0.5))
    np.testing.assert_allclose(rh[todo], 0.5 * (r0[todo] + r1[todo]))
    d = lambda a, b: np.abs(np.sum(a * b, -1))   # noqa: E731
    assert np.all(d(qh[todo], q0[todo]) >= d(q1[todo], q0[todo]) - 1e-12)


def test_each_gap_takes_the_blend_of_its_row_in_the_servers_table():
    known = np.ones((60, 3), bool)
    known[5:10] = False
    known[30:45] = False
    rows = [{"start": 5, "end": 10, "frames": 5, "length": 6, "bucket": 6, "blend": 0.3},
            {"start": 30, "end": 45, "frames": 15, "length": 19, "bucket": 16, "blend": 0.8}]
    w = correct.table_blend(len(known), rows)
    assert np.all(w[5:10] == 0.3) and np.all(w[30:45] == 0.8)
    assert np.all(w[known.all(1)] == 1.0)
    assert np.all(correct.table_blend(len(known), None) == 1.0)   # a server without the table: the fill
