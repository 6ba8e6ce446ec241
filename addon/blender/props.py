"""Add-on preferences (where the server is) and per-scene settings shown in the Motion tab."""
from __future__ import annotations

from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core import keyreduce
from ..core.rigmap import PRESETS

_PRESET_ITEMS = [("AUTO", "Auto", "Detect the naming scheme from the bone names")] + [
    (p, p.replace("_", " ").title(), f"{p} bone names") for p in PRESETS]


class MotioncorePreferences(bpy.types.AddonPreferences):
    bl_idname = (__package__ or "motioncore.blender").rpartition(".")[0]   # the extension's package, above blender/

    connection_file: StringProperty(  # type: ignore[valid-type]
        name="Connection File", subtype="FILE_PATH", default="",
        description="Server connection file (MOTIONCORE_CONNECTION_FILE overrides; empty: the default location)")
    host: StringProperty(name="Host", default="", description="Server address (used when no connection file is set)")  # type: ignore[valid-type]
    port: IntProperty(name="Port", default=0, min=0, max=65535)  # type: ignore[valid-type]
    key: StringProperty(name="Key", subtype="PASSWORD", default="", description="The server's HMAC key")  # type: ignore[valid-type]
    timeout: FloatProperty(name="Timeout (s)", default=30.0, min=1.0, max=3600.0)  # type: ignore[valid-type]
    start_server: BoolProperty(name="Start a local server", default=False,  # type: ignore[valid-type]
                               description="On Connect, start the server command below if no server answers")
    server_command: StringProperty(name="Server command", default="motioncore serve",  # type: ignore[valid-type]
                                   description="Run without a shell, e.g. /path/to/.venv/bin/motioncore serve")

    def draw(self, context: bpy.types.Context) -> None:
        col = self.layout.column()
        col.prop(self, "connection_file")
        row = col.row()
        row.prop(self, "host")
        row.prop(self, "port")
        col.prop(self, "key")
        col.prop(self, "start_server")
        sub = col.row()
        sub.enabled = bool(self.start_server)
        sub.prop(self, "server_command")
        col.prop(self, "timeout")


class MotioncoreBoneMapItem(bpy.types.PropertyGroup):
    """One row of an armature's bone map: a model joint and the rig bone that plays it."""

    joint: StringProperty(name="Model Joint", default="")  # type: ignore[valid-type]
    bone: StringProperty(name="Bone", default="", description="The rig bone (empty: unmapped)")  # type: ignore[valid-type]


class KeysOptions:
    """Keys = Reduced | Every Frame and the tolerance, for the operators that write a filled span (In-fill, In-fill
    Hands, Walk Along Path, Style from Example): their Adjust Last Operation panel (F9) shows them."""

    keys: EnumProperty(name="Keys", default="REDUCED", items=keyreduce.KEYS)  # type: ignore[valid-type]
    max_error: FloatProperty(name="Max Error (cm)", default=keyreduce.MAX_CM, min=0.001,  # type: ignore[valid-type]
                             description="Reduced keys: how far any joint may move from the every-frame fill")
    mean_error: FloatProperty(name="Mean Error (cm)", default=keyreduce.MEAN_CM, min=0.001,  # type: ignore[valid-type]
                              description="Reduced keys: how far the joints may move on average")

    def reduce_options(self, cm_per_unit: float) -> dict[str, float] | None:
        """`rigio.write_segment`'s ``reduce``: None for Every Frame."""
        if self.keys == "EVERY_FRAME":
            return None
        return {"max_cm": float(self.max_error), "mean_cm": float(self.mean_error), "cm_per_unit": cm_per_unit}


