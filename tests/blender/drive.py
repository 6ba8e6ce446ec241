"""Runs INSIDE a venv with the real ``bpy`` wheel (tests/blender/test_blender_real.py starts it as a subprocess).

    python drive.py ZIP OUT.json [CONNECTION_FILE]

1. install the extension zip with ``bpy.ops.extensions.package_install_files`` and enable it;
2. build an armature with 12 Bandai-named bones and key two poses 30 frames apart (the user's keys);
3. bulk key writing (``fcurves.write_rotations``: foreach_set) against a ``keyframe_insert`` loop on a
   twin armature: the same curves;
4. with a live server (CONNECTION_FILE): Walk-along-path through ``bpy.ops.motioncore.walk_path``, then
   one ``ed.undo`` reverts it;
5. with a server that is down: ``bpy.ops.motioncore.infill`` reports an error and writes nothing;
6. with the live server: the walk on a rig with tilted, rolled bones points every bone as the model's
   bone to its one child (posed directions compared); In-fill between two keyed poses (every frame of the gap keyed,
   equal to the server's answer, the user's keys unchanged, one undo); Style from example.
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


def armature(name: str, roll: float = 0.0):
    """12 Bandai-named bones; ``roll`` != 0 tilts each bone off the vertical and rolls it (i * roll rad),
    so its rest frame differs from the model joint's."""
    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for i, b in enumerate(BONES):
        eb = arm.edit_bones.new(b)
        eb.head = (0.1 * (i % 3), 0.0, 0.1 * i)
        eb.tail = (0.1 * (i % 3) + 0.05 * np.sin(roll * i), 0.05 * np.cos(roll * i) * (roll != 0), 0.1 * i + 0.1)
        eb.roll = roll * i
    for b, p in PARENT.items():
        arm.edit_bones[b].parent = arm.edit_bones[p]
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return obj


def full_armature(name: str, joints: list[str], parents: list[int], roll: float):
    """One bone per model joint, chained as the model's skeleton, each tilted and rolled differently."""
    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for i, b in enumerate(joints):
        eb = arm.edit_bones.new(b)
        eb.head = (0.05 * (i % 4), 0.02 * (i % 3), 0.08 * i)
        eb.tail = (0.05 * (i % 4) + 0.03 * np.sin(roll * i), 0.02 * (i % 3) + 0.03, 0.08 * i + 0.06)
        eb.roll = roll * i
    for i, p in enumerate(parents):
        if p >= 0:
            arm.edit_bones[joints[i]].parent = arm.edit_bones[joints[p]]
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
    fc = sys.modules["bl_ext.user_default.motioncore.blender.fcurves"]

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
    os.chmod(os.environ["MOTIONCORE_CONNECTION_FILE"], 0o600)   # as a server leaves it (others' files are refused)
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
    try:
        bpy.ops.motioncore.connect("EXEC_DEFAULT")
    except RuntimeError:
        pass
    res["down"]["status"] = bpy.context.scene.motioncore.status
    # the add-on's operators
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    walker = armature("Walker")
    res["walk"] = None
    if conn:
        os.environ["MOTIONCORE_CONNECTION_FILE"] = conn
        res["connect"] = {"result": sorted(bpy.ops.motioncore.connect("EXEC_DEFAULT")),
                          "status": bpy.context.scene.motioncore.status}
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
        res["walk"] = {"result": sorted(r), "s": time.perf_counter() - t,   # Keys = Reduced, the default
                       "keys": sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Walker"]).values()),
                       "report": bpy.context.scene.motioncore.last_report,
                       "types": sorted({t for v in snapshot(bpy.data.objects["Walker"]).values() for t in v[1]})}
        reduced = world_heads(bpy.data.objects["Walker"])
        bpy.ops.ed.undo()
        res["walk"]["keys_after_undo"] = sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Walker"]).values())
        bpy.ops.motioncore.walk_path("EXEC_DEFAULT", True, keys="EVERY_FRAME")
        res["walk"]["every_keys"] = sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Walker"]).values())
        dense = world_heads(bpy.data.objects["Walker"])
        bpy.ops.ed.undo()
        d = np.linalg.norm(reduced - dense, axis=-1) * 100.0 if reduced.shape == dense.shape else np.full(1, np.inf)
        res["walk"].update(frames=int(dense.shape[0]), max_cm=float(d.max()), mean_cm=float(d.mean()))
        res["walk"]["world"] = walk_world_check(conn)
        res["bone_map"] = live_bone_map()
        res["retarget"] = live_retarget()
        res["infill"] = live_infill(conn)
        res["style"] = live_style(conn)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


