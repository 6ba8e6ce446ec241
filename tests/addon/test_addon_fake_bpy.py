"""The add-on's operators, unchanged, against a live server with a fake ``bpy`` (tests/fakebpy.py): each
runs in milliseconds to a second, without Blender. Real Blender runs the same operators in
tests/blender/test_blender_real.py.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data, server_process
from helpers import fakebpy

ROOT = Path(__file__).resolve().parents[2]
PKG = "_mc_fake_addon"
BANDAI12 = [("Hips", None), ("Spine", "Hips"), ("Chest", "Spine"), ("Neck", "Chest"), ("Head", "Neck"),
            ("Shoulder_L", "Chest"), ("UpperArm_L", "Shoulder_L"), ("LowerArm_L", "UpperArm_L"),
            ("Shoulder_R", "Chest"), ("UpperArm_R", "Shoulder_R"), ("UpperLeg_L", "Hips"), ("UpperLeg_R", "Hips")]

pytestmark = pytest.mark.timeout(120)


def _qn(q):
    q = np.asarray(q, float)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with server_process(tmp_path_factory.mktemp("fake-bpy-srv")) as (p, conn, _):
        yield p, conn


@pytest.fixture
def addon(tmp_path, monkeypatch, server):
    """The add-on (with its vendored client) imported as a package against the fake bpy, registered, and a
    scene/preferences pointing at the live server."""
    bpy = fakebpy.install(monkeypatch)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_addon
    finally:
        sys.path.pop(0)
    dst = tmp_path / "addon"
    shutil.copytree(ROOT / "addon", dst, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    build_addon.vendor(dst)
    spec = importlib.util.spec_from_file_location(PKG, dst / "__init__.py", submodule_search_locations=[str(dst)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[PKG] = mod
    try:
        spec.loader.exec_module(mod)
        mod.register()
        ops, props = sys.modules[f"{PKG}.blender.operators"], sys.modules[f"{PKG}.blender.props"]
        assert props.MotioncorePreferences.bl_idname == PKG   # Blender keys add-on preferences by the package
        settings = fakebpy.new_group(props.MotioncoreSceneSettings)
        prefs = fakebpy.new_group(props.MotioncorePreferences)
        prefs.connection_file = str(server[1])
        monkeypatch.delenv("MOTIONCORE_CONNECTION_FILE", raising=False)
        scene = fakebpy.Scene(settings)

        def ctx(active, selected=()):
            return fakebpy.context(scene, prefs, props.MotioncorePreferences.bl_idname, active,
                                   [active, *selected] if active is not None else list(selected))
        yield mod, ops, bpy, ctx, scene, prefs
        mod.unregister()
    finally:
        for m in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
            del sys.modules[m]


def _rig(bpy, name, seed=0, bones=BANDAI12):
    rng = np.random.default_rng(seed)
    spec = [(b, p, (0.1 * (i % 3), 0.0, 0.1 * i), _qn(rng.normal(size=4))) for i, (b, p) in enumerate(bones)]
    obj = fakebpy.armature(name, spec)
    bpy.data.objects.append(obj)
    return obj


def _channels(obj):
    return {(fc.data_path, fc.array_index): fc for fc in obj.animation_data.action.fcurves}


def test_infill_operator_fills_every_frame_keeps_user_keys_and_caches_variations(addon, server):
    mod, ops, bpy, ctx, scene, _ = addon
    arm = _rig(bpy, "Filler")
    rng = np.random.default_rng(1)
    user = {f: {b: _qn(rng.normal(size=4) * [1, .2, .2, .2] + [3, 0, 0, 0]) for b, _ in BANDAI12} for f in (1, 31)}
    for f, pose in user.items():
        fakebpy.key_pose(arm, f, pose)
    op = ops.MOTIONCORE_OT_infill()
    assert op.variations == 1 and op.order == "bisection" and op.temperature == 0.0   # defaults from annotations
    assert op.keys == "REDUCED" and op.max_error == 0.5 and op.mean_error == 0.1
    op.keys = "EVERY_FRAME"   # a key on every filled frame (Reduced: tests/blender/test_blender_reduced_keys.py)
    assert op.execute(ctx(arm)) == {"FINISHED"}, op.reports
    ch = _channels(arm)
    for b, _ in BANDAI12:
        for i in range(4):
            kp = ch[(f'pose.bones["{b}"].rotation_quaternion', i)].keyframe_points
            assert [k.co[0] for k in kp] == list(range(1, 32))
            assert [(k.co[1], k.type) for k in kp if k.co[0] in (1, 31)] == \
                [(np.float32(user[f][b][i]), "KEYFRAME") for f in (1, 31)]
            assert {k.type for k in kp if 1 < k.co[0] < 31} == {"GENERATED"}
    # three variations at temperature 1: each pick writes its sample; switching asks the server nothing
    op = ops.MOTIONCORE_OT_infill()
    op.variations, op.temperature, op.keys = 3, 1.0, "EVERY_FRAME"
    assert op.execute(ctx(arm)) == {"FINISHED"}, op.reports
    first = [k.co[1] for k in ch[('pose.bones["Spine"].rotation_quaternion', 1)].keyframe_points]
    from motioncore.wire.client import Client
    with Client(server[1]) as c:
        before = c.health(stats=True)["received"]
    op.variation = 3
    assert op.execute(ctx(arm)) == {"FINISHED"} and "showing 3" in op.reports[-1][1]
    third = [k.co[1] for k in ch[('pose.bones["Spine"].rotation_quaternion', 1)].keyframe_points]
    with Client(server[1]) as c:
        assert c.health(stats=True)["received"] == before + 2, op.reports    # this hello and health only: the pick was cached
    assert first[0] == third[0] and first[-1] == third[-1] and first != third


def test_walk_operator_writes_keys_along_the_curve(addon):
    mod, ops, bpy, ctx, scene, _ = addon
    path = fakebpy.curve("Path", [(0, 0, 0), (0, -1.5, 0), (0, -3.0, 0)])
    walker = _rig(bpy, "Walker", seed=2)
    op = ops.MOTIONCORE_OT_walk_path()   # Keys = Reduced, the default: fewer keys than frames, the report says so
    assert op.execute(ctx(walker, [path])) == {"FINISHED"}, op.reports
    ch = _channels(walker)
    reduced = len(ch[("location", 1)].keyframe_points)
    assert "walked" in op.reports[-1][1] and "keys (every frame: " in op.reports[-1][1], op.reports[-1][1]
    assert ch[("location", 1)].keyframe_points[-1].co[1] < -2.0                # towards -y, as drawn
    op = ops.MOTIONCORE_OT_walk_path()
    op.keys = "EVERY_FRAME"                                                    # walked again: a key on every frame
    assert op.execute(ctx(walker, [path])) == {"FINISHED"}, op.reports
    assert len(ch[("location", 1)].keyframe_points) > 60                       # the root follows the path
    assert 2 <= reduced < len(ch[("location", 1)].keyframe_points)
    assert ch[("location", 1)].keyframe_points[-1].co[1] < -2.0
    # over the frame range, faster: keys on exactly frames 5..48 and further along the path by the end
    scene.frame_current, scene.frame_end = 5, 48
    scene.motioncore.walk_length, scene.motioncore.speed = "RANGE", 2.0
    runner = _rig(bpy, "Runner", seed=7)
    op = ops.MOTIONCORE_OT_walk_path()
    op.keys = "EVERY_FRAME"
    assert op.execute(ctx(runner, [path])) == {"FINISHED"}, op.reports
    loc = _channels(runner)[("location", 1)].keyframe_points
    assert [k.co[0] for k in loc] == list(range(5, 49))
    walked = {n: -[k.co[1] for k in _channels(o)[("location", 1)].keyframe_points][43] for n, o in
              (("default", walker), ("fast", runner))}
    assert walked["fast"] > 1.3 * walked["default"], walked                  # 44 frames in: 2 m/s vs a walk
    scene.frame_current = 48
    assert ops.MOTIONCORE_OT_walk_path().execute(ctx(runner, [path])) == {"CANCELLED"}   # nothing left to walk


@needs_data
def test_style_operator_reads_the_example_action(addon):
    from motioncore.data import load

    mod, ops, bpy, ctx, scene, _ = addon
    clip = next(c for c in load("bandai2") if c.labels.get("style") == "elderly" and c.labels.get("content") == "walk"
                and c.split == "test").motion
    sk = clip.skeleton
    bones = [(n, sk.names[p] if p >= 0 else None) for n, p in zip(sk.names, sk.parents, strict=True)]
    rig = _rig(bpy, "Stylist", seed=3, bones=bones)
    rigmap = sys.modules[f"{PKG}.core.rigmap"]
    ex = bpy.data.actions.new("Example")
    rig.animation_data_create().action = ex
    for f in range(0, 120):
        fakebpy.key_pose(rig, f + 1, {b: rigmap.to_rig(clip.rotations[f, j], rigmap.rest_offset(
            np.array(rig.data.bones[b].matrix_local.q))) for j, (b, _) in enumerate(bones)})
    rig.animation_data.action = None
    scene.motioncore.style_action = ex
    path = fakebpy.curve("Path", [(0, 0, 0), (0, -2.0, 0)])
    op = ops.MOTIONCORE_OT_style_adapt()
    assert op.execute(ctx(rig, [path])) == {"FINISHED"}, op.reports
    assert rig.animation_data.action is not ex and len(_channels(rig)) > 80
    assert "style code fitted to the example in" in op.reports[-1][1], op.reports   # the server fitted the code
    assert "held-out error" in op.reports[-1][1], op.reports   # and said how well the code predicts the example


def test_connect_map_bones_and_errors(addon, server, tmp_path, monkeypatch):
    mod, ops, bpy, ctx, scene, prefs = addon
    arm = _rig(bpy, "Mapped")
    op = ops.MOTIONCORE_OT_connect()
    assert op.execute(ctx(arm)) == {"FINISHED"} and scene.motioncore.status.startswith("connected: cpu:")
    scene.motioncore.map_task = "pfnn.rollout"
    op = ops.MOTIONCORE_OT_map_bones()
    assert op.execute(ctx(arm)) == {"FINISHED"}
    rows = {r.joint: r.bone for r in arm.data.motioncore_map}
    assert len(rows) == 22 and sum(1 for b in rows.values() if b) == 12 and "12 of 22" in op.reports[-1][1]
    # bad input: a clear report, nothing written
    op = ops.MOTIONCORE_OT_infill()
    assert op.execute(ctx(None)) == {"CANCELLED"} and "select an armature" in op.reports[-1][1]
    assert op.execute(ctx(arm)) == {"CANCELLED"} and "has no action" in op.reports[-1][1]
    # the server down: Connect says so, In-fill reports and writes nothing
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps({**json.loads(Path(server[1]).read_text()), "port": 9}))   # nothing listens on 9
    dead.chmod(0o600)   # as a server leaves it (a file others can read is refused: tested in test_addon_jobs)
    prefs.connection_file = str(dead)
    sys.modules[f"{PKG}.blender.modal"].stop_worker()
    fakebpy.key_pose(arm, 1, {"Hips": (1, 0, 0, 0)})
    fakebpy.key_pose(arm, 9, {"Hips": (1, 0, 0, 0)})
    op = ops.MOTIONCORE_OT_connect()
    assert op.execute(ctx(arm)) == {"CANCELLED"} and scene.motioncore.status.startswith("not running: ")
    keys_before = sum(len(fc.keyframe_points) for fc in arm.animation_data.action.fcurves)
    op = ops.MOTIONCORE_OT_infill()
    assert op.execute(ctx(arm)) == {"CANCELLED"} and "running?" in op.reports[-1][1]
    assert sum(len(fc.keyframe_points) for fc in arm.animation_data.action.fcurves) == keys_before


def test_retarget_operator_between_rigs_with_other_rolls(addon):
    mod, ops, bpy, ctx, scene, _ = addon
    src, dst = _rig(bpy, "Source", seed=4), _rig(bpy, "Target", seed=5)
    rng = np.random.default_rng(6)
    for f in (1, 10, 20):
        fakebpy.key_pose(src, f, {b: _qn(rng.normal(size=4) * [1, .3, .3, .3] + [3, 0, 0, 0]) for b, _ in BANDAI12})
    scene.frame_start, scene.frame_end = 1, 20
    op = ops.MOTIONCORE_OT_retarget()
    assert op.execute(ctx(src, [dst])) == {"FINISHED"}, op.reports
    rigmap = sys.modules[f"{PKG}.core.rigmap"]
    s_ch, d_ch = _channels(src), _channels(dst)
    for b, _ in BANDAI12:     # model-space rotations agree: each bone turns the same in the world
        qs = np.array([s_ch[(f'pose.bones["{b}"].rotation_quaternion', i)].evaluate(10) for i in range(4)])
        qd = np.array([d_ch[(f'pose.bones["{b}"].rotation_quaternion', i)].evaluate(10) for i in range(4)])
        ms = rigmap.to_model(_qn(qs), rigmap.rest_offset(np.array(src.data.bones[b].matrix_local.q)))
        md = rigmap.to_model(_qn(qd), rigmap.rest_offset(np.array(dst.data.bones[b].matrix_local.q)))
        assert abs(abs(float(np.dot(ms, md))) - 1) < 1e-5, b


def test_interactive_path_worker_timer_drain_then_modal_write_with_progress(addon):
    """With a UI (not background): invoke submits to the worker and returns RUNNING_MODAL at once; the
    bpy.app.timers callback drains the finished result; the modal operator writes on its next timer event
    (FINISHED, keys written); the status bar showed progress and was cleared."""
    import time

    mod, ops, bpy, ctx, scene, _ = addon
    bpy.app.background = False
    path = fakebpy.curve("Path", [(0, 0, 0), (0, -1.5, 0), (0, -3.0, 0)])
    arm = _rig(bpy, "Async", seed=8)
    c = ctx(arm, [path])
    op = ops.MOTIONCORE_OT_walk_path()
    t = time.perf_counter()
    assert op.invoke(c, fakebpy.event("NONE")) == {"RUNNING_MODAL"}
    assert time.perf_counter() - t < 0.5 and c.window_manager.handlers == [op]   # the UI thread is free
    assert bpy.app.timers.is_registered(sys.modules[f"{PKG}.blender.modal"].drain_results) and arm.animation_data is None
    deadline = time.monotonic() + 60
    out = {"PASS_THROUGH"}
    while out == {"PASS_THROUGH"} and time.monotonic() < deadline:
        bpy.app.timers.run()                                   # Blender's event loop calls the timer ...
        out = op.modal(c, fakebpy.event("TIMER"))               # ... and sends the operator timer events
        time.sleep(0.01)
    assert out == {"FINISHED"}, op.reports
    assert len(_channels(arm)[("location", 0)].keyframe_points) >= 2 and "wrote " in op.reports[-1][1]   # Reduced
    assert not bpy.app.timers.funcs and not c.window_manager.timers              # unregistered, removed
    assert c.workspace.status[0].startswith("motioncore Walk along path: waiting") and c.workspace.status[-1] is None
    assert scene.motioncore.progress == ""


def test_infill_report_names_the_bones_it_did_not_fill_and_why(addon, server):
    mod, ops, bpy, ctx, scene, _ = addon
    arm = _rig(bpy, "Tailed", bones=BANDAI12 + [("Tail", "Hips"), ("Tail1", "Tail")])
    rng = np.random.default_rng(2)
    for f in (1, 31):
        fakebpy.key_pose(arm, f, {b: _qn(rng.normal(size=4) * [1, .2, .2, .2] + [3, 0, 0, 0])
                                  for b, _ in BANDAI12 + [("Tail", "Hips"), ("Tail1", "Tail")]})
    op = ops.MOTIONCORE_OT_infill()
    assert op.execute(ctx(arm)) == {"FINISHED"}, op.reports
    msg = op.reports[-1][1]
    assert "on 12 bones" in msg and "not filled: Tail, Tail1 (no model joint maps to them" in msg, msg
    assert ('pose.bones["Tail"].rotation_quaternion', 0) not in _channels(arm) or \
        [k.co[0] for k in _channels(arm)[('pose.bones["Tail"].rotation_quaternion', 0)].keyframe_points] == [1, 31]


def test_infill_plants_the_feet_by_default_and_sends_the_choice(addon):
    """In-fill's Plant Feet is on by default and goes to the server with the body in-fill's request (the
    any-order model, drawn at temperature > 0, has no such option)."""
    _, ops, *_ = addon
    op = ops.MOTIONCORE_OT_infill()
    assert op.plant_feet is True and op.job_options() == {"plant_feet": True}
    op.plant_feet = False
    assert op.job_options() == {"plant_feet": False}
    op.temperature = 1.0
    assert op.job_options() == {}
