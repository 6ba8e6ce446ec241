"""Run under real bpy: ``python free_handles.py in.json out.json``. Blender's own F-curve evaluation of Bezier keys
with handles set by hand (FREE, or ALIGNED), the truth for motioncore.core.keyfit.bezier_evaluate.

in.json: ``curves``: [{"keys": (K, 2), "left": (K, 2), "right": (K, 2), "type": "FREE" | "ALIGNED"}], ``frames``.
Each curve's keys are added and their handles and types set in bulk (``foreach_set``), then ``fcurve.update()``.
out.json: per curve the handles Blender holds after the update and ``fcurve.evaluate`` at every frame.
"""
import json
import sys

import bpy
import numpy as np


def channelbag(name):
    obj = bpy.data.objects.new(name, None)
    bpy.context.scene.collection.objects.link(obj)
    action = bpy.data.actions.new(name)
    obj.animation_data_create()
    obj.animation_data.action = action
    if bpy.app.version < (4, 4, 0):
        return action
    from bpy_extras import anim_utils
    slot = obj.animation_data.action_slot
    if slot is None:
        slot = action.slots.new(id_type="OBJECT", name=name)
        obj.animation_data.action_slot = slot
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


def main():
    req = json.load(open(sys.argv[1]))
    bag = channelbag("handles")
    out = []
    for i, c in enumerate(req["curves"]):
        fc = bag.fcurves.new(f'["c{i}"]', index=0)
        kp = fc.keyframe_points
        keys = np.asarray(c["keys"], np.float32)
        kp.add(len(keys))
        kp.foreach_set("co", keys.ravel())
        rna = kp[0].bl_rna.properties
        for prop, item in (("interpolation", "BEZIER"), ("handle_left_type", c["type"]),
                           ("handle_right_type", c["type"])):
            kp.foreach_set(prop, np.full(len(keys), rna[prop].enum_items[item].value, np.int32))
        kp.foreach_set("handle_left", np.asarray(c["left"], np.float32).ravel())
        kp.foreach_set("handle_right", np.asarray(c["right"], np.float32).ravel())
        fc.update()
        left, right = np.empty(2 * len(keys), np.float32), np.empty(2 * len(keys), np.float32)
        kp.foreach_get("handle_left", left)
        kp.foreach_get("handle_right", right)
        out.append({"left": left.reshape(-1, 2).tolist(), "right": right.reshape(-1, 2).tolist(),
                    "values": [fc.evaluate(f) for f in req["frames"]]})
    json.dump({"blender": bpy.app.version_string, "curves": out}, open(sys.argv[2], "w"))


main()
