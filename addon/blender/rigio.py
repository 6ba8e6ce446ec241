"""Reading a rig's action for an in-fill and writing the answer back (bpy objects in, plain arrays out).

Any rotation mode is read by converting (`rigclip.to_quat`) and written back in the bone's own mode,
continuous with the frame before; the user's rotation mode is never changed. The root translation is
read where the rig carries it: the root bone's location (BVH and FBX imports put the hips motion there),
the object's location, or both, and written back to where it came from. Only the frames around the gaps
(`vendor.gaps.windows`) are evaluated and written, so a long action costs little.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core import keyreduce, keys, rigclip, rigmap
from ..vendor import gaps
from ..vendor.quat_np import matrix_to_quat
from . import fcurves, keywrite


def _path(bone: str, prop: str) -> str:
    return fcurves.bone_path(bone, prop)


def _parents_first(arm: Any, names: set[str]) -> list[str]:
    out: list[str] = []
    todo = [b for b in arm.data.bones if b.parent is None]
    while todo:
        b = todo.pop(0)
        if b.name in names:
            out.append(b.name)
        todo.extend(b.children)
    return out


def _mat(m: Any) -> np.ndarray:
    return np.array([list(r) for r in m], np.float64)


def _varies(fcmap: dict, path: str, cache: fcurves.KeyCache) -> bool:
    vals = [fcurves.cached_keys(fcmap, (path, i), cache)[1] for i in range(3) if (path, i) in fcmap]
    return any(v.size and np.ptp(v) > 1e-6 for v in vals)


def read_rig(arm: Any, action: Any, slot: Any, candidates: list[str]) -> dict[str, Any]:
    """What an in-fill needs to know about the rig: the bones with the animator's rotation keys (parents
    first), their modes, keyed frames, rest heads and offsets, and where the root motion lives."""
    fcmap = fcurves.fcurve_map(action, slot)
    cache: fcurves.KeyCache = {}   # every curve read once (the write reuses it in the same call)
    keyed, modes = {}, {}
    for b in candidates:
        mode = arm.pose.bones[b].rotation_mode
        path, n = rigclip.CHANNELS[mode]
        f = fcurves.user_key_frames(fcmap, _path(b, path), n, cache)
        if f is not None and f.size:
            keyed[b], modes[b] = f, mode
    bones = _parents_first(arm, set(keyed))
    locs = {b: fcurves.user_key_frames(fcmap, _path(b, "location"), 3, cache) for b in bones}
    with_loc = [b for b in bones if (k := locs[b]) is not None and k.size]
    root = next((b for b in with_loc if _varies(fcmap, _path(b, "location"), cache)), with_loc[0] if with_loc else
                (bones[0] if bones else None))
    chain: list[str] = []
    bone = arm.data.bones[root] if root else None
    while bone is not None:
        chain.insert(0, bone.name)
        bone = bone.parent
    obj_keys = fcurves.user_key_frames(fcmap, "location", 3, cache)
    obj_loc = obj_keys is not None and obj_keys.size > 0
    root_keys = [k for k in ((locs.get(root) if root in with_loc else None), obj_keys if obj_loc else None)
                 if k is not None]
    db = arm.data.bones
    idx = {b: i for i, b in enumerate(bones)}
    mw = _mat(arm.matrix_world)[:3, :3]
    return {"fcmap": fcmap, "keys": cache, "bones": bones, "modes": [modes[b] for b in bones], "keyed": keyed,
            "heads": np.array([tuple(db[b].head_local) for b in bones], np.float64).reshape(-1, 3),
            "parents": [idx.get(db[b].parent.name, -1) if db[b].parent else -1 for b in bones],
            "up": [_keyed_ancestor(db[b], idx) for b in bones],
            "offsets": {b: rigmap.rest_offset(np.array(tuple(db[b].matrix_local.to_quaternion()), np.float64))
                        for b in bones},
            "root": root, "chain": chain, "rests": [_mat(db[b].matrix_local) for b in chain],
            "root_on_bone": root in with_loc, "root_on_object": obj_loc, "root_keys": root_keys,
            "object_rs": mw}


def _keyed_ancestor(bone: Any, idx: dict[str, int]) -> int:
    """Index (in ``idx``) of the nearest ancestor of ``bone`` with rotation keys; -1 when none."""
    p = bone.parent
    while p is not None and p.name not in idx:
        p = p.parent
    return idx[p.name] if p is not None else -1


def _rotations(rig: dict[str, Any], bone: str, frames: np.ndarray, user: bool = False, bez: bool = False
               ) -> tuple[np.ndarray, str]:
    """(T, C) raw channel values of ``bone`` at ``frames`` and its mode (``user``: the curve of the user's keys
    alone, `fcurves.evaluate_user`; ``bez``: Blender's default Bezier of those keys, `fcurves.evaluate_keys_bezier`)."""
    mode = rig["modes"][rig["bones"].index(bone)] if bone in rig["bones"] else None
    if mode is None:
        mode = "QUATERNION"
    path, n = rigclip.CHANNELS[mode]
    default = {"QUATERNION": [1.0, 0, 0, 0], "AXIS_ANGLE": [0.0, 0, 1, 0]}.get(mode, [0.0, 0, 0])
    if bez:
        return fcurves.evaluate_keys_bezier(rig["fcmap"], _path(bone, path), default, frames, rig.get("keys")), mode
    if user:
        return fcurves.evaluate_user(rig["fcmap"], _path(bone, path), default, frames, rig.get("keys")), mode
    return fcurves.evaluate(rig["fcmap"], _path(bone, path), default, frames), mode


def _chain_channels(arm: Any, rig: dict[str, Any], frames: np.ndarray, quats: dict[str, np.ndarray] | None = None,
                    user: bool = False, bez: bool = False) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray | None]:
    """Location and rotation channels of the root chain at ``frames`` (``quats`` overrides rotations), and
    the object's location in armature axes (None when it carries no motion); ``user``: the user's keys alone;
    ``bez``: Blender's default Bezier of them."""
    locs, qs = [], []
    ev = (lambda p, d, f: fcurves.evaluate_keys_bezier(rig["fcmap"], p, d, f, rig.get("keys"))) if bez else \
        (lambda p, d, f: fcurves.evaluate_user(rig["fcmap"], p, d, f, rig.get("keys"))) if user else \
        (lambda p, d, f: fcurves.evaluate(rig["fcmap"], p, d, f))
    for b in rig["chain"]:
        locs.append(ev(_path(b, "location"), [0.0, 0, 0], frames))
        if quats is not None and b in quats:
            qs.append(quats[b])
        else:
            raw, mode = _rotations(rig, b, frames, user, bez)
            qs.append(rigclip.to_quat(raw, mode))
    off = None
    if rig["root_on_object"]:
        loc = ev("location", [0.0, 0, 0], frames)
        off = loc @ np.linalg.inv(rig["object_rs"]).T
    return locs, qs, off


