"""Runs INSIDE a venv with the real ``bpy`` wheel: Walk Along Path and Style from Example on a BVH imported at the
importer's defaults, with Keys = Every Frame and Keys = Reduced, each timed (bench/walk_keys.py).

    python walk_keys.py ZIP SPEC.json OUT.npz CONNECTION_FILE

SPEC: ``bvh`` (the rig and, imported a second time, the Style Example), ``points`` (the path, scene units),
``repeats``. OUT.npz.json: per operator and Keys setting the seconds of each run and the last report.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import bpy
import numpy as np
from walk_rigs import curve  # the same Bezier path object (this folder is the script's sys.path[0])


def main() -> None:
    zip_path, spec_path, out, conn = sys.argv[1:5]
    os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
    spec = json.loads(open(spec_path).read())
    res: dict = {"blender": bpy.app.version_string}
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    try:
        bpy.ops.import_anim.bvh(filepath=spec["bvh"])
        example = bpy.context.active_object.animation_data.action
        example.use_fake_user = True
        ex = bpy.context.active_object
        bpy.ops.import_anim.bvh(filepath=spec["bvh"])
        walker = bpy.context.active_object
        bpy.data.objects.remove(ex)
        path_obj = curve(spec["points"])
        sc, s = bpy.context.scene, bpy.context.scene.motioncore
        s.style_action = example
        for label, op in (("walk", bpy.ops.motioncore.walk_path), ("style", bpy.ops.motioncore.style_adapt)):
            for _ in range(int(spec["repeats"])):
                for keys in ("EVERY_FRAME", "REDUCED"):
                    walker.animation_data_clear()
                    for pb in walker.pose.bones:
                        pb.location, pb.rotation_euler = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
                    sc.frame_current = 1
                    for o in bpy.data.objects:
                        o.select_set(o in (walker, path_obj))
                    bpy.context.view_layer.objects.active = walker
                    t = time.perf_counter()
                    try:
                        op("EXEC_DEFAULT", True, keys=keys)
                        report = s.last_report
                    except RuntimeError as e:
                        report = "ERROR " + str(e).strip()
                    r = res.setdefault(f"{label}/{keys}", {"seconds": [], "report": ""})
                    r["seconds"].append(time.perf_counter() - t)
                    r["report"] = report
    except Exception:
        res["error"] = traceback.format_exc()
    np.savez(out, done=np.ones(1))
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
