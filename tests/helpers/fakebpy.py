"""A small test double of the few ``bpy`` APIs the add-on uses, so its operators run against a live server
in milliseconds without Blender (tests/addon/test_addon_fake_bpy.py). Blender 4.2 behaviour: legacy
``Action.fcurves``, no action slots. Real Blender is covered by tests/blender/test_blender_real.py.

What is faithful: operator properties from (string) annotations with their defaults; f-curves with bulk
``keyframe_points.add`` / ``insert`` / ``remove`` / ``foreach_get`` / ``foreach_set`` (``co``, the handles, and the
``type``, handle-type and interpolation enums as integers; handles are stored, not computed),
``update`` sorting keys, linear ``evaluate`` per channel (as Blender does, quaternions are not kept
unit between keys); armatures whose bones have rest rotations (``matrix_local``), heads, parents and
children; pose bones; scenes with frame and preview ranges and a render fps. Undo and the UI are not.
"""
from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

KEY_TYPES = {"KEYFRAME": 0, "BREAKDOWN": 1, "MOVING_HOLD": 2, "EXTREME": 3, "JITTER": 4, "GENERATED": 5}
HANDLE_TYPES = {"FREE": 0, "AUTO": 1, "VECTOR": 2, "ALIGNED": 3, "AUTO_CLAMPED": 4}
INTERPOLATIONS = {"CONSTANT": 0, "LINEAR": 1, "BEZIER": 2}
ENUMS = {"type": KEY_TYPES, "handle_left_type": HANDLE_TYPES, "handle_right_type": HANDLE_TYPES,
         "interpolation": INTERPOLATIONS}
PAIRS = ("co", "handle_left", "handle_right")


# ------------------------------------------------------------------------------------------- props

class Prop:
    def __init__(self, kind: str, **kw: Any):
        self.kind, self.kw = kind, kw

    def default(self) -> Any:
        if self.kind == "Collection":
            return Collection(self.kw.get("type"))
        if self.kind == "Pointer":
            t = self.kw.get("type")
            return new_group(t) if isinstance(t, type) and issubclass(t, PropertyGroup) else None
        if "default" in self.kw:
            return self.kw["default"]
        if self.kind == "Enum":
            return self.kw["items"][0][0]
        return {"Int": 0, "Float": 0.0, "String": "", "Bool": False}[self.kind]


def _prop(kind: str):
    return lambda **kw: Prop(kind, **kw)


def init_props(obj: Any) -> None:
    """Give ``obj`` every property its class annotations declare (evaluated like Blender does)."""
    for cls in reversed(type(obj).__mro__):
        mod = sys.modules.get(cls.__module__)
        for name, ann in cls.__dict__.get("__annotations__", {}).items():
            if isinstance(ann, str):
                try:
                    ann = eval(ann, vars(mod) if mod else {})
                except Exception:
                    continue
            if isinstance(ann, Prop):
                setattr(obj, name, ann.default())


class Collection(list):
    def __init__(self, item_type: Any = None):
        super().__init__()
        self.item_type = item_type

    def add(self) -> Any:
        item = new_group(self.item_type) if self.item_type else types.SimpleNamespace()
        self.append(item)
        return item


# ------------------------------------------------------------------------------------------- types

class _Registrable:
    bl_idname = ""


class Operator(_Registrable):
    def __init__(self) -> None:
        init_props(self)
        self.reports: list[tuple[set, str]] = []

    def report(self, kind: set, message: str) -> None:
        self.reports.append((set(kind), message))


class PropertyGroup(_Registrable):
    pass


def new_group(cls: type) -> Any:
    obj = cls.__new__(cls)
    init_props(obj)
    return obj


class AddonPreferences(PropertyGroup):
    pass


class Panel(_Registrable):
    pass


class UIList(_Registrable):
    pass


class Action:
    def __init__(self, name: str):
        self.name = name
        self.fcurves = FCurves()

    @property
    def frame_range(self) -> tuple[float, float]:
        frames = [k.co[0] for fc in self.fcurves for k in fc.keyframe_points]
        return (min(frames), max(frames)) if frames else (0.0, 0.0)


# --------------------------------------------------------------------------------------- f-curves

class _EnumItem:
    def __init__(self, value: int):
        self.value = value


class _RNA:
    properties = {a: types.SimpleNamespace(enum_items={k: _EnumItem(v) for k, v in e.items()})
                  for a, e in ENUMS.items()}


class Key:
    bl_rna = _RNA()

    def __init__(self) -> None:
        self.co = self.handle_left = self.handle_right = (0.0, 0.0)
        self.type, self.interpolation = "KEYFRAME", "BEZIER"
        self.handle_left_type = self.handle_right_type = "AUTO_CLAMPED"


