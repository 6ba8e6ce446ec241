"""The real ``bpy`` module for tests that launch Blender: the wheels from PyPI (5.0.1 and the 4.2 LTS series),
each in its own venv under ``$MOTIONCORE_CACHE/blender/`` (default ``~/.cache/motioncore/blender/``) (created on first use: ~15 s and ~400 MB each).
Such a test carries the ``blender`` marker; ``MOTIONCORE_SKIP_BLENDER=1`` skips them all (tests/conftest.py)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from motioncore.data.cache import cache_root

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = {"5.0.1": "bpy==5.0.1", "4.2": "bpy==4.2.*"}
VENVS = Path(os.environ.get("MOTIONCORE_BLENDER_VENVS") or cache_root() / "blender")   # $MOTIONCORE_CACHE/blender


def bpy_python(version: str) -> Path:
    """The venv's python with ``bpy`` (created on first use)."""
    venv = VENVS / f"bpy-{version}"
    py = venv / "bin" / "python"
    ok = venv / ".ready"
    if not ok.exists():
        if sys.version_info[:2] != (3, 11):
            pytest.skip("the bpy 4.2-5.0 wheels need Python 3.11")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", VERSIONS[version], "numpy", "pyzmq==27.3.0"],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.fail(f"could not install {VERSIONS[version]} (set MOTIONCORE_SKIP_BLENDER=1 to skip the real-Blender "
                        f"tests on a machine without PyPI):\n{r.stderr[-2000:]}")
        ok.write_text(VERSIONS[version])
    return py


def build_addon_module():
    """scripts/build_addon.py as a module."""
    spec = importlib.util.spec_from_file_location("_build_addon_under_test", ROOT / "scripts" / "build_addon.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_addon_zip(dist: Path) -> Path:
    """The extension zip, as scripts/build_addon.py --skip-wheels builds it, in ``dist``."""
    return build_addon_module().build(dist_dir=dist, skip_wheels=True)
