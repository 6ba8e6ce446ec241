"""Runs INSIDE a venv with the real ``bpy`` wheel: In-fill Hands with the object the hand manipulates
(issue 14). Used by tests/blender/test_blender_hands_object.py.

    python hands_object.py ZIP SPEC.json TRACK.npz OUT.npz CONNECTION_FILE

SPEC: {"hand": BVH path, "fps", "gap": [first, last] (Blender frames whose finger keys are deleted; the wrist
keeps every key), "gap30": a second such gap, filled last with the Hands Model empty (infill-hands), "context": scene frames on each side, "model": the object-conditioned model, "plain_model":
one trained without the object}. TRACK: "frames" (Blender frames), "rotations" (F, 4) WXYZ and "positions"
(F, 3): the take's object track as the data has it (Y-up, the BVH's units).

A ManipNet hand BVH imported with Blender's own importer at its defaults (Euler bones, the wrist's motion on
its location keys); an empty keyed with the object track, converted as Blender's importers convert Y-up
data (world matrix [A R A^-1 | A p], A the Y-up -> Z-up turn, so its local +Z is the data's +Y); the
finger keys inside the gap deleted; then In-fill Hands through a live server with the empty in the Object
field, again with the field empty (the generated keys are replaced), once with the object and a model
trained without one (refused), and with the Hands Model empty (the bundled infill-hands). Writes the
evaluated poses (pose-bone matrices, armature space: the truth, Blender's Bezier after the deletion, each
fill) and the reports to OUT.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import bpy
import numpy as np

A_QUAT = (np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0)   # Y-up -> Z-up: +90 degrees about X


def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def fcurves_of(obj):
    ad = obj.animation_data
    if bpy.app.version >= (4, 4, 0):
        from bpy_extras import anim_utils
        return list(anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot).fcurves)
    return list(ad.action.fcurves)


def evaluate(obj, frames) -> np.ndarray:
    sc = bpy.context.scene
    out = np.zeros((len(frames), len(obj.pose.bones), 4, 4))
    for i, f in enumerate(frames):
        sc.frame_set(int(f))
        for j, pb in enumerate(obj.pose.bones):
            out[i, j] = np.array(pb.matrix)
    return out


def delete_finger_keys(obj, wrist: str, a: int, b: int) -> int:
    """Delete every key strictly inside frames a..b on every curve but the wrist's (rotation and location)."""
    n_del = 0
    for fc in fcurves_of(obj):
        if f'"{wrist}"' in fc.data_path:
            continue
        kp = fc.keyframe_points
        co = np.empty(2 * len(kp), np.float32)
        kp.foreach_get("co", co)
        co = co.reshape(-1, 2)
        interp = np.empty(len(kp), np.int32)
        kp.foreach_get("interpolation", interp)
        keep = ~((co[:, 0] >= a - 0.5) & (co[:, 0] <= b + 0.5))
        n_del += int((~keep).sum())
        kp.clear()
        kp.add(int(keep.sum()))
        kp.foreach_set("co", co[keep].ravel())
        kp.foreach_set("interpolation", interp[keep])
        fc.update()
    return n_del


def evaluate_keys_bezier(obj, frames) -> np.ndarray:
    """``evaluate`` with every key of ``obj`` set to Bezier (Blender's default, Auto Clamped), then put back: the
    curve of the keys the add-on applies a model's change to, whatever the keys' own interpolation (the ManipNet
    import leaves them LINEAR)."""
    saved = [(fc, [k.interpolation for k in fc.keyframe_points]) for fc in fcurves_of(obj)]
    for fc, _ in saved:
        for k in fc.keyframe_points:
            k.interpolation = "BEZIER"
        fc.update()
    try:
        return evaluate(obj, frames)
    finally:
        for fc, kinds in saved:
            for k, kind in zip(fc.keyframe_points, kinds, strict=True):
                k.interpolation = kind
            fc.update()


