"""Runs INSIDE a venv with the real ``bpy`` wheel and motioncore's src on PYTHONPATH (tests/io/test_io_blender.py):

    python io_roundtrip.py IN.bvh OUTDIR OUT.json

A BVH clip written to .blend and .fbx with motioncore.io.blender and read back: world joint position
error (cm) and frame counts, as JSON."""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

from motioncore.io.blender import read_blender, write_blender
from motioncore.io.bvh import read_bvh


def main() -> None:
    src, out, res_path = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    m = read_bvh(src)
    _, gp = m.global_transforms()
    res = {"frames": m.num_frames, "joints": m.skeleton.num_joints}
    for suffix in (".blend", ".fbx"):
        f = write_blender(out / f"clip{suffix}", m)
        back = read_blender(f)
        _, gb = back.global_transforms()
        same = back.num_frames == m.num_frames and list(back.skeleton.names) == list(m.skeleton.names)
        res[suffix] = {"size": f.stat().st_size, "same_layout": same, "fps": back.fps,
                       "max_pos_err_cm": float(np.abs(gb - gp).max()) if same else None,
                       "leftovers": sorted(p.name for p in out.iterdir() if p.name.startswith("."))}
    res_path.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
