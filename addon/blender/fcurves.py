"""Version-aware f-curve access and bulk key writing: the only add-on module that touches actions.

Blender 4.4 introduced slotted actions; 5.0 removed ``Action.fcurves``. On 4.4+ f-curves live in the
channelbag of (layer, keyframe strip, slot); on 4.2/4.3 they are ``action.fcurves`` with
``new(path, index=i, action_group=group)``. Keys are written in bulk (``keyframe_points.add`` +
``foreach_set("co")`` + ``update()``), never with a ``keyframe_insert`` loop. ``bpy`` is imported
lazily so this module imports without Blender.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..core.keys import ChannelMerge, merge_channel

SLOTTED_ACTIONS = (4, 4, 0)
GENERATED = "GENERATED"


def blender_version() -> tuple[int, int, int]:
    import bpy
    return tuple(bpy.app.version)  # type: ignore[return-value]


def channelbag(action: Any, slot: Any, *, ensure: bool = True) -> Any:
    """The channelbag holding ``slot``'s f-curves (4.4+), creating layer, strip and bag if ``ensure``."""
    try:  # bpy_extras helper (4.4+); present in 5.0
        from bpy_extras import anim_utils
        helper = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    except ImportError:
        helper = None
    if helper is not None and ensure:
        return helper(action, slot)
    if not action.layers:
        if not ensure:
            return None
        action.layers.new("Layer")
    layer = action.layers[0]
    if not layer.strips:
        if not ensure:
            return None
        layer.strips.new(type="KEYFRAME")
    strip = layer.strips[0]
    return strip.channelbag(slot, ensure=ensure)


def fcurve_collection(action: Any, slot: Any = None, *, ensure: bool = True) -> Any:
    """The collection to find/create f-curves in: the slot's channelbag fcurves (4.4+) or action.fcurves."""
    if blender_version() >= SLOTTED_ACTIONS:
        if slot is None:
            raise ValueError("Blender 4.4+ needs the action slot to find f-curves (got slot=None)")
        bag = channelbag(action, slot, ensure=ensure)
        return None if bag is None else bag.fcurves
    return action.fcurves


def ensure_fcurves(action: Any, slot: Any, data_paths_and_indices: Iterable[tuple[str, int]],
                   group: str = "") -> list[Any]:
    """One f-curve per (data_path, index), found or created (in ``group``), in the given order."""
    slotted = blender_version() >= SLOTTED_ACTIONS
    fcurves = fcurve_collection(action, slot, ensure=True)
    out = []
    for path, index in data_paths_and_indices:
        fc = fcurves.find(path, index=index)
        if fc is None:
            if slotted:
                fc = fcurves.new(path, index=index, group_name=group) if group else fcurves.new(path, index=index)
            else:
                fc = fcurves.new(path, index=index, action_group=group)
        out.append(fc)
    return out


def read_keys(fcurve: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames, values, is_generated) of an f-curve's keys, read in bulk."""
    kp = fcurve.keyframe_points
    n = len(kp)
    co = np.empty(2 * n, np.float32)
    kp.foreach_get("co", co)
    if not n:
        return co[0::2].astype(np.float64), co[1::2].astype(np.float64), np.zeros(0, bool)
    try:  # enum as its integer value, in bulk (works in 4.2 and 5.0)
        types = np.empty(n, np.int32)
        kp.foreach_get("type", types)
        generated = types == _enum_value(kp, GENERATED)
    except (TypeError, RuntimeError, AttributeError, KeyError):
        generated = np.array([k.type == GENERATED for k in kp], bool)
    return co[0::2].astype(np.float64), co[1::2].astype(np.float64), generated


INSERT_MAX = 256   # new keys placed one by one (in order) up to this many; more are appended in bulk