def _mods():
    return (sys.modules["bl_ext.user_default.motioncore.core.requests"], sys.modules["bl_ext.user_default.motioncore.core.rigmap"],
            sys.modules["bl_ext.user_default.motioncore.core.keys"], sys.modules["bl_ext.user_default.motioncore.vendor.client"])


def _fk(local: np.ndarray, parents: list[int], mul) -> np.ndarray:
    """(T, J, 4) global rotations from local ones."""
    g = np.array(local, np.float64)
    for j, p in enumerate(parents):
        if p >= 0:
            g[:, j] = mul(g[:, p], local[:, j])
    return g


def world_heads(obj) -> np.ndarray:
    """(F, B, 3) world positions of every pose bone's head (scene units) on every frame of the object's action, as
    Blender evaluates its F-curves."""
    lo, hi = (int(round(v)) for v in obj.animation_data.action.frame_range)
    out = np.zeros((hi - lo + 1, len(obj.pose.bones), 3))
    for i, f in enumerate(range(lo, hi + 1)):
        bpy.context.scene.frame_set(f)
        mw = obj.matrix_world
        for j, pb in enumerate(obj.pose.bones):
            out[i, j] = tuple(mw @ pb.head)
    return out


def walk_world_check(conn: str) -> dict:
    """Walk a rig whose bones are tilted and rolled (a rest shaped nothing like the model's): the rest alignment
    (`addon/core/align.py`, as the In-fill's) points every bone with one child as the model's bone to that
    child: the rig's posed direction head(b) -> head(c) is the model's posed offset of c, A G_b off_c, in every
    frame, whatever the bone's rest tilt and roll."""
    req, rigmap, keys, client = _mods()
    sc = bpy.context.scene
    sc.render.fps, sc.render.fps_base = 30, 1.0     # the model's rate: key k is model frame k
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    rig = armature("Rolled", roll=0.7)
    bpy.data.objects["Path"].select_set(True)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    sc.frame_current = 1
    r = bpy.ops.motioncore.walk_path("EXEC_DEFAULT", True, keys="EVERY_FRAME")   # the model's pose on every frame
    points = np.array([[0, 0], [0, 1.5], [0, 3.0]], np.float32)
    with client.Client(conn, timeout=60) as c:
        reply = c.call("pfnn.rollout", {"gait": "walk"}, {"points": points})
    joints, parents = reply.content["skeleton"]["joints"], reply.content["skeleton"]["parents"]
    G = _fk(np.asarray(reply.arrays["rotations"], np.float64), parents, rigmap.quat_mul)
    off = np.asarray(reply.arrays["offsets"], np.float64)
    A = rigmap.Y_UP_TO_Z_UP
    kids = {b: [c for c, p in PARENT.items() if p == b] for b in BONES}
    pairs = [(b, k[0]) for b, k in kids.items() if len(k) == 1 and parents[joints.index(k[0])] == joints.index(b)]
    worst = 0.0
    for f in (1, 15, 40, 80):
        sc.frame_set(f)
        for b, c in pairs:
            got = np.array(rig.pose.bones[c].head) - np.array(rig.pose.bones[b].head)
            qa = rigmap.quat_mul(A, G[f - 1, joints.index(b)])
            want = rigmap.quat_mul(rigmap.quat_mul(qa, np.r_[0.0, off[joints.index(c)]]), rigmap.quat_conj(qa))[1:]
            cos = float(np.dot(got, want) / (np.linalg.norm(got) * np.linalg.norm(want)))
            worst = max(worst, float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))))
    return {"result": sorted(r), "max_angle_deg": worst, "frames": int(reply.content["frames"]), "pairs": len(pairs)}


