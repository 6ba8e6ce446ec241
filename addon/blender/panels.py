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
        row = box.row()
        row.prop(s, "speed")
        row.prop(s, "walk_length", text="")
        box.prop(s, "rig_preset")
        box.operator("motioncore.walk_path", icon="CURVE_PATH")
        box.prop(s, "style_action")
        box.operator("motioncore.style_adapt", icon="BRUSH_DATA")

        box = layout.box()
        box.label(text="Fill and retarget")
        row = box.row(align=True)
        row.operator("motioncore.infill", icon="KEYFRAME")
        row.operator("motioncore.adapt_action", icon="SHADERFX")
        col = box.column(align=True)
        col.operator("motioncore.hands_infill", icon="VIEW_PAN")
        col.prop(s, "hands_object")
        col.prop(s, "hands_side")
        col.prop(s, "hands_model")
        box.operator("motioncore.retarget", icon="ARMATURE_DATA")


class MOTIONCORE_UL_bone_map(bpy.types.UIList):
    """One row per model joint: its name and a search field over the armature's bones."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any,
                  active_property: Any, index: int | None = 0, flt_flag: int | None = 0) -> None:
        row = layout.row(align=True)
        row.label(text=item.joint, icon="BONE_DATA" if item.bone else "ERROR")
        row.prop_search(item, "bone", data, "bones", text="")


class MOTIONCORE_PT_bone_map(bpy.types.Panel):
    """The active armature's bone map (stored on the armature): fill it, then fix unmapped rows."""

    bl_label = "Bone Map"
    bl_idname = "MOTIONCORE_PT_bone_map"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Motion"
    bl_parent_id = "MOTIONCORE_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: bpy.types.Context) -> None:
        s = settings(context)
        layout: Any = self.layout
        obj: Any = context.active_object
        if obj is None or obj.type != "ARMATURE":
            layout.label(text="Select an armature")
            return
        row = layout.row(align=True)
        row.prop(s, "map_task", text="")
        row.operator("motioncore.map_bones", icon="FILE_REFRESH")
        layout.template_list("MOTIONCORE_UL_bone_map", "", obj.data, "motioncore_map", obj.data,
                             "motioncore_map_index", rows=6)


classes = (MOTIONCORE_PT_main, MOTIONCORE_UL_bone_map, MOTIONCORE_PT_bone_map)
