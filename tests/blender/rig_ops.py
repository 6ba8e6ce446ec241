"""Runs INSIDE a venv with the real ``bpy`` wheel: Connect, Map Bones and Hands In-fill on rigs made by
Blender's own BVH importer at its defaults (issue 12 items 9, 10, 13). Used by tests/blender/test_blender_infill.py.

    python rig_ops.py ZIP CONNECTION_FILE BODY_BVH HAND_BVH OUT.json

1. Connect with the preference pointing at the live server's connection file: the report names it;
   the same file made readable by others: refused, nothing talked to.
2. Map Bones on the Bandai BVH import (an upright human rig): for the dog (mann.rollout) an error
   naming a skeleton of another kind and the bone map untouched; for In-fill (body) every joint mapped.
3. Hands: a ManipNet hand BVH import (120 fps, Euler); Map For "In-fill (hands)" maps the hands model;
   keys deleted inside one gap, Hands In-fill: the bones it reports equal the bones that got keys.
4. Retarget from the Euler import (root motion on the hips bone) onto a second import: world joint positions.
5. Walk along a Bezier, a NURBS and a poly spline (each curve object moved, turned and scaled) and Style from
   example along the Bezier, on an Euler import: modes kept, hips on the curve Blender draws (world space).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback

import bpy
import numpy as np


def fcurves_of(obj):
    ad = obj.animation_data
    if bpy.app.version >= (4, 4, 0):
        from bpy_extras import anim_utils
        return list(anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot).fcurves)
    return list(ad.action.fcurves)


def run(op, **kw) -> str:
    """The operator's report: the last_report on success, the error text otherwise."""
    try:
        op("EXEC_DEFAULT", True, **kw)
        return bpy.context.scene.motioncore.last_report
    except RuntimeError as e:
        return "ERROR " + str(e).strip()


def import_bvh(path: str):
    for o in list(bpy.data.objects):
        bpy.data.objects.remove(o)
    bpy.ops.import_anim.bvh(filepath=path)
    obj = bpy.context.active_object
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    return obj

# the curves walked (cm, the BVH import's units): local control points; each curve object is moved, turned
# and scaled unevenly, so a path read in local space or from the control polygon is off by metres
PATHS = {
    "BEZIER": [(0, 0, 0), (300, 200, 0), (600, 0, 0)],                                   # an S, auto handles
    "NURBS": [(0, 0, 0), (150, 0, 0), (300, 260, 0), (450, -160, 0), (600, 80, 0), (750, 80, 0)],
    "POLY": [(0, 0, 0), (120, 25, 0), (240, 75, 0), (360, 95, 0), (480, 75, 0), (600, 25, 0), (720, 0, 0)],
}
CURVE_TRANSFORM = {"location": (50.0, -30.0, 0.0), "rotation_euler": (0.0, 0.0, 0.6), "scale": (1.2, 0.8, 1.0)}


def make_curve(kind: str):
    """A curve object with one spline of ``kind`` through PATHS[kind], transformed by CURVE_TRANSFORM. The
    NURBS is order 4, not clamped to its end points (Blender's default for a new spline), with one point
    weighted 3: the curve Blender draws starts and ends well inside the control polygon."""
    cd = bpy.data.curves.new(f"Path{kind}", "CURVE")
    cd.dimensions = "3D"
    sp = cd.splines.new(kind)
    pts = PATHS[kind]
    if kind == "BEZIER":
        sp.bezier_points.add(len(pts) - 1)
        for bp, co in zip(sp.bezier_points, pts):
            bp.co = co
            bp.handle_left_type = bp.handle_right_type = "AUTO"
    else:
        sp.points.add(len(pts) - 1)
        for i, (pt, co) in enumerate(zip(sp.points, pts)):
            pt.co = (*co, 3.0 if kind == "NURBS" and i == 2 else 1.0)
        if kind == "NURBS":
            sp.order_u, sp.use_endpoint_u = 4, False
    obj = bpy.data.objects.new(f"Path{kind}", cd)
    bpy.context.scene.collection.objects.link(obj)
    for k, v in CURVE_TRANSFORM.items():
        setattr(obj, k, v)
    return obj


