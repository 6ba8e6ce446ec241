"""The add-on's jobs against a real server, without Blender: walk, feature in-fill, style, retarget and
mapping jobs through the worker thread, progress and cancel, connecting to (or starting) a local server."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import shutil
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data, server_process
from helpers.addon import addon_module, same_rotation, unit_quat
from helpers.blender import build_addon_module

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon"


keys = addon_module("core.keys")
rigmap = addon_module("core.rigmap")
jobs = addon_module("core.jobs")
requests = addon_module("core.requests")
connect = addon_module("core.connect")


build_addon = build_addon_module()


# ------------------------------------------------------------------- against a real server (no Blender)

@pytest.fixture(scope="module")
def built_addon(tmp_path_factory):
    """A copy of the add-on with its vendored client, imported as a package (not addon/__init__.py)."""
    root = tmp_path_factory.mktemp("built")
    addon = root / "addon"
    shutil.copytree(ADDON, addon, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    build_addon.vendor(addon)
    name = "_motioncore_addon_built"
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    pkg = importlib.util.module_from_spec(spec)
    pkg.__path__ = [str(addon)]
    sys.modules[name] = pkg
    try:
        yield types.SimpleNamespace(client=importlib.import_module(f"{name}.vendor.client"),
                                    protocol=importlib.import_module(f"{name}.vendor.protocol"),
                                    keys=importlib.import_module(f"{name}.core.keys"))
    finally:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[m]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with server_process(tmp_path_factory.mktemp("addon-srv")) as (_, conn, _):
        yield conn


@pytest.mark.timeout(60)
def test_walk_path_job_and_plan_through_the_worker_thread(server, built_addon):
    """walk_path minus bpy: the operator's job runs on the worker thread with the vendored client, and
    walk_plan turns the reply into keys for a Mixamo rig."""
    points = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 1.0]], np.float32)   # model x, z metres
    w = jobs.Worker(lambda: built_addon.client.Client(server, timeout=30))
    try:
        jid = w.submit(lambda c: (lambda m: (dict(m.content), {k: np.array(v) for k, v in m.arrays.items()}))(
            c.call("pfnn.rollout", {"gait": "walk"}, {"points": points})))
        res = w.wait(jid, 60)
    finally:
        w.stop()
    assert res is not None and res.ok, res and res.error
    content, arrays = res.value
    rig = list(rigmap.PRESETS["MIXAMO"].values())
    plan = built_addon.keys.walk_plan(content, arrays, rig, scene_fps=24.0, start=10)
    T = plan.frames.size
    assert plan.frames[0] == 10 and T == int((content["frames"] - 1) / content["fps"] * 24) + 1
    assert plan.rotations.shape == (T, len(plan.bones), 4) and "mixamorig:LeftArm" in plan.bones
    assert np.allclose(np.linalg.norm(plan.rotations, axis=-1), 1, atol=1e-3)
    assert plan.unmapped == ["joint_Root"]
    # the character walks along Blender's +x and towards -y (model +z), about 4 m in x
    assert plan.location[-1, 0] > 2.0 and plan.location[-1, 1] < 0 and abs(plan.location[-1, 2]) < 0.5


@pytest.mark.timeout(60)
def test_feature_infill_is_told_the_rotation_form(server, built_addon):
    P = built_addon.protocol   # the add-on sees the vendored copy's exception classes
    with built_addon.client.Client(server, timeout=30) as c:
        with pytest.raises(P.InvalidRequest) as e:  # the bundled any-order model fills rotations, by joint name
            c.infill(np.zeros((4, 8), np.float32), np.array([1, 0, 0, 1], bool))
        assert "fills rotations" in str(e.value) and "'rotations'" in str(e.value)


def _mixamo_rig_clip(style: str, frames: int, seed: int = 0):
    """A Bandai test walk as a Mixamo-named rig whose bones have random rest rotations: (model local
    rotations (T, J, 4), Bandai joint names, rig bone names, pose rotations (T, J, 4), bone offsets, clip)."""
    from motioncore.data import load

    clip = next(c for c in load("bandai2") if c.labels.get("style") == style and c.labels.get("content") == "walk"
                and c.split == "test")
    joints = list(clip.motion.skeleton.names)
    rmap = rigmap.auto_map(list(rigmap.PRESETS["MIXAMO"].values()), joints)
    bones = [rmap.mapping[j] for j in joints if j in rmap.mapping]
    names = requests.joint_names(bones, joints, None)      # what the operators send for these bones
    bones, js = [b for b, n in zip(bones, names) if n in joints], [n for n in names if n in joints]
    rng = np.random.default_rng(seed)
    offsets = {b: rigmap.rest_offset(unit_quat(rng.normal(size=4))) for b in bones}
    q = clip.motion.rotations[:frames][:, [joints.index(j) for j in js]]
    pose = np.stack([rigmap.to_rig(q[:, n], offsets[b]) for n, b in enumerate(bones)], axis=1)
    return q, js, bones, pose, offsets, clip


@needs_data
@pytest.mark.timeout(120)
def test_style_job_reads_a_rolled_mixamo_rig_like_the_model(server, built_addon):
    """Style from example for a Mixamo rig with rolled bones: the job's style code equals the one from
    the clip in the model's own joints, with the rig's object location as the ground root."""
    q, js, bones, pose, offsets, clip = _mixamo_rig_clip("elderly", 150)
    req = addon_module("core.requests")
    hips = clip.motion.positions[:150, 1]
    location = np.stack([hips[:, 0], -hips[:, 2], np.zeros(150)], 1) / 100.0   # Blender Z-up metres
    points = np.array([[0.0, 0.0], [0.0, 2.0]], np.float32)
    with built_addon.client.Client(server, timeout=60) as c:
        content, arrays = req.style_job(points, pose, bones, location, 30.0, None, None, offsets)(c)
        ground = np.stack([hips[:, 0], np.zeros(150), hips[:, 2]], 1)
        ref = c.style_adapt(points, rotations=q, root=ground, joints=js, root_space="ground")
        near = c.style_adapt(points, rotations=q, root=hips, joints=js)   # the true hips height
    assert content["model"] == "learnet-biped" and content["style_from"] == "exemplar"
    assert content["code_fit"]["steps"] > 0 and content["code_fit"]["rows"] > 0   # the code is fitted, not just read
    np.testing.assert_allclose(arrays["z"], ref.arrays["z"], atol=1e-4)
    assert np.isfinite(near.arrays["z"]).all()


@needs_data
@pytest.mark.timeout(120)
def test_the_style_code_barely_moves_with_the_stance_height(server, built_addon):
    """How much the stance height moves the style code (the clip's actor stands 2.5 cm off the model's rest),
    bounded at 60% of the code's largest value. The code the server sends back is the fitted one; the
    exemplar's feet are put on the training data's floor first (families.style.adapt.level_stance), so only the
    hips' bob, which the ground form lacks, is left: 15% measured (the encoder's code unlevelled: 131%)."""
    q, js, bones, pose, offsets, clip = _mixamo_rig_clip("elderly", 150)
    hips = clip.motion.positions[:150, 1]
    points = np.array([[0.0, 0.0], [0.0, 2.0]], np.float32)
    with built_addon.client.Client(server, timeout=60) as c:
        ground = np.stack([hips[:, 0], np.zeros(150), hips[:, 2]], 1)
        ref = c.style_adapt(points, rotations=q, root=ground, joints=js, root_space="ground")
        near = c.style_adapt(points, rotations=q, root=hips, joints=js)   # the true hips height
    moved = float(np.abs(ref.arrays["z"] - near.arrays["z"]).max() / np.abs(near.arrays["z"]).max())
    assert 0.0 < moved < 0.6, moved


@pytest.mark.timeout(60)
def test_worker_job_reports_progress_and_cancel_stops_the_request_on_the_server(tmp_path, built_addon):
    """What the modal operator does: send a long request through a Client method with requests.live() on the worker, read
    its progress from the job's Control, then cancel: the server stops it and the job ends with a
    Cancelled error at once (the ESC path), while the server stays up."""
    with server_process(tmp_path, "--debug") as (_, conn, _):
        w = jobs.Worker(lambda: built_addon.client.Client(conn, timeout=30))
        try:
            jid = w.submit(lambda c: c.call("debug.sleep", {"seconds": 30, "steps": 3000}, **requests.live()))
            ctl = w.control(jid)
            deadline = time.monotonic() + 10
            while ctl.done == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert ctl.total == 3000 and ctl.done > 0 and ctl.text().startswith(f"{ctl.done}/3000")
            t = time.monotonic()
            w.cancel(jid)
            res = w.wait(jid, 10)
            assert res is not None and getattr(res.error, "code", None) == "cancelled", res
            assert time.monotonic() - t < 2.0
            assert w.control(jid) is None                       # handed out: forgotten
            ok = w.wait(w.submit(lambda c: c.health(stats=True)), 10)
            assert ok.ok and ok.value["status"] == "ok" and ok.value["inflight"] == 0
        finally:
            w.stop()


def test_connect_job_states_and_starting_a_local_server(tmp_path, built_addon):
    """Connect reports "not running" (no server, nothing to start), starts the server command when
    asked and reports "connected", and "version mismatch" for a server speaking another protocol."""
    conn = tmp_path / "conn.json"
    make = lambda: built_addon.client.Client(conn, timeout=5)      # noqa: E731
    down = connect.connect_job(make)(None)
    assert down["state"] == "not running" and "Connect" in down["detail"]
    cmd = f"{sys.executable} -m motioncore_server --connection-file {conn} --port 0 --device cpu --workers 1"
    up = connect.connect_job(make, cmd, wait_s=60)(None)
    try:
        assert up["state"] == "connected" and up["started"] > 0, up
        assert "learnet-biped" in up["hello"]["models"] and "style.adapt" in up["detail"]
        # item 9: the report names the server reached and its connection file
        info = json.loads(conn.read_text())
        assert f"connection file {conn}" in up["detail"] and f"tcp://127.0.0.1:{info['port']}" in up["detail"]
        assert f"pid {info['pid']}" in up["detail"], up["detail"]
        # a connection file others can read: its key is no secret, the server is not talked to
        conn.chmod(0o644)
        bad = connect.connect_job(make, cmd)(None)
        assert bad["state"] == "not trusted", bad   # refused by the add-on's check or the wire client's (one rule)
        assert "readable or writable by others" in bad["detail"] or "other users can read" in bad["detail"], bad
        assert len(connect._STARTED) == 1          # and nothing new was started over it
        conn.chmod(0o600)
    finally:
        assert connect.stop_started() == 1

    class Old:
        def hello(self):
            return {"protocol_version": 1}

        def close(self):
            pass
    assert connect.connect_job(Old)(None)["state"] == "version mismatch"
    bad = connect.connect_job(make, "/nonexistent/motioncore serve")(None)
    assert bad["state"] == "not running" and "could not find '/nonexistent/motioncore'" in bad["detail"]
    assert "Server command to the full path" in bad["detail"]


def test_start_a_local_server_finds_motioncore_of_a_venv(tmp_path, monkeypatch):
    """Item 9: `motioncore serve` is not on Blender's PATH after the README's install; the add-on takes
    the venv's folder or its python, finds bin/motioncore, or says what to set."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "motioncore"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (venv / "bin" / "python").write_text("")
    assert connect.resolve_command(str(venv)) == [str(exe), "serve"]
    assert connect.resolve_command(f"{venv}/bin/python") == [str(exe), "serve"]
    assert connect.resolve_command(f"{exe} serve --port 0") == [str(exe), "serve", "--port", "0"]
    monkeypatch.setenv("PATH", str(venv / "bin"))
    assert connect.resolve_command("motioncore serve") == [str(exe), "serve"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="could not find 'motioncore'.*Server command to the full path"):
        connect.resolve_command("motioncore serve")


