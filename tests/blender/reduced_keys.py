"""Runs INSIDE a venv with the real ``bpy`` wheel: In-fill's Keys = Reduced against Every Frame on clips imported with
Blender's own BVH importer at its defaults (tests/blender/test_blender_reduced_keys.py, bench/reduced_keys.py).

    python reduced_keys.py ZIP SPEC.json OUT.npz CONNECTION_FILE

SPEC: {"clips": [{"name", "path" (BVH), "fps" (the scene's), "gaps": [[first, last], ...] (Blender frames deleted),
"context" (keyed frames either side), "edit": bool (the editing checks), "figure": [bone, property, gap] (one bone's
curves evaluated finely over that gap and the next, for docs/blender.md)}]}.
Per clip: import, evaluate the truth, delete the keys strictly inside the gaps (the rest typed Bezier, Auto Clamped,
as the animator's), In-fill once over the gaps' range with Keys = Every Frame, then with Keys = Reduced (the same
request: the add-on's reply cache answers it). Counted: GENERATED keys after each; evaluated (pose-bone matrices,
armature space): NAME/truth, NAME/dense, NAME/reduced on the gap frames, NAME/j_* on the gaps and 3 frames either side.
With "edit": one reduced key moved (Blender's curve before and after), then the pose keyed inside the first gap
(one bone turned), the handles beside that gap shaped, and the gaps filled again (Every Frame, then Reduced, then one
undo), the animator's keys compared.
"""
from __future__ import annotations

import os
import sys

import bpy
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from infill_bvh import delete_inside, evaluate, fcurves_of, import_clip, last_report, run_spec, set_interpolation  # noqa: E402

FIELDS = ("co", "handle_left", "handle_right")
ENUMS = ("type", "interpolation", "handle_left_type", "handle_right_type", "easing")


def snapshot(obj) -> dict:
    """Every key of every curve: its floats (co, handles) and enums, as Blender stores them."""
    out = {}
    for fc in fcurves_of(obj):
        kp = fc.keyframe_points
        n = len(kp)
        rec = {}
        for f in FIELDS:
            a = np.empty(2 * n, np.float32)
            kp.foreach_get(f, a)
            rec[f] = a.reshape(-1, 2)
        for e in ENUMS:
            a = np.empty(n, np.int32)
            kp.foreach_get(e, a)
            rec[e] = a
        out[(fc.data_path, fc.array_index)] = rec
    return out


def generated_value(obj) -> int:
    fc = next(iter(fcurves_of(obj)))
    return int(fc.keyframe_points[0].bl_rna.properties["type"].enum_items["GENERATED"].value)


def count_generated(snap: dict, gen: int) -> int:
    return int(sum((r["type"] == gen).sum() for r in snap.values()))


def infill(lo: int, hi: int, keys: str) -> str:
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = lo, hi
    try:
        bpy.ops.motioncore.infill("EXEC_DEFAULT", True, variations=1, temperature=0.0, keys=keys)
        return last_report()
    except RuntimeError as e:
        return "ERROR " + str(e)


def fine(fc, lo: float, hi: float, step: float = 0.1) -> np.ndarray:
    xs = np.arange(lo, hi + 1e-9, step)
    return np.stack([xs, [fc.evaluate(float(x)) for x in xs]], 1)