def live_bone_map() -> dict:
    """Map Bones fills the armature's stored map for the walk model; a row set to no bone keeps that
    joint off the rig in the next walk."""
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    rig = armature("Mapped")
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    bpy.context.scene.motioncore.map_task = "pfnn.rollout"
    r = sorted(bpy.ops.motioncore.map_bones("EXEC_DEFAULT"))
    rows = {x.joint: x.bone for x in rig.data.motioncore_map}
    next(x for x in rig.data.motioncore_map if x.joint == "Head").bone = ""     # the animator's choice
    bpy.data.objects["Path"].select_set(True)
    bpy.ops.motioncore.walk_path("EXEC_DEFAULT", True)
    keyed = {k.split('"')[1] for k in snapshot(rig) if k.startswith("pose.bones")}
    return {"result": r, "rows": len(rows), "mapped": sum(1 for b in rows.values() if b),
            "head_row": rows.get("Head"), "keyed_bones": sorted(keyed)}


def live_retarget() -> dict:
    """Retarget the walked, rolled rig onto a twin with other rolls: every bone turns the same in the world
    (its armature-space rotation relative to its rest) and the object follows the same path."""
    _, rigmap, _, _ = _mods()
    src = bpy.data.objects["Rolled"]
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    dst = armature("Copy", roll=-0.9)
    src.select_set(True)
    dst.select_set(True)
    bpy.context.view_layer.objects.active = src
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, 60
    t = time.perf_counter()
    try:
        r = sorted(bpy.ops.motioncore.retarget("EXEC_DEFAULT", True))
    except RuntimeError as e:
        return {"error": str(e)}
    worst, loc = 0.0, 0.0
    for f in (1, 20, 45, 60):
        sc.frame_set(f)
        loc = max(loc, float(np.abs(np.array(src.location) - np.array(dst.location)).max()))
        for b in BONES:
            def delta(o, b=b):
                g = np.array(tuple(o.pose.bones[b].matrix.to_quaternion()))
                m = np.array(tuple(o.data.bones[b].matrix_local.to_quaternion()))
                return rigmap.quat_mul(g, rigmap.quat_conj(m))
            dot = abs(float(np.dot(delta(src), delta(dst))))
            worst = max(worst, float(np.degrees(2 * np.arccos(min(1.0, dot)))))
    return {"result": r, "s": time.perf_counter() - t, "max_angle_deg": worst, "max_location_diff": loc}


