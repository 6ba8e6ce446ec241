"""Runs INSIDE a venv with the real ``bpy`` wheel: Walk Along Path and Walk in Example's Style on several rigs of
one motion (test_blender_walk_rigs.py): each BVH imported at the importer's defaults walks the same Bezier curve
and, with its own import as the Style Example, walks it in that style. Writes per rig and operator the report,
the bones, and the evaluated world heads of every bone on every 2nd walked frame.

    python walk_rigs.py ZIP CONNECTION_FILE OUT.npz NAME=BVH [NAME=BVH ...]
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import bpy
import numpy as np

PATH = [(0, 0, 0), (300, 200, 0), (600, 0, 0)]   # cm (the BVH import's units): an S


def run(op, **kw) -> str:
    try:
        op("EXEC_DEFAULT", True, **kw)
        return bpy.context.scene.motioncore.last_report
    except RuntimeError as e:
        return "ERROR " + str(e).strip()


def curve(points=PATH):
    """A 3D Bezier curve object through ``points`` (Auto handles), linked to the scene."""
    cd = bpy.data.curves.new("Path", "CURVE")
    cd.dimensions = "3D"
    sp = cd.splines.new("BEZIER")
    sp.bezier_points.add(len(points) - 1)
    for bp, co in zip(sp.bezier_points, points):
        bp.co = co
        bp.handle_left_type = bp.handle_right_type = "AUTO"
    obj = bpy.data.objects.new("Path", cd)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def rig(name: str, path: str, res: dict, arrays: dict) -> None:
    for o in list(bpy.data.objects):
        bpy.data.objects.remove(o)
    bpy.ops.import_anim.bvh(filepath=path)
    ex = bpy.context.active_object
    example = ex.animation_data.action
    example.use_fake_user = True
    bpy.ops.import_anim.bvh(filepath=path)
    walker = bpy.context.active_object
    bpy.data.objects.remove(ex)
    path_obj = curve()
    sc, s = bpy.context.scene, bpy.context.scene.motioncore
    bones = [pb.name for pb in walker.pose.bones]
    res[name] = {"bones": bones}
    for label, op in (("walk", bpy.ops.motioncore.walk_path), ("style", bpy.ops.motioncore.style_adapt)):
        walker.animation_data_clear()
        for pb in walker.pose.bones:
            pb.location, pb.rotation_euler = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        s.style_action = example
        sc.frame_current = 1
        for o in bpy.data.objects:
            o.select_set(o in (walker, path_obj))
        bpy.context.view_layer.objects.active = walker
        res[name][label] = run(op, keys="EVERY_FRAME")   # rigs against rigs to 0.01 cm: the model's pose, not
        # a reduction within 0.5 cm of it (Keys = Reduced against Every Frame: test_blender_real.py)
        if walker.animation_data is None or walker.animation_data.action is None:
            continue
        lo, hi = (int(v) for v in walker.animation_data.action.frame_range)
        frames = list(range(lo, hi + 1, 2))
        heads = np.zeros((len(frames), len(bones), 3))
        for i, f in enumerate(frames):
            sc.frame_set(f)
            mw = walker.matrix_world
            for j, pb in enumerate(walker.pose.bones):
                heads[i, j] = tuple(mw @ pb.head)
        arrays[f"{name}/{label}"] = heads


def main() -> None:
    zip_path, conn, out = sys.argv[1:4]
    os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
    res: dict = {"blender": bpy.app.version_string}
    arrays: dict = {}
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    for arg in sys.argv[4:]:
        name, path = arg.split("=", 1)
        try:
            rig(name, path, res, arrays)
        except Exception:
            res[name] = {"error": traceback.format_exc()}
    np.savez(out, **arrays)
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
