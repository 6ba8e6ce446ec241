"""motioncore for Blender: a thin client of the motion server (see docs/protocol.md).

Imports only its bundled protocol/client copies (``vendor/``, made by scripts/build_addon.py), bpy,
numpy and the standard library; never torch or the motioncore package. Pure logic (key merging, rig
maps, the worker thread) lives in bpy-free modules so plain pytest covers it.
"""
from __future__ import annotations

import bpy

from . import operators, panels, props, requests

classes = (*props.classes, *operators.classes, *panels.classes)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    props.register_props()


def unregister() -> None:
    operators.stop_draining()
    operators.stop_worker()
    requests.stop_started()   # a server Connect started goes with the add-on
    props.unregister_props()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
