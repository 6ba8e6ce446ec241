"""One mapper: the add-on's bone map (addon/core/rigmap.py, the library's vendored names and topology) gives the
same pairs as the library's ``retarget.auto_map`` on the same rig, for every name set of the topology test, the
rig seen as Blender holds it (Z-up heads in armature space)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data
from helpers.addon import addon_module
from helpers.rigs import NAME_SETS, renamed

from motioncore.core.axes import Y_UP_TO_Z_UP
from motioncore.core.rotations import quat_apply
from motioncore.retarget import auto_map

rigmap = addon_module("core.rigmap")


@needs_data
@pytest.mark.parametrize("name_set", ["bandai", "lafan1", "cmu-asf", "cmu-3dsmax", "cmu-motionbuilder", "mixamo",
                                      "humanik", "unreal", "rigify-def", "metarig"])
def test_the_addon_maps_every_name_set_as_the_library(name_set):
    from motioncore.data import load
    from motioncore.models.registry import load_model

    _, meta = load_model("infill-body")
    msk = meta["skeleton"]
    walk = load("bandai2", "test", progress=False)[0].motion
    rig = renamed(walk, NAME_SETS[name_set]).skeleton
    lib = auto_map(rig, type(rig).from_dict(msk))
    heads = quat_apply(np.asarray(Y_UP_TO_Z_UP, np.float64), rig.rest_positions())   # Blender's Z-up armature
    add = rigmap.auto_map(list(rig.names), list(msk["names"]), rig_parents=list(rig.parents), rig_heads=heads,
                          model_parents=msk["parents"], model_offsets=np.asarray(msk["offsets"]))
    assert add.mapping == lib.pairs and add.unmapped == list(lib.unmapped) == []
