"""Benchmark: writing 50 bones x 1000 frames of quaternion keys in REAL Blender, the add-on's bulk path
(``fcurves.write_rotations``: ``keyframe_points.add`` + ``foreach_set('co')``) against a
``keyframe_insert`` loop (one call per bone and frame), in the same run, on twin armatures. Checks that
both give the same curves, then prints the times and the ratio. Never asserts timings.

Run it with a Python that has the bpy wheel, e.g. the venv the real-Blender tests create:

    ~/.cache/motioncore/blender/bpy-5.0.1/bin/python bench/blender_keys.py [--bones 50] [--frames 1000]
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

import bpy
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def addon_fcurves():
    """addon/blender/fcurves.py as a package module, without registering the add-on."""
    spec = importlib.machinery.ModuleSpec("_mc_addon", None, is_package=True)
    pkg = importlib.util.module_from_spec(spec)
    pkg.__path__ = [str(ROOT / "addon")]
    sys.modules["_mc_addon"] = pkg
    return importlib.import_module("_mc_addon.blender.fcurves")


def armature(name: str, n: int):
    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    for i in range(n):
        eb = arm.edit_bones.new(f"b{i:03d}")
        eb.head, eb.tail = (0.0, 0.0, 0.1 * i), (0.0, 0.0, 0.1 * i + 0.1)
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bones", type=int, default=50)
    ap.add_argument("--frames", type=int, default=1000)
    args = ap.parse_args()
    fc = addon_fcurves()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    B, F = args.bones, args.frames
    q = np.random.default_rng(0).normal(size=(F, B, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    frames = np.arange(1, F + 1, dtype=np.float64)
    bulk, loop = armature("Bulk", B), armature("Loop", B)
    bones = [pb.name for pb in bulk.pose.bones]
    t = time.perf_counter()
    fc.write_rotations(bulk, bones, frames, q)
    t_bulk = time.perf_counter() - t
    t = time.perf_counter()
    pbs = [loop.pose.bones[b] for b in bones]
    for i, f in enumerate(frames):
        for j, pb in enumerate(pbs):
            pb.rotation_quaternion = q[i, j]
            pb.keyframe_insert("rotation_quaternion", frame=f, keytype="GENERATED")
    t_loop = time.perf_counter() - t
    worst = 0.0
    for b in bones[:: max(1, B // 10)]:
        for i in range(4):
            path = fc.bone_path(b)
            a = fc.find_fcurve(*fc.assigned_action(bulk), path, i)
            c = fc.find_fcurve(*fc.assigned_action(loop), path, i)
            ca, cc = np.empty(2 * F, np.float32), np.empty(2 * F, np.float32)
            a.keyframe_points.foreach_get("co", ca)
            c.keyframe_points.foreach_get("co", cc)
            worst = max(worst, float(np.abs(ca - cc).max()))
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    print(f"# bench/blender_keys.py, {datetime.date.today()}, Blender {bpy.app.version_string} (bpy wheel), "
          f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{B} bones x {F} frames x 4 channels = {B * F * 4:,} keys; max |difference| of the keys {worst:.1e}")
    print()
    print("| method | seconds | keys/s | vs keyframe_insert |")
    print("|---|---:|---:|---:|")
    print(f"| keyframe_insert loop ({B * F:,} calls) | {t_loop:.2f} | {B * F * 4 / t_loop:,.0f} | 1.0x |")
    print(f"| foreach_set bulk (add-on) | {t_bulk:.3f} | {B * F * 4 / t_bulk:,.0f} | {t_loop / t_bulk:.1f}x |")


if __name__ == "__main__":
    main()
