"""Server jobs built from plain data (no bpy): what the operators send, run on the worker thread.

Each ``*_job`` function returns ``job(client) -> (content, arrays)``; operators build them in the main
thread from what they read off the rig, and the worker runs them. Bones are mapped to the model's joints
here, with the server's ``models`` listing (presets, then names: `rigmap.auto_map`), so the rig needs
no renaming; rotations arrive already carried into the model's rest frames (`rigmap.to_model`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor.axes import y_up_to_z_up, z_up_to_y_up
from ..vendor.gaps import MODEL_FPS, whole_frames
from ..vendor.quat_np import quat_apply, quat_continuity
from . import jobs, keys, rigmap, rigplant
from .correct import correct, table_blend
from .messages import describe_error  # noqa: F401  (the operators' and connect's one error line)

PROTOCOL_VERSION = 2   # what the bundled protocol speaks (vendor/protocol.py; issue 18 made it 2)
Job = Callable[[Any], tuple[dict[str, Any], dict[str, np.ndarray]]]


def plain(msg: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A reply as plain data (arrays copied out of the receive buffers)."""
    return dict(msg.content), {k: np.array(v) for k, v in msg.arrays.items()}


def live() -> dict[str, Any]:
    """The keywords that tie a `Client` method to the running job (`jobs.current`): the server's progress
    goes to the job's Control, and the UI's cancel (`jobs.Worker.cancel`) cancels the request on the server."""
    ctl = jobs.current()
    return {} if ctl is None else {"progress": ctl.set_progress, "cancel_when": ctl.cancelled.is_set}


def find_model(client: Any, task: str, name: str | None, object_cond: bool = False) -> dict[str, Any]:
    """The ``models`` entry serving ``task`` (named ``name``; ``use:USE``: the one the server lists as the default
    for that use, e.g. ``use:infill``; else the first; with ``object_cond`` and no name, the first trained with the
    hand's object); raises ValueError."""
    served = [m for m in client.models() if task in m.get("tasks", ()) and m.get("available", True)]
    if name is not None and name.startswith("use:"):
        name = next((m["name"] for m in served if name[4:] in m.get("default_for", ())), name[4:])
    pick = next((m for m in served if (name is None and (not object_cond or m.get("object_cond")))
                 or m["name"] == name), None)
    if pick is None and name is None and object_cond:
        have = ", ".join(m["name"] for m in served) or "none"
        raise ValueError(f"the server serves no hands model trained with an object (object_cond; serving {task}: "
                         f"{have}): clear the Object field to fill without it, or serve one (motioncore serve "
                         "--model PATH of a checkpoint trained with --object-cond)")
    if pick is None:
        have = ", ".join(m["name"] for m in served) or "none"
        raise ValueError(f"the server has no model {name or ''} for {task} (serving it: {have})".replace("  ", " "))
    return pick


def model_side(info: dict[str, Any]) -> str:
    """The hand a hands model was trained on: its ``hand`` ("l" / "r") where it names one (``infill-hands``
    learns from both hands, the left mirrored onto the right), else from its ``training_data``: "l" for
    manipnet-left, else "r"."""
    if info.get("hand") in ("l", "r"):
        return str(info["hand"])
    return "l" if "left" in str(info.get("training_data") or "").lower() else "r"