def move_one_key(obj, gaps, gen: int) -> dict:
    """Move the middle reduced key of the liveliest curve with three or more reduced keys in one gap (with its
    handles, as G does in the Graph Editor); Blender's curve on quarter frames before and after, and that key's
    neighbours' frames."""
    best = None
    for a, b in gaps:
        for fc in fcurves_of(obj):
            snap = snapshot_one(fc)
            sel = np.flatnonzero((snap["type"] == gen) & (snap["co"][:, 0] >= a) & (snap["co"][:, 0] <= b))
            if sel.size >= 3:
                span = float(np.ptp(snap["co"][sel, 1]))
                if best is None or span > best[0]:
                    best = (span, fc, sel[sel.size // 2], (a, b))
    if best is None:
        return {"error": "no curve with three reduced keys in a gap"}
    _, fc, k, (a, b) = best
    kp = fc.keyframe_points
    lo, hi = a - 6, b + 6
    before = fine(fc, lo, hi, 0.25)
    delta = 0.2 * max(best[0], 1e-3)
    key = kp[int(k)]
    for f in FIELDS:
        v = list(getattr(key, f))
        setattr(key, f, (v[0], v[1] + delta))
    fc.update()
    after = fine(fc, lo, hi, 0.25)
    prev_x, next_x = float(kp[int(k) - 1].co[0]), float(kp[int(k) + 1].co[0])
    for f in FIELDS:   # put it back
        v = list(getattr(key, f))
        setattr(key, f, (v[0], v[1] - delta))
    fc.update()
    return {"curve": f"{fc.data_path}[{fc.array_index}]", "key": float(kp[int(k)].co[0]), "prev": prev_x,
            "next": next_x, "before": before.tolist(), "after": after.tolist(), "delta": delta}


def snapshot_one(fc) -> dict:
    kp = fc.keyframe_points
    n = len(kp)
    co = np.empty(2 * n, np.float32)
    kp.foreach_get("co", co)
    t = np.empty(n, np.int32)
    kp.foreach_get("type", t)
    return {"co": co.reshape(-1, 2), "type": t}


def kp_enum(obj, prop: str, item: str) -> int:
    fc = next(iter(fcurves_of(obj)))
    return int(fc.keyframe_points[0].bl_rna.properties[prop].enum_items[item].value)


def shape_handles(obj, frames) -> int:
    """The animator shapes the handles of their keys on ``frames`` (FREE, pulled off the auto positions), as in the
    Graph Editor. Returns the keys shaped."""
    n = 0
    for fc in fcurves_of(obj):
        for kp in fc.keyframe_points:
            if round(kp.co[0]) in frames and kp.type != "GENERATED":
                kp.handle_left_type = kp.handle_right_type = "FREE"
                kp.handle_left = (kp.co[0] - 0.4, kp.co[1] - 0.01)
                kp.handle_right = (kp.co[0] + 0.3, kp.co[1] + 0.02)
                n += 1
        fc.update()
    return n


def key_a_pose(obj, frame: int, turn_bone: str) -> None:
    """The animator keys the whole pose on ``frame`` (inside a gap), one bone turned by 0.3 rad first."""
    bpy.context.scene.frame_set(frame)
    for pb in obj.pose.bones:
        prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(pb.rotation_mode,
                                                                                              "rotation_euler")
        if pb.name == turn_bone:
            if prop == "rotation_euler":
                pb.rotation_euler[0] += 0.3
            else:
                raise ValueError("the edit check turns an Euler bone")
        pb.keyframe_insert(prop, frame=frame)
        if pb.parent is None:
            pb.keyframe_insert("location", frame=frame)


def run_clip(clip: dict, tmp: str, res: dict, arrays: dict) -> None:
    name = clip["name"]
    obj = import_clip(clip, tmp)
    obj_name = obj.name
    gaps = [tuple(g) for g in clip["gaps"]]
    frames = np.concatenate([np.arange(a, b + 1) for a, b in gaps])
    lo_all, hi_all = (int(round(v)) for v in obj.animation_data.action.frame_range)
    jframes = np.unique(np.concatenate([np.arange(max(lo_all, a - 3), min(hi_all, b + 3) + 1) for a, b in gaps]))
    bones = [pb.name for pb in obj.pose.bones]
    info = {"bones": bones, "parents": [bones.index(b.parent.name) if b.parent else -1 for b in obj.data.bones],
            "blender": bpy.app.version_string, "modes": sorted({pb.rotation_mode for pb in obj.pose.bones})}
    arrays[f"{name}/rest"] = np.array([np.array(b.matrix_local) for b in obj.data.bones])
    arrays[f"{name}/object"] = np.array(obj.matrix_world)
    arrays[f"{name}/frames"], arrays[f"{name}/jframes"] = frames, jframes
    arrays[f"{name}/truth"], arrays[f"{name}/j_truth"] = evaluate(obj, frames), evaluate(obj, jframes)
    delete_inside(obj, gaps)
    set_interpolation(obj, "BEZIER")
    gen = generated_value(obj)
    ctx = int(clip["context"])
    lo, hi = gaps[0][0] - ctx, gaps[-1][1] + ctx
    user = snapshot(obj)
    fig = clip.get("figure")
    fig_curves = []
    if fig:
        fig_curves = [fc for fc in fcurves_of(obj) if fc.data_path == f'pose.bones["{fig[0]}"].{fig[1]}']
        g0 = min(int(fig[2]) if len(fig) > 2 else 0, len(gaps) - 1)   # the figure's first gap, and the next one
        fig_lo, fig_hi = gaps[g0][0] - 4, gaps[min(g0 + 1, len(gaps) - 1)][1] + 4
        for fc in fig_curves:
            arrays[f"{name}/fig_user{fc.array_index}"] = snapshot_one(fc)["co"]
    for mode in ("EVERY_FRAME", "REDUCED"):
        tag = "dense" if mode == "EVERY_FRAME" else "reduced"
        info[f"report_{tag}"] = infill(lo, hi, mode)
        snap = snapshot(obj)
        info[f"keys_{tag}"] = count_generated(snap, gen)
        arrays[f"{name}/{tag}"], arrays[f"{name}/j_{tag}"] = evaluate(obj, frames), evaluate(obj, jframes)
        curves = fcurves_of(obj)   # every curve on the gap frames, as Blender evaluates it
        info["curves"] = [f"{fc.data_path}[{fc.array_index}]" for fc in curves]
        arrays[f"{name}/curves_{tag}"] = np.array([[fc.evaluate(float(f)) for f in frames] for fc in curves])
        arrays[f"{name}/keys_{tag}"] = np.array([len(fc.keyframe_points) for fc in curves])
        for fc in fig_curves:
            arrays[f"{name}/fig_{tag}{fc.array_index}"] = fine(fc, fig_lo, fig_hi)
            s = snapshot(obj)[(fc.data_path, fc.array_index)]
            arrays[f"{name}/fig_{tag}_keys{fc.array_index}"] = np.concatenate(
                [s["co"], s["handle_left"], s["handle_right"], (s["type"] == gen)[:, None].astype(np.float32)], 1)
    now = snapshot(obj)
    info["user_keys_kept"] = all(np.array_equal(now[k][f][now[k]["type"] != gen], v[f])
                                 for k, v in user.items() for f in ("co", "type", "interpolation", "handle_left_type",
                                                                    "handle_right_type"))
    if clip.get("edit"):
        info["move"] = move_one_key(obj, gaps, gen)
        a, b = gaps[0]
        g = (a + b) // 2
        key_a_pose(obj, g, clip["edit"])
        shaped = shape_handles(obj, (a - 1, g, b + 1))
        mine = snapshot(obj)
        old_gen = {k: r["co"][(r["type"] == gen) & (r["co"][:, 0] >= a) & (r["co"][:, 0] <= b)] for k, r in mine.items()}
        info["report_again_dense"] = infill(lo, hi, "EVERY_FRAME")
        dense2 = snapshot(obj)
        arrays[f"{name}/again_dense"] = evaluate(obj, np.arange(a, b + 1))
        bpy.ops.ed.undo_push(message="before the reduced fill")
        info["report_again"] = infill(lo, hi, "REDUCED")
        again = snapshot(obj)
        arrays[f"{name}/again"] = evaluate(obj, np.arange(a, b + 1))
        bpy.ops.ed.undo()   # one Ctrl+Z: the reduced fill gone, the curves as before it
        obj = bpy.data.objects[obj_name]   # undo reloads the data: the old reference is gone
        undone = snapshot(obj)
        info["undo_restores"] = undone.keys() == dense2.keys() and all(
            np.array_equal(undone[k][f], v[f]) for k, v in dense2.items() for f in (*FIELDS, *ENUMS))
        info["again_frame"] = g
        # the animator's keys (the new pose key among them), every float and enum as it was
        info["again_user_kept"] = all(np.array_equal(again[k][f][again[k]["type"] != gen], v[f][v["type"] != gen])
                                      for k, v in mine.items() for f in (*FIELDS, *ENUMS))
        info["again_user_co_kept"] = all(np.array_equal(again[k]["co"][again[k]["type"] != gen],
                                                        v["co"][v["type"] != gen]) for k, v in mine.items())
        info["again_user_enums_kept"] = all(np.array_equal(again[k][f][again[k]["type"] != gen], v[f][v["type"] != gen])
                                            for k, v in mine.items() for f in ENUMS)
        # handle positions: the ones the animator shaped (FREE, beside the gap and on the new key) exactly as they
        # were; the others moved only where Blender computes them (Auto Clamped: from their neighbours)
        free = int(kp_enum(obj, "handle_left_type", "FREE"))
        info["again_shaped_examples"] = []
        for label, snap2 in (("every_frame", dense2), ("reduced", again)):
            kept = 0
            for k, v in mine.items():
                r = snap2[k]
                u_old, u_new = v["type"] != gen, r["type"] != gen
                sh = v["handle_left_type"][u_old] == free
                same = ~((v["handle_left"][u_old] != r["handle_left"][u_new]).any(1)
                         | (v["handle_right"][u_old] != r["handle_right"][u_new]).any(1))
                kept += int((sh & same).sum())
                for i in np.flatnonzero(sh & ~same)[:1]:
                    if len(info["again_shaped_examples"]) < 6:
                        info["again_shaped_examples"].append(
                            [label, k[0], k[1], v["co"][u_old][i].tolist(), v["handle_left"][u_old][i].tolist(),
                             r["handle_left"][u_new][i].tolist(), v["handle_right"][u_old][i].tolist(),
                             r["handle_right"][u_new][i].tolist(), int(r["handle_left_type"][u_new][i])])
            info[f"again_shaped_kept_{label}"] = kept
        moved, moved_auto, shaped_kept = 0, 0, 0
        for k, v in mine.items():
            r = again[k]
            u_old, u_new = v["type"] != gen, r["type"] != gen
            diff = (v["handle_left"][u_old] != r["handle_left"][u_new]).any(1) | \
                (v["handle_right"][u_old] != r["handle_right"][u_new]).any(1)
            moved += int(diff.sum())
            moved_auto += int((diff & (v["handle_left_type"][u_old] != free)).sum())
            shaped_kept += int((~diff & (v["handle_left_type"][u_old] == free)).sum())
        info.update(again_user_handles_moved=moved, again_user_handles_moved_auto=moved_auto,
                    again_user_shaped=shaped, again_user_shaped_kept=shaped_kept)
        fresh, total, doubled = 0, 0, 0
        for k, r in again.items():   # each GENERATED key of the gap holds the new fill's value on its frame: none stale
            sel = (r["type"] == gen) & (r["co"][:, 0] >= a) & (r["co"][:, 0] <= b)
            d = dense2[k]
            dmap = {float(x): float(y) for x, y in d["co"][d["type"] == gen]}
            for x, y in r["co"][sel]:
                total += 1
                fresh += int(abs(dmap.get(float(x), np.inf) - float(y)) <= 1e-6 * max(1.0, abs(float(y))))
            doubled += r["co"].shape[0] - np.unique(np.round(r["co"][:, 0])).size
        old = sum(v.shape[0] for v in old_gen.values())
        info.update(again_old_keys=old, again_doubled=doubled)
        info.update(again_keys=total, again_fresh=fresh)
    res[name] = info


def main() -> None:
    run_spec(lambda clip, tmp, res, arrays, spec: run_clip(clip, tmp, res, arrays))


if __name__ == "__main__":
    main()