class MotioncoreSceneSettings(bpy.types.PropertyGroup):
    path_model: StringProperty(name="Model", default="", description="Path controller (empty: the server's default)")  # type: ignore[valid-type]
    path_request: EnumProperty(  # type: ignore[valid-type]
        name="Controller", default="pfnn.rollout",
        items=[("pfnn.rollout", "PFNN (biped)", "Phase-functioned biped controller"),
               ("mann.rollout", "MANN (quadruped)", "Mode-adaptive quadruped controller")])
    gait: StringProperty(name="Gait", default="walk", description="Gait name, e.g. walk, run (biped) or trot (dog)")  # type: ignore[valid-type]
    speed: FloatProperty(name="Speed (m/s)", default=0.0, min=0.0, max=12.0,  # type: ignore[valid-type]
                         description="Speed along the path; 0: the gait's usual speed")
    walk_length: EnumProperty(  # type: ignore[valid-type]
        name="Length", default="PATH",
        items=[("PATH", "Path", "From the current frame until the path is walked (plus a second to settle)"),
               ("RANGE", "Frame range", "From the current frame to the end of the scene (or preview) range")])
    rig_preset: EnumProperty(name="Rig Names", items=_PRESET_ITEMS, default="AUTO")  # type: ignore[valid-type]
    map_task: EnumProperty(  # type: ignore[valid-type]
        name="Map For", default="infill",
        items=[("infill", "In-fill (body)", "The any-order body model's joints"),
               ("infill.hands", "In-fill (hands)", "The any-order hands model's joints (In-fill Hands)"),
               ("pfnn.rollout", "Walk (biped)", "The PFNN biped's joints"),
               ("mann.rollout", "Walk (dog)", "The MANN dog's joints"),
               ("style.adapt", "Style", "The style model's joints")])
    style_action: PointerProperty(name="Style Example", type=bpy.types.Action)  # type: ignore[valid-type]
    hands_object: PointerProperty(  # type: ignore[valid-type]
        name="Object", type=bpy.types.Object,
        description="The object the hand manipulates (In-fill Hands): its evaluated pose relative to the hand on "
                    "every frame guides the fingers; needs a hands model trained with an object. Its local axes "
                    "are read Z-up, as Blender's importers convert Y-up data. Empty: fill without an object")
    hands_side: EnumProperty(  # type: ignore[valid-type]
        name="Hand", default="AUTO",
        items=[("AUTO", "Auto", "From the armature's and bones' names (leftHand, hand.L ...); right when they do not say"),
               ("RIGHT", "Right", "A right hand"),
               ("LEFT", "Left", "A left hand: mirrored onto a right-hand model (and back), the object too")])
    hands_model: StringProperty(  # type: ignore[valid-type]
        name="Hands Model", default="",
        description="In-fill Hands' model (empty: infill-hands; with Temperature > 0 anyorder-hands, or with an Object the first any-order model trained with one)")
    style_model: StringProperty(name="Style Model", default="", description="Style model (empty: the server's default)")  # type: ignore[valid-type]
    status: StringProperty(name="Status", default="Not connected")  # type: ignore[valid-type]
    progress: StringProperty(name="Progress", default="")  # type: ignore[valid-type]
    last_report: StringProperty(name="Last Report", default="")  # type: ignore[valid-type]


classes = (MotioncorePreferences, MotioncoreBoneMapItem, MotioncoreSceneSettings)


def register_props() -> None:
    bpy.types.Scene.motioncore = PointerProperty(type=MotioncoreSceneSettings)  # type: ignore[attr-defined,func-returns-value]
    # the bone map lives on the armature data, so it travels with the rig (saved in the .blend, linked)
    bpy.types.Armature.motioncore_map = CollectionProperty(type=MotioncoreBoneMapItem)  # type: ignore[attr-defined,func-returns-value]
    bpy.types.Armature.motioncore_map_index = IntProperty(default=0)  # type: ignore[attr-defined,func-returns-value]


def unregister_props() -> None:
    delattr(bpy.types.Scene, "motioncore")
    delattr(bpy.types.Armature, "motioncore_map")
    delattr(bpy.types.Armature, "motioncore_map_index")


def bone_map(obj: Any) -> dict[str, str]:
    """The armature's stored bone map, model joint -> bone ("" = leave unmapped); empty if none."""
    rows = getattr(getattr(obj, "data", None), "motioncore_map", None) or ()
    return {r.joint: r.bone for r in rows if r.joint}


def preferences(context: bpy.types.Context) -> Any:
    """This add-on's preferences (a MotioncorePreferences)."""
    prefs: Any = context.preferences
    return prefs.addons[MotioncorePreferences.bl_idname].preferences


def scene(context: bpy.types.Context) -> Any:
    """The context's scene (typed Any: the stubs mark it Optional and lack our ``motioncore`` settings)."""
    sc: Any = context.scene
    if sc is None:
        raise ValueError("no active scene")
    return sc


def settings(context: bpy.types.Context) -> Any:
    """The scene's MotioncoreSceneSettings."""
    return scene(context).motioncore
