"""The add-on as it ships, without Blender: the zip's layout and manifest, the vendored copies' and the
add-on's imports (bpy, numpy, stdlib, relative only), operator ids, typed errors, and mypy against the bpy
stubs of 4.2 and 5.0."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers.addon import addon_module
from helpers.blender import build_addon_module

from motioncore.data.cache import cache_root

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon"
SRC = ROOT / "src" / "motioncore"


keys = addon_module("core.keys")
rigmap = addon_module("core.rigmap")
jobs = addon_module("core.jobs")
fcurves = addon_module("blender.fcurves")
requests = addon_module("core.requests")
connect = addon_module("core.connect")


build_addon = build_addon_module()


# ------------------------------------------------------------------------------ vendoring and build

def test_build_skip_wheels_zip_layout(tmp_path):
    addon, dist = tmp_path / "addon", tmp_path / "dist"
    shutil.copytree(ADDON, addon, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_addon.py"), "--skip-wheels",
                          "--addon-dir", str(addon), "--dist", str(dist)], capture_output=True, text=True, check=True)
    zpath = Path(out.stdout.strip())
    version = tomllib.loads((ADDON / "blender_manifest.toml").read_text())["version"]
    assert zpath == dist / f"motioncore_blender-{version}.zip"
    assert [p.name for p in dist.iterdir()] == [zpath.name]          # no temporary file left behind
    with zipfile.ZipFile(zpath) as z:
        names = set(z.namelist())
        manifest = tomllib.loads(z.read("blender_manifest.toml").decode())
        assert z.read("vendor/client.py") == (SRC / "wire" / "client.py").read_bytes()
    assert {"blender_manifest.toml", "__init__.py", "blender/operators.py", "core/keys.py", "vendor/protocol.py"} <= names
    assert not any(n.endswith(("README.md", ".pyc")) or n.startswith("wheels/") for n in names)
    assert "wheels" not in manifest and manifest["id"] == "motioncore"   # no wheels: no wheels list


def test_manifest_fields_and_limits():
    m = tomllib.loads((ADDON / "blender_manifest.toml").read_text())
    for f in ("schema_version", "id", "name", "tagline", "version", "type", "maintainer", "license",
              "blender_version_min"):
        assert f in m, f
    assert m["id"] == "motioncore" and m["type"] == "add-on" and m["blender_version_min"] == "4.2.0"
    assert len(m["tagline"]) <= 64 and not m["tagline"].endswith(".")
    assert set(m["permissions"]) == {"network", "files"}
    assert all(0 < len(r) <= 64 for r in m["permissions"].values())
    wheels = m["wheels"]
    assert all(w.startswith("./wheels/pyzmq-") and w.endswith(".whl") for w in wheels)
    for abi in ("cp311-cp311", "cp312-abi3"):
        for plat in ("manylinux", "win_amd64", "macosx"):
            assert any(abi in w and plat in w for w in wheels), (abi, plat)


def test_manifest_wheels_list_is_rewritten_from_the_downloaded_files(tmp_path):
    got = [tmp_path / "pyzmq-1-cp311-cp311-win_amd64.whl"]
    m = tomllib.loads(build_addon.manifest_text(ADDON, got))
    assert m["wheels"] == ["./wheels/pyzmq-1-cp311-cp311-win_amd64.whl"] and m["permissions"]


# ---------------------------------------------------------------------------------- add-on hygiene

ALLOWED_TOP = {"bpy", "bpy_extras", "mathutils", "numpy", "zmq", "__future__"} | set(sys.stdlib_module_names)


def test_addon_imports_only_bpy_numpy_stdlib_and_relative():
    for py in sorted(p for p in ADDON.rglob("*.py") if "vendor" not in p.parts):
        tree = ast.parse(py.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(tops) <= ALLOWED_TOP, f"{py.name} imports {tops}"
        assert "sys.path" not in py.read_text(), py.name
    core = sorted((ADDON / "core").glob("*.py"))
    assert {p.stem for p in core} >= {"keys", "rigmap", "rigclip", "requests", "jobs"}
    for pure in core:   # the computing layer: no bpy (nor a module of the Blender layer), even lazily
        assert not {n.split(".")[0] for n in _imported(pure)} & {"bpy", "bpy_extras", "mathutils"}, pure.name
        rel = {(n.level, n.module) for n in ast.walk(ast.parse(pure.read_text()))
               if isinstance(n, ast.ImportFrom) and n.level}
        assert all(m is None or not m.startswith("blender") for _, m in rel), (pure.name, rel)


def test_core_imports_without_bpy(monkeypatch):
    """Every module of addon/core imports in a process where ``bpy`` cannot be imported."""
    monkeypatch.setitem(sys.modules, "bpy", None)
    for pure in sorted((ADDON / "core").glob("*.py")):
        if pure.stem != "__init__":
            addon_module(f"core.{pure.stem}")


def _imported(py: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(py.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_operator_ids_and_classes_tuple():
    tree = ast.parse((ADDON / "blender" / "operators.py").read_text())
    ids = {n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
           and any(isinstance(t, ast.Name) and t.id == "bl_idname" for t in n.targets)}
    assert ids == {"motioncore.connect", "motioncore.infill", "motioncore.adapt_action", "motioncore.hands_infill", "motioncore.walk_path",
                   "motioncore.style_adapt", "motioncore.retarget", "motioncore.map_bones"}
    assert "classes = (" in (ADDON / "__init__.py").read_text()


def test_not_available_errors_are_reported_from_the_typed_server_error():
    from motioncore.wire import protocol as P
    describe = requests.describe_error
    msg = describe("In-fill", P.error_from_content({"code": "unknown_type", "message": "no handler"}))
    assert msg == "In-fill: not available on this server (unknown_type: no handler)"
    msg = describe("Hands", P.ModelUnavailable("no model 'hands'"))
    assert "not available on this server" in msg and "model_unavailable" in msg
    assert describe("X", P.Busy("full")) == "X: server error busy: full"
    assert describe("X", ValueError("bad")) == "X: ValueError: bad"
    # the operator's name once, and the add-on's own control where the library names a command-line flag
    msg = describe("Learn This Action", P.error_from_content(
        {"code": "invalid_request", "message": "Learn This Action: Learn This Action: no keys to learn from"}))
    assert msg == "Learn This Action: server error invalid_request: no keys to learn from"
    msg = describe("Walk Along Path", P.error_from_content({"code": "invalid_request", "message": (
        "path: walking it takes 126 s, over the 60 s a default length may have; give its length (--frames 3784 at "
        "30 fps) to generate it whole, or split the path")}))
    assert "--" not in msg and "set Length to Frame range with a range of 3784 frames (at 30 fps)" in msg


STUBS = Path(os.environ.get("MOTIONCORE_STUBS") or cache_root() / "bpy-stubs")


def _stubs(version: str) -> Path:
    """A venv holding only fake-bpy-module for one Blender version (its python, for mypy's
    ``--python-executable``): the 4.2 and 5.0 packages install to the same ``bpy-stubs`` directory, so one
    venv can hold only one of them."""
    venv = STUBS / version
    py = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", f"fake-bpy-module-{version}"],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.fail(f"could not install fake-bpy-module-{version}:\n{r.stderr[-2000:]}")
        (venv / ".ready").write_text(version)
    return py


@pytest.mark.parametrize("version", ["4-2", "5-0"])
def test_mypy_addon_against_bpy_stubs(tmp_path, version):
    """The add-on type-checks against each Blender version's API: catches API one version lacks."""
    pytest.importorskip("mypy")
    addon = tmp_path / "motioncore_addon"
    shutil.copytree(ADDON, addon, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    build_addon.vendor(addon)
    stubs = _stubs(version)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mypy", "--python-version", "3.11", "--ignore-missing-imports",
                        "--no-incremental", "--cache-dir", os.devnull, "--python-executable", str(stubs),
                        "motioncore_addon"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"fake-bpy-module-{version}:\n" + r.stdout + r.stderr
    assert time.monotonic() - t0 < 120
    # the stubs in use really are that version's: Action.fcurves exists in 4.2 and is gone in 5.0
    probe = tmp_path / "probe.py"
    probe.write_text("import bpy\n\ndef f(a: bpy.types.Action) -> object:\n    return a.fcurves\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--python-version", "3.11", "--no-incremental", "--cache-dir",
                        os.devnull, "--python-executable", str(stubs), str(probe)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=180)
    assert (r.returncode == 0) == (version == "4-2"), r.stdout