def infill_segments(arm: Any, rig: dict[str, Any], rng: tuple[int, int], fps: float | None = None,
                    whole: bool = False) -> list[dict[str, Any]]:
    """The windows to send for frames ``rng`` (inclusive): per window its frames, model-space rotations
    (T, B, 4), known (T, B + 1) (the root last), the root relative to its parent (T, 3, armature units)
    and the raw channel values (to write continuously). ``fps`` (the scene's) sizes the context around
    each gap to the model's (`vendor.gaps.context_frames`). ``whole``: one window, the whole range (the body
    in-fill: the server windows it, `vendor.gaps`, and fits its gate and Learn This Action on every keyed frame of
    the range). Raises ValueError when nothing is missing."""
    lo, hi = rng
    bones = rig["bones"]
    known = keys.constraints(rig["keyed"], bones, lo, hi)
    if rig["root_keys"]:
        rk = np.ones(hi - lo + 1, bool)
        for k in rig["root_keys"]:
            rk &= keys.constraints({"r": k}, ["r"], lo, hi)[:, 0]
    else:
        rk = known.all(axis=1)   # no root motion anywhere: the rest position, a key where the pose is keyed
    known = np.concatenate([known, rk[:, None]], axis=1)
    missing = ~known.all(axis=1)
    if not missing.any():
        raise ValueError(f"nothing to fill: frames {lo}..{hi} are keyed on all {len(bones)} bones"
                         f"{' and the root' if rig['root_keys'] else ''}; delete the keys where the motion "
                         "should be filled (keys typed GENERATED count as missing)")
    segs = []
    spans = [(0, missing.size - 1)] if whole else gaps.windows(missing, gaps.context_frames(fps))
    # the interpolation of the user's keys: the curve they see in a gap (LINEAR from Blender's BVH importer)
    curve = fcurves.user_interpolation(rig["fcmap"], [_path(b, rigclip.CHANNELS[m][0]) for b, m in
                                                      zip(bones, rig["modes"], strict=True)])
    for a, b in spans:
        frames = np.arange(lo + a, lo + b + 1, dtype=np.float64)
        raws, qs = [], []
        for bone in bones:
            raw, mode = _rotations(rig, bone, frames)
            raws.append(raw)
            qs.append(rigmap.to_model(rigclip.to_quat(raw, mode), rig["offsets"][bone]))
        locs, cq, off = _chain_channels(arm, rig, frames)
        root = rigclip.root_in_parent(rig["rests"], locs, cq, off) if rig["chain"] else np.zeros((frames.size, 3))
        # what Blender gives for the user's keys alone (our GENERATED keys left out): a deterministic model's
        # correction is applied to these curves (requests.infill_segments_job)
        bez = np.stack([rigmap.to_model(rigclip.to_quat(_rotations(rig, bone, frames, user=True)[0],
                                                        _rotations(rig, bone, frames[:1])[1]), rig["offsets"][bone])
                        for bone in bones], axis=1)
        locs, cq, off = _chain_channels(arm, rig, frames, user=True)
        bez_root = rigclip.root_in_parent(rig["rests"], locs, cq, off) if rig["chain"] else np.zeros((frames.size, 3))
        # Blender's default Bezier of the same keys (the model's base: its correction is applied to this, then
        # blended from the user's curve above by the gate's weight; correct.correct)
        kb = np.stack([rigmap.to_model(rigclip.to_quat(_rotations(rig, bone, frames, bez=True)[0],
                                                       _rotations(rig, bone, frames[:1])[1]), rig["offsets"][bone])
                       for bone in bones], axis=1)
        locs, cq, off = _chain_channels(arm, rig, frames, bez=True)
        kb_root = rigclip.root_in_parent(rig["rests"], locs, cq, off) if rig["chain"] else np.zeros((frames.size, 3))
        segs.append({"frames": frames, "rotations": np.stack(qs, axis=1), "known": known[a:b + 1],
                     "root": root, "raw": raws, "bezier": bez, "bezier_root": bez_root,
                     "keys_bezier": kb, "keys_bezier_root": kb_root, "curve": curve})
    return segs


