"""Clips whose feet retargeting must put on the target's ground: write them as BVH into a folder.

    python scripts/feet_rigs.py OUT [--bandai dataset-2_walk_normal_001.bvh] [--cmu 07_01 --cmu 07_03]

- ``OUT/one_axis/<bandai clip>.bvh``: a Bandai capture (30 fps) re-expressed in joint frames where each joint's
  first child lies along its local +x (every single-child offset on one axis, LaFAN1's convention: the rest pose
  alone is a line; the rotations stand the body up). Per joint j a constant frame change C_j: offsets
  o'_j = C_parent^-1 o_j, rotations q'_j = C_parent^-1 q_j C_j, so the world motion is unchanged (checked here
  to 1e-6 cm before writing).
- ``OUT/cmu_3dsmax/<clip>.bvh``: CMU clips of cmu_05-09 (120 fps, ASF units) with their joints renamed to the
  3dsMax-friendly names (LeftHip, LeftKnee, LeftAnkle, LeftToe, LeftCollar, LeftShoulder, LeftElbow,
  LeftWrist, Chest, lowerback), motion untouched.

The data comes from the mocap archives (``MOTIONCORE_DATA``), unpacked into the data cache.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_apply, quat_between, quat_inv, quat_mul
from motioncore.core.skeleton import Skeleton
from motioncore.data.cache import data_root, unpack
from motioncore.io.bvh import read_bvh, write_bvh

BANDAI2 = "bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz"
CMU0509 = "cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz"
THREEDSMAX = {"UpLeg": "Hip", "Leg": "Knee", "Foot": "Ankle", "ToeBase": "Toe", "Shoulder": "Collar",
              "Arm": "Shoulder", "ForeArm": "Elbow", "Hand": "Wrist", "FingerBase": "Hand", "HandIndex1": "Fingers"}


def one_axis_rest(m: Motion) -> Motion:
    """``m`` in joint frames whose first child lies on local +x (module doc); Euler channels ZYX."""
    sk = m.skeleton
    C = np.tile([1.0, 0, 0, 0], (sk.num_joints, 1))
    for j in range(sk.num_joints):
        kids = sk.children(j)
        if kids and np.linalg.norm(sk.offsets[kids[0]]) > 1e-9:
            C[j] = quat_between(np.array([1.0, 0, 0]), sk.offsets[kids[0]] / np.linalg.norm(sk.offsets[kids[0]]))
        elif sk.parents[j] >= 0:
            C[j] = C[sk.parents[j]]
    Cp = np.array([C[p] if p >= 0 else [1.0, 0, 0, 0] for p in sk.parents])
    off = quat_apply(quat_inv(Cp), sk.offsets)
    q = quat_mul(quat_mul(quat_inv(Cp)[None], m.rotations), C[None])
    pos = quat_apply(quat_inv(Cp)[None], m.positions)
    chans = tuple(tuple(c for c in ch if "position" in c) + ("Zrotation", "Yrotation", "Xrotation")
                  for ch in sk.channels)
    ends = tuple((j, tuple(quat_apply(quat_inv(C[j]), np.array(o)))) for j, o in sk.end_sites)
    return Motion(Skeleton(sk.names, sk.parents, off, chans, ends), q, pos, m.fps, m.name)


def threedsmax_names(m: Motion) -> Motion:
    """``m`` with cmu_05-09's joint names in the 3dsMax-friendly naming (module doc)."""
    def name(n: str) -> str:
        for side in ("Left", "Right"):
            if n.startswith(side) and n[len(side):] in THREEDSMAX:
                return side + THREEDSMAX[n[len(side):]]
        return {"Spine1": "Chest", "LowerBack": "lowerback"}.get(n, n)

    sk = m.skeleton
    return Motion(Skeleton(tuple(name(n) for n in sk.names), sk.parents, sk.offsets, sk.channels, sk.end_sites),
                  m.rotations, m.positions, m.fps, m.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--bandai", action="append", help="Bandai dataset-2 clip file name (repeatable; default "
                    "dataset-2_walk_normal_001.bvh)")
    ap.add_argument("--cmu", action="append", help="cmu_05-09 clip (repeatable; default 07_01 and 07_03)")
    a = ap.parse_args()
    out = Path(a.out)
    b2 = unpack(data_root() / BANDAI2, progress=False)
    for name in a.bandai or ["dataset-2_walk_normal_001.bvh"]:
        m = read_bvh(next(b2.rglob(name)))
        axis = one_axis_rest(m)
        err = np.abs(axis.global_transforms()[1] - m.global_transforms()[1]).max()
        if err > 1e-6:
            raise SystemExit(f"{name}: the re-expressed clip moves differently ({err:.2e} cm)")
        (out / "one_axis").mkdir(parents=True, exist_ok=True)
        write_bvh(out / "one_axis" / name, axis)
        print(f"{out / 'one_axis' / name}: {m.num_frames} frames at {m.fps:g} fps, world motion within {err:.1e} cm")
    cmu = unpack(data_root() / CMU0509, progress=False) / "cmu_bvh_hahne"
    for clip in a.cmu or ["07_01", "07_03"]:
        m = threedsmax_names(read_bvh(cmu / f"{clip}.bvh"))
        (out / "cmu_3dsmax").mkdir(parents=True, exist_ok=True)
        write_bvh(out / "cmu_3dsmax" / f"{clip}.bvh", m)
        print(f"{out / 'cmu_3dsmax' / clip}.bvh: {m.num_frames} frames at {m.fps:g} fps, 3dsMax-friendly names")


if __name__ == "__main__":
    main()