def live_infill(conn: str) -> dict:
    """In-fill between two keyed poses 30 frames apart on a rolled rig: the request the operator sent
    (captured on the wire: the model's joints, frames 1 and 31 known), keys on every frame of the gap, the
    user's keys unchanged, one undo removes the fill. (The written values against the truth and against
    the library: tests/blender/test_blender_infill.py and tests/blender/test_blender_rest.py.)"""
    req, rigmap, keys, client = _mods()
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    rig = armature("Filler", roll=0.4)
    bpy.context.view_layer.objects.active = rig
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, 100
    user = user_keys(rig)
    bpy.ops.ed.undo_push(message="before in-fill")
    captured, orig = [], client.Client.call

    def spy(self, kind, content=None, arrays=None, **kw):   # the operator's own request and the reply, unchanged
        reply = orig(self, kind, content, arrays, **kw)
        if kind == "infill":
            captured.append((dict(content), dict(arrays), dict(reply.content),
                             {k: np.array(v) for k, v in reply.arrays.items()}))
        return reply

    client.Client.call = spy   # every request goes through Client.call (the add-on calls Client methods)
    t = time.perf_counter()
    try:
        r = bpy.ops.motioncore.infill("EXEC_DEFAULT", True, keys="EVERY_FRAME")   # Reduced: test_blender_reduced_keys
    finally:
        client.Client.call = orig
    out = {"result": sorted(r), "s": time.perf_counter() - t}
    after = snapshot(rig)
    frames = np.arange(1, 32, dtype=np.float64)
    content, sent, _, reply = captured[-1]
    q = np.asarray(reply["rotations"], np.float64)
    q = q[0] if q.ndim == 4 else q                                   # (T, J, 4): the first sample
    out["window_frames"], out["sent_joints"] = int(len(q)), len(content["joints"])
    out["known_frames"] = sorted(np.flatnonzero(np.asarray(sent["known"]).all(axis=1)).tolist())
    every = True
    for b in BONES:
        for i in range(4):
            co = np.array(after[f'pose.bones["{b}"].rotation_quaternion[{i}]'][0]).reshape(-1, 2)
            every &= set(co[:, 0].tolist()) >= set(frames.tolist())
    out.update(every_frame=bool(every))
    out["user_keys_kept"] = all([list(c) for c in zip(after[k][0][0::2], after[k][0][1::2], strict=True)
                                 if c[0] in (1.0, 31.0)] == [v[0][0:2], v[0][2:4]] for k, v in user.items())
    out["keys"] = sum(len(v[0]) // 2 for v in after.values())
    bpy.ops.ed.undo()
    out["after_undo_same_as_user"] = snapshot(bpy.data.objects["Filler"]) == user
    return out


def live_style(conn: str) -> dict:
    """Style from example: an example action (a leg swing keyed on a full, rolled Bandai-named rig, plus
    object location) -> the walk along the curve; one undo reverts it."""
    req, rigmap, keys, client = _mods()
    for o in list(bpy.context.selected_objects):
        o.select_set(False)
    with client.Client(conn, timeout=60) as c:
        sk = next(m for m in c.models() if m["name"] == "learnet-biped")["skeleton"]
    rig = full_armature("Stylist", sk["names"], sk["parents"], roll=0.3)   # every joint: the style needs them
    ex = bpy.data.actions.new("Example")
    rig.animation_data_create()
    rig.animation_data.action = ex
    offsets = {b.name: rigmap.rest_offset(np.array(tuple(b.matrix_local.to_quaternion()))) for b in rig.data.bones}
    T = 120
    t = np.arange(T) / 30.0
    swing = 0.35 * np.sin(2 * np.pi * 1.0 * t)          # a walking swing of the legs, model space
    names = list(sk["names"])
    q = np.zeros((T, len(names), 4))
    q[..., 0] = 1.0
    for name, sgn in (("UpperLeg_L", 1), ("UpperLeg_R", -1)):
        q[:, names.index(name)] = np.stack([np.cos(sgn * swing / 2), np.sin(sgn * swing / 2), 0 * t, 0 * t], 1)
    for k in range(T):
        for j, b in enumerate(names):
            rig.pose.bones[b].rotation_quaternion = rigmap.to_rig(q[k, j], offsets[b])
            rig.pose.bones[b].keyframe_insert("rotation_quaternion", frame=k + 1)
        rig.location = (0.0, -1.2 * t[k], 0.0)        # walking towards model +z at 1.2 m/s
        rig.keyframe_insert("location", frame=k + 1)
    rig.animation_data.action = None
    rig.location = (0, 0, 0)
    bpy.context.scene.motioncore.style_action = ex
    bpy.data.objects["Path"].select_set(True)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.ed.undo_push(message="before style")
    t0 = time.perf_counter()
    try:
        r = sorted(bpy.ops.motioncore.style_adapt("EXEC_DEFAULT", True))
    except RuntimeError as e:
        return {"error": str(e)}
    out = {"result": r, "s": time.perf_counter() - t0,   # Keys = Reduced, the default
           "keys": sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Stylist"]).values()),
           "report": bpy.context.scene.motioncore.last_report}
    reduced = world_heads(bpy.data.objects["Stylist"])
    bpy.ops.ed.undo()
    out["keys_after_undo"] = sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Stylist"]).values())
    bpy.ops.motioncore.style_adapt("EXEC_DEFAULT", True, keys="EVERY_FRAME")
    out["every_keys"] = sum(len(v[0]) // 2 for v in snapshot(bpy.data.objects["Stylist"]).values())
    dense = world_heads(bpy.data.objects["Stylist"])
    bpy.ops.ed.undo()
    d = np.linalg.norm(reduced - dense, axis=-1) * 100.0 if reduced.shape == dense.shape else np.full(1, np.inf)
    out.update(frames=int(dense.shape[0]), max_cm=float(d.max()), mean_cm=float(d.mean()))
    return out


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