def object_to_model(rotations: np.ndarray, positions: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """An object's pose as `rigio.object_track` reads it ((T, 4) WXYZ rotations and (T, 3) positions in
    the frame of the root's translation, Blender's Z-up armature axes and units) -> the model's Y-up axes and
    units: positions (x, y, z) = (X, Z, -Y) * ``scale``, rotations A^-1 R A with A the Y-up -> Z-up turn,
    so the object's own axes convert like the world's (its local +Z up in Blender is +Y up in the model, as
    Blender's BVH and FBX importers convert Y-up data)."""
    a = rigmap.Y_UP_TO_Z_UP
    q = rigmap.quat_mul(rigmap.quat_mul(rigmap.quat_conj(a), np.asarray(rotations, np.float64)), a)
    return q, z_up_to_y_up(positions) * float(scale)


def check_object_model(info: dict[str, Any], names: Sequence[str], bones: Sequence[str], root_bone: str | None,
                       object_name: str) -> None:
    """Refuse (ValueError, one line) an object for a model trained without one, or on a rig whose root
    translation is not the model's root joint (the wrist): the object is read relative to that bone."""
    if not info.get("object_cond"):
        raise ValueError(f"model {info.get('name')!r} was trained without an object and cannot use "
                         f"{object_name!r}: clear the Object field, or pick a hands model trained with "
                         "--object-cond (object_cond in the server's models)")
    wrist = (info.get("skeleton") or {}).get("names", ["?"])[0]
    got = names[list(bones).index(root_bone)] if root_bone is not None and root_bone in bones else None
    if got != wrist:
        raise ValueError(f"the object is read relative to the hand's root bone, and this rig's ({root_bone!r}) "
                         f"plays {got or 'no joint'!r}, not the model's {wrist!r}: use a hand rig whose root bone "
                         "is the wrist (as a ManipNet BVH import), or clear the Object field")


def joint_names(bones: Sequence[str], model_joints: Sequence[str], rig_preset: str | None,
                overrides: Mapping[str, str] | None = None, parents: Sequence[int] | None = None,
                heads: np.ndarray | None = None, model_skeleton: Mapping[str, Any] | None = None) -> list[str]:
    """One distinct name per bone for the request's ``joints``: the model joint the bone maps to, else
    the bone's own name (prefixed ``rig:`` if that would collide with a mapped model joint). With the rig's
    ``parents`` and ``heads`` and the model's skeleton (parents, offsets) the bodies map by topology first."""
    sk = model_skeleton or {}
    rmap = rigmap.auto_map(list(bones), list(model_joints), rig_preset=rig_preset, overrides=overrides,
                           rig_parents=parents, rig_heads=heads, model_parents=sk.get("parents"),
                           model_offsets=sk.get("offsets"))
    of_bone = {b: j for j, b in rmap.mapping.items()}
    taken = set(of_bone.values())
    return [of_bone.get(b) or (f"rig:{b}" if b in taken else b) for b in bones]


def rig_units(info: dict[str, Any], names: Sequence[str], heads: np.ndarray, parents: Sequence[int]) -> float:
    """Model units per rig (armature) unit from the bones mapped to model joints whose parents are mapped
    too (`rigclip.units_scale`: the nearest power of ten, so a rig in the model's units is exact)."""
    from .rigclip import units_scale

    sk = info["skeleton"]
    col = {n: i for i, n in enumerate(sk["names"])}
    off = np.asarray(sk.get("offsets") or np.zeros((len(col), 3)), np.float64)
    ml, rl = [], []
    for b, (n, p) in enumerate(zip(names, parents, strict=True)):
        if p >= 0 and n in col and names[p] in col and sk["parents"][col[n]] == col[names[p]]:
            ml.append(np.linalg.norm(off[col[n]]))
            rl.append(np.linalg.norm(np.asarray(heads[b]) - np.asarray(heads[p])))
    return units_scale(np.array(ml), np.array(rl))


def infill_segments_job(segments: Sequence[dict[str, np.ndarray]], bones: Sequence[str], heads: np.ndarray,
                        parents: Sequence[int], model: str | None, rig_preset: str | None = None, *,
                        fps: float | None = None, temperature: float = 0.0, samples: int = 1,
                        order: str = "bisection", seed: int = 0, overrides: Mapping[str, str] | None = None,
                        up: Sequence[int] | None = None, root_parent: int = -1, object_name: str | None = None,
                        root_bone: str | None = None, side: str | None = None, adapt: float | None = None,
                        plant_feet: bool | None = None, curve: str | None = None, rate: str | None = None,
                        adapt_steps: int | None = None) -> Job:
    """In-fill the windows of a rig's action, one request each. A segment: ``rotations`` (T, B, 4) the
    bones' pose rotations in model axes with the rig's rest as identity (`rigmap.to_model`), ``known``
    (T, B + 1) (column B: the root translation), ``root`` (T, 3) the root bone's head relative to its parent
    in armature units and axes (`rigclip.root_in_parent`), and with ``object_name`` (hands)
    ``object_rotations`` (T, 4) / ``object_positions`` (T, 3), the object in the same frame
    (`rigio.object_track`), sent in the model's axes and units (`object_to_model`) and in the frame the root
    translation is sent in, to a model trained with the object (``model`` None: the first such one), else
    refused (`check_object_model`; ``root_bone``: the bone whose translation is ``root``). ``heads`` (B, 3)
    rest heads and ``parents`` give the rig's units (`rig_units`) and rest pose; ``up`` (B,) each bone's
    nearest keyed ancestor (default ``parents``), ``root_parent`` the root bone's. The pose goes to the
    model's skeleton by world-space rest alignment (`vendor.rest`, the library's retarget/rest.py) and the answer comes back the same way.
    ``side`` ("l" / "r", hands): the rig's hand; a model trained on the other (`model_side`) gets the clip
    mirrored (the request's ``mirror``): the rig is aligned to the mirror image of the model's skeleton,
    which the server mirrors onto the model's and back. ``fps``: the scene's rate (the server resamples to
    the model's). ``plant_feet`` (the body in-fill): plant the feet in contact: the server's gate judges planting
    on test gaps cut from the keys (``"judge"``), and where it keeps it the rig's own feet are planted after the
    correction, with the rig's own bone lengths (`rigplant`); None: the server's default (it plants its answer).
    ``curve`` ("bezier", "linear", "constant"): the interpolation of the user's keys (`fcurves.user_interpolation`):
    the server's gate weighs the fill against that curve too, and the answer is blended from it (addon/core/correct.py).
    ``adapt`` (seconds, the time limit) and ``adapt_steps`` (the budget in steps): Learn This Action instead of
    a fill. ``rate``: "best" (the body in-fill) fills at the common rate test gaps cut from the keys fill closer than
    ``fps`` (the reply's ``rate.filled_at``); "scene" or None at ``fps``.
    Returns ({"segments": [reply content, ...], "scale": s, "rest_same": bool},
    {"rotations.i": (S, T, B, 4) the bones' rotations as sent in, "root.i": (S, T, 3) in the rig's units,
    Z-up, and for a model that fills whole frames "known.i" (T, B + 1), the mask used (`whole_frames`)})."""
    from ..vendor import rest

    ups = list(parents if up is None else up)

    def job(c: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        info = find_model(c, "infill", model, object_cond=object_name is not None)
        sk = info["skeleton"]
        mnames = list(sk["names"])
        names = joint_names(bones, mnames, rig_preset, overrides, parents, heads, sk)
        if object_name is not None:
            check_object_model(info, names, bones, root_bone, object_name)
        mirror = side is not None and side != model_side(info)
        scale = rig_units(info, names, heads, parents)
        col = {n: b for b, n in enumerate(names)}
        cols = [col.get(n, -1) for n in mnames]
        sample = [np.asarray(g["rotations"], np.float64)[np.asarray(g["known"], bool).all(1)] for g in segments]
        mdl = mirrored_skeleton(mnames, sk["parents"], sk.get("offsets"), info.get("convention"), mirror)
        al = rest.alignment(mdl, cols, z_up_to_y_up(heads), ups, np.concatenate(sample) if sample else None)
        paths = _joint_paths(al, ups)
        rj = int(info.get("root_joint") or 0)
        mp = al["parents"][rj]
        settings = {"model": info["name"], "joints": mnames, "temperature": float(temperature),
                    "samples": int(samples), "order": order, "seed": int(seed), "fps": float(fps) if fps else None,
                    "mirror": True if mirror else None,
                    "plant_feet": None if plant_feet is None else "judge" if plant_feet else False,
                    "curve": curve or None, "rate": rate or None}
        unmapped = [b for i, b in enumerate(bones) if i not in set(cols)]
        replies: list[dict[str, Any]] = []
        arrays: dict[str, np.ndarray] = {}
        whole = bool(info.get("group_frames"))
        for i, seg in enumerate(segments):
            loc = np.asarray(seg["rotations"], np.float64)
            q, g = rest.rig_to_model(loc, al)
            d = rest.rig_globals(loc, ups)
            rel = z_up_to_y_up(seg["root"])
            if root_parent >= 0:
                rel = quat_apply(d[:, root_parent], rel)
            if mp >= 0:
                rel = quat_apply(rigmap.quat_conj(g[:, mp]), rel)
            obj = None
            if object_name is not None:   # the object in the frame the root goes in: the same turns, the same units
                oq, op = object_to_model(seg["object_rotations"], seg["object_positions"], 1.0)
                if root_parent >= 0:
                    oq, op = rigmap.quat_mul(d[:, root_parent], oq), quat_apply(d[:, root_parent], op)
                if mp >= 0:
                    oq = rigmap.quat_mul(rigmap.quat_conj(g[:, mp]), oq)
                    op = quat_apply(rigmap.quat_conj(g[:, mp]), op)
                obj = (oq / np.linalg.norm(oq, axis=-1, keepdims=True), op * scale)
            known = np.asarray(seg["known"], bool)
            rc: dict[str, Any] = {}
            for attempt in (0, 1):
                if whole:
                    known = whole_frames(known)
                    arrays[f"known.{i}"] = known
                if known.all():   # only partial keys were missing: what the curves give stays
                    rc, ra = {}, None
                    break
                km = np.ones((len(known), len(mnames) + 1), bool)
                for j, bs in paths.items():
                    km[:, j] = known[:, bs].all(axis=1)
                km[:, -1] = known[:, -1]
                if whole:   # whole frames: joints the rig lacks are filled with the frame (held at rest elsewhere)
                    km[:, [j for j in range(len(mnames)) if j not in paths]] = km.all(axis=1, keepdims=True)
                try:
                    if adapt:   # Learn This Action: the server fine-tunes on these keys and caches the copy
                        rc, ra = plain(c.adapt(q, rel * scale, km, model=info["name"], joints=mnames,
                                               fps=settings["fps"], seconds=float(adapt), steps=adapt_steps,
                                               **live()))
                        return {"adapted": rc.get("adapted"), "cached": rc.get("cached"), "model": info["name"]}, {}
                    rc, ra = plain(c.infill_rotations(q, rel * scale, km, object_track=obj, **settings, **live()))
                    break
                except Exception as e:   # a whole-frames model (the listing may not say so): whole frames
                    if whole or attempt or getattr(e, "code", None) != "whole_frames":
                        raise
                    whole = True
            replies.append({**rc, "unmapped": unmapped, "gate": scene_frames(rc.get("gate"), (rc.get("rate") or {})
                                                                   .get("filled_at") or fps, info.get("fps"))})
            if ra is None:
                arrays[f"rotations.{i}"] = loc[None].astype(np.float32)
                arrays[f"root.{i}"] = np.asarray(seg["root"], np.float64)[None]
                continue

            def to_rig(qs: np.ndarray, root: np.ndarray, loc: np.ndarray = loc, known: np.ndarray = known
                       ) -> tuple[np.ndarray, np.ndarray]:
                out = rest.model_to_rig(qs, loc, ~known[:, :-1], al)
                r = np.asarray(root, np.float64) / scale
                if mp >= 0:
                    r = quat_apply(rest.model_globals(qs, al["parents"])[:, mp], r)
                if root_parent >= 0:
                    r = quat_apply(rigmap.quat_conj(rest.rig_globals(out, ups)[:, root_parent]), r)
                return out, y_up_to_z_up(r)

            rots, roots = [], []
            rate_used = (rc.get("rate") or {}).get("filled_at") or fps   # the rate the action was filled at
            base = None
            if "base_rotations" in ra and "bezier" in seg:   # a deterministic model: its correction over its base
                base = to_rig(np.asarray(ra["base_rotations"][0], np.float64), ra["base_root"][0])
            feet = rigplant.rig_feet(rc, known, names, info, bones, ups, root_bone, root_parent, rate_used) \
                if base is not None and plant_feet is not False else None
            blend = table_blend(len(known), rc.get("gaps")) \
                if base is not None else None
            for s in range(ra["rotations"].shape[0]):
                out, r = to_rig(np.asarray(ra["rotations"][s], np.float64), ra["root"][s])
                if base is not None:
                    out, r = correct(out, r, base, seg, known, blend)
                if feet is not None:   # the server planted its answer: the rig's own feet planted again
                    rb, legs, kf, todo = feet
                    out, r = rigplant.plant_rig(out, r, heads, ups, rb, legs, kf, todo,
                                                rate_used or float(info.get("fps") or MODEL_FPS))
                rots.append(out)
                roots.append(r)
            arrays[f"rotations.{i}"] = np.stack(rots)
            arrays[f"root.{i}"] = np.stack(roots)
        return {"segments": replies, "scale": scale, "model": info["name"], "rest_same": al["rest_same"]}, arrays
    return job


def scene_frames(fits: Sequence[dict[str, Any]] | None, fps: float | None, model_fps: float | None
                 ) -> list[dict[str, Any]] | None:
    """The gate's fits with each one's gap length in the action's own frames (``frames``) where the server gave
    it in the model's only (a 24 fps action filled through the model's 30: a gap of 15 frames, not "20")."""
    if not fits:
        return None if fits is None else []
    k = float(fps) / float(model_fps) if fps and model_fps else 1.0
    return [f if "frames" in f or "length" not in f else {**f, "frames": max(1, int(round(f["length"] * k)))}
            for f in fits]


def mirrored_skeleton(names: Sequence[str], parents: Sequence[int], offsets: Any, convention: Any,
                      mirror: bool) -> dict[str, Any]:
    """The model skeleton `rest.alignment` aligns a rig to: the listing's names, parents, offsets (zeros
    when not listed) and ``convention``; with ``mirror`` its mirror image across x (offsets x -> -x, rotations
    (w, x, y, z) -> (w, x, -y, -z), as ``motioncore.tasks.infill.mirror_x``), the skeleton a left hand is
    posed on before the server mirrors it onto a right-hand model."""
    off = np.zeros((len(names), 3)) if offsets is None or not len(offsets) else \
        np.asarray(offsets, np.float64).reshape(len(names), 3)
    conv = None if convention is None else np.asarray(convention, np.float64)
    if mirror:
        off = off * np.array([-1.0, 1.0, 1.0])
        conv = None if conv is None else conv * np.array([1.0, 1.0, -1.0, -1.0])
    return {"names": list(names), "parents": list(parents), "offsets": off, "convention": conv}


def _joint_paths(al: dict[str, Any], up: Sequence[int]) -> dict[int, list[int]]:
    """Per mapped model joint, the rig bones its local rotation depends on: its frame bone (`vendor.rest`, the library's retarget/rest.py) and the
    bones above it up to (not including) the frame bone of its nearest mapped model ancestor."""
    cols, parents, frames = al["cols"], al["parents"], al["frames"]
    out: dict[int, list[int]] = {}
    for j, c in enumerate(cols):
        if c < 0:
            continue
        p = parents[j]
        while p >= 0 and cols[p] < 0:
            p = parents[p]
        stop = int(frames[p]) if p >= 0 else -1
        bs, b = [], int(frames[j])
        while b >= 0 and b != stop:
            bs.append(b)
            b = up[b]
        out[j] = bs
    return out


def style_job(points: np.ndarray, rotations: np.ndarray, bones: Sequence[str], location: np.ndarray, fps: float,
              model: str | None, rig_preset: str | None = None, offsets: Mapping[str, np.ndarray] | None = None,
              gait: str | None = None, overrides: Mapping[str, str] | None = None, speed: float = 0.0,
              until: tuple[int, int, float] | None = None, parents: Sequence[int] | None = None,
              heads: np.ndarray | None = None) -> Job:
    """Style from example: the example action's bone rotations (T, B, 4) and object locations (T, 3,
    Blender metres) at ``fps``, and the path ``points`` (N, 2) in metres. With the rig's ``parents`` and rest
    ``heads`` the bones map and align as the In-fill's (`keys.to_model_joints`, `align`)."""
    rot = np.asarray(rotations, np.float64)

    def job(c: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        info = find_model(c, "style.adapt", model)
        sk = info["skeleton"]
        ex, names = keys.to_model_joints(rot, bones, sk["names"], rig_preset, offsets, overrides, parents, heads,
                                         {"parents": sk.get("parents"), "offsets": sk.get("offsets"),
                                          "convention": info.get("convention")} if sk.get("parents") else None)
        root = keys.root_from_location(location, float(info.get("units_per_metre") or 100.0))
        frames = None if until is None else range_frames(until[0], until[1], until[2], float(info["fps"]))
        return plain(c.style_adapt(points, rotations=ex, root=root, joints=names, fps=float(fps), root_space="ground",
                                   gait=gait or None, frames=frames, model=info["name"],
                                   speed=np.full(len(points), speed) if speed > 0 else None, **live()))
    return job


def rig_skeleton(names: Sequence[str], parents: Sequence[int], heads: np.ndarray) -> dict[str, Any]:
    """A wire skeleton (docs/protocol.md) of a rig in the models' convention: joints at the bones' rest
    heads (``heads`` (J, 3) in armature space, Z-up), offsets from the parent's head in Y-up axes."""
    h = z_up_to_y_up(heads)
    off = np.array([h[j] - h[p] if p >= 0 else h[j] for j, p in enumerate(parents)])
    return {"joints": list(names), "parents": [int(p) for p in parents], "offsets": off.round(9).tolist()}


def retarget_job(pose: np.ndarray, location: np.ndarray, source: dict[str, Any], target: dict[str, Any],
                 src_offsets: Sequence[np.ndarray | None]) -> Job:
    """Retarget: the source rig's pose rotations (T, J, 4) (carried out of its bones' rest frames with
    ``src_offsets``) and object locations (T, 3, Z-up) onto ``target`` (both from `rig_skeleton`). The
    reply's ``root`` is the target root joint's position (Y-up); see `retarget_to_rig`."""
    q = np.stack([rigmap.to_model(pose[:, j], o) for j, o in enumerate(src_offsets)], axis=1)
    root = z_up_to_y_up(location) + np.asarray(source["offsets"][0], np.float64)
    return lambda c: plain(c.retarget(q, root, source, target, **live()))


def retarget_to_rig(arrays: Mapping[str, np.ndarray], target: dict[str, Any],
                    tgt_offsets: Sequence[np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    """((T, J, 4) pose rotations for the target's bones, (T, 3) object locations, Z-up) from a reply.

    The motion's translation sits on one joint (the hips, under a static root joint on Bandai-like
    skeletons): the first joint whose reply ``translations`` leave its rest offset. The object moves
    so that joint's world position follows the reply: location = its world position minus where the rig's
    rest offsets, posed by the reply's rotations, put it."""
    rot = np.asarray(arrays["rotations"], np.float64)
    pose = np.stack([rigmap.to_rig(rot[:, j], o) for j, o in enumerate(tgt_offsets)], axis=1)
    parents = [int(p) for p in target["parents"]]
    off = np.asarray(target["offsets"], np.float64)
    trans = np.asarray(arrays.get("translations", np.broadcast_to(off, rot.shape[:2] + (3,))), np.float64)
    trans = trans.copy()
    trans[:, 0] = np.asarray(arrays["root"], np.float64)
    moving = np.abs(trans - off[None]).max(axis=(0, 2)) > 1e-6
    r = int(np.argmax(moving)) if moving.any() else 0
    chain = [r]
    while parents[chain[-1]] >= 0:
        chain.append(parents[chain[-1]])
    g = np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (rot.shape[0], 1))
    world = np.zeros((rot.shape[0], 3))
    posed_rest = np.zeros((rot.shape[0], 3))   # where the rig puts the joint from its rest offsets, posed
    for j in reversed(chain):   # forward kinematics down to the moving joint
        world = world + quat_apply(g, trans[:, j])
        posed_rest = posed_rest + quat_apply(g, np.broadcast_to(off[j], trans[:, j].shape))
        g = rigmap.quat_mul(g, rot[:, j])
    # the object's location is the difference: a rotated parent above the moving joint (Bandai's root joint)
    # swings the rest offset too, so the plain rest position would leave a constant offset (82 cm on a clip)
    return quat_continuity(pose), y_up_to_z_up(world - posed_rest)


def spine_direction(names: Sequence[str], parents: Sequence[int]) -> tuple[int, int] | None:
    """(top ancestor, head) joint indices of the chain to the first joint named like a head; None without one."""
    low = [rigmap.normalise_name(n) for n in names]
    head = next((j for j, n in enumerate(low) if "head" in n and "end" not in n and "top" not in n), None)
    if head is None:
        return None
    top = head
    while parents[top] >= 0:
        top = parents[top]
    return top, head


def skeleton_kind_mismatch(info: dict[str, Any], mapping: Mapping[str, str], rig_names: Sequence[str],
                           rig_heads: np.ndarray, limit_deg: float = 45.0) -> str | None:
    """A sentence when the rig is a skeleton of another kind than the model's (a human rig for the dog,
    a dog for a biped model): the rig's root-to-head direction as posed (``rig_heads``: the bones' posed
    heads in armature space, Z-up; rest poses say little: Bandai's BVH rest lays the spine along X) is
    upright (within ``limit_deg`` of +Z) or not, against the model's kind (on four legs: it serves
    ``mann.rollout`` or has a tail). None when they agree or the model has no head (hands)."""
    sk = info.get("skeleton") or {}
    names, parents = list(sk.get("names") or []), [int(p) for p in sk.get("parents") or []]
    ends = spine_direction(names, parents) if names and len(parents) == len(names) else None
    if ends is None:
        return None
    _, head = ends
    chain: list[int] = []
    j = head         # the head's ancestors that the rig maps, root-most first
    while j >= 0:
        if names[j] in mapping:
            chain.insert(0, j)
        j = parents[j]
    if len(chain) < 2 or chain[-1] != head:
        return None
    idx = {b: i for i, b in enumerate(rig_names)}
    base = chain[1] if len(chain) > 2 and parents[chain[0]] < 0 else chain[0]   # not a root on the floor
    rh = np.asarray(rig_heads, np.float64)
    v = rh[idx[mapping[names[head]]]] - rh[idx[mapping[names[base]]]]
    n = float(np.linalg.norm(v))
    if n < 1e-9:
        return None
    up = float(np.degrees(np.arccos(np.clip(v[2] / n, -1.0, 1.0)))) <= limit_deg
    four = "mann.rollout" in (info.get("tasks") or ()) or any("tail" in rigmap.normalise_name(x) for x in names)
    if up != four:
        return None
    kind = "a skeleton on four legs" if four else "an upright skeleton"
    rig = "upright" if up else "not upright (on four legs or lying)"
    return (f"this rig is a skeleton of another kind: {info.get('name', 'the model')} is {kind}, and this rig as "
            f"posed is {rig} ({mapping[names[base]]} to {mapping[names[head]]}); {len(mapping)} of {len(names)} "
            "joints matched by name only; the bone map was not changed. Pick the model made for this rig in Map For")


def mapping_job(bones: Sequence[str], task: str, model: str | None, rig_preset: str | None,
                overrides: Mapping[str, str] | None = None, heads: np.ndarray | None = None,
                parents: Sequence[int] | None = None, rest_heads: np.ndarray | None = None
                ) -> Callable[[Any], dict[str, Any]]:
    """The rows of the armature's bone map for the model serving ``task``: ``{"model", "rows": [(model
    joint, rig bone or "")]}``, the stored choices first, then the bodies by topology (with the rig's
    ``parents`` and ``rest_heads``, as the In-fill maps them), then presets and names. With the bones' posed
    ``heads`` (armature space) a rig of another kind (`skeleton_kind_mismatch`) gives ``{"model",
    "wrong_kind": sentence}`` instead."""
    def job(c: Any) -> dict[str, Any]:
        info = find_model(c, task, model)
        joints = list(info["skeleton"]["names"])
        sk = info["skeleton"]
        rmap = rigmap.auto_map(list(bones), joints, rig_preset=rig_preset, overrides=overrides, rig_parents=parents,
                               rig_heads=rest_heads, model_parents=sk.get("parents"), model_offsets=sk.get("offsets"))
        if heads is not None:
            wrong = skeleton_kind_mismatch(info, rmap.mapping, bones, heads)
            if wrong:
                return {"model": info["name"], "wrong_kind": wrong}
        return {"model": info["name"], "rows": [(j, rmap.mapping.get(j, "")) for j in joints]}
    return job


def range_frames(start: int, end: int, scene_fps: float, model_fps: float) -> int:
    """Model frames that cover scene frames ``start``..``end`` (the walk then ends on ``end``)."""
    if end <= start:
        raise ValueError(f"the current frame {start} is at or past the end of the range ({end}): nothing to walk")
    return int(round((end - start) / scene_fps * model_fps)) + 1


def walk_job(task: str, points: np.ndarray, model: str | None, gait: str | None = None, speed: float = 0.0,
             until: tuple[int, int, float] | None = None) -> Job:
    """Walk along ``points`` (N, 2) metres with the path controller serving ``task``: ``gait`` (name),
    ``speed`` (m/s; 0: the gait's default), ``until`` = (start frame, end frame, scene fps) to walk exactly
    to the end of the range (else the path's own length plus a second to settle)."""
    def job(c: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        name, frames = model or None, None
        if until is not None:
            info = find_model(c, task, model)
            name, frames = info["name"], range_frames(until[0], until[1], until[2], float(info["fps"]))
        return plain(c.walk(task, points, gait=gait or None, speed=np.full(len(points), speed) if speed > 0 else None,
                            frames=frames, model=name, **live()))
    return job
