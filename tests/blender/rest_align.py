"""Runs INSIDE a venv with the real ``bpy`` wheel: world-space rest alignment (retarget/rest.py vendored into the add-on, issue 12
item 3) on a rig made by Blender's own BVH importer at its defaults.

    python rest_align.py ADDON_DIR BVH MODEL.json OUT.json [REREST]

MODEL.json: {"names", "parents", "offsets", "convention"} (the in-fill model's skeleton). Reads the rig's
rest heads, maps its bones to the model's joints (`rigmap.auto_map`), builds the alignment, carries the
evaluated pose of every 7th frame onto the model (`rigrest.rig_to_model`) and back (`rigrest.model_to_rig`),
and writes per mapped model bone (joint -> each mapped child) the largest angle between the model bone's
world direction (forward kinematics of the model's skeleton) and the rig's (the evaluated bone heads), with
its kind (one mapped child reached directly or through unmapped rig bones, or several), plus the round
trip's largest error over every bone. REREST: "A" re-rests the imported rig into an A-pose
first (upper arms turned 40 degrees down in edit mode, the animation keys kept) -- a rig whose rest
differs from the model's while its motion is the same.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import math
import sys
import types

import bpy
import numpy as np


def addon_module(addon_dir: str, name: str) -> types.ModuleType:
    if "mcaddon" not in sys.modules:
        pkg = importlib.util.module_from_spec(importlib.machinery.ModuleSpec("mcaddon", None, is_package=True))
        pkg.__path__ = [addon_dir]
        sys.modules["mcaddon"] = pkg
    return importlib.import_module(f"mcaddon.{name}")


def main() -> None:
    addon_dir, bvh, model_path, out_path = sys.argv[1:5]
    rerest = sys.argv[5] if len(sys.argv) > 5 else ""
    rigmap, rigrest, qn, requests = (addon_module(addon_dir, n) for n in ("core.rigmap", "vendor.rest", "vendor.quat_np",
                                                                          "core.requests"))
    model = json.loads(open(model_path).read())
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_anim.bvh(filepath=bvh)
    arm = next(o for o in bpy.context.scene.objects if o.type == "ARMATURE")
    if rerest == "A":
        # turn the upper arms 40 degrees down about the forward axis in edit mode: the rest pose changes, the
        # keys do not (so the posed arms change too: this is a different rig, as an animator would have)
        bpy.context.view_layer.objects.active = arm
        bpy.ops.object.mode_set(mode="EDIT")
        from mathutils import Matrix
        for eb in arm.data.edit_bones:
            low = eb.name.lower()
            if "humerus" in low or "upperarm" in low:
                side = 1.0 if eb.head.x > 0 else -1.0
                r = Matrix.Rotation(math.radians(-40 * side), 4, "Y")
                for e in [eb] + list(eb.children_recursive):
                    e.transform(Matrix.Translation(eb.head) @ r @ Matrix.Translation(-eb.head), roll=True)
        bpy.ops.object.mode_set(mode="OBJECT")
    db = arm.data.bones
    names, todo = [], [b for b in db if b.parent is None]
    while todo:   # parents first
        b = todo.pop(0)
        names.append(b.name)
        todo.extend(b.children)
    idx = {n: i for i, n in enumerate(names)}
    up = [idx[db[n].parent.name] if db[n].parent else -1 for n in names]
    heads = np.array([tuple(db[n].head_local) for n in names])
    C = [rigmap.rest_offset(np.array(tuple(db[n].matrix_local.to_quaternion()))) for n in names]
    rmap = rigmap.auto_map(names, model["names"])
    cols = [idx[rmap.mapping[j]] if j in rmap.mapping else -1 for j in model["names"]]
    sc = bpy.context.scene
    fr = list(range(int(arm.animation_data.action.frame_range[0]), int(arm.animation_data.action.frame_range[1]) + 1, 7))
    loc = np.zeros((len(fr), len(names), 4))
    hd = np.zeros((len(fr), len(names), 3))
    for i, f in enumerate(fr):
        sc.frame_set(f)
        for b, n in enumerate(names):
            pb = arm.pose.bones[n]
            loc[i, b] = rigmap.to_model(np.array(tuple(pb.rotation_quaternion if pb.rotation_mode == "QUATERNION"
                                                       else pb.rotation_euler.to_quaternion())), C[b])
            hd[i, b] = tuple(pb.head)
    al = rigrest.alignment(model, cols, requests.z_up_to_y_up(heads), up, loc)
    q, g = rigrest.rig_to_model(loc, al)
    off = np.asarray(model["offsets"], np.float64)
    par = model["parents"]
    worst: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for j, c in enumerate(cols):
        kids = rigrest._mapped_children(j, cols, par) if c >= 0 else []
        for k in kids:
            if k == model.get("root_joint", 1):
                continue   # the model's root joint sits at the root translation, not at its rest offset
            if np.linalg.norm(heads[cols[k]] - heads[c]) < 1e-6 * np.ptp(heads, axis=0).max():
                continue   # a zero-length rig bone (CMU's lowerback starts at the root) has no direction
            mdir = qn.quat_apply(g[:, j], np.broadcast_to(off[k], (len(fr), 3)))
            rdir = requests.z_up_to_y_up(hd[:, cols[k]] - hd[:, c])
            cos = np.sum(mdir * rdir, -1) / (np.linalg.norm(mdir, axis=-1) * np.linalg.norm(rdir, axis=-1) + 1e-12)
            direct = db[names[cols[k]]].parent is not None and db[names[cols[k]]].parent.name == names[c]
            key = f"{model['names'][j]}->{model['names'][k]}"
            # one mapped child: a rotation can point the bone at it (directly or through unmapped rig bones);
            # several: one rotation for bones whose layout differs from the model's (a best fit)
            kinds[key] = "several" if len(kids) > 1 else "single" if direct else "through unmapped rig bones"
            worst[key] = float(np.degrees(np.arccos(np.clip(cos, -1, 1))).max())
    back = rigrest.model_to_rig(q, loc, np.ones(loc.shape[:2], bool), al)
    rt = float(np.degrees(qn.quat_angle(back, loc)).max())   # every bone: unmapped ones are kept
    json.dump({"bones": worst, "kinds": kinds, "round_trip_deg": rt, "rest_same": al["rest_same"],
               "rest_deg": float(np.degrees(qn.quat_angle(al["rt"], qn.IDENT)).max()), "frames": len(fr),
               "multi": [model["names"][j] for j in range(len(par))
                         if sum(1 for k in range(len(par)) if par[k] == j and cols[k] >= 0) > 1]},
              open(out_path, "w"))


if __name__ == "__main__":
    main()
