"""Runs INSIDE a venv with the real ``bpy`` wheel: the animator's in-fill on rigs made by Blender's own BVH
importer (issue 12). Used by tests/blender/test_blender_infill.py (small) and bench/blender_infill.py (full).

    python infill_bvh.py ZIP SPEC.json OUT.npz CONNECTION_FILE

SPEC: {"clips": [{"name", "path" (BVH), "rotate_mode" (null: the importer's default, Euler), "fps" (the scene's;
null: as the importer leaves it),
"gaps": [[first, last], ...] (Blender frames deleted, inclusive), "fbx": bool, "full_range": bool (the scene
range is the whole action, not each gap's window), "profile": bool (cProfile of the first operator call),
"adapt": seconds, its time limit, or true: its defaults (Learn This Action over the whole action before the in-fill;
"adapt_steps": its budget in steps, default the operator's), "plant_feet": bool (In-fill's Plant Feet;
default off), "keys": how the keys are interpolated when In-fill runs (null: set to Bezier, Auto Clamped, as before;
"imported": as Blender's importer left them, LINEAR; "BEZIER", "LINEAR", "CONSTANT"; "VECTOR": Bezier with Vector
handles), "update_fps": bool (the importer's Update Scene FPS), "best_rate": bool (In-fill's Best Rate, default on),
"once": bool (with full_range: one In-fill, no warm rerun), "jerk": bool (also evaluate the
gaps and 3 frames either side: NAME/j_truth, j_bezier, j_addon), "all_frames": bool (NAME/all: every frame
before the keys are deleted)}], NAME/user: the gap frames as the user's keys give them when In-fill runs,
"checks": bool}.
Per clip: import, evaluate the truth on the gap frames, delete the keys strictly inside the gaps, evaluate
Blender's BEZIER (auto-clamped) and LINEAR interpolation of the remaining keys, then run
``bpy.ops.motioncore.infill`` once per gap (scene range = the gap and 10 keyed frames either side) and
evaluate. Writes every evaluated pose (pose-bone matrices, armature space) and the reports to OUT.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import bpy
import numpy as np

CONTEXT = 10


def fcurves_of(obj):
    ad = obj.animation_data
    act = ad.action
    if bpy.app.version >= (4, 4, 0):
        from bpy_extras import anim_utils
        bag = anim_utils.action_get_channelbag_for_slot(act, ad.action_slot)
        return list(bag.fcurves)
    return list(act.fcurves)


def evaluate(obj, frames) -> np.ndarray:
    """(F, B, 4, 4) pose-bone matrices (armature space) at ``frames``."""
    sc = bpy.context.scene
    out = np.zeros((len(frames), len(obj.pose.bones), 4, 4))
    for i, f in enumerate(frames):
        sc.frame_set(int(f))
        for j, pb in enumerate(obj.pose.bones):
            out[i, j] = np.array(pb.matrix)
    return out


def keys_of(obj) -> dict:
    out = {}
    for fc in fcurves_of(obj):
        n = len(fc.keyframe_points)
        co = np.empty(2 * n, np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out[(fc.data_path, fc.array_index)] = co.reshape(-1, 2)
    return out


def delete_inside(obj, gaps) -> None:
    """Delete every key strictly inside the gaps (frames first..last), in bulk."""
    for fc in fcurves_of(obj):
        kp = fc.keyframe_points
        n = len(kp)
        co = np.empty(2 * n, np.float32)
        kp.foreach_get("co", co)
        co = co.reshape(-1, 2)
        keep = np.ones(n, bool)
        for a, b in gaps:
            keep &= ~((co[:, 0] >= a - 0.5) & (co[:, 0] <= b + 0.5))
        interp = np.empty(n, np.int32)
        kp.foreach_get("interpolation", interp)
        kept, ki = co[keep], interp[keep]
        kp.clear()
        kp.add(len(kept))
        kp.foreach_set("co", kept.ravel())
        kp.foreach_set("interpolation", ki)
        fc.update()


def interpolations(obj) -> list:
    """Every key's interpolation, per f-curve (to put back as the importer left them)."""
    out = []
    for fc in fcurves_of(obj):
        kp = fc.keyframe_points
        v = np.empty(len(kp), np.int32)
        kp.foreach_get("interpolation", v)
        out.append(v)
    return out


def restore_interpolations(obj, saved: list) -> None:
    for fc, v in zip(fcurves_of(obj), saved):
        fc.keyframe_points.foreach_set("interpolation", v)
        fc.update()


def set_interpolation(obj, kind: str) -> None:
    handles = "VECTOR" if kind == "VECTOR" else "AUTO_CLAMPED"
    kind = "BEZIER" if kind == "VECTOR" else kind
    for fc in fcurves_of(obj):
        kp = fc.keyframe_points
        if not len(kp):
            continue
        enum = kp[0].bl_rna.properties["interpolation"].enum_items[kind].value
        kp.foreach_set("interpolation", np.full(len(kp), enum, np.int32))
        if kind == "BEZIER":
            h = kp[0].bl_rna.properties["handle_left_type"].enum_items[handles].value
            kp.foreach_set("handle_left_type", np.full(len(kp), h, np.int32))
            kp.foreach_set("handle_right_type", np.full(len(kp), h, np.int32))
        fc.update()