def write_keys(fcurve: Any, frames: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
               key_type: str = GENERATED, old: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
               ) -> ChannelMerge:
    """Merge predicted ``values`` at ``frames`` into ``fcurve`` by the rule of :mod:`.keys` (the user's
    keys inside the range kept exactly, keys outside untouched) and write them.

    Cost on a long action: refreshed values go in with one ``foreach_set``; a few new keys (a gap in a long
    action) are inserted at their place (``insert(..., options={'FAST'})``: a binary search, no handle
    update) because ``FCurve.update`` sorts keys appended at the end by swapping neighbours, O(keys x
    distance moved): 0.1 s per f-curve of 7,000 keys. Many new keys (a new or sparse curve) are appended in
    bulk. One ``update()`` at the end recomputes the handles. ``old``: the curve's keys as `read_keys` gave
    them moments ago in the same operator call (used when the key count still matches)."""
    if old is None or old[0].size != len(fcurve.keyframe_points):
        old = read_keys(fcurve)
    old_f, old_v, old_gen = old
    plan = merge_channel(old_f, old_v, old_gen, frames, values)
    n_old, n_new = old_f.size, plan.new_frames.size
    values_changed = not np.array_equal(plan.values, old_v)
    if n_new == 0 and not values_changed:
        return plan
    kp = fcurve.keyframe_points
    in_place = 0 < n_new <= INSERT_MAX and n_old > 0 and plan.new_frames.min() < old_f.max() \
        and hasattr(kp, "insert")
    if in_place:
        if values_changed:
            co = np.empty(2 * n_old, np.float32)
            co[0::2], co[1::2] = old_f, plan.values
            kp.foreach_set("co", co)
        held = [np.empty(2 * n_old, np.float32) for _ in range(2)]
        kp.foreach_get("handle_left", held[0])
        kp.foreach_get("handle_right", held[1])
        for f, v in zip(plan.new_frames.tolist(), plan.new_values.tolist(), strict=True):
            kp.insert(f, v, options={"FAST"}, keyframe_type=key_type)
        _restore_handles(kp, old_f, held)
    else:
        if n_new:
            kp.add(n_new)
        co = np.empty(2 * (n_old + n_new), np.float32)
        co[0:2 * n_old:2], co[1:2 * n_old:2] = old_f, plan.values
        co[2 * n_old::2], co[2 * n_old + 1::2] = plan.new_frames, plan.new_values
        kp.foreach_set("co", co)
        if n_new:
            _set_key_types(kp, n_old, key_type)
    fcurve.update()   # sorts keys (already in order here) and recomputes handles
    return plan


def _restore_handles(kp: Any, frames: np.ndarray, held: list[np.ndarray]) -> None:
    """Put back the handles (left, right: ``held``, as read before) of the keys on ``frames``: ``insert``, even FAST,
    shortens its neighbours' handles, the animator's shaped ones too (`update` recomputes the automatic ones)."""
    m = len(kp)
    co = np.empty(2 * m, np.float32)
    kp.foreach_get("co", co)
    at = np.searchsorted(co[0::2], np.asarray(frames, np.float32))
    for attr, h in zip(("handle_left", "handle_right"), held, strict=True):
        a = np.empty(2 * m, np.float32)
        kp.foreach_get(attr, a)
        a = a.reshape(-1, 2)
        a[at] = h.reshape(-1, 2)
        kp.foreach_set(attr, a.ravel())


def _enum_value(kp: Any, identifier: str) -> int:
    """The integer value of a keyframe ``type`` enum item (what foreach_get/foreach_set exchange)."""
    return int(kp[0].bl_rna.properties["type"].enum_items[identifier].value)


def _set_key_types(kp: Any, start: int, key_type: str) -> None:
    """Mark keys[start:] as ``key_type``: in bulk through the enum's integer values (foreach_get/set),
    falling back to a loop over the new keys where that is not available (test doubles)."""
    n = len(kp)
    try:
        types = np.empty(n, np.int32)
        kp.foreach_get("type", types)
        types[start:] = _enum_value(kp, key_type)
        kp.foreach_set("type", types)
    except (TypeError, RuntimeError, AttributeError, KeyError):
        for i in range(start, n):
            kp[i].type = key_type


# -------------------------------------------------------------------------------- object-level helpers

def ensure_action(obj: Any, name: str | None = None) -> tuple[Any, Any]:
    """(action, slot) animating ``obj``, created if missing (slot is None before 4.4)."""
    import bpy
    ad = obj.animation_data or obj.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(name or f"{obj.name}Action")
    if blender_version() < SLOTTED_ACTIONS:
        return ad.action, None
    slot = getattr(ad, "action_slot", None)
    if slot is None:
        slot = ad.action.slots.new(id_type="OBJECT", name=obj.name)
        ad.action_slot = slot
    return ad.action, slot


