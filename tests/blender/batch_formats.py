"""Runs INSIDE the bpy venv with motioncore's src on PYTHONPATH (tests/io/test_io_blender.py):

    python batch_formats.py WORKDIR OUT.json

`motioncore retarget` over a folder holding a .bvh and an .fbx clip (Bandai), onto a CMU target given as
.blend, writing .fbx; then a re-run (resumable). Writes the reports and the outputs' joint errors."""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

from motioncore.batch.files import read_motion
from motioncore.batch.run import run_batch
from motioncore.io.blender import write_blender
from motioncore.io.bvh import read_bvh


def main() -> None:
    work, res_path = Path(sys.argv[1]), Path(sys.argv[2])
    src, out = work / "src", work / "out"
    clip = read_bvh(work / "bandai.bvh")
    write_blender(src / "as_fbx.fbx", clip)
    (src / "as_bvh.bvh").write_bytes((work / "bandai.bvh").read_bytes())
    (src / "broken.fbx").write_text("not an fbx")
    write_blender(work / "target.blend", read_bvh(work / "cmu.bvh"))
    rep = run_batch(src, work / "target.blend", out, fmt="fbx", progress=False)
    a, b = read_motion(out / "as_fbx.fbx"), read_motion(out / "as_bvh.fbx")
    _, gin_fbx = read_motion(src / "as_fbx.fbx").global_transforms()   # the input as read from each format
    _, gin_bvh = clip.global_transforms()
    again = run_batch(src, work / "target.blend", out, fmt="fbx", progress=False)
    res_path.write_text(json.dumps({"counts": rep["counts"], "errors": rep["errors"], "again": again["counts"],
                                    "outputs": sorted(p.name for p in out.iterdir()),
                                    "joints": a.skeleton.num_joints, "frames": a.num_frames,
                                    "inputs_fbx_vs_bvh_cm": float(np.abs(gin_fbx - gin_bvh).max()),
                                    "same_skeleton_out": list(a.skeleton.names) == list(b.skeleton.names)},
                                   indent=1))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
