"""The cmu_05-09 conversion (the MotionBuilder-friendly BVH of CMU's mocap) onto the cmu_01-03 skeleton: the
``convert`` of the registered set ``cmu05-09`` (``data.registry``), run when its cache is built."""
from __future__ import annotations

from pathlib import Path

from ..core.motion import Motion
from ..core.skeleton import Skeleton
from ..data.cache import unpack
from ..data.registry import ASF_UNIT_CM, CMU0103, HAHNE_TO_ASF
from ..errors import DataError
from ..io.bvh import read_bvh
from .core import retarget

__all__ = ["hahne_to_asf"]


def hahne_to_asf(motion: Motion, root: Path) -> Motion:
    """A cmu_05-09 clip on the cmu_01-03 skeleton: joints renamed to CMU's ASF names, lengths from ASF units to
    cm, then retargeted (world-space rest alignment, ``retarget.retarget``) onto subject 01's skeleton of the
    cmu_01-03 conversion, whose rest pose and joint frames differ. Every mapped bone keeps its direction in
    every frame (checked to 0.00 deg); the root's path is scaled by the leg-length ratio."""
    sk = motion.skeleton
    missing = [n for n in sk.names if n not in HAHNE_TO_ASF]
    if missing:
        raise DataError(f"{motion.name}: joints not in the cmu_05-09 naming: {missing}")
    renamed = Skeleton(tuple(HAHNE_TO_ASF[n] for n in sk.names), sk.parents, sk.offsets * ASF_UNIT_CM, sk.channels,
                       tuple((j, tuple(float(v) * ASF_UNIT_CM for v in o)) for j, o in sk.end_sites))
    src = Motion(renamed, motion.rotations, motion.positions * ASF_UNIT_CM, motion.fps, motion.name)
    ref = read_bvh(unpack(root / CMU0103[0], progress=False) / "cmu_bvh" / "01_01.bvh").skeleton
    return retarget(src, ref, {n: n for n in ref.names}, scale="legs", missing="error")