def assigned_action(obj: Any) -> tuple[Any, Any]:
    """(action, slot) currently animating ``obj``, or (None, None)."""
    ad = obj.animation_data
    if ad is None or ad.action is None:
        return None, None
    return ad.action, getattr(ad, "action_slot", None)


def find_fcurve(action: Any, slot: Any, data_path: str, index: int) -> Any:
    if action is None:
        return None
    if blender_version() >= SLOTTED_ACTIONS and slot is None:
        slot = action.slots[0] if len(action.slots) else None
        if slot is None:
            return None
    fcurves = fcurve_collection(action, slot, ensure=False)
    return None if fcurves is None else fcurves.find(data_path, index=index)


def bone_path(bone: str, prop: str = "rotation_quaternion") -> str:
    import bpy
    return f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{prop}'


def bone_key_frames(action: Any, slot: Any, bones: Iterable[str]) -> dict[str, np.ndarray]:
    """Frames at which each bone has a rotation/location key of the animator's (for range detection and
    constraints). Keys typed GENERATED are ours, refreshed by the next run, so they do not count: in-filling
    again after an in-fill fills the same frames anew."""
    out: dict[str, np.ndarray] = {}
    for b in bones:
        frames = []
        for prop, n in (("rotation_quaternion", 4), ("rotation_euler", 3), ("location", 3)):
            for i in range(n):
                fc = find_fcurve(action, slot, bone_path(b, prop), i)
                if fc is not None:
                    f, _, generated = read_keys(fc)
                    frames.append(f[~generated])
        if frames:
            out[b] = np.unique(np.concatenate(frames))
    return out


def sample_rotations(action: Any, slot: Any, bones: Sequence[str], frames: Sequence[float] | np.ndarray) -> np.ndarray:
    """(T, J, 4) WXYZ bone rotations evaluated from the action's f-curves (identity where unkeyed),
    normalised as Blender does when it poses them: its f-curves interpolate the four channels apart, so
    between keys the raw values are not a unit quaternion."""
    out = np.zeros((len(frames), len(bones), 4))
    out[..., 0] = 1.0
    for j, b in enumerate(bones):
        for i in range(4):
            fc = find_fcurve(action, slot, bone_path(b), i)
            if fc is not None:
                out[:, j, i] = [fc.evaluate(f) for f in frames]
    from ..vendor.quat_np import quat_normalize

    return quat_normalize(out)


def sample_location(action: Any, slot: Any, frames: Sequence[float] | np.ndarray, data_path: str = "location"
                    ) -> np.ndarray:
    """(T, 3) the action's object location channels evaluated at ``frames`` (0 where unkeyed)."""
    out = np.zeros((len(frames), 3))
    for i in range(3):
        fc = find_fcurve(action, slot, data_path, i)
        if fc is not None:
            out[:, i] = [fc.evaluate(f) for f in frames]
    return out


def write_rotations(obj: Any, bones: Sequence[str], frames: np.ndarray, rotations: np.ndarray) -> int:
    """Write (T, J, 4) WXYZ rotations as GENERATED keys on the bones' rotation_quaternion channels,
    keeping the user's keys (merge rule of :mod:`.keys`). Returns the number of keys added."""
    action, slot = ensure_action(obj)
    added = 0
    for j, b in enumerate(bones):
        fcs = ensure_fcurves(action, slot, [(bone_path(b), i) for i in range(4)], group=b)
        for i, fc in enumerate(fcs):
            added += write_keys(fc, frames, rotations[:, j, i]).new_frames.size
    return added


def write_location(obj: Any, frames: np.ndarray, location: np.ndarray, group: str = "Object Transforms") -> int:
    """Write (T, 3) object locations as GENERATED keys (merge rule as above)."""
    action, slot = ensure_action(obj)
    fcs = ensure_fcurves(action, slot, [("location", i) for i in range(3)], group=group)
    return sum(write_keys(fc, frames, location[:, i]).new_frames.size for i, fc in enumerate(fcs))


# ------------------------------------------------------------------ channels of any rotation mode

