"""motioncore for Blender: a thin client of the motion server (see docs/protocol.md).

Two layers (addon/README.md): ``core/`` computes (bpy-free, plain pytest covers it), ``blender/`` talks to
Blender; both use the library copies in ``vendor/`` (made by scripts/build_addon.py). Imports only those
copies, bpy, numpy and the standard library; never torch or the motioncore package.
"""
from __future__ import annotations

import bpy

from .blender import modal, operators, panels, props
from .core import connect

classes = (*props.classes, *operators.classes, *panels.classes)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    props.register_props()


def unregister() -> None:
    modal.stop_draining()
    modal.stop_worker()
    connect.stop_started()   # a server Connect started goes with the add-on
    props.unregister_props()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
