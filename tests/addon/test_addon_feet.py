"""The feet in the add-on's In-fill report (addon/core/feet_report.py), without Blender: a real walk as the add-on
holds a BVH-imported rig (rest heads Z-up, rotations with the rest as identity, the root's head), its positions
against the library's forward kinematics, and its skate against core.feet."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data
from helpers.addon import addon_module

from motioncore.core import feet as F
from motioncore.core.axes import y_up_to_z_up

fr = addon_module("core.feet_report")


def _rig(walk):
    """The add-on's rig dict and one segment for the walk, keyed on frames 0-9, every 20th and the last; the root
    bone is the hips (joint 1, below Bandai's still joint_Root), its head relative to joint_Root's."""
    sk = walk.skeleton
    heads = y_up_to_z_up(sk.forward_kinematics(np.tile([1.0, 0, 0, 0], (1, sk.num_joints, 1)),
                                               sk.offsets[None])[1][0])
    rig = {"bones": list(sk.names), "heads": heads, "parents": sk.parents.tolist(), "up": sk.parents.tolist(),
           "root": sk.names[1]}
    T = walk.num_frames
    keyed = np.zeros(T, bool)
    keyed[:10] = keyed[9::20] = keyed[-1] = True
    known = np.repeat(keyed[:, None], sk.num_joints + 1, 1)
    seg = {"frames": np.arange(T, dtype=float), "known": known, "rotations": walk.rotations,
           "root": y_up_to_z_up(walk.positions[:, 1])}
    return rig, seg, keyed


@pytest.fixture(scope="module")
def walk(bandai_walk):
    from motioncore.io.bvh import read_bvh

    return read_bvh(bandai_walk)


@needs_data
def test_rig_positions_are_the_librarys_forward_kinematics(walk):
    rig, seg, _ = _rig(walk)
    p = fr.rig_positions(seg["rotations"], seg["root"], rig["heads"], rig["up"], 1, 0)
    assert np.allclose(p, walk.global_transforms()[1], atol=1e-4)   # Bandai keys each joint's offset to ~1e-6 cm
    names = [rig["bones"][j] for j in fr.rig_feet(rig["bones"], rig["heads"], rig["parents"], p[::10])]
    assert names == ["Foot_L", "Toes_L", "Foot_R", "Toes_R"]


@needs_data
def test_the_report_measures_what_was_written_against_blenders_curve_and_the_keys(walk):
    rig, seg, keyed = _rig(walk)
    T = walk.num_frames
    slide = seg["root"] + np.linspace(0, 300.0, T)[:, None] * np.array([1.0, 0, 0])   # 300 cm drift: keys move too
    seg = {**seg, "bezier": walk.rotations, "bezier_root": seg["root"]}
    fig = fr.skate_figures(rig, [seg], [walk.rotations], [slide], walk.fps, 1.0)
    truth = walk.global_transforms()[1]
    feet = [walk.skeleton.index(n) for n in ("Foot_L", "Toes_L", "Foot_R", "Toes_R")]
    drift = truth + np.linspace(0, 300.0, T)[:, None, None] * np.array([1.0, 0, 0])
    g = F.ground(drift[keyed], feet)
    assert fig["filled"] == pytest.approx(F.skate(drift, walk.fps, feet, g, F.fill_span(keyed)))
    assert fig["bezier"] == pytest.approx(F.skate(truth, walk.fps, feet, g, F.fill_span(keyed)))
    assert fig["keyed"] == pytest.approx(F.skate(drift, walk.fps, feet, g, keyed))
    assert fig["filled"] > fig["bezier"]   # the whole body slides 30 cm/s more
    msg = fr.skate_message(fig)
    assert msg.startswith(f"; feet slide {fig['filled']:.0f} cm/s") and "Blender's curve" in msg
    # the reply as the operator holds it; cm per rig unit from the reply's scale (a rig in metres: 100)
    arrays = {"rotations.0": walk.rotations[None], "root.0": slide[None] / 100.0}
    metres = {**rig, "heads": rig["heads"] / 100.0}
    seg_m = {**seg, "bezier_root": seg["root"] / 100.0}
    assert fr.report_feet(metres, [seg_m], arrays, 0, walk.fps, {"scale": 100.0}) == msg
    assert fr.report_feet(rig, [seg], {}, 0, walk.fps, {}).startswith("; feet not measured (KeyError")
    lifted = slide + np.array([0.0, 0.0, 20.0])   # Z up: the whole body 20 cm up in the filled frames
    lifted[keyed] = slide[keyed]
    fig = fr.skate_figures(rig, [seg], [walk.rotations], [lifted], walk.fps, 1.0)
    assert not np.isfinite(fig["filled"])
    assert fr.skate_message(fig).startswith("; no foot comes within 2.5 cm of the ground your keys stand on")


def test_a_rig_without_legs_reports_nothing_about_feet():
    heads = np.array([[0.0, 0, 0], [0, 0, 10], [0, 0, 20]])
    rig = {"bones": ["a", "b", "c"], "heads": heads, "parents": [-1, 0, 1], "up": [-1, 0, 1], "root": "a"}
    T = 6
    q = np.tile([1.0, 0, 0, 0], (T, 3, 1))
    known = np.ones((T, 4), bool)
    known[2:4] = False
    seg = {"frames": np.arange(T, dtype=float), "known": known, "bezier": q, "bezier_root": np.zeros((T, 3))}
    assert fr.skate_figures(rig, [seg], [q], [np.zeros((T, 3))], 30.0, 1.0) is None
    assert fr.skate_message(None) == ""
