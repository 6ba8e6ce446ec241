"""Runs INSIDE a venv with the real ``bpy`` wheel (tests/test_blender_real.py starts it as a subprocess).

    python drive.py ZIP OUT.json [CONNECTION_FILE]

1. install the extension zip with ``bpy.ops.extensions.package_install_files`` and enable it;
2. build an armature with 12 Bandai-named bones and key two poses 30 frames apart (the user's keys);
3. bulk key writing (``fcurves.write_rotations``: foreach_set) against a ``keyframe_insert`` loop on a
   twin armature: the same curves;
4. with a live server (CONNECTION_FILE): Walk-along-path through ``bpy.ops.motioncore.walk_path``, then
   one ``ed.undo`` reverts it;
5. with a server that is down: ``bpy.ops.motioncore.infill`` reports an error and writes nothing.
Writes a JSON of figures and booleans to OUT; pytest asserts on them. Background mode: timers never
fire, so the operators run synchronously (``execute``).
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import bpy
import numpy as np

BONES = ["Hips", "Spine", "Chest", "Neck", "Head", "Shoulder_L", "UpperArm_L", "LowerArm_L", "Shoulder_R",
         "UpperArm_R", "UpperLeg_L", "UpperLeg_R"]
PARENT = {"Spine": "Hips", "Chest": "Spine", "Neck": "Chest", "Head": "Neck", "Shoulder_L": "Chest",
          "UpperArm_L": "Shoulder_L", "LowerArm_L": "UpperArm_L", "Shoulder_R": "Chest", "UpperArm_R": "Shoulder_R",
          "UpperLeg_L": "Hips", "UpperLeg_R": "Hips"}


def armature(name: str):
    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for i, b in enumerate(BONES):
        eb = arm.edit_bones.new(b)
        eb.head = (0.1 * (i % 3), 0.0, 0.1 * i)
        eb.tail = (0.1 * (i % 3), 0.0, 0.1 * i + 0.1)
    for b, p in PARENT.items():
        arm.edit_bones[b].parent = arm.edit_bones[p]
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return obj


def poses(seed: int, n: int) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, len(BONES), 4)) * [1.0, 0.2, 0.2, 0.2] + [3.0, 0, 0, 0]
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def user_keys(obj, frames=(1, 31)) -> dict:
    q = poses(0, len(frames))
    for f, qq in zip(frames, q, strict=True):
        for j, b in enumerate(BONES):
            pb = obj.pose.bones[b]
            pb.rotation_quaternion = qq[j]
            pb.keyframe_insert("rotation_quaternion", frame=f)
    return snapshot(obj)


def fcurves_of(obj):
    ad = obj.animation_data
    if ad is None or ad.action is None:
        return []
    act = ad.action
    if bpy.app.version >= (4, 4, 0):
        from bpy_extras import anim_utils
        bag = anim_utils.action_get_channelbag_for_slot(act, ad.action_slot)
        return [] if bag is None else list(bag.fcurves)
    return list(act.fcurves)


def snapshot(obj) -> dict:
    out = {}
    for fc in fcurves_of(obj):
        co = np.empty(2 * len(fc.keyframe_points), np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out[f"{fc.data_path}[{fc.array_index}]"] = (co.tolist(), [k.type for k in fc.keyframe_points])
    return out


def main() -> None:
    zip_path, out_path = sys.argv[1], sys.argv[2]
    conn = sys.argv[3] if len(sys.argv) > 3 else ""
    res: dict = {"blender": bpy.app.version_string}
    bpy.ops.wm.read_factory_settings(use_empty=True)
    t = time.perf_counter()
    r = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    res["install"] = sorted(r)
    res["install_s"] = time.perf_counter() - t
    res["operators"] = sorted(n for n in dir(bpy.ops.motioncore) if not n.startswith("_"))
    mod = sys.modules.get("bl_ext.user_default.motioncore")
    res["addon_module"] = mod is not None
    fc = sys.modules["bl_ext.user_default.motioncore.fcurves"]

    # bulk writing against a keyframe_insert loop on a twin armature
    a, b = armature("Bulk"), armature("Loop")
    keep_a, _ = user_keys(a), user_keys(b)
    frames = np.arange(1, 32, dtype=np.float64)
    q = poses(1, frames.size)
    t = time.perf_counter()
    added = fc.write_rotations(a, BONES, frames, q)
    res["bulk_s"] = time.perf_counter() - t
    t = time.perf_counter()
    for i, f in enumerate(frames):
        if f in (1, 31):
            continue  # the user's keys stay
        for j, bone in enumerate(BONES):
            pb = b.pose.bones[bone]
            pb.rotation_quaternion = q[i, j]
            pb.keyframe_insert("rotation_quaternion", frame=f, keytype="GENERATED")
    res["loop_s"] = time.perf_counter() - t
    res["keys_added"] = added
    sa, sb = snapshot(a), snapshot(b)
    res["same_curves"] = sorted(sa) == sorted(sb)
    diff = 0.0
    for k in sa:
        ca, cb = np.asarray(sa[k][0]), np.asarray(sb[k][0])
        diff = max(diff, float(np.abs(ca - cb).max()) if ca.shape == cb.shape else float("inf"))
        fa = next(x for x in fcurves_of(a) if f"{x.data_path}[{x.array_index}]" == k)
        fb = next(x for x in fcurves_of(b) if f"{x.data_path}[{x.array_index}]" == k)
        diff = max(diff, max(abs(fa.evaluate(f) - fb.evaluate(f)) for f in np.linspace(1, 31, 121)))
        res.setdefault("types", set()).update(sa[k][1])
    res["types"] = sorted(res.get("types", []))
    res["bulk_vs_loop_max_diff"] = diff
    user = {k: (v[0][0:2] + v[0][-2:]) for k, v in keep_a.items()}  # keys at frames 1 and 31
    now = {k: [c for c in zip(sa[k][0][0::2], sa[k][0][1::2], strict=True) if c[0] in (1.0, 31.0)] for k in sa}
    res["user_keys_kept"] = all([list(x) for x in now[k]] == [v[0:2], v[2:4]] for k, v in user.items())

    # a server that is down: a clear error and nothing written
    os.environ["MOTIONCORE_CONNECTION_FILE"] = os.path.join(os.path.dirname(out_path), "nobody.json")
    dead = {"transport": "tcp", "ip": "127.0.0.1", "port": 9, "key": "00" * 32, "signature_scheme": "hmac-sha256",
            "server_session": "gone", "pid": 0}
    if conn:  # a real connection file, its port closed
        with open(conn) as f:
            dead = {**json.load(f), "port": 9}
    with open(os.environ["MOTIONCORE_CONNECTION_FILE"], "w") as f:
        json.dump(dead, f)
    target = bpy.data.objects["Bulk"]
    bpy.context.view_layer.objects.active = target
    before = snapshot(target)
    t = time.perf_counter()
    try:
        r = bpy.ops.motioncore.infill("EXEC_DEFAULT", True)
        res["down"] = {"result": sorted(r)}
    except RuntimeError as e:  # bpy turns an operator's ERROR report into RuntimeError in background
        res["down"] = {"error": str(e)}
    res["down"]["s"] = time.perf_counter() - t
    res["down"]["unchanged"] = snapshot(target) == before
    # the add-on's operators
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    walker = armature("Walker")
    res["walk"] = None
    if conn:
        os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
        curve = bpy.data.curves.new("Path", "CURVE")
        sp = curve.splines.new("POLY")
        sp.points.add(2)
        for i, p in enumerate([(0, 0, 0, 1), (0, -1.5, 0, 1), (0, -3.0, 0, 1)]):
            sp.points[i].co = p
        cobj = bpy.data.objects.new("Path", curve)
        bpy.context.scene.collection.objects.link(cobj)
        cobj.select_set(True)
        walker.select_set(True)
        bpy.context.view_layer.objects.active = walker
        bpy.ops.ed.undo_push(message="before walk")
        t = time.perf_counter()
        r = bpy.ops.motioncore.walk_path("EXEC_DEFAULT", True)  # undo=True: pushed as a button press would
        res["walk"] = {"result": sorted(r), "s": time.perf_counter() - t,
                       "keys": sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Walker"]).values())}
        bpy.ops.ed.undo()
        res["walk"]["keys_after_undo"] = sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Walker"]).values())
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
