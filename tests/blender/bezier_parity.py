"""Run under real bpy: ``python bezier_parity.py in.json out.json``. Blender's own F-curve Bezier as the
truth for motioncore.core.fcurve.

in.json: ``keys`` (K,) frames, ``values`` (C, K), ``frames`` (F,) to evaluate; optional ``bvh`` (a file
to import with ``bpy.ops.import_anim.bvh`` at its defaults) with ``bvh_keep`` (frames whose keys stay;
they are then set to Bezier interpolation, as the importer makes them Linear).
out.json: the preferences and curve settings found, ``inserted`` (C, F) evaluated values of curves keyed
with ``keyframe_points.insert``, and for the BVH: per imported curve its settings, the remaining keys and
``fcurve.evaluate`` on every frame between them.
"""
import json
import sys

import bpy
from bpy_extras import anim_utils


def new_channelbag(name):
    obj = bpy.data.objects.new(name, None)
    bpy.context.scene.collection.objects.link(obj)
    action = bpy.data.actions.new(name)
    obj.animation_data_create()
    obj.animation_data.action = action
    slot = obj.animation_data.action_slot
    if slot is None:
        slot = action.slots.new(id_type="OBJECT", name=name)
        obj.animation_data.action_slot = slot
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


def inserted(req):
    bag = new_channelbag("keys")
    out, info = [], {}
    for i, vals in enumerate(req["values"]):
        fc = bag.fcurves.new(f'["ch{i}"]', index=0)
        for f, v in zip(req["keys"], vals):
            fc.keyframe_points.insert(f, v)
        fc.update()
        kp = fc.keyframe_points[0]
        info = {"auto_smoothing": fc.auto_smoothing, "extrapolation": fc.extrapolation,
                "interpolation": kp.interpolation, "handles": [kp.handle_left_type, kp.handle_right_type]}
        out.append([fc.evaluate(f) for f in req["frames"]])
    return out, info


def imported(req):
    bpy.ops.import_anim.bvh(filepath=req["bvh"])
    obj = bpy.context.view_layer.objects.active
    ad = obj.animation_data
    bag = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)
    keep = set(req["bvh_keep"])
    curves = []
    for fc in bag.fcurves:
        kp0 = fc.keyframe_points[0]
        before = {"auto_smoothing": fc.auto_smoothing, "interpolation": kp0.interpolation,
                  "handles": [kp0.handle_left_type, kp0.handle_right_type], "n_keys": len(fc.keyframe_points)}
        for kp in reversed(list(fc.keyframe_points)):
            if round(kp.co[0]) not in keep:
                fc.keyframe_points.remove(kp, fast=True)
        for kp in fc.keyframe_points:  # imported keys are LINEAR: the animator's "Interpolation > Bezier"
            kp.interpolation = "BEZIER"
        fc.update()
        keys = [list(kp.co) for kp in fc.keyframe_points]
        lo, hi = int(keys[0][0]), int(keys[-1][0])
        curves.append({"path": fc.data_path, "index": fc.array_index, "before": before, "keys": keys,
                       "frames": list(range(lo, hi + 1)),
                       "values": [fc.evaluate(f) for f in range(lo, hi + 1)]})
    return curves


def main():
    req = json.load(open(sys.argv[1]))
    edit = bpy.context.preferences.edit
    res = {"blender": bpy.app.version_string, "fcurve_new_auto_smoothing": edit.fcurve_new_auto_smoothing,
           "keyframe_new_handle_type": edit.keyframe_new_handle_type,
           "keyframe_new_interpolation_type": edit.keyframe_new_interpolation_type}
    res["inserted"], res["inserted_info"] = inserted(req)
    if req.get("bvh"):
        res["bvh"] = imported(req)
    json.dump(res, open(sys.argv[2], "w"))


main()