def drawn_polyline(obj) -> np.ndarray:
    """(N, 2) the curve as Blender draws it: the evaluated curve's mesh (edges chained in order), in world
    space, horizontal (x, y)."""
    bpy.context.view_layer.update()
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    try:
        co = np.array([tuple(obj.matrix_world @ v.co) for v in me.vertices])[:, :2]
        nbr: dict[int, list[int]] = {}
        for e in me.edges:
            a, b = e.vertices
            nbr.setdefault(a, []).append(b)
            nbr.setdefault(b, []).append(a)
    finally:
        ev.to_mesh_clear()
    cur = min(k for k, v in nbr.items() if len(v) == 1)
    order = [cur]
    while True:
        nxt = [w for w in nbr[cur] if w not in order[-2:]]
        if not nxt:
            break
        cur = nxt[0]
        order.append(cur)
    return co[order]


def to_polyline(poly: np.ndarray, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distance, arc length along ``poly`` of the nearest point) of each of ``pts`` (M, 2)."""
    a, b = poly[:-1], poly[1:]
    ab = b - a
    t = np.clip(np.einsum("mkj,kj->mk", pts[:, None] - a[None], ab) / np.maximum((ab ** 2).sum(1), 1e-12), 0, 1)
    near = a[None] + t[..., None] * ab[None]
    dist = np.linalg.norm(pts[:, None] - near, axis=2)
    k = dist.argmin(1)
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(ab, axis=1))])
    i = np.arange(len(pts))
    return dist[i, k], cum[k] + t[i, k] * np.linalg.norm(ab[k], axis=1)


def dense(poly: np.ndarray, step: float = 5.0) -> np.ndarray:
    """``poly`` resampled every ``step`` along its length."""
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(poly, axis=0), axis=1))])
    at = np.linspace(0.0, cum[-1], max(2, int(cum[-1] / step) + 1))
    return np.stack([np.interp(at, cum, poly[:, i]) for i in range(poly.shape[1])], axis=1)


def walk_and_style(body: str, res: dict) -> None:
    """Walk along a Bezier, a NURBS and a poly spline, each curve object moved, turned and scaled, and Style
    from example along the Bezier, on an Euler BVH import: bones keyed in their own mode, the hips measured
    against the curve Blender draws (world space): mean horizontal distance and the share of the curve's
    length walked. The Bezier's figures also go under the unsuffixed keys (walk_*)."""
    sc, s = bpy.context.scene, bpy.context.scene.motioncore
    ex = import_bvh(body)
    example = ex.animation_data.action
    example.use_fake_user = True
    bpy.ops.import_anim.bvh(filepath=body)
    walker = bpy.context.active_object
    walker.animation_data_clear()
    bpy.data.objects.remove(ex)
    curves = {k: make_curve(k) for k in PATHS}
    res["curve_transform"] = CURVE_TRANSFORM
    runs = [("walk", bpy.ops.motioncore.walk_path, k) for k in PATHS] + [("style", bpy.ops.motioncore.style_adapt, "BEZIER")]
    for label, op, kind in runs:
        curve = curves[kind]
        key = label if label == "style" else f"walk_{kind.lower()}"
        walker.animation_data_clear()
        for pb in walker.pose.bones:
            pb.location, pb.rotation_euler = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        s.style_action = example
        sc.frame_current = 1
        for o in bpy.data.objects:
            o.select_set(o in (walker, curve))
        bpy.context.view_layer.objects.active = walker
        t = time.perf_counter()
        res[key] = run(op)
        res[f"{key}_s"] = time.perf_counter() - t
        res[f"{key}_modes"] = sorted({pb.rotation_mode for pb in walker.pose.bones})
        if walker.animation_data is None or walker.animation_data.action is None:
            continue
        fcs = fcurves_of(walker)
        res[f"{key}_rot_bones"] = len({fc.data_path.split('"')[1] for fc in fcs
                                       if fc.data_path.endswith("rotation_euler") and len(fc.keyframe_points)})
        res[f"{key}_quat_curves"] = sum(fc.data_path.endswith("rotation_quaternion") for fc in fcs)
        lo_w, hi_w = (int(v) for v in walker.animation_data.action.frame_range)
        hp = []
        for f in range(lo_w, hi_w + 1, 5):
            sc.frame_set(f)
            hp.append(tuple(walker.matrix_world @ walker.pose.bones["Hips"].head))
        hp = np.array(hp)[:, :2]
        poly = drawn_polyline(curve)
        dist, along = to_polyline(poly, hp)
        length = float(np.linalg.norm(np.diff(poly, axis=0), axis=1).sum())
        res[f"{key}_hips_to_curve"] = float(dist.mean())
        res[f"{key}_hips_to_curve_max"] = float(dist.max())
        res[f"{key}_hips_travel"] = float(np.linalg.norm(hp[-1] - hp[0]))
        res[f"{key}_covered"] = float((along.max() - along[0]) / length)   # share of the drawn length walked
        res[f"{key}_curve_length"] = length
        res[f"{key}_hips_to_curve_frames"] = [round(float(v), 1) for v in dist]
        # the test's power: how far the curve Blender draws is from a path read from the control polygon
        # (world space), and from the control points with the object's transform ignored
        ctrl = np.array([p[:3] for p in PATHS[kind]], np.float64)
        mw = np.array(curve.matrix_world)
        res[f"{key}_polygon_off"] = float(to_polyline(poly, dense((ctrl @ mw[:3, :3].T + mw[:3, 3])[:, :2]))[0].mean())
        res[f"{key}_local_off"] = float(to_polyline(poly, dense(ctrl[:, :2]))[0].mean())
        if kind == "BEZIER" and label == "walk":
            res.update({k.replace("walk_bezier", "walk"): v for k, v in list(res.items()) if k.startswith("walk_bezier")})


