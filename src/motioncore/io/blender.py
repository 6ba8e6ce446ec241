"""Read and write ``.fbx`` and ``.blend`` animation through Blender's Python module, headless (the
``blender`` extra: ``pip install -e '.[blender]'`` installs ``bpy==5.0.1``, a Python 3.11 wheel).

A Motion is in the models' convention: Y up, centimetres, every joint's rest frame on the world axes
(BVH). A Blender armature is Z up, metres, each bone's rest frame along the bone with its roll. With A
the Y-up -> Z-up rotation (+90 degrees about X), a bone's world rotation posed is ``A G_j A^-1 M_b``
for the joint's model global rotation G_j and the bone's world rest rotation M_b, so reading inverts
that (``G_j = A^-1 W_b M_b^-1 A``) and writing keys the bone's pose rotation ``C^-1 q_j C`` with
``C = A^-1 M_b`` (the add-on's `rigmap.rest_offset` math). The root joint's translation is the root
bone's world head position. Reading works in world space (the armature object's transform, such as the
0.01 scale and axis turn of an FBX import, is applied); writing creates an armature at the origin.

FBX keeps the world motion (a Bandai clip written and read back: 2e-3 cm) but not the rest pose: the
armature Blender imports from our FBX has the first frame's pose as its rest (its bind pose), so the
offsets and local rotations read back differ from the BVH's while every joint's world position agrees.
Anything that depends on the rest pose (retargeting's rest alignment) sees that other rest pose; .blend
keeps it (1e-4 cm, same offsets).

``bpy`` is imported inside the functions only; without it they raise MotioncoreError with the install
hint. Blender's state is per process: each call starts from an empty scene.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..core.axes import Y_UP_TO_Z_UP, y_up_to_z_up, z_up_to_y_up
from ..core.motion import Motion
from ..core.rotations import matrix_to_quat, quat_apply, quat_inv, quat_mul, quat_normalize
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError

SUFFIXES = (".fbx", ".blend")
A = Y_UP_TO_Z_UP   # Y-up -> Z-up, WXYZ
UNITS = 100.0   # centimetres per Blender metre


def _bpy():
    try:
        import bpy
    except ImportError:
        raise MotioncoreError(".fbx and .blend need Blender's Python module: pip install -e '.[blender]' "
                              "(bpy 5.0.1, Python 3.11)") from None
    return bpy


def _parents_first(bones) -> list:
    """Depth first, children in their order (a BVH's joint order, for armatures written from one)."""
    out, todo = [], [b for b in bones if b.parent is None][::-1]
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(list(b.children)[::-1])
    return out


def read_blender(path: str | os.PathLike) -> Motion:
    """The first animated armature of a ``.fbx`` or ``.blend`` file as a Motion (see the module doc)."""
    bpy = _bpy()
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise MotioncoreError(f"{p}: expected {' or '.join(SUFFIXES)}")
    if not p.is_file():
        raise MotioncoreError(f"{p}: no such file")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    try:
        if p.suffix.lower() == ".blend":
            bpy.ops.wm.open_mainfile(filepath=str(p))
        else:
            bpy.ops.import_scene.fbx(filepath=str(p))
    except RuntimeError as e:
        raise MotioncoreError(f"{p}: Blender could not read it ({str(e).strip()[:200]})") from None
    arms = [o for o in bpy.data.objects if o.type == "ARMATURE"]
    if not arms:
        raise MotioncoreError(f"{p}: no armature in the file")
    arm = next((o for o in arms if o.animation_data and o.animation_data.action), arms[0])
    scene = bpy.context.scene
    fps = float(scene.render.fps) / float(scene.render.fps_base)
    act = arm.animation_data.action if arm.animation_data else None
    lo, hi = (int(round(v)) for v in act.frame_range) if act else (scene.frame_start, scene.frame_start)
    bones = _parents_first(arm.data.bones)
    names = [b.name for b in bones]
    parents = [names.index(b.parent.name) if b.parent else -1 for b in bones]
    scene.frame_set(lo)
    mw = np.array(arm.matrix_world)
    mrot = _rotation_of(mw)
    rest_w = np.array([quat_mul(mrot, _q(b.matrix_local)) for b in bones])                     # (J, 4)
    heads = np.array([(mw @ np.r_[np.array(b.head_local), 1.0])[:3] for b in bones]) * UNITS    # world, Z-up
    hy = z_up_to_y_up(heads)
    offsets = np.array([hy[j] - hy[pj] if pj >= 0 else hy[j] for j, pj in enumerate(parents)])
    sk = Skeleton(tuple(names), np.array(parents), offsets)
    T = hi - lo + 1
    glob = np.empty((T, len(bones), 4))
    head = np.empty((T, len(bones), 3))
    for i, f in enumerate(range(lo, hi + 1)):
        scene.frame_set(f)
        mw = np.array(arm.matrix_world)
        mrot = _rotation_of(mw)
        for j, b in enumerate(bones):
            pb = arm.pose.bones[b.name]
            w = quat_mul(mrot, _q(pb.matrix))
            glob[i, j] = quat_mul(quat_mul(quat_inv(A), quat_mul(w, quat_inv(rest_w[j]))), A)
            head[i, j] = (mw @ np.r_[np.array(pb.head), 1.0])[:3]
    head = z_up_to_y_up(head * UNITS)
    local = glob.copy()
    pos = np.empty((T, len(bones), 3))
    pos[:, 0] = head[:, 0]
    for j, pj in enumerate(parents):
        if pj >= 0:
            local[:, j] = quat_mul(quat_inv(glob[:, pj]), glob[:, j])
            pos[:, j] = quat_apply(quat_inv(glob[:, pj]), head[:, j] - head[:, pj])
            if np.abs(pos[:, j] - offsets[j]).max() < 1e-4:   # a bone that does not translate: its offset exactly
                pos[:, j] = offsets[j]
    return Motion(sk, quat_normalize(local), pos, fps, p.stem)


def _q(m) -> np.ndarray:
    return np.array(tuple(m.to_quaternion()), np.float64)


def _rotation_of(m: np.ndarray) -> np.ndarray:
    """WXYZ rotation of a 4x4 matrix with scale (columns normalised)."""
    r = np.asarray(m, np.float64)[:3, :3]
    return matrix_to_quat(r / np.linalg.norm(r, axis=0, keepdims=True))


def write_blender(path: str | os.PathLike, motion: Motion) -> Path:
    """Write ``motion`` as an armature with one action to ``.fbx`` or ``.blend``, atomically (a temporary
    file in the same folder, then renamed)."""
    bpy = _bpy()
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise MotioncoreError(f"{out}: expected {' or '.join(SUFFIXES)}")
    if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.positions).all()):
        raise MotioncoreError(f"{out}: the motion holds NaN or infinity; nothing written")
    sk = motion.skeleton
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    fps = float(motion.fps)
    scene.render.fps, scene.render.fps_base = max(1, int(round(fps))), max(1, int(round(fps))) / fps
    data = bpy.data.armatures.new(motion.name or "motion")
    obj = bpy.data.objects.new(motion.name or "motion", data)
    scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    rest = sk.rest_positions() / UNITS                                          # (J, 3) Y-up metres
    heads = y_up_to_z_up(rest)
    kids = [[c for c in range(sk.num_joints) if sk.parents[c] == j] for j in range(sk.num_joints)]
    bpy.ops.object.mode_set(mode="EDIT")
    for j, n in enumerate(sk.names):
        eb = data.edit_bones.new(n)
        eb.head = heads[j]
        d = (heads[kids[j][0]] - heads[j]) if kids[j] else None
        if d is None or np.linalg.norm(d) < 1e-4:
            pj = sk.parents[j]
            d = heads[j] - heads[pj] if pj >= 0 and np.linalg.norm(heads[j] - heads[pj]) > 1e-4 else np.array([0, 0, 0.05])
            d = d / np.linalg.norm(d) * 0.05
        eb.tail = heads[j] + d
        eb.roll = 0.0
    for j, pj in enumerate(sk.parents):
        if pj >= 0:
            data.edit_bones[sk.names[j]].parent = data.edit_bones[sk.names[pj]]
    bpy.ops.object.mode_set(mode="POSE")
    rest_q = {b.name: _q(b.matrix_local) for b in data.bones}
    T = motion.num_frames
    moving = [j for j in range(sk.num_joints) if j == 0 or np.abs(motion.positions[:, j] - sk.offsets[j]).max() > 1e-6]
    for i in range(T):
        f = i + 1
        for j, n in enumerate(sk.names):
            pb = obj.pose.bones[n]
            pb.rotation_mode = "QUATERNION"
            c = quat_mul(quat_inv(A), rest_q[n])
            pb.rotation_quaternion = quat_mul(quat_mul(quat_inv(c), motion.rotations[i, j]), c)
            pb.keyframe_insert("rotation_quaternion", frame=f)
            if j in moving:   # translation from the rest offset, in the bone's rest frame (metres, Z up)
                d = y_up_to_z_up(motion.positions[i, j] - sk.offsets[j]) / UNITS
                pb.location = quat_apply(quat_inv(rest_q[n]), d)
                pb.keyframe_insert("location", frame=f)
    scene.frame_start, scene.frame_end = 1, T
    bpy.ops.object.mode_set(mode="OBJECT")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = str(out.parent / f".{out.stem}.{os.getpid()}.{os.urandom(4).hex()}.tmp{suffix}")   # a name only: Blender
    # writes a .blend1 backup next to a file that already exists
    bpy.context.preferences.filepaths.save_version = 0   # no .blend1 backups
    try:
        if suffix == ".blend":
            bpy.ops.wm.save_as_mainfile(filepath=tmp, copy=True, check_existing=False)
        else:
            bpy.ops.export_scene.fbx(filepath=tmp, use_selection=False, add_leaf_bones=False, bake_anim=True,
                                     bake_anim_use_nla_strips=False, bake_anim_use_all_actions=False,
                                     bake_anim_simplify_factor=0.0)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
