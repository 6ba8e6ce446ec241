"""scripts/lafan_like_rig.py: a Bandai clip rewritten in LAFAN1's BVH convention keeps every joint's world motion
(to 1e-4 cm after the BVH round trip) while its rest frames change: offsets along the parent's +x, the hips the
ROOT at a far OFFSET, a third spine bone, Euler ZYX."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rig():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import lafan_like_rig
    finally:
        sys.path.pop(0)
    return lafan_like_rig


def test_rewritten_clip_keeps_every_joints_world_motion_with_lafan_rest_frames(rig, raw_file, tmp_path):
    from motioncore.core.rotations import quat_angle
    from motioncore.io.bvh import read_bvh, write_bvh

    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    path = tmp_path / "lafan.bvh"
    write_bvh(path, rig.rewrite(rig.with_mid_spine(mo)), precision=8)
    new = read_bvh(path)
    sk = new.skeleton
    assert rig.check(mo, new) <= 1e-4                      # cm: every Bandai joint, every frame
    assert sk.names[0] == "Hips" and sk.parents[0] == -1 and "joint_Root" not in sk.names
    assert np.allclose(sk.offsets[0], rig.ROOT_OFFSET)
    assert {"Spine", "Spine1", "Spine2", "LeftUpLeg", "RightToe"} <= set(sk.names)
    assert all(c[-3:] == ("Zrotation", "Yrotation", "Xrotation") for c in sk.channels)
    first = {}
    for j, p in enumerate(sk.parents):
        if p >= 0:
            first.setdefault(int(p), j)
    for p, j in first.items():   # every joint's first child along its +x (the hips: 20 degrees off, as LAFAN1's)
        d = sk.offsets[j] / np.linalg.norm(sk.offsets[j])
        want = 20.0 if p == 0 else 0.0
        assert abs(np.degrees(np.arccos(np.clip(d[0], -1, 1))) - want) < 1e-4, sk.names[j]
    # the rest frames changed (a turn per joint, not the same clip written again): locals differ from Bandai's
    b = [mo.skeleton.index(n) for n in ("LowerLeg_L", "UpperArm_R")]
    n = [sk.index(x) for x in ("LeftLeg", "RightArm")]
    assert np.degrees(quat_angle(new.rotations[:, n], mo.rotations[:, b])).min() > 5.0


def test_a_clip_whose_root_joint_moves_is_refused(rig, raw_file):
    from motioncore.errors import MotioncoreError
    from motioncore.io.bvh import read_bvh

    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    mo.positions[:, 0, 1] += 1.0
    with pytest.raises(MotioncoreError, match="joint_Root moves"):
        rig.rewrite(mo)