def keyed_empty(track: dict):
    """An empty keyed on every frame of the track, its world matrix [A R A^-1 | A p]."""
    empty = bpy.data.objects.new("Mug", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.rotation_mode = "QUATERNION"
    inv = (A_QUAT[0], -A_QUAT[1], -A_QUAT[2], -A_QUAT[3])
    for f, q, p in zip(track["frames"], track["rotations"], track["positions"], strict=True):
        empty.location = (float(p[0]), float(-p[2]), float(p[1]))
        empty.rotation_quaternion = qmul(qmul(A_QUAT, tuple(float(v) for v in q)), inv)
        empty.keyframe_insert("location", frame=float(f))
        empty.keyframe_insert("rotation_quaternion", frame=float(f))
    return empty


def hands_infill(**kw) -> str:
    try:
        bpy.ops.motioncore.hands_infill("EXEC_DEFAULT", True, variations=1, temperature=0.0,
                                        **{"keys": "EVERY_FRAME", **kw})   # the fill's own values (parity)
        return bpy.context.scene.motioncore.last_report
    except RuntimeError as e:
        return "ERROR " + str(e).strip()


def main() -> None:
    zip_path, spec_path, track_path, out_path, conn = sys.argv[1:6]
    os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
    spec = json.loads(open(spec_path).read())
    res: dict = {"blender": bpy.app.version_string}
    arrays: dict = {}
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
        with np.load(track_path) as z:
            track = {k: z[k] for k in z.files}
        bpy.ops.import_anim.bvh(filepath=spec["hand"])
        arm = bpy.context.active_object
        sc = bpy.context.scene
        sc.render.fps, sc.render.fps_base = int(round(spec["fps"])), 1.0
        a, b = spec["gap"]
        ctx = int(spec["context"])
        frames = np.arange(a, b + 1)
        bones = [pb.name for pb in arm.pose.bones]
        res.update(bones=bones, parents=[bones.index(x.parent.name) if x.parent else -1 for x in arm.data.bones],
                   modes=sorted({pb.rotation_mode for pb in arm.pose.bones}))
        arrays["rest"] = np.array([np.array(x.matrix_local) for x in arm.data.bones])
        arrays["frames"] = frames
        arrays["truth"] = evaluate(arm, frames)
        a2, b2 = spec["gap30"]   # a second gap, 30 frames at the models' 30 fps, for infill-hands
        frames2 = np.arange(a2, b2 + 1)
        arrays["truth30"] = evaluate(arm, frames2)
        empty = keyed_empty(track)
        res["deleted"] = delete_finger_keys(arm, "WRIST", a, b)
        arrays["bezier"] = evaluate(arm, frames)   # Blender's own Bezier over the keys left
        bpy.context.view_layer.objects.active = arm
        arm.select_set(True)
        sc.frame_start, sc.frame_end = a - ctx, b + ctx
        s = sc.motioncore
        sc.frame_set(a)   # the current frame is put back after the object is read
        arrays["empty_world"] = np.array([np.array(empty.matrix_world)])
        s.hands_object, s.hands_model = empty, spec["model"]
        res["with"] = hands_infill()
        res["frame_after"] = sc.frame_current
        arrays["with"] = evaluate(arm, frames)
        s.hands_object = None
        res["without"] = hands_infill()
        arrays["without"] = evaluate(arm, frames)
        s.hands_object, s.hands_model = empty, spec["plain_model"]
        res["refused"] = hands_infill()
        s.hands_model = ""   # empty at temperature 0: the deterministic infill-hands, with the object
        res["default_model"] = hands_infill()
        arrays["default_model"] = evaluate(arm, frames)
        s.hands_object = arm
        res["own_armature"] = hands_infill()
        res["deleted30"] = delete_finger_keys(arm, "WRIST", a2, b2)
        arrays["bezier30"] = evaluate(arm, frames2)
        arrays["keysbez30"] = evaluate_keys_bezier(arm, frames2)
        sc.frame_start, sc.frame_end = a2 - ctx, b2 + ctx
        sc.frame_set(a2)
        s.hands_object, s.hands_model = empty, ""
        res["fill30"] = hands_infill()
        arrays["fill30"] = evaluate(arm, frames2)
    except Exception:
        res["error"] = traceback.format_exc()
    np.savez(out_path, **arrays)
    with open(out_path + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
