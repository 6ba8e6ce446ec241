"""Runs INSIDE a venv with the real ``bpy`` wheel (tests/addon/test_blender_euler_orders.py):

    python euler_orders.py IN.json OUT.json

IN: {"angles": [[x, y, z], ...] radians, "quats": [[w, x, y, z], ...]}. For each of Blender's six Euler rotation
modes, Blender's own answers as JSON: ``Euler(angles, mode).to_quaternion()``; a pose bone in that mode with
``rotation_euler = angles``, its ``matrix_basis`` as a quaternion; and ``Quaternion(q).to_euler(mode)``."""
from __future__ import annotations

import json
import sys

import bpy
from mathutils import Euler, Quaternion

ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def main() -> None:
    data = json.loads(open(sys.argv[1]).read())
    bpy.ops.wm.read_factory_settings(use_empty=True)
    arm = bpy.data.armatures.new("rig")
    obj = bpy.data.objects.new("rig", arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    b = arm.edit_bones.new("bone")
    b.head, b.tail = (0, 0, 0), (0, 0, 1)
    bpy.ops.object.mode_set(mode="POSE")
    pb = obj.pose.bones["bone"]
    out = {}
    for mode in ORDERS:
        pb.rotation_mode = mode
        euler, posed = [], []
        for v in data["angles"]:
            euler.append(list(Euler(v, mode).to_quaternion()))
            pb.rotation_euler = v
            bpy.context.view_layer.update()
            posed.append(list(pb.matrix_basis.to_quaternion()))
        back = [list(Quaternion(q).to_euler(mode)) for q in data["quats"]]
        out[mode] = {"euler": euler, "posed": posed, "to_euler": back}
    out["version"] = bpy.app.version_string
    open(sys.argv[2], "w").write(json.dumps(out))


main()
