"""The add-on plants the rig's own feet (addon/core/rigplant.py on the vendored core.plant) exactly as the library
plants a clip (families.body.fill_plant.plant_clip): a CMU walk (never trained on) as a rig, its legs found from
the model joints its bones map to, Blender's Bezier of its keys in three gaps."""
from __future__ import annotations

import numpy as np
from conftest import needs_data
from helpers.addon import addon_module

rigplant = addon_module("core.rigplant")
axes = addon_module("vendor.axes")

TO_MODEL = {"lfemur": "UpperLeg_L", "ltibia": "LowerLeg_L", "lfoot": "Foot_L", "ltoes": "Toes_L",
            "rfemur": "UpperLeg_R", "rtibia": "LowerLeg_R", "rfoot": "Foot_R", "rtoes": "Toes_R", "root": "Hips"}


@needs_data
def test_the_rigs_feet_are_planted_as_the_library_plants_them():
    from motioncore.core.rotations import quat_continuity
    from motioncore.data.datasets import load
    from motioncore.eval.clips import cut_gaps
    from motioncore.eval.keyed import bezier_keys
    from motioncore.families.body.fill_plant import plant_clip
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve

    m = next(c.motion for c in load("cmu", "test", fps=30, progress=False) if c.name == "07_03")
    sk = m.skeleton
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    p = np.asarray(m.positions, np.float64)
    known = cut_gaps(len(q), 3, 15)
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    bq, bp = bq[0], bp[0]
    want = plant_clip(sk, bq, bp, known, ~known, m.fps)
    assert np.abs(want.offsets).max() > 5.0   # Bezier's feet slide: there is something to plant

    names = [TO_MODEL.get(n, n) for n in sk.names]   # what the add-on's bone map gives the rig's bones
    legs = rigplant.rig_legs(names, read_meta(resolve("infill-body"))["skeleton"])
    assert [[sk.names[b] for b in lg] for lg in legs] == [["lfemur", "ltibia", "lfoot", "ltoes"],
                                                         ["rfemur", "rtibia", "rfoot", "rtoes"]]
    heads = axes.y_up_to_z_up(sk.rest_positions())   # a BVH rig: its bones' rest heads, Blender's Z-up
    rot, root = rigplant.plant_rig(bq, axes.y_up_to_z_up(bp[:, 0]), heads, list(sk.parents), 0, legs, known,
                                   ~known, m.fps)
    np.testing.assert_allclose(np.abs(np.sum(rot * want.rotations, -1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(axes.z_up_to_y_up(root), want.positions[:, 0], atol=1e-9)
    np.testing.assert_array_equal(rot[known], bq[known])


@needs_data
def test_the_rig_plants_at_the_strength_the_servers_gate_kept():
    """The gate keeps planting per gap length at the strongest strength that costs no error
    (`families.body.fill_plant.judge_plant`); the add-on reads it from the reply's gate (`planted_frames`: 0 where
    not planted, 1 from a server that sends none) and plants the rig at it, as the library plants a clip at it."""
    from motioncore.core.rotations import quat_continuity
    from motioncore.data.datasets import load
    from motioncore.eval.clips import cut_gaps
    from motioncore.eval.keyed import bezier_keys
    from motioncore.families.body.fill_plant import plant_clip

    m = next(c.motion for c in load("cmu", "test", fps=30, progress=False) if c.name == "07_03")
    sk = m.skeleton
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    p = np.asarray(m.positions, np.float64)
    known = cut_gaps(len(q), 3, 15)
    gate = [{"length": 15, "plant": True, "plant_error": {"strength": 0.5}}, {"length": 5, "plant": False}]
    st = rigplant.planted_frames(known, gate, m.fps, 30.0)
    assert set(np.unique(st[~known])) == {0.5} and not st[known].any()
    assert set(np.unique(rigplant.planted_frames(known, [{"length": 15, "plant": True}], m.fps, 30.0)[~known])) == {1.0}
    assert not rigplant.planted_frames(known, [{"length": 15, "plant": False}], m.fps, 30.0).any()
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    bq, bp = bq[0], bp[0]
    half = plant_clip(sk, bq, bp, known, ~known, m.fps, strength=0.5)
    full = plant_clip(sk, bq, bp, known, ~known, m.fps)
    np.testing.assert_allclose(half.offsets, 0.5 * full.offsets, atol=1e-12)
    legs = [tuple(sk.names.index(n) for n in lg) for lg in (("lfemur", "ltibia", "lfoot", "ltoes"),
                                                            ("rfemur", "rtibia", "rfoot", "rtoes"))]
    heads = axes.y_up_to_z_up(sk.rest_positions())
    rot, root = rigplant.plant_rig(bq, axes.y_up_to_z_up(bp[:, 0]), heads, list(sk.parents), 0, legs, known, st,
                                   m.fps)
    np.testing.assert_allclose(np.abs(np.sum(rot * half.rotations, -1)), 1.0, atol=1e-9)
    np.testing.assert_array_equal(rot[known], bq[known])