class KeyframePoints(list):
    def add(self, count: int) -> None:
        self.extend(Key() for _ in range(count))

    def insert(self, frame: float, value: float, options: Any = (), keyframe_type: str = "KEYFRAME") -> Key:  # type: ignore[override]
        """Blender's ``keyframe_points.insert``: the key goes to its place in frame order."""
        k = Key()
        k.co, k.type = (float(frame), float(np.float32(value))), keyframe_type
        at = int(np.searchsorted([q.co[0] for q in self], frame))
        list.insert(self, at, k)
        return k

    def remove(self, key: Key, fast: bool = False) -> None:  # type: ignore[override]
        del self[next(i for i, k in enumerate(self) if k is key)]

    def foreach_get(self, attr: str, seq: np.ndarray) -> None:
        if attr in PAIRS:
            seq[:] = np.array([getattr(k, attr) for k in self], np.float32).reshape(-1)
        elif attr in ENUMS:
            seq[:] = [ENUMS[attr][getattr(k, attr)] for k in self]
        else:
            raise TypeError(attr)

    def foreach_set(self, attr: str, seq: Any) -> None:
        a = np.asarray(seq)
        if attr in PAIRS:
            for k, xy in zip(self, a.reshape(-1, 2).astype(np.float32), strict=True):
                setattr(k, attr, (float(xy[0]), float(xy[1])))
        elif attr in ENUMS:
            names = {v: n for n, v in ENUMS[attr].items()}
            for k, t in zip(self, a, strict=True):
                setattr(k, attr, names[int(t)])
        else:
            raise TypeError(attr)


class FCurve:
    def __init__(self, data_path: str, index: int, group: str = ""):
        self.data_path, self.array_index, self.group = data_path, index, group
        self.keyframe_points = KeyframePoints()

    def update(self) -> None:
        self.keyframe_points.sort(key=lambda k: k.co[0])

    def evaluate(self, frame: float) -> float:
        kp = sorted(self.keyframe_points, key=lambda k: k.co[0])
        if not kp:
            return 0.0
        f = np.array([k.co[0] for k in kp])
        v = np.array([k.co[1] for k in kp])
        return float(np.interp(frame, f, v))


class FCurves(list):
    def find(self, data_path: str, index: int = 0) -> FCurve | None:
        return next((fc for fc in self if fc.data_path == data_path and fc.array_index == index), None)

    def new(self, data_path: str, index: int = 0, action_group: str = "") -> FCurve:
        if self.find(data_path, index) is not None:
            raise RuntimeError(f"F-Curve {data_path}[{index}] already exists")
        fc = FCurve(data_path, index, action_group)
        self.append(fc)
        return fc


# ---------------------------------------------------------------------------------------- objects

class Quat(tuple):
    pass


