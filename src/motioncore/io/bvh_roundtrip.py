"""BVH round-trip check: read a file, write it, read the copy back and report the worst rotation and
position differences (``motioncore bvh roundtrip``)."""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.rotations import quat_angle
from ..errors import MotioncoreError
from .bvh import PathLike, read_bvh, write_bvh

__all__ = ["roundtrip", "roundtrip_main", "RoundtripResult"]


@dataclass(frozen=True)
class RoundtripResult:
    """Worst differences between a file and its read-write-read copy."""

    path: str
    frames: int
    joints: int
    max_rot_err_deg: float  # worst quat_angle over frames and joints, degrees
    max_pos_err: float  # worst absolute local-translation difference, file units

    def ok(self, tol: float = 1e-4) -> bool:
        return self.max_rot_err_deg <= tol and self.max_pos_err <= tol


def roundtrip(path: PathLike, *, precision: int = 6) -> RoundtripResult:
    """Read ``path``, write it to a temporary file, read that back and compare (joints by name)."""
    a = read_bvh(path)
    with tempfile.TemporaryDirectory(prefix="motioncore-bvh-") as tmp:
        copy = Path(tmp) / (Path(path).stem + ".bvh")
        write_bvh(copy, a, precision=precision)
        b = read_bvh(copy)
    idx = [b.skeleton.index(n) for n in a.skeleton.names]
    if a.rotations.size:
        rot = float(np.degrees(np.max(quat_angle(a.rotations, b.rotations[:, idx]))))
        pos = float(np.max(np.abs(a.positions - b.positions[:, idx])))
    else:
        rot = pos = 0.0
    return RoundtripResult(str(path), a.num_frames, a.skeleton.num_joints, rot, pos)


def roundtrip_main(files: list[str], tol: float = 1e-4) -> int:
    """Round-trip every file, print one line each plus a summary; 0 if all are within ``tol``."""
    if not files:
        print("motioncore: error: bvh roundtrip: no BVH files given (or none in the folders given)", file=sys.stderr)
        return 2
    width = max(12, min(40, max(len(Path(f).stem) for f in files)))
    print(f"{'file':<{width}} {'frames':>7} {'joints':>6} {'rot err deg':>12} {'pos err cm':>12}  status")
    failed, worst_rot, worst_pos = 0, 0.0, 0.0
    for f in files:
        try:
            r = roundtrip(f)
        except (MotioncoreError, OSError) as e:
            failed += 1
            print(f"{Path(f).stem:<{width}} ERROR: {e}")
            continue
        worst_rot, worst_pos = max(worst_rot, r.max_rot_err_deg), max(worst_pos, r.max_pos_err)
        failed += not r.ok(tol)
        print(f"{Path(f).stem:<{width}} {r.frames:>7} {r.joints:>6} {r.max_rot_err_deg:>12.3g} "
              f"{r.max_pos_err:>12.3g}  {'OK' if r.ok(tol) else 'FAIL'}")
    print(f"{len(files)} files, {failed} failed (tol {tol:g}); worst rotation error {worst_rot:.3g} deg, "
          f"worst position error {worst_pos:.3g} cm")
    return 1 if failed else 0
