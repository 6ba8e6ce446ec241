"""The add-on's bpy-free modules under plain pytest, imported without addon/__init__.py (which needs bpy)."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

ADDON = Path(__file__).resolve().parents[2] / "addon"
PKG = "_motioncore_addon_under_test"


def addon_module(name: str) -> types.ModuleType:
    """Import addon/<name>.py (``name`` dotted for a sub-package) as PKG.<name>, the library copies in
    addon/vendor/ made first (git-ignored, as scripts/build_addon.py makes them)."""
    if PKG not in sys.modules:
        from .blender import build_addon_module

        build_addon_module().vendor(ADDON)
        spec = importlib.machinery.ModuleSpec(PKG, None, is_package=True)
        pkg = importlib.util.module_from_spec(spec)
        pkg.__path__ = [str(ADDON)]
        sys.modules[PKG] = pkg
    return importlib.import_module(f"{PKG}.{name}")


def unit_quat(q):
    """``q`` (..., 4) scaled to unit length."""
    import numpy as np

    q = np.asarray(q, float)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def same_rotation(a, b, atol=1e-9) -> bool:
    """Whether WXYZ quaternions ``a`` and ``b`` are the same rotations (q == -q)."""
    import numpy as np

    return bool(np.allclose(np.abs(np.sum(unit_quat(a) * unit_quat(b), axis=-1)), 1.0, atol=atol))