class Matrix:
    """A bone's rest rotation (WXYZ) standing in for ``matrix_local`` / ``matrix_world``."""

    def __init__(self, q: Any = (1.0, 0.0, 0.0, 0.0), t: Any = (0.0, 0.0, 0.0)):
        self.q, self.t = tuple(float(x) for x in q), tuple(float(x) for x in t)

    def __iter__(self) -> Any:
        """The rows of the 4x4 matrix (rotation q, translation t), as mathutils.Matrix iterates."""
        w, x, y, z = np.asarray(self.q) / np.linalg.norm(self.q)
        r = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
             [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
             [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
        return iter([[*r[i], self.t[i]] for i in range(3)] + [[0.0, 0.0, 0.0, 1.0]])

    def to_quaternion(self) -> Quat:
        return Quat(self.q)

    def __matmul__(self, v: Any) -> tuple:
        return tuple(v)   # the identity object transform of the tests


class Vec(tuple):
    def to_3d(self) -> Vec:
        return Vec(self[:3])


class Bone:
    def __init__(self, name: str, head: Any, rest: Any = (1.0, 0.0, 0.0, 0.0)):
        self.name, self.head_local = name, tuple(head)
        self.matrix_local = Matrix(rest, head)
        self.parent: Bone | None = None
        self.children: list[Bone] = []
        self.select = False


class PoseBone:
    def __init__(self, bone: Bone):
        self.bone, self.name = bone, bone.name
        self.rotation_mode = "QUATERNION"
        self.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)

    @property
    def head(self) -> Any:
        """The posed head (armature space); the double does not pose: the rest head."""
        return self.bone.head_local


class NamedList(list):
    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return next(x for x in self if x.name == key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        return next((x for x in self if x.name == key), default)


class AnimData:
    def __init__(self) -> None:
        self.action: Action | None = None


class Object:
    def __init__(self, name: str, type: str, data: Any = None):
        self.name, self.type, self.data = name, type, data
        self.animation_data: AnimData | None = None
        self.matrix_world = Matrix()
        self.location = (0.0, 0.0, 0.0)

    def animation_data_create(self) -> AnimData:
        self.animation_data = AnimData()
        return self.animation_data


def armature(name: str, bones: list[tuple[str, str | None, Any, Any]]) -> Object:
    """An armature object: ``bones`` = [(name, parent name or None, head (Z-up), rest WXYZ)], parents first."""
    data = types.SimpleNamespace(bones=NamedList(), motioncore_map=Collection(), motioncore_map_index=0)
    by = {}
    for b, parent, head, rest in bones:
        bone = Bone(b, head, rest)
        if parent is not None:
            bone.parent = by[parent]
            by[parent].children.append(bone)
        by[b] = bone
        data.bones.append(bone)
    obj = Object(name, "ARMATURE", data)
    obj.pose = types.SimpleNamespace(bones=NamedList(PoseBone(b) for b in data.bones))
    return obj


def curve(name: str, points: list[tuple[float, float, float]]) -> Object:
    sp = types.SimpleNamespace(type="POLY", points=[types.SimpleNamespace(co=Vec((*p, 1.0))) for p in points])
    return Object(name, "CURVE", types.SimpleNamespace(splines=[sp]))


def key_pose(obj: Object, frame: float, rotations: dict[str, Any]) -> None:
    """Key bone rotations (WXYZ) at ``frame`` as an animator does (key type KEYFRAME)."""
    ad = obj.animation_data or obj.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(f"{obj.name}Action")
    for b, q in rotations.items():
        for i in range(4):
            path = f'pose.bones["{b}"].rotation_quaternion'
            fc = ad.action.fcurves.find(path, i) or ad.action.fcurves.new(path, i, b)
            fc.keyframe_points.add(1)
            fc.keyframe_points[-1].co = (float(frame), float(np.float32(q[i])))   # Blender keeps float32
            fc.update()


# ----------------------------------------------------------------------------------------- context

class Scene:
    def __init__(self, settings: Any):
        self.frame_start, self.frame_end, self.frame_current = 1, 250, 1
        self.use_preview_range, self.frame_preview_start, self.frame_preview_end = False, 1, 250
        self.render = types.SimpleNamespace(fps=30, fps_base=1.0)
        self.motioncore = settings


def context(scene: Scene, prefs: Any, addon_id: str, active: Object | None, selected: list[Object]) -> Any:
    return types.SimpleNamespace(
        scene=scene, active_object=active, selected_objects=selected, window_manager=WindowManager(), window=None,
        workspace=Workspace(), screen=None,
        preferences=types.SimpleNamespace(addons={addon_id: types.SimpleNamespace(preferences=prefs)}))


# ------------------------------------------------------------------------------------------ module

def _module(name: str, **attrs: Any) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


props = _module("bpy.props", **{f"{k}Property": _prop(k) for k in
                                ("Int", "Float", "String", "Bool", "Enum", "Pointer", "Collection")})
types_mod = _module("bpy.types", Operator=Operator, PropertyGroup=PropertyGroup, AddonPreferences=AddonPreferences,
                    Panel=Panel, UIList=UIList, Action=Action, Context=object, Event=object, Scene=Scene,
                    Armature=type("Armature", (), {}), Object=Object)


class _Actions(list):
    def new(self, name: str) -> Action:
        a = Action(name)
        self.append(a)
        return a


class Timers:
    """``bpy.app.timers``: functions registered here are called by the test (``run``), as Blender's event
    loop would between events."""

    def __init__(self) -> None:
        self.funcs: list[Any] = []

    def register(self, fn: Any, first_interval: float = 0.0, persistent: bool = False) -> None:
        self.funcs.append(fn)

    def is_registered(self, fn: Any) -> bool:
        return fn in self.funcs

    def unregister(self, fn: Any) -> None:
        self.funcs.remove(fn)

    def run(self) -> None:
        for fn in list(self.funcs):
            if fn() is None:
                self.funcs.remove(fn)


class WindowManager:
    """Records the modal handler and timers an operator's ``invoke`` adds."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []
        self.timers: list[Any] = []

    def event_timer_add(self, step: float, window: Any = None) -> Any:
        t = types.SimpleNamespace(step=step)
        self.timers.append(t)
        return t

    def event_timer_remove(self, t: Any) -> None:
        self.timers.remove(t)

    def modal_handler_add(self, op: Any) -> None:
        self.handlers.append(op)


class Workspace:
    def __init__(self) -> None:
        self.status: list[str | None] = []

    def status_text_set(self, text: str | None) -> None:
        self.status.append(text)


def event(type: str, value: str = "NOTHING") -> Any:
    return types.SimpleNamespace(type=type, value=value)


bpy = _module("bpy", props=props, types=types_mod,
              app=types.SimpleNamespace(version=(4, 2, 0), version_string="4.2.0 (fake)", background=True,
                                        timers=Timers()),
              utils=types.SimpleNamespace(register_class=lambda cls: None, unregister_class=lambda cls: None,
                                          escape_identifier=lambda s: s.replace("\\", "\\\\").replace('"', '\\"')),
              data=types.SimpleNamespace(objects=NamedList(), actions=_Actions()))


def install(monkeypatch: Any) -> types.ModuleType:
    """Put the fake in sys.modules as ``bpy`` (and ``bpy.props`` / ``bpy.types``); a fresh bpy.data."""
    bpy.data = types.SimpleNamespace(objects=NamedList(), actions=_Actions())
    bpy.app.timers, bpy.app.background = Timers(), True
    monkeypatch.setitem(sys.modules, "bpy", bpy)
    monkeypatch.setitem(sys.modules, "bpy.props", props)
    monkeypatch.setitem(sys.modules, "bpy.types", types_mod)
    monkeypatch.setitem(sys.modules, "bpy_extras", None)
    return bpy