@needs_data
@pytest.mark.timeout(60)
def test_retarget_job_between_rigs_with_different_rolls_is_exact(server, built_addon):
    """The Retarget operator's conversions (rest frames, Z-up, root from the object location) around the
    server's retarget: a clip on a rig onto the same skeleton with other bone rolls comes back as the same
    model motion and the same object path."""
    from motioncore.data import load

    m = load("bandai2", "test")[0].motion
    sk, T = m.skeleton, 40
    names, parents = list(sk.names), [int(p) for p in sk.parents]
    heads_y = np.zeros((len(names), 3))
    for j, p in enumerate(parents):
        heads_y[j] = sk.offsets[j] + (heads_y[p] if p >= 0 else 0)
    heads = requests.y_up_to_z_up(heads_y) / 100.0                    # Blender metres, Z-up
    skel = requests.rig_skeleton(names, parents, heads)
    rng = np.random.default_rng(5)
    src_off = [rigmap.rest_offset(unit_quat(rng.normal(size=4))) for _ in names]
    tgt_off = [rigmap.rest_offset(unit_quat(rng.normal(size=4))) for _ in names]
    q = m.rotations[:T]
    pose = np.stack([rigmap.to_rig(q[:, j], o) for j, o in enumerate(src_off)], axis=1)
    # the clip's hips path moved onto the object (the rig's bones carry rotations only)
    hips_world = m.positions[:T, 1] / 100.0
    location = requests.y_up_to_z_up(hips_world - np.asarray(skel["offsets"][0]) - np.asarray(skel["offsets"][1]))
    with built_addon.client.Client(server, timeout=30) as c:
        content, arrays = requests.retarget_job(pose, location, skel, skel, src_off)(c)
    out_pose, out_loc = requests.retarget_to_rig(arrays, skel, tgt_off)
    back = np.stack([rigmap.to_model(out_pose[:, j], o) for j, o in enumerate(tgt_off)], axis=1)
    assert content["mapped"] == len(names) and content["unmapped"] == []
    assert same_rotation(back, q, 1e-5)
    np.testing.assert_allclose(out_loc, location, atol=1e-5)


@pytest.mark.timeout(60)
def test_mapping_job_lists_every_model_joint_with_its_bone(server, built_addon):
    rig = list(rigmap.PRESETS["MIXAMO"].values())
    with built_addon.client.Client(server, timeout=30) as c:
        out = requests.mapping_job(rig, "infill", None, None)(c)
        kept = requests.mapping_job(rig, "infill", None, None, {"Hips": ""})(c)
    rows = dict(out["rows"])
    assert out["model"] == "anyorder-body" and len(rows) == 22 and rows["joint_Root"] == ""
    assert rows["Hips"] == "mixamorig:Hips" and rows["Hand_L"] == "mixamorig:LeftHand"
    assert dict(kept["rows"])["Hips"] == ""