def import_clip(clip: dict, tmp: str):
    for o in list(bpy.data.objects):
        bpy.data.objects.remove(o)
    for a in list(bpy.data.actions):
        bpy.data.actions.remove(a)
    kw = {} if not clip.get("rotate_mode") else {"rotate_mode": clip["rotate_mode"]}
    sc = bpy.context.scene
    sc.render.fps, sc.render.fps_base = 24, 1.0   # Blender's default scene (an earlier clip's import may have set it)
    if clip.get("update_fps"):
        kw["update_scene_fps"] = True
    bpy.ops.import_anim.bvh(filepath=clip["path"], **kw)
    obj = bpy.context.active_object
    if clip.get("fbx"):   # through an FBX export and re-import
        path = f"{tmp}/{clip['name']}.fbx"
        bpy.ops.export_scene.fbx(filepath=path, use_selection=True, bake_anim=True, add_leaf_bones=False)
        for o in list(bpy.data.objects):
            bpy.data.objects.remove(o)
        for a in list(bpy.data.actions):
            bpy.data.actions.remove(a)
        bpy.ops.import_scene.fbx(filepath=path)
        obj = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    sc = bpy.context.scene
    if clip.get("fps"):   # None: the scene as the importer leaves it (24 fps: the importer's default keeps it)
        sc.render.fps, sc.render.fps_base = int(round(clip["fps"])), 1.0
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    return obj


def infill(obj, lo: int, hi: int, profile: dict | None = None, **kw) -> tuple[str, float]:
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = lo, hi
    bpy.context.view_layer.objects.active = obj
    prof = None
    if profile is not None:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t = time.perf_counter()
    try:
        # a key on every filled frame: these figures are the fill's (Keys = Reduced: reduced_keys.py)
        bpy.ops.motioncore.infill("EXEC_DEFAULT", True, **{"keys": "EVERY_FRAME", **kw})
        msg = last_report()
    except RuntimeError as e:
        msg = "ERROR " + str(e)
    dt = time.perf_counter() - t
    if prof is not None:
        import io
        import pstats
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(30)
        profile["text"] = buf.getvalue()
    return msg, dt