def main() -> None:
    zip_path, conn, body, hand, out = sys.argv[1:6]
    res: dict = {"blender": bpy.app.version_string}
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    key = next(k for k in bpy.context.preferences.addons.keys() if k.endswith("motioncore"))
    prefs = bpy.context.preferences.addons[key].preferences
    os.environ.pop("MOTIONCORE_CONNECTION_FILE", None)
    try:
        # item 9: Connect names the connection file and the server; a file others can read is refused
        prefs.connection_file = conn
        res["connect"] = run(bpy.ops.motioncore.connect)
        res["status"] = bpy.context.scene.motioncore.status
        loose = os.path.join(tempfile.mkdtemp(), "loose.json")
        shutil.copy(conn, loose)
        os.chmod(loose, 0o644)
        prefs.connection_file = loose
        res["connect_loose"] = run(bpy.ops.motioncore.connect)
        prefs.connection_file = conn
        bpy.ops.motioncore.connect("EXEC_DEFAULT", True)
        # item 10: the dog model on a human rig
        arm = import_bvh(body)
        s = bpy.context.scene.motioncore
        s.map_task = "infill"
        res["map_body"] = run(bpy.ops.motioncore.map_bones)
        res["rows_body"] = len(arm.data.motioncore_map)
        s.map_task = "mann.rollout"
        res["map_dog"] = run(bpy.ops.motioncore.map_bones)
        res["rows_after_dog"] = len(arm.data.motioncore_map)
        # item 13: hands
        arm = import_bvh(hand)
        sc = bpy.context.scene
        sc.render.fps, sc.render.fps_base = 120, 1.0
        s.map_task = "infill.hands"
        res["map_hands"] = run(bpy.ops.motioncore.map_bones)
        arm.data.motioncore_map.clear()
        a, b, ctx = 201, 260, 40
        for fc in fcurves_of(arm):
            kp = fc.keyframe_points
            co = np.empty(2 * len(kp), np.float32)
            kp.foreach_get("co", co)
            co = co.reshape(-1, 2)
            keep = ~((co[:, 0] >= a) & (co[:, 0] <= b))
            kp.clear()
            kp.add(int(keep.sum()))
            kp.foreach_set("co", co[keep].ravel())
            fc.update()
        before = {(fc.data_path, fc.array_index): len(fc.keyframe_points) for fc in fcurves_of(arm)}
        sc.frame_start, sc.frame_end = a - ctx, b + ctx
        res["hands"] = run(bpy.ops.motioncore.hands_infill, variations=1, temperature=0.0)
        got = {(fc.data_path, fc.array_index): len(fc.keyframe_points) for fc in fcurves_of(arm)}
        changed = {p.split('"')[1] for (p, _), n in got.items() if n != before.get((p, _), 0) and p.startswith("pose.bones")}
        res["hands_bones_keyed"] = sorted(changed)
        res["hands_root_keyed"] = any(n != before.get(k, 0) for k, n in got.items() if k[0].endswith("location"))
        res["hand_bones"] = [pb.name for pb in arm.pose.bones]
        # items 5 and 1: Retarget from an Euler BVH import (root motion on the hips bone) onto a second
        # import of the same file with its action removed: the target's bones go where the source's are
        src = import_bvh(body)
        src.name = "Source"
        bpy.ops.import_anim.bvh(filepath=body)
        tgt = bpy.context.active_object
        tgt.name = "Target"
        tgt.animation_data_clear()
        for pb in tgt.pose.bones:   # clearing the action leaves the last evaluated pose: back to rest
            pb.location, pb.rotation_euler = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        sc.render.fps, sc.render.fps_base = 30, 1.0
        lo, hi = 1, 60
        sc.frame_start, sc.frame_end = lo, hi
        for o in bpy.data.objects:
            o.select_set(o in (src, tgt))
        bpy.context.view_layer.objects.active = src
        res["retarget"] = run(bpy.ops.motioncore.retarget)
        res["retarget_modes"] = sorted({pb.rotation_mode for pb in tgt.pose.bones})
        err, rel, moved, moved_t = [], [], [], []
        for f in range(lo, hi + 1, 3):
            sc.frame_set(f)
            a = np.array([tuple(src.matrix_world @ pb.head) for pb in src.pose.bones])
            b = np.array([tuple(tgt.matrix_world @ tgt.pose.bones[pb.name].head) for pb in src.pose.bones])
            err.append(np.linalg.norm(a - b, axis=1)[1:].mean())   # joint_Root, a static bone at the origin, moves with the object
            rel.append(np.linalg.norm((a - a[1]) - (b - b[1]), axis=1)[1:].mean())   # the pose about the hips
            moved.append(a[1])
            moved_t.append(b[1])
        res["retarget_err"] = float(np.mean(err))
        res["source_travel"] = float(np.linalg.norm(moved[-1] - moved[0]))
        res["target_travel_err"] = float(np.abs((np.array(moved_t) - moved_t[0]) - (np.array(moved) - moved[0])).max())
        res["retarget_pose_err"] = float(np.mean(rel))
        # an Euler source whose action was removed: nothing useful to write: an error, not success
        src.animation_data_clear()
        bpy.ops.import_anim.bvh(filepath=body)
        still = bpy.context.active_object
        still.animation_data_clear()
        still.animation_data_create()
        still.animation_data.action = bpy.data.actions.new("Empty")
        for o in bpy.data.objects:
            o.select_set(o in (still, tgt))
        bpy.context.view_layer.objects.active = still
        res["retarget_rest"] = run(bpy.ops.motioncore.retarget)
        # items 4 and 6: Walk and Style on an Euler BVH import (cm, hips far from the origin at rest)
        walk_and_style(body, res)
    except Exception:
        res["error"] = traceback.format_exc()
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
