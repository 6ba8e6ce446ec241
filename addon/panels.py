"""The "Motion" tab in the 3D Viewport sidebar."""
from __future__ import annotations

from typing import Any

import bpy

from .props import settings


class MOTIONCORE_PT_main(bpy.types.Panel):
    bl_label = "motioncore"
    bl_idname = "MOTIONCORE_PT_main"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Motion"

    def draw(self, context: bpy.types.Context) -> None:
        s = settings(context)
        layout: Any = self.layout
        row = layout.row()
        row.operator("motioncore.connect", icon="LINKED")
        layout.label(text=s.status)
        if s.progress:
            layout.label(text=s.progress, icon="TIME")

        box = layout.box()
        box.label(text="Walk along a path")
        box.prop(s, "path_request")
        box.prop(s, "path_model")
        box.prop(s, "gait")
        box.prop(s, "rig_preset")
        box.operator("motioncore.walk_path", icon="CURVE_PATH")
        box.prop(s, "style_action")
        box.operator("motioncore.style_adapt", icon="BRUSH_DATA")

        box = layout.box()
        box.label(text="Fill and retarget")
        box.operator("motioncore.infill", icon="KEYFRAME")
        box.operator("motioncore.hands_infill", icon="VIEW_PAN")
        box.operator("motioncore.retarget", icon="ARMATURE_DATA")


classes = (MOTIONCORE_PT_main,)
