"""What the operators read from the scene: the active armature, the selection, frame range and rate, curve
points, rest offsets, rig units and skeletons (bpy objects in, plain values out)."""
from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ..core import keys, requests, rigmap
from .props import scene, settings


def _armature(context: bpy.types.Context) -> Any:
    obj = context.active_object
    if obj is None or obj.type != "ARMATURE":
        raise ValueError("select an armature (active object)")
    return obj


def _scene_frames(context: bpy.types.Context) -> tuple[int, int]:
    sc = scene(context)
    preview = (sc.frame_preview_start, sc.frame_preview_end) if sc.use_preview_range else None
    return keys.effective_range((sc.frame_start, sc.frame_end), preview)


def _scene_fps(context: bpy.types.Context) -> float:
    """The scene's rate, a standard one when within 0.1% of it (`rates.standard_rate`: 30.0003 fps is 30)."""
    from ..core.rates import standard_rate

    r = scene(context).render
    return standard_rate(float(r.fps) / float(r.fps_base))


def _is_selected(pb: Any) -> bool:
    sel = getattr(pb, "select", None)   # PoseBone.select where it exists, else Bone.select
    return bool(pb.bone.select if sel is None else sel)


def _selected_bones(obj: Any) -> list[str]:
    return [pb.name for pb in obj.pose.bones if _is_selected(pb)] or [pb.name for pb in obj.pose.bones]


def rest_offsets(obj: Any) -> dict[str, np.ndarray]:
    """Bone name -> `rigmap.rest_offset` from each bone's rest rotation in armature space."""
    return {b.name: rigmap.rest_offset(np.array(tuple(b.matrix_local.to_quaternion()), np.float64))
            for b in obj.data.bones}


def _preset(context: bpy.types.Context) -> str | None:
    p = settings(context).rig_preset
    return None if p == "AUTO" else p


def curve_points(curve_obj: Any, depsgraph: Any = None) -> np.ndarray:
    """(N, 2) ground points (model x, z; scene units) of the curve as Blender evaluates and draws it (Bezier
    handles, NURBS order and weights, poly: its tessellation at the curve's resolution), in world space
    (the object's transform applied). Blender is Z-up: model x = x, model z = -y. A curve that evaluates
    to a surface (bevel, extrude) falls back to its first spline's control points."""
    if not curve_obj.data.splines:
        raise ValueError(f"curve {curve_obj.name!r} has no splines")
    mw = np.array([list(r) for r in curve_obj.matrix_world], np.float64)
    world = None
    try:
        dg = depsgraph or bpy.context.evaluated_depsgraph_get()
        ev = curve_obj.evaluated_get(dg)
        me = ev.to_mesh()
        try:
            if me is not None and len(me.vertices) >= 2 and not len(me.polygons):
                co = np.empty(3 * len(me.vertices), np.float32)
                me.vertices.foreach_get("co", co)
                local = co.reshape(-1, 3).astype(np.float64)
                # the edges chain the points in order along the spline: follow them from an end
                ed = np.empty(2 * len(me.edges), np.int32)
                me.edges.foreach_get("vertices", ed)
                order = _chain_order(ed.reshape(-1, 2), local.shape[0])
                world = local[order] @ mw[:3, :3].T + mw[:3, 3]
        finally:
            ev.to_mesh_clear()
    except (RuntimeError, AttributeError):
        world = None
    if world is None:
        sp = curve_obj.data.splines[0]
        pts = [p.co for p in (sp.bezier_points if sp.type == "BEZIER" else sp.points)]
        world = np.array([tuple(p)[:3] for p in pts], np.float64) @ mw[:3, :3].T + mw[:3, 3]
    if world.shape[0] < 2:
        raise ValueError(f"curve {curve_obj.name!r} needs at least 2 points, has {world.shape[0]}")
    return np.stack([world[:, 0], -world[:, 1]], axis=1)


def _chain_order(edges: np.ndarray, n: int) -> np.ndarray:
    """Vertex indices in order along a chain of edges (an open spline from its first end; a cyclic one from
    vertex 0); vertices on no edge are left out."""
    nbr: dict[int, list[int]] = {}
    for u, v in edges.tolist():
        nbr.setdefault(u, []).append(v)
        nbr.setdefault(v, []).append(u)
    if not nbr:
        return np.arange(n)
    ends = sorted(k for k, v in nbr.items() if len(v) == 1)
    cur = ends[0] if ends else min(nbr)
    out, seen = [cur], {cur}
    while True:
        nxt = [w for w in nbr[cur] if w not in seen]
        if not nxt:
            return np.array(out)
        cur = nxt[0]
        out.append(cur)
        seen.add(cur)


def rig_units_per_metre(arm: Any, hips: str | None) -> float:
    """Scene units per metre of the rig: the nearest power of ten to its hips' rest height over 0.95 m (a BVH
    imported at scale 1 is in centimetres: 100; a rig in metres: 1)."""
    bone = arm.data.bones.get(hips) if hips else None
    mw = np.array([list(r) for r in arm.matrix_world], np.float64)
    h = float((mw[:3, :3] @ np.array(tuple(bone.head_local), np.float64))[2]) if bone is not None else 0.0
    if h <= 1e-6:
        return 1.0
    return float(10.0 ** max(0.0, np.round(np.log10(h / 0.95))))   # metres, cm or mm; never below metres


def _hips_bone(arm: Any, bones: list[str]) -> str | None:
    """The rig's hips: a mapped bone named like hips or pelvis, else the first with children."""
    for b in bones:
        n = b.lower()
        if "hip" in n and not any(t in n for t in ("left", "right", "_l", "_r", ".l", ".r")) or "pelvis" in n:
            return b
    return next((b for b in bones if arm.data.bones[b].children), bones[0] if bones else None)



def _pose_bones(obj: Any) -> Any:
    return obj.pose.bones


def _parents_first(bones: Any) -> list[Any]:
    """The armature's bones with every parent before its children (the wire skeleton's rule)."""
    out: list[Any] = []
    todo = [b for b in bones if b.parent is None]
    while todo:
        b = todo.pop(0)
        out.append(b)
        todo.extend(b.children)
    return out


def rig_hierarchy(arm: Any) -> tuple[list[str], list[int], np.ndarray]:
    """The armature's bones parents first: (names, parent indices, (B, 3) rest heads in armature space)."""
    order = _parents_first(arm.data.bones)
    return ([b.name for b in order], [order.index(b.parent) if b.parent else -1 for b in order],
            np.array([tuple(b.head_local) for b in order], np.float64).reshape(-1, 3))


def _rig_skeleton(bones: list[Any]) -> dict[str, Any]:
    names = [b.name for b in bones]
    parents = [names.index(b.parent.name) if b.parent else -1 for b in bones]
    return requests.rig_skeleton(names, parents, np.array([tuple(b.head_local) for b in bones], np.float64))
