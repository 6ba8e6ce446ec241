"""Retargeted feet on the target's ground (retarget.contacts.stand_on, `motioncore retarget`'s default) and the one
foot-contact definition (core.feet) behind `retarget --contacts`: a real walk lifted 8.8 cm, the same walk in a
rest pose with every single-child offset on its parent's +x (scripts/feet_rigs.py) sunk 8 cm, both put back on
the target walk's contact height and report.json saying by how much."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F
from motioncore.core.motion import Motion

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_feet_rigs_under_test", ROOT / "scripts" / "feet_rigs.py")
assert _spec and _spec.loader
rigs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rigs)


@pytest.fixture(scope="module")
def walk(bandai_walk):
    from motioncore.io.bvh import read_bvh

    return read_bvh(bandai_walk)


def _moved(m: Motion, dy: float) -> Motion:
    pos = m.positions.copy()
    pos[:, 0, 1] += dy   # the root's translation: the whole body
    return Motion(m.skeleton, m.rotations, pos, m.fps, m.name)


@needs_data
def test_stand_on_moves_the_whole_clip_onto_a_contact_height(walk):
    from motioncore.retarget.contacts import contact_height_of, feet_of, stand_on

    h = contact_height_of(walk)
    gp = walk.global_transforms()[1]
    toes = [leg[-1] for leg in feet_of(walk.skeleton, gp[::10])]
    assert h == pytest.approx(np.median(gp[:, toes, 1].min(axis=1)))
    assert 2.0 < h < 7.0   # the toe joint sits a few cm above the floor
    up = _moved(walk, 8.8)
    assert contact_height_of(up) == pytest.approx(h + 8.8)
    back, dy = stand_on(up, h)
    assert dy == pytest.approx(-8.8)
    np.testing.assert_allclose(back.global_transforms()[1], gp, atol=1e-9)
    np.testing.assert_array_equal(back.rotations, walk.rotations)


@needs_data
def test_the_one_axis_rest_clip_moves_as_the_capture(walk):
    axis = rigs.one_axis_rest(walk)
    sk = axis.skeleton
    np.testing.assert_allclose(axis.global_transforms()[1], walk.global_transforms()[1], atol=1e-9)
    for j in range(sk.num_joints):
        kids = sk.children(j)
        if kids:
            o = sk.offsets[kids[0]]
            assert np.allclose(o[1:], 0, atol=1e-9) and o[0] >= 0, (sk.names[j], o)


@needs_data
def test_retarget_puts_the_feet_on_the_targets_contact_height_and_says_so(walk, tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.io.bvh import read_bvh, write_bvh
    from motioncore.retarget.contacts import contact_height_of

    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "floating.bvh", _moved(walk, 8.8))
    write_bvh(src / "one_axis_low.bvh", _moved(rigs.one_axis_rest(walk), -8.0))
    write_bvh(tmp_path / "target.bvh", walk)
    target = contact_height_of(walk)
    assert main(["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "floating.bvh: feet moved down 8.8" in err and "one_axis_low.bvh: feet moved up 8.0" in err, err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["floor"] == pytest.approx(target, abs=1e-3)
    feet = {Path(k).name: v for k, v in rep["feet"].items()}
    assert feet["floating.bvh"]["moved_up"] == pytest.approx(-8.8, abs=0.01)
    assert feet["one_axis_low.bvh"]["moved_up"] == pytest.approx(8.0, abs=0.01)
    for name in ("floating", "one_axis_low"):
        out = read_bvh(tmp_path / "out" / f"{name}.bvh")
        assert abs(contact_height_of(out) - target) < 0.01   # within 1 cm asked; the BVH's 6 digits give this
    assert rep["below_ground"] == {}
    assert main(["retarget", str(src), "--target", str(tmp_path / "target.bvh"), "--out", str(tmp_path / "kept"),
                 "--quiet", "--keep-height"]) == 0
    kept = read_bvh(tmp_path / "kept" / "floating.bvh")
    assert contact_height_of(kept) == pytest.approx(target + 8.8, abs=0.01)
    assert json.loads((tmp_path / "kept" / "report.json").read_text())["feet"] == {}


@needs_data
def test_retarget_contacts_are_core_feets_on_the_ankles(walk):
    from motioncore.retarget.contacts import leg_chains, source_cm_per_unit, source_contacts

    assert source_cm_per_unit(walk.skeleton) == 1.0   # a BVH in cm
    chains = leg_chains(walk.skeleton)
    want = F.contacts(walk.global_transforms()[1], walk.fps, [c[2] for c in chains])
    np.testing.assert_array_equal(source_contacts(walk), want)
    assert 0.2 < want.mean() < 0.6   # a walk: each ankle planted part of the time
    metres = Motion(walk.skeleton.__class__(walk.skeleton.names, walk.skeleton.parents, walk.skeleton.offsets / 100,
                                            walk.skeleton.channels), walk.rotations, walk.positions / 100, walk.fps)
    assert source_cm_per_unit(metres.skeleton) == 100.0
    np.testing.assert_array_equal(source_contacts(metres), want)   # the same labels in metres
