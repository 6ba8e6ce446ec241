"""Runs INSIDE a venv with the real ``bpy`` wheel: Style from example on a clip of a held-out style (issue 15
item 4). Used by tests/blender/test_blender_style.py.

    python style_walk.py ZIP CONNECTION_FILE EXAMPLE_BVH WALKER_BVH SPEC.json OUT.npz

The example clip imported by Blender's BVH importer at its defaults is the Style Example action; a second
import with its animation cleared is the walker; a poly curve through SPEC's ``points`` (model x, z metres:
Blender x = x, y = -z, in the rig's cm) is the path; Speed and Gait from SPEC. After the operator the pose is
sampled on every written frame: OUT.npz holds ``pose`` (F, B, 4, 4) bone matrices in armature space,
``rest`` (B, 4, 4), ``world`` (F, 4, 4) the object's matrix, ``frames``, and the ``style.adapt`` request's
arrays (``sent/*``: the exemplar as the add-on read it, the path) and reply's (``reply/*``); OUT.npz.json the
reports, the request's content, bone names and parents.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import bpy
import numpy as np


def run(op, **kw) -> str:
    try:
        op("EXEC_DEFAULT", True, **kw)
        return bpy.context.scene.motioncore.last_report
    except RuntimeError as e:
        return "ERROR " + str(e).strip()


def mat(m) -> list:
    return [list(r) for r in m]


def main() -> None:
    zip_path, conn, example, walker_bvh, spec_path, out = sys.argv[1:7]
    spec = json.loads(open(spec_path).read())
    res: dict = {"blender": bpy.app.version_string}
    arrays: dict = {}
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
        key = next(k for k in bpy.context.preferences.addons.keys() if k.endswith("motioncore"))
        bpy.context.preferences.addons[key].preferences.connection_file = conn
        os.environ.pop("MOTIONCORE_CONNECTION_FILE", None)
        res["connect"] = run(bpy.ops.motioncore.connect)
        # what the operator sends and gets back (style.adapt): kept to tell the Blender layer's error apart
        # from the walk's (an autoregressive rollout amplifies float32 rounding of the exemplar)
        client = sys.modules[key + ".vendor.client"].Client   # every request goes through Client.call
        sent: dict = {}
        plain_call = client.call

        def spy(self, type, content=None, arrs=None, **kw):
            reply = plain_call(self, type, content, arrs, **kw)
            if type == "style.adapt":
                sent.update(content=dict(content), arrays={k: np.array(v) for k, v in arrs.items()},
                            reply={k: np.array(v) for k, v in reply.arrays.items()})
            return reply
        client.call = spy
        sc = bpy.context.scene
        sc.render.fps, sc.render.fps_base = int(spec["fps"]), 1.0
        # the Style Example: the held-out clip at the importer's defaults (Euler bones, root motion on the hips)
        bpy.ops.import_anim.bvh(filepath=example)
        ex = bpy.context.active_object
        action = ex.animation_data.action
        action.use_fake_user = True
        res["example_frames"] = list(action.frame_range)
        res["example_modes"] = sorted({pb.rotation_mode for pb in ex.pose.bones})
        bpy.data.objects.remove(ex)
        # the walker: another import, its animation cleared and back at rest
        bpy.ops.import_anim.bvh(filepath=walker_bvh)
        walker = bpy.context.active_object
        walker.name = "Walker"
        walker.animation_data_clear()
        for pb in walker.pose.bones:
            pb.location, pb.rotation_euler = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        # the path: a poly line through the judge's points (cm: the Bandai import's units)
        cd = bpy.data.curves.new("Path", "CURVE")
        cd.dimensions = "3D"
        pts = np.asarray(spec["points"], np.float64) * 100.0
        sp = cd.splines.new("POLY")
        sp.points.add(len(pts) - 1)
        for p, (x, z) in zip(sp.points, pts):
            p.co = (x, -z, 0.0, 1.0)
        curve = bpy.data.objects.new("Path", cd)
        sc.collection.objects.link(curve)
        s = sc.motioncore
        s.speed, s.gait, s.walk_length = float(spec["speed"]), str(spec["gait"]), "PATH"
        sc.frame_current = 1

        def select() -> None:
            for o in bpy.data.objects:
                o.select_set(o in (walker, curve))
            bpy.context.view_layer.objects.active = walker

        # no example: the operator refuses (it has no "no example" mode)
        s.style_action = None
        select()
        res["no_example"] = run(bpy.ops.motioncore.style_adapt)
        s.style_action = action
        select()
        t0 = time.perf_counter()
        res["style"] = run(bpy.ops.motioncore.style_adapt, keys="EVERY_FRAME")   # the reply's pose to 1e-4 deg (Keys
        # = Reduced, the default, against Every Frame: test_blender_real.py)
        res["op_s"] = time.perf_counter() - t0
        client.call = plain_call
        res["sent"] = sent.get("content")
        for k, v in sent.get("arrays", {}).items():
            arrays[f"sent/{k}"] = v
        for k, v in sent.get("reply", {}).items():
            arrays[f"reply/{k}"] = v
        res["modes"] = sorted({pb.rotation_mode for pb in walker.pose.bones})
        lo, hi = (int(round(v)) for v in walker.animation_data.action.frame_range)
        bones = [b.name for b in walker.data.bones]
        res["bones"] = bones
        res["parents"] = [bones.index(b.parent.name) if b.parent else -1 for b in walker.data.bones]
        arrays["rest"] = np.array([mat(b.matrix_local) for b in walker.data.bones])
        frames = np.arange(lo, hi + 1)
        pose, world = [], []
        for f in frames:
            sc.frame_set(int(f))
            pose.append([mat(walker.pose.bones[b].matrix) for b in bones])
            world.append(mat(walker.matrix_world))
        arrays.update(frames=frames, pose=np.array(pose), world=np.array(world))
    except Exception:
        res["error"] = traceback.format_exc()
    np.savez(out, **arrays)
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