def object_track(arm: Any, obj: Any, rig: dict[str, Any], frames: np.ndarray, scene: Any
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Another object's pose at ``frames`` (scene frames) as Blender evaluates it (parents, constraints,
    drivers: the scene is stepped to each frame and put back), in the frame :func:`infill_segments` sends
    the root in (`rigclip.object_in_parent`): ((T, 4) WXYZ rotations, scale removed; (T, 3) positions in
    armature units), Z-up. The armature's own world matrix is read at each frame too, so an armature moved
    by its object keeps the object where it is relative to the hand."""
    frames = np.asarray(frames, np.float64)
    mats = np.zeros((frames.size, 4, 4))
    f0, sub0 = scene.frame_current, scene.frame_subframe
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            try:
                mats[i] = np.linalg.inv(_mat(arm.matrix_world)) @ _mat(obj.matrix_world)
            except np.linalg.LinAlgError:
                raise ValueError(f"the armature {arm.name!r} has a degenerate transform (zero scale?) on frame "
                                 f"{int(f)}") from None
    finally:
        scene.frame_set(f0, subframe=sub0)
    if not np.isfinite(mats).all():
        raise ValueError(f"the object {obj.name!r} has a degenerate transform (zero scale?) on some frame")
    locs, cq, off = _chain_channels(arm, rig, frames)
    rot, pos = rigclip.object_in_parent(rig["rests"], locs, cq, mats, off)
    return matrix_to_quat(rot), pos


def write_segment(arm: Any, rig: dict[str, Any], seg: dict[str, Any], q: np.ndarray, root: np.ndarray,
                  unmapped: set[str], reduce: dict[str, float] | None = None,
                  stats: dict[str, float] | None = None) -> tuple[int, set[str]]:
    """Write one window's answer: (T, B, 4) model rotations for the unknown elements of each bone (in the
    bone's mode, continuous with the frame before), and the root (T, 3) where it came from. Returns
    (keys written, bone names written, plus "root").

    ``reduce`` (Keys = Reduced): {"max_cm", "mean_cm", "cm_per_unit"}: each filled span is written as the fewest
    keys with ALIGNED handles that keep the world joint positions within ``max_cm`` (``mean_cm`` on average) of
    the every-frame fill (`core.keyreduce`); None: a key on every filled frame. ``stats`` (a dict) is given
    "every_frame" (the keys an every-frame fill writes) and "max_cm", "sum_cm", "n_cm" (the check's figures)."""
    frames, known = seg["frames"], seg.get("known_sent", seg["known"])
    names: set[str] = set()
    final: dict[str, np.ndarray] = {}
    chans: list[keyreduce.Channel] = []
    raws: list[np.ndarray] = []
    for j, bone in enumerate(rig["bones"]):
        mode = rig["modes"][j]
        cur = np.array(seg["raw"][j], np.float64)
        todo = ~known[:, j]
        rq = rigmap.to_rig(np.asarray(q[:, j], np.float64), rig["offsets"][bone])
        if todo.any() and bone not in unmapped:
            for s, e in gaps.runs(todo):
                prev = cur[s - 1] if s > 0 else cur[s]
                cur[s:e] = rigclip.from_quat(rq[s:e], mode, prev)
            chans.append(keyreduce.Channel(_path(bone, rigclip.CHANNELS[mode][0]), bone, cur, todo, j, mode))
            names.add(bone)
        final[bone] = rigclip.to_quat(cur, mode)
        raws.append(cur)
    todo = ~known[:, -1]
    if todo.any() and rig["chain"] and (rig["root_on_bone"] or rig["root_on_object"]):
        locs, qs, off = _chain_channels(arm, rig, frames, final)
        if rig["root_on_bone"]:
            loc = rigclip.root_location(rig["rests"], locs, qs, root, off)
            chans.append(keyreduce.Channel(_path(rig["root"], "location"), rig["root"], loc, todo, -1, "location"))
        else:
            o = rigclip.object_offset_for(rig["rests"], locs, qs, root)
            loc = o @ rig["object_rs"].T
            chans.append(keyreduce.Channel("location", "Object Transforms", loc, todo, -2, "location"))
        names.add("root")
    every = sum(int(c.todo.sum()) * c.values.shape[1] for c in chans)
    written = 0
    if reduce is None:
        for c in chans:
            written += fcurves.write_channels(arm, c.path, frames[c.todo], c.values[c.todo], group=c.group,
                                              cache=rig.get("keys"), auto_handles=True)
        figures = {"max_cm": 0.0, "sum_cm": 0.0, "n_cm": 0}
    else:
        p = keyreduce.plan(rig, frames, raws, chans, float(reduce["max_cm"]), float(reduce["mean_cm"]),
                           float(reduce.get("cm_per_unit", 1.0)),
                           user=_user_channels(rig, frames, chans) if reduce.get("user_curve", True) else None)
        for c in chans:   # a gap the user's own curve holds gets no keys (our old ones there removed)
            written += keywrite.write_reduced(arm, c.path, frames[c.todo], c.keys, group=c.group,
                                             cache=rig.get("keys"))
        figures = {"max_cm": p.max_cm, "sum_cm": p.mean_cm * p.checked, "n_cm": p.checked, "kept": p.kept}
    if stats is not None:
        stats["every_frame"] = stats.get("every_frame", 0) + every
        stats["max_cm"] = max(stats.get("max_cm", 0.0), figures["max_cm"])
        stats["sum_cm"] = stats.get("sum_cm", 0.0) + figures["sum_cm"]
        stats["n_cm"] = stats.get("n_cm", 0) + figures["n_cm"]
        stats["kept"] = stats.get("kept", 0) + figures.get("kept", 0)
        stats["kept_cm"] = float(reduce["max_cm"]) if reduce is not None else 0.0
    return written, names


def _user_channels(rig: dict[str, Any], frames: np.ndarray, chans: list[keyreduce.Channel]) -> list[np.ndarray]:
    """Per written channel (T, C) its values on the user's own curve (their keys alone, `fcurves.evaluate_user`):
    what `keyreduce.plan` compares the fill with, to write no keys where the fill changed nothing."""
    out = []
    for c in chans:
        default = [0.0] * c.values.shape[1]
        if c.mode == "QUATERNION":
            default = [1.0, 0.0, 0.0, 0.0]
        elif c.mode == "AXIS_ANGLE":
            default = [0.0, 0.0, 1.0, 0.0]
        out.append(np.asarray(fcurves.evaluate_user(rig["fcmap"], c.path, default, frames, rig.get("keys")),
                              np.float64))
    return out


# --------------------------------------------------- whole-action writes and reads (walk, retarget, style)

def write_rotations_in_mode(arm: Any, bones: list[str], frames: np.ndarray, quats: np.ndarray) -> int:
    """Write (T, B, 4) WXYZ pose rotations as GENERATED keys in each bone's own rotation mode (Euler orders,
    axis-angle, quaternion), continuous from the bone's value on the frame before ``frames[0]``; the user's
    rotation mode is never changed. Returns the keys written."""
    action, slot = fcurves.assigned_action(arm)
    fcmap = fcurves.fcurve_map(action, slot) if action is not None else {}
    n = 0
    for j, b in enumerate(bones):
        pb = arm.pose.bones[b]
        mode = pb.rotation_mode
        path, _ = rigclip.CHANNELS[mode]
        default = {"QUATERNION": [1.0, 0, 0, 0], "AXIS_ANGLE": [0.0, 0, 1, 0]}.get(mode, [0.0, 0, 0])
        prev = fcurves.evaluate(fcmap, _path(b, path), default, np.array([frames[0] - 1.0]))[0]
        vals = rigclip.from_quat(np.asarray(quats[:, j], np.float64), mode, prev)
        n += fcurves.write_channels(arm, _path(b, path), frames, vals, group=b)
    return n


def write_walk(arm: Any, bones: list[str], frames: np.ndarray, quats: np.ndarray, location: np.ndarray,
               reduce: dict[str, float] | None = None, stats: dict[str, float] | None = None,
               root: str | None = None) -> int:
    """A walk (Walk Along Path, Style from Example): (T, B, 4) WXYZ pose rotations of ``bones`` in each bone's own
    rotation mode (continuous from the frame before ``frames[0]``) and the object's (T, 3) ``location``, as
    GENERATED keys. ``reduce`` (Keys = Reduced, as `write_segment`'s): the fewest keys with ALIGNED handles that
    keep the world joint positions (the rig's rest heads, ``root`` the bone the object's motion moves) within
    ``max_cm`` / ``mean_cm`` of the every-frame walk (`core.keyreduce`); None: a key on every frame. ``stats`` gets
    "every_frame", "max_cm", "sum_cm", "n_cm" as `write_segment` gives them. Returns the keys written."""
    if reduce is None:
        n = write_rotations_in_mode(arm, bones, frames, quats) + fcurves.write_location(arm, frames, location)
        if stats is not None:
            stats["every_frame"] = stats.get("every_frame", 0) + n
        return n
    action, slot = fcurves.assigned_action(arm)
    fcmap = fcurves.fcurve_map(action, slot) if action is not None else {}
    db = arm.data.bones
    idx = {b: i for i, b in enumerate(bones)}
    T = frames.size
    todo = np.ones(T, bool)
    chans: list[keyreduce.Channel] = []
    raws, modes = [], []
    for j, b in enumerate(bones):
        mode = arm.pose.bones[b].rotation_mode
        path, _ = rigclip.CHANNELS[mode]
        default = {"QUATERNION": [1.0, 0, 0, 0], "AXIS_ANGLE": [0.0, 0, 1, 0]}.get(mode, [0.0, 0, 0])
        prev = fcurves.evaluate(fcmap, _path(b, path), default, np.array([frames[0] - 1.0]))[0]
        vals = rigclip.from_quat(np.asarray(quats[:, j], np.float64), mode, prev)
        chans.append(keyreduce.Channel(_path(b, path), b, vals, todo, j, mode))
        raws.append(vals)
        modes.append(mode)
    chans.append(keyreduce.Channel("location", "Object Transforms", np.asarray(location, np.float64), todo, -2,
                                   "location"))
    rig = {"bones": list(bones), "modes": modes,
           "heads": np.array([tuple(db[b].head_local) for b in bones], np.float64).reshape(-1, 3),
           "up": [_keyed_ancestor(db[b], idx) for b in bones],
           "offsets": {b: rigmap.rest_offset(np.array(tuple(db[b].matrix_local.to_quaternion()), np.float64))
                       for b in bones},
           "root": root if root in idx else bones[0], "object_rs": _mat(arm.matrix_world)[:3, :3]}
    p = keyreduce.plan(rig, frames, raws, chans, float(reduce["max_cm"]), float(reduce["mean_cm"]),
                       float(reduce.get("cm_per_unit", 1.0)))
    n = 0
    for c in chans:
        n += keywrite.write_reduced(arm, c.path, frames, c.keys, group=c.group)
    if stats is not None:
        stats["every_frame"] = stats.get("every_frame", 0) + p.every_frame
        stats["max_cm"] = max(stats.get("max_cm", 0.0), p.max_cm)
        stats["sum_cm"] = stats.get("sum_cm", 0.0) + p.mean_cm * p.checked
        stats["n_cm"] = stats.get("n_cm", 0) + p.checked
    return n


def keyed_mode(arm: Any, fcmap: dict, bone: str) -> str:
    """The rotation mode ``bone``'s keys in this action are in: the bone's own mode when the action keys
    its channel, else the channel the action has (an example clip keyed in another mode)."""
    mode = arm.pose.bones[bone].rotation_mode
    have = {p for p, _ in fcmap}
    if _path(bone, rigclip.CHANNELS[mode][0]) in have:
        return str(mode)
    if _path(bone, "rotation_quaternion") in have:
        return "QUATERNION"
    if _path(bone, "rotation_euler") in have:
        return str(mode) if mode in rigclip.EULER_ORDERS else "XYZ"
    if _path(bone, "rotation_axis_angle") in have:
        return "AXIS_ANGLE"
    return str(mode)


def read_pose(arm: Any, action: Any, slot: Any, bones: list[str], frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, B, 4) WXYZ pose rotations of ``bones`` (parents first, the root first) in whatever rotation mode
    each is keyed, and (T, 3) the root bone's translation from its rest head in armature space plus the
    object's keyed location (root motion on the hips bone, on the object, or both), evaluated from the
    f-curves at ``frames``."""
    fcmap = fcurves.fcurve_map(action, slot)
    rig: dict[str, Any] = {"fcmap": fcmap, "bones": bones, "modes": [keyed_mode(arm, fcmap, b) for b in bones]}
    q = np.stack([rigclip.to_quat(*_rotations(rig, b, frames)) for b in bones], axis=1)
    # the bone that carries the motion: the first whose location keys vary (Bandai's hips under a static
    # root joint), else the root; its head's displacement moves the whole skeleton
    root = next((b for b in bones if _varies(fcmap, _path(b, "location"), {})), bones[0])
    db = arm.data.bones
    chain: list[str] = []
    bone = db[root]
    while bone is not None:
        chain.insert(0, bone.name)
        bone = bone.parent
    rig.update(chain=chain, root_on_object=False)
    rests = [_mat(db[b].matrix_local) for b in chain]
    qs = {b: q[:, bones.index(b)] for b in chain if b in bones}
    locs, cq, _ = _chain_channels(arm, rig, frames, qs)
    ms = rigclip.chain_pose(rests, locs, cq)
    # the root joint's position that puts the moving bone's head where it is when the skeleton is rebuilt
    # from its rest offsets and the posed rotations (as the server does): h - sum g_parent (rest offset)
    pos = ms[-1][:, :3, 3].copy()
    for i in range(1, len(chain)):
        g = ms[i - 1][:, :3, :3] @ rests[i - 1][:3, :3].T
        pos -= g @ (rests[i][:3, 3] - rests[i - 1][:3, 3])
    head = pos - rests[0][:3, 3]
    obj = fcurves.evaluate(fcmap, "location", [0.0, 0, 0], frames)
    mw = _mat(arm.matrix_world)[:3, :3]
    return q, head @ mw.T + obj
