"""One leg finder (retarget.topology.find_legs, vendored): the library's planting (families.body.fill_plant.legs_of)
and the add-on's (addon/core/rigplant.rig_legs) find the same legs on a real Bandai walk renamed into each common
name set of biped rigs, the hierarchy first: bones with no telling names, and an IK helper named like a foot, do
not change which joints the legs are."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data
from helpers.addon import addon_module
from helpers.rigs import NAME_SETS, renamed

from motioncore.core.motion import Motion
from motioncore.core.skeleton import Skeleton
from motioncore.retarget import clip_poses
from motioncore.retarget.topology import find_legs

LEGS = [("UpperLeg_L", "LowerLeg_L", "Foot_L", "Toes_L"), ("UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")]


@pytest.fixture(scope="module")
def walk() -> Motion:
    from motioncore.data import load

    return next(c for c in load("bandai2", "test", progress=False) if "walk" in c.name).motion


def named(sk: Skeleton, legs: list) -> list[tuple[str | None, ...]]:
    return [tuple(sk.names[j] if j >= 0 else None for j in lg) for lg in legs]


def with_helper(m: Motion, name: str) -> Motion:
    """``m`` with a leaf bone ``name`` inserted as joint 1, a child of the root (an IK target, say)."""
    sk = m.skeleton
    parents = np.r_[-1, 0, [p + 1 if p > 0 else p for p in sk.parents[1:]]]
    offsets = np.insert(sk.offsets, 1, [0.0, 0.0, 10.0], axis=0)
    channels = (sk.channels[0], ("Zrotation", "Xrotation", "Yrotation"), *sk.channels[1:])
    ends = tuple((j + 1 if j > 0 else j, off) for j, off in sk.end_sites)
    out = Skeleton((sk.names[0], name, *sk.names[1:]), parents, offsets, channels, ends)
    rot = np.insert(m.rotations, 1, [1.0, 0.0, 0.0, 0.0], axis=1)
    pos = np.insert(m.positions, 1, offsets[1], axis=1)
    return Motion(out, rot, pos, m.fps, m.name)


@needs_data
@pytest.mark.parametrize("name_set", sorted(NAME_SETS))
def test_library_and_addon_find_the_same_legs_on_each_rig(walk, name_set):
    from motioncore.families.body.fill_plant import legs_of
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve

    rig = renamed(walk, NAME_SETS[name_set])
    sk = rig.skeleton
    want = [tuple(NAME_SETS[name_set][n] for n in leg) for leg in LEGS]
    assert named(sk, find_legs(sk.parents, sk.offsets, sk.names, clip_poses(rig))) == want
    assert named(sk, [(lg.hip, lg.knee, lg.ankle, lg.toe) for lg in legs_of(sk)]) == want
    # the add-on: the rig's bones, each named by the model joint its bone map gives it
    to_model = {v: k for k, v in NAME_SETS[name_set].items()}
    rigplant = addon_module("core.rigplant")
    legs = rigplant.rig_legs([to_model[n] for n in sk.names], read_meta(resolve("infill-body"))["skeleton"])
    assert named(sk, legs) == want


@needs_data
def test_legs_come_from_the_hierarchy_not_the_names(walk):
    sk = walk.skeleton
    blank = Skeleton(tuple(f"bone{j:02d}" for j in range(sk.num_joints)), sk.parents, sk.offsets, sk.channels,
                     sk.end_sites)
    blind = Motion(blank, walk.rotations, walk.positions, walk.fps, walk.name)
    got = find_legs(blank.parents, blank.offsets, blank.names, clip_poses(blind))
    assert named(sk, got) == LEGS   # the sides from the pose: the left leg is the walk's left leg
    # an IK helper named like a foot, before the real foot in the bone order, is no leg
    helped = with_helper(walk, "IK_Foot_L")
    hs = helped.skeleton
    assert named(hs, find_legs(hs.parents, hs.offsets, hs.names, clip_poses(helped))) == LEGS


def test_a_skeleton_that_is_no_whole_biped_has_its_legs_found_by_names():
    names = ("pelvis", "thigh.L", "shin.L", "foot.L", "toe.L", "thigh.R", "shin.R", "foot.R", "toe.R")
    parents = [-1, 0, 1, 2, 3, 0, 5, 6, 7]
    offsets = np.array([[0, 90, 0], [10, 0, 0], [0, -45, 0], [0, -40, 0], [0, -5, 12],
                        [-10, 0, 0], [0, -45, 0], [0, -40, 0], [0, -5, 12]], float)
    assert find_legs(parents, offsets, names) == [(1, 2, 3, 4), (5, 6, 7, 8)]
    assert find_legs(parents, offsets, ("pelvis", "a", "b", "c", "d", "e", "f", "g", "h")) == []