def fcurve_map(action: Any, slot: Any) -> dict[tuple[str, int], Any]:
    """(data_path, index) -> f-curve for every f-curve of ``slot`` (4.4+) or the action, read once."""
    if action is None:
        return {}
    if blender_version() >= SLOTTED_ACTIONS and slot is None:
        slot = action.slots[0] if len(action.slots) else None
        if slot is None:
            return {}
    fcs = fcurve_collection(action, slot, ensure=False)
    return {} if fcs is None else {(fc.data_path, fc.array_index): fc for fc in fcs}


KeyCache = dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def cached_keys(fcmap: dict[tuple[str, int], Any], key: tuple[str, int], cache: KeyCache | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`read_keys` of ``fcmap[key]``, kept in ``cache`` (one operator call reads a curve once)."""
    if cache is None:
        return read_keys(fcmap[key])
    if key not in cache:
        cache[key] = read_keys(fcmap[key])
    return cache[key]


def user_key_frames(fcmap: dict[tuple[str, int], Any], path: str, n: int, cache: KeyCache | None = None
                    ) -> np.ndarray | None:
    """Frames of the animator's keys (not GENERATED) on any of the ``n`` channels of ``path``; None when
    the property has no f-curve at all."""
    parts = [cached_keys(fcmap, (path, i), cache) for i in range(n) if (path, i) in fcmap]
    if not parts:
        return None
    f = np.round(np.concatenate([f[~g] for f, _, g in parts]))
    if f.size == 0:
        return f
    lo = f.min()   # whole frames: an occupancy table is linear in the keys (np.unique sorts them)
    have = np.zeros(int(f.max() - lo) + 1, bool)
    have[(f - lo).astype(np.int64)] = True
    return np.flatnonzero(have) + lo


def _keys_bezier(fc: Any, x: np.ndarray, y: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Blender's default Bezier of keys ``x``, ``y`` (Auto Clamped handles, ``fc``'s auto smoothing, constant
    extrapolation; one key: held) at ``frames`` (``vendor.fcurve``)."""
    from ..vendor.fcurve import keys_bezier

    smooth = str(getattr(fc, "auto_smoothing", "NONE"))
    return keys_bezier(x, y[None], frames, smooth if smooth in ("CONT_ACCEL", "NONE") else "NONE")[0]


def evaluate_user(fcmap: dict[tuple[str, int], Any], path: str, default: Sequence[float], frames: np.ndarray,
                  cache: KeyCache | None = None) -> np.ndarray:
    """As :func:`evaluate`, but the curve through the user's keys alone: what Blender gives for them, our
    GENERATED keys left out. A curve without GENERATED keys is Blender's own evaluation; one with them is
    Blender's default Bezier (Auto Clamped handles, the curve's auto smoothing, constant extrapolation) of the
    user's keys (``vendor.fcurve``, the library's parity-tested copy of Blender's handle rules)."""

    frames = np.asarray(frames, np.float64)
    out = np.tile(np.asarray(default, np.float64), (len(frames), 1))
    for i in range(out.shape[1]):
        fc = fcmap.get((path, i))
        if fc is None:
            continue
        x, y, gen = cached_keys(fcmap, (path, i), cache)
        if not gen.any():
            out[:, i] = [fc.evaluate(float(f)) for f in frames]
            continue
        x, y = x[~gen], y[~gen]
        if x.size:
            out[:, i] = _keys_bezier(fc, x, y, frames)
    return out


def evaluate_keys_bezier(fcmap: dict[tuple[str, int], Any], path: str, default: Sequence[float], frames: np.ndarray,
                         cache: KeyCache | None = None) -> np.ndarray:
    """(T, n) Blender's default Bezier of the user's keys of ``path`` (Auto Clamped handles, the curve's auto
    smoothing, constant extrapolation; ``vendor.fcurve``) whatever interpolation and handles the keys have: the
    curve the model's base is (a LINEAR import, CONSTANT keys or hand-set handles give another curve in Blender)."""

    frames = np.asarray(frames, np.float64)
    out = np.tile(np.asarray(default, np.float64), (len(frames), 1))
    for i in range(out.shape[1]):
        fc = fcmap.get((path, i))
        if fc is None:
            continue
        x, y, gen = cached_keys(fcmap, (path, i), cache)
        x, y = x[~gen], y[~gen]
        if x.size:
            out[:, i] = _keys_bezier(fc, x, y, frames)
    return out


INTERPOLATIONS = {"BEZIER": "bezier", "LINEAR": "linear", "CONSTANT": "constant"}   # the rest: eased, as Bezier


def user_interpolation(fcmap: dict[tuple[str, int], Any], paths: Sequence[str]) -> str:
    """The interpolation most of the user's keys (not GENERATED) on the curves of ``paths`` have, as the server's
    ``curve`` field names it: "linear" (Blender's BVH importer leaves every key LINEAR), "constant" or "bezier"
    (any handle type; the easing modes count as Bezier). "bezier" when there is no key."""
    counts: dict[str, int] = {}
    for (p, _), fc in fcmap.items():
        if p not in paths:
            continue
        kp = fc.keyframe_points
        n = len(kp)
        if not n:
            continue
        try:
            vals = np.empty(n, np.int32)
            kp.foreach_get("interpolation", vals)
            types = np.empty(n, np.int32)
            kp.foreach_get("type", types)
            items = kp[0].bl_rna.properties["interpolation"].enum_items
            names = {items[k].value: k for k in INTERPOLATIONS}
            user = types != _enum_value(kp, GENERATED)
            kinds = [names.get(int(v), "BEZIER") for v in vals[user]]
        except (TypeError, RuntimeError, AttributeError, KeyError):
            kinds = [str(getattr(k, "interpolation", "BEZIER")) for k in kp if k.type != GENERATED]
        for k in kinds:
            c = INTERPOLATIONS.get(k, "bezier")
            counts[c] = counts.get(c, 0) + 1
    return max(counts, key=lambda c: counts[c]) if counts else "bezier"


def evaluate(fcmap: dict[tuple[str, int], Any], path: str, default: Sequence[float], frames: np.ndarray) -> np.ndarray:
    """(T, n) the channels of ``path`` evaluated at ``frames`` (``default`` where a channel has no f-curve)."""
    out = np.tile(np.asarray(default, np.float64), (len(frames), 1))
    for i in range(out.shape[1]):
        fc = fcmap.get((path, i))
        if fc is not None:
            out[:, i] = [fc.evaluate(float(f)) for f in frames]
    return out


def auto_generated(fcurve: Any, frames: np.ndarray) -> None:
    """Our GENERATED keys on ``frames`` back to Auto Clamped handles (a Reduced fill's ALIGNED handles, when Every
    Frame writes over it)."""
    kp = fcurve.keyframe_points
    n = len(kp)
    if not n:
        return
    f, _, gen = read_keys(fcurve)
    sel = gen & np.isin(np.round(f), np.round(np.asarray(frames, np.float64)))
    if not sel.any():
        return
    auto = int(kp[0].bl_rna.properties["handle_left_type"].enum_items["AUTO_CLAMPED"].value)
    changed = False
    for side in ("handle_left_type", "handle_right_type"):
        t = np.empty(n, np.int32)
        kp.foreach_get(side, t)
        if (t[sel] != auto).any():
            t[sel] = auto
            kp.foreach_set(side, t)
            changed = True
    if changed:
        fcurve.update()


def write_channels(obj: Any, path: str, frames: np.ndarray, values: np.ndarray, group: str,
                   cache: KeyCache | None = None, auto_handles: bool = False) -> int:
    """Write (T, n) ``values`` at ``frames`` on the n channels of ``path`` (merge rule of :mod:`.keys`);
    returns the keys written (added, or our GENERATED keys refreshed). ``cache``: keys read earlier in the
    same call (`cached_keys`); the entries written are dropped from it."""
    if not len(frames):
        return 0
    action, slot = ensure_action(obj)
    fcs = ensure_fcurves(action, slot, [(path, i) for i in range(values.shape[1])], group=group)
    n = 0
    for i, fc in enumerate(fcs):
        plan = write_keys(fc, frames, values[:, i], old=None if cache is None else cache.pop((path, i), None))
        n += plan.new_frames.size + plan.refreshed
        if auto_handles and plan.refreshed:
            auto_generated(fc, frames)
    return n