def server_cpu() -> float:
    """CPU seconds (user + system) the server process has used so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(os.environ["MOTIONCORE_CONNECTION_FILE"]) as f:
            pid = json.load(f)["pid"]
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, KeyError, ValueError, IndexError):
        return float("nan")


def last_report() -> str:
    return bpy.context.scene.motioncore.last_report


def run_clip(clip: dict, tmp: str, res: dict, arrays: dict, checks: bool) -> None:
    name = clip["name"]
    obj = import_clip(clip, tmp)
    bones = [pb.name for pb in obj.pose.bones]
    gaps = [tuple(g) for g in clip["gaps"]]
    frames = np.concatenate([np.arange(a, b + 1) for a, b in gaps])
    arrays[f"{name}/rest"] = np.array([np.array(b.matrix_local) for b in obj.data.bones])
    arrays[f"{name}/frames"] = frames
    arrays[f"{name}/object"] = np.array(obj.matrix_world)
    info = {"bones": bones, "parents": [bones.index(b.parent.name) if b.parent else -1 for b in obj.data.bones],
            "modes": sorted({pb.rotation_mode for pb in obj.pose.bones}), "blender": bpy.app.version_string,
            "action_frames": [float(v) for v in obj.animation_data.action.frame_range]}
    arrays[f"{name}/truth"] = evaluate(obj, frames)
    lo_all, hi_all = (int(round(v)) for v in obj.animation_data.action.frame_range)
    jframes = np.unique(np.concatenate([np.arange(max(lo_all, a - 3), min(hi_all, b + 3) + 1) for a, b in gaps]))
    if clip.get("all_frames"):   # every frame of the action as imported (NAME/all)
        arrays[f"{name}/all"] = evaluate(obj, np.arange(lo_all, hi_all + 1))
    if clip.get("jerk"):
        arrays[f"{name}/jframes"] = jframes
        arrays[f"{name}/j_truth"] = evaluate(obj, jframes)
    delete_inside(obj, gaps)
    user = keys_of(obj)
    imported = interpolations(obj)
    info["scene_fps"] = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    for kind in ("BEZIER", "LINEAR"):
        set_interpolation(obj, kind)
        arrays[f"{name}/{kind.lower()}"] = evaluate(obj, frames)
        if clip.get("jerk") and kind == "BEZIER":
            arrays[f"{name}/j_bezier"] = evaluate(obj, jframes)
    keys = clip.get("keys") or "BEZIER"   # null: Bezier, as every run before keys were named
    if keys == "imported":
        restore_interpolations(obj, imported)
    else:
        set_interpolation(obj, keys)
    arrays[f"{name}/user"] = evaluate(obj, frames)
    if clip.get("jerk"):
        arrays[f"{name}/j_user"] = evaluate(obj, jframes)
    msgs, times = [], []
    full = clip.get("full_range")
    if clip.get("adapt"):   # Learn This Action over the whole action first (the server caches the copy)
        sc = bpy.context.scene
        sc.frame_start, sc.frame_end = lo_all, hi_all
        t = time.perf_counter()
        try:
            kw = {} if clip["adapt"] is True else {"seconds": float(clip["adapt"])}   # True: its defaults
            if clip.get("adapt_steps"):
                kw["steps"] = int(clip["adapt_steps"])
            bpy.ops.motioncore.adapt_action("EXEC_DEFAULT", True, **kw)
            info["adapt_report"] = last_report()
        except RuntimeError as e:
            info["adapt_report"] = "ERROR " + str(e)
        info["adapt_s"] = time.perf_counter() - t
    prof: dict | None = {} if clip.get("profile") else None
    # named every time (the operator remembers its last setting); off unless asked: the parity checks compare the
    # correction with fill_clip unplanted (the rig's planting has its own parity test, tests/addon/test_addon_rigplant.py)
    plant = bool(clip.get("plant_feet", False))
    for a, b in (gaps[:1] if full and clip.get("once") else gaps):   # "once": one In-fill over the whole range
        # the operator remembers its last settings (as Blender's do): name the defaults
        ctx = int(clip.get("context", CONTEXT))   # scene frames covering the model's context
        lo, hi = (lo_all, hi_all) if full else (a - ctx, b + ctx)
        m, s = infill(obj, lo, hi, prof, variations=1, temperature=0.0, plant_feet=plant,
                      best_rate=bool(clip.get("best_rate", True)))
        if prof:
            info["profile"], prof = prof["text"], None
        msgs.append(m)
        times.append(s)
    if full and not clip.get("once"):   # again with the server warm: the generated keys deleted, the same gaps anew
        delete_inside(obj, gaps)
        prof = {} if clip.get("profile") else None
        # seed 1: a new request (the same one would be answered from the add-on's reply cache). CPU seconds
        # too (this process, and the server's from /proc): on a loaded machine they say what a quiet one takes
        srv0, cpu0 = server_cpu(), time.process_time()
        info["op_s_warm"] = [infill(obj, lo_all, hi_all, prof, variations=1, temperature=0.0, seed=1,
                                    plant_feet=plant, best_rate=bool(clip.get("best_rate", True)))[1]]
        info["op_cpu_warm"] = [time.process_time() - cpu0, server_cpu() - srv0]
        if prof:
            info["profile_warm"] = prof["text"]
    arrays[f"{name}/addon"] = evaluate(obj, frames)
    if clip.get("jerk"):
        arrays[f"{name}/j_addon"] = evaluate(obj, jframes)
    info.update(reports=msgs, op_s=times, modes_after=sorted({pb.rotation_mode for pb in obj.pose.bones}))
    now = keys_of(obj)
    info["user_keys_kept"] = all(
        np.array_equal(now[k][np.isin(now[k][:, 0], v[:, 0])], v) for k, v in user.items())
    if checks:
        a, b = gaps[0]
        again, _ = infill(obj, a - CONTEXT, b + CONTEXT, variations=1, temperature=0.0)                   # item 7: refills its own keys
        info["again"] = again
        arrays[f"{name}/again"] = evaluate(obj, frames)
        info["no_gap"] = infill(obj, a - CONTEXT - 5, a - 2)[0]               # a range without a gap
        info["variations"] = infill(obj, a - CONTEXT, b + CONTEXT, variations=3, temperature=1.0, variation=2)[0]
        info["plain_after"] = infill(obj, a - CONTEXT, b + CONTEXT)[0]         # item 12: settings reset
        arrays[f"{name}/plain_after"] = evaluate(obj, frames)
    res[name] = info


def run_spec(run) -> None:
    """A driver's main (``python SCRIPT ZIP SPEC.json OUT.npz CONNECTION_FILE``): a factory-fresh Blender with the
    add-on installed from ZIP, ``run(clip, tmp, res, arrays, spec)`` per clip of SPEC (a clip that raises gets its
    traceback as its result), then the arrays to OUT.npz and the results to OUT.npz.json."""
    zip_path, spec_path, out_path, conn = sys.argv[1:5]
    import tempfile
    os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
    spec = json.loads(open(spec_path).read())
    res: dict = {"blender": bpy.app.version_string}
    arrays: dict = {}
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    tmp = tempfile.mkdtemp()
    for clip in spec["clips"]:
        try:
            run(clip, tmp, res, arrays, spec)
        except Exception:
            res[clip["name"]] = {"error": traceback.format_exc()}
    np.savez(out_path, **arrays)
    with open(out_path + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)


def main() -> None:
    run_spec(lambda clip, tmp, res, arrays, spec: run_clip(clip, tmp, res, arrays, bool(spec.get("checks"))))


if __name__ == "__main__":
    main()
