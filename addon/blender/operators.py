"""Operators: properties -> plain request -> server job (worker thread, `modal`) -> keys written in one UNDO
step. What they read from the scene is in `scene_read`, the job machinery in `modal`."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import bpy
import numpy as np

from ..core import connect, keyreduce, keys, quality, rates, requests, rigmap
from ..core.feet_report import report_feet
from ..core.gate_report import adapt_message, gate_message
from ..core.jobs import Worker, run_sync
from ..vendor.gaps import runs as gap_runs
from . import fcurves, rigio
from .modal import _ServerOperator, client_factory, worker
from .props import KeysOptions, bone_map, preferences, scene, settings
from .rigio import infill_segments, object_track, read_pose, read_rig, write_rotations_in_mode, write_segment
from .scene_read import (
    _armature,
    _hips_bone,
    _parents_first,
    _preset,
    _rig_skeleton,
    _scene_fps,
    _scene_frames,
    _selected_bones,
    curve_points,
    rest_offsets,
    rig_hierarchy,
    rig_units_per_metre,
)


class MOTIONCORE_OT_connect(_ServerOperator):
    """Say hello to the motion server (starting a local one if the preferences ask) and show its status"""

    bl_idname = "motioncore.connect"
    bl_label = "Connect"
    bl_options = {"REGISTER"}
    label = "Connect"

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        worker(context, restart=True)   # preferences may have changed
        prefs = preferences(context)
        cmd = str(prefs.server_command) if prefs.start_server else ""
        return connect.connect_job(client_factory(context), cmd)

    def make_worker(self, context: bpy.types.Context) -> Worker:
        return Worker(lambda: None)     # the job makes its own clients (see connect.connect_job)

    def execute(self, context: bpy.types.Context) -> set[str]:  # type: ignore[override]
        job = self._prepare(context)
        if job is None:
            return {"CANCELLED"}
        return self._finish(context, run_sync(lambda: None, job))

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        s = settings(context)
        s.status = f"{value['state']}: {value['detail']}"
        if value["state"] != "connected":
            raise ValueError(s.status)
        return s.status


class _WalkBase(KeysOptions, _ServerOperator):
    """Shared by walk_path and style_adapt: a root path from the selected curve; the reply's rollout is
    written from the current frame (Blender forbids subclassing a registered operator class)."""

    def path(self, context: bpy.types.Context) -> tuple[Any, np.ndarray]:
        arm = _armature(context)
        curves = [o for o in context.selected_objects if o.type == "CURVE"]
        if not curves:
            raise ValueError("select a curve (the path) as well as the armature")
        hips = _hips_bone(arm, [b.name for b in arm.data.bones])
        upm = rig_units_per_metre(arm, hips)
        bones, parents, heads = rig_hierarchy(arm)   # bones map and align as the In-fill's
        self._state.update(armature=arm.name, start=scene(context).frame_current, offsets=rest_offsets(arm),
                           units=upm, bones=bones, parents=parents, heads=heads)
        return arm, (curve_points(curves[0]) / upm).astype(np.float32)   # the models walk in metres

    def until(self, context: bpy.types.Context) -> tuple[int, int, float] | None:
        """(start, end, scene fps) when the walk should fill the scene (or preview) range, else None."""
        if settings(context).walk_length != "RANGE":
            return None
        (lo, hi), preview = _scene_range_and_preview(context)
        end = preview[1] if preview else hi
        return int(self._state["start"]), int(end), _scene_fps(context)

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        content, arrays = value
        arm = bpy.data.objects[self._state["armature"]]
        plan = keys.walk_plan(content, arrays, self._state["bones"], _scene_fps(context), self._state["start"],
                              _preset(context), self._state["offsets"], bone_map(arm), self._state["parents"],
                              self._state["heads"])
        fcurves.ensure_action(arm)
        # the root path in the rig's units, and the object placed so that the hips (not the object's origin)
        # are over it: minus the hips' rest head, horizontally, in world axes
        loc = plan.location * float(self._state.get("units", 1.0))
        hips = _hips_bone(arm, plan.bones)
        if hips is not None:
            mw = np.array([list(r) for r in arm.matrix_world], np.float64)[:3, :3]
            loc[:, :2] -= (mw @ np.array(tuple(arm.data.bones[hips].head_local), np.float64))[:2]
        reduce = self.reduce_options(100.0 / float(self._state.get("units", 1.0)))
        stats: dict[str, float] = {}
        added = rigio.write_walk(arm, plan.bones, plan.frames, plan.rotations, loc, reduce, stats, hips)   # bones' own modes
        miss = f"; unmapped: {', '.join(plan.unmapped)}" if plan.unmapped else ""
        what = f"{added} keys" if reduce is None else keyreduce.report(added, stats)
        return f"walked {plan.frames.size} frames with {len(plan.bones)} bones ({what}){miss}"


class MOTIONCORE_OT_walk_path(_WalkBase):
    """Animate the active armature walking along the selected curve (path controller on the server)"""

    bl_idname = "motioncore.walk_path"
    bl_label = "Walk Along Path"
    label = "Walk along path"

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        _, points = self.path(context)
        s = settings(context)
        return requests.walk_job(str(s.path_request), points, s.path_model or None, s.gait or None,
                                 float(s.speed), self.until(context))


def _scene_range_and_preview(context: bpy.types.Context) -> tuple[tuple[int, int], tuple[int, int] | None]:
    sc = scene(context)
    return (sc.frame_start, sc.frame_end), ((sc.frame_preview_start, sc.frame_preview_end)
                                            if sc.use_preview_range else None)


ORDERS = [("bisection", "Bisection", "Halve the gaps: far keys first (the default)"),
          ("sequential", "Sequential", "Frame by frame, left to right"),
          ("random", "Random", "A random order"),
          ("entropy", "Most certain first", "Lowest-entropy element first (slowest)")]
_REPLIES: dict[str, Any] = {}   # request fingerprint -> reply: picking another variation asks nothing
_REPLIES_KEPT = 4
CURVES = ("bezier", "bezier_root", "keys_bezier", "keys_bezier_root")   # the user's curve, Blender's Bezier of the keys


def fingerprint(*parts: Any) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(np.ascontiguousarray(p).tobytes() if isinstance(p, np.ndarray) else repr(p).encode())
    return h.hexdigest()


class _InfillBase(KeysOptions, _ServerOperator):
    """Shared by the two in-fill operators (Blender forbids subclassing a registered operator class).

    The options are operator properties, so after a run the Adjust Last Operation panel (F9) shows
    them: change ``Show Variation`` to preview each of the ``Variations`` and keep the one you like
    (one undo step each; the samples are cached, so switching asks the server nothing)."""

    label = "In-fill"
    model = "use:infill.variations"
    user_curve = False   # Keys = Reduced: leave a gap on the user's curve where the fill matched it (off: see rigio)
    whole_range = False   # the body in-fill sends the whole range: its gate learns from every keyed frame
    variations: bpy.props.IntProperty(name="Variations", default=1, min=1, max=8,  # type: ignore[valid-type]
                                      description="Samples to draw (temperature > 0 makes them differ)")
    variation: bpy.props.IntProperty(name="Show Variation", default=1, min=1, max=8,  # type: ignore[valid-type]
                                     description="Which of this request's samples to write",
                                     options={"SKIP_SAVE"})   # a new run starts at the first sample
    temperature: bpy.props.FloatProperty(name="Temperature", default=0.0, min=0.0, max=2.0,  # type: ignore[valid-type]
                                         description="0: the most likely motion; 1: the model's spread")
    order: bpy.props.EnumProperty(name="Order", items=ORDERS, default="bisection")  # type: ignore[valid-type]
    seed: bpy.props.IntProperty(name="Seed", default=0, min=0)  # type: ignore[valid-type]
    best_rate: bpy.props.BoolProperty(name="Best Rate", default=True, description=(  # type: ignore[valid-type]
        "Fill at the common frame rate that test gaps cut from your keys fill closer (a 30 fps capture in a 24 fps "
        "scene: 30); your keys stay on their frames. Off: the scene's rate"))

    def bones(self, arm: Any) -> list[str]:
        return [pb.name for pb in arm.pose.bones]

    def model_name(self, context: bpy.types.Context) -> str | None:
        return self.model

    def manipulated(self, context: bpy.types.Context, arm: Any) -> Any:
        """The object the hand manipulates (hands: the panel's Object field), None for none."""
        return None

    def side(self, context: bpy.types.Context, arm: Any, bones: list[str]) -> str | None:
        """Hands: "l" or "r", the rig's hand (mirrored onto a model of the other); None for a body."""
        return None

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        arm = _armature(context)
        action, slot = fcurves.assigned_action(arm)
        if action is None:
            raise ValueError(f"{arm.name!r} has no action: key at least two poses first")
        rig = read_rig(arm, action, slot, self.bones(arm))
        if not rig["bones"]:
            raise ValueError("no bone has rotation keys: key at least two poses first")
        rng = keys.fill_range(rig["keyed"], _selected_bones(arm), *_scene_range_and_preview(context))
        if rng is None:
            raise ValueError("key the selected bones on at least two frames inside the frame range")
        segs = infill_segments(arm, rig, rng, _scene_fps(context), whole=self.whole_range)
        held = self.manipulated(context, arm)
        sent = ["rotations", "known", "root"]
        if held is not None:   # the object's pose over each window's frames, as Blender evaluates it
            for g in segs:
                g["object_rotations"], g["object_positions"] = object_track(arm, held, rig, g["frames"],
                                                                            scene(context))
            sent += ["object_rotations", "object_positions"]
        opts = (self.model_name(context), _preset(context), int(self.variations), float(self.temperature),
                str(self.order), int(self.seed), _scene_fps(context), None if held is None else held.name,
                self.side(context, arm, rig["bones"]))
        curve, rate = segs[0].get("curve") if segs else None, "best" if self.best_rate else "scene"   # keys, rate
        # only the keyed values identify the request (the rest is filled): a pick after a write hits the cache
        key = fingerprint(arm.name, rig["bones"], *[np.where(g["known"][..., :-1, None], g["rotations"], 0.0)
                                                    for g in segs], *[g["frames"] for g in segs],
                          *[g[k] for g in segs for k in sent[3:]], sorted(bone_map(arm).items()), *opts,
                          sorted(self.job_options().items()), curve, rate)
        self._state.update(armature=arm.name, rig=rig, segments=segs, key=key, held=opts[7], side=opts[8])
        extra = self.job_options()
        if key in _REPLIES and not extra.get("adapt"):
            cached = _REPLIES[key]
            return lambda c: cached
        return requests.infill_segments_job(
            [{k: g[k] for k in (*sent, *CURVES) if k in g} for g in segs], rig["bones"], rig["heads"],
            rig["parents"], opts[0] or None, _preset(context), fps=opts[6], temperature=opts[3],
            samples=opts[2], order=opts[4], seed=opts[5], overrides=bone_map(arm), up=rig["up"],
            root_parent=rig["up"][rig["bones"].index(rig["root"])] if rig["root"] in rig["bones"] else -1,
            object_name=opts[7], root_bone=rig["root"], side=opts[8], curve=curve, rate=rate, **extra)

    def job_options(self) -> dict[str, Any]:
        """Extra keywords for `requests.infill_segments_job` (Learn This Action: its budget)."""
        return {}

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        content, arrays = value
        rig, segs = self._state["rig"], self._state["segments"]
        if not self._state.get("sync"):
            rig["keys"] = {}   # the animator may have edited keys while the server worked: read them again
        B = len(rig["bones"])
        outs = [arrays.get(f"rotations.{i}") for i in range(len(segs))]
        for o, g in zip(outs, segs):
            if o is None or o.ndim != 4 or o.shape[1:] != (g["frames"].size, B, 4):
                raise ValueError(f"the server's rotations have shape {None if o is None else o.shape}, "
                                 f"expected (S, {g['frames'].size}, {B}, 4)")
        _REPLIES[self._state["key"]] = value
        while len(_REPLIES) > _REPLIES_KEPT:
            del _REPLIES[next(iter(_REPLIES))]
        S = outs[0].shape[0]
        pick = min(max(int(self.variation), 1), S) - 1
        unmapped = set(content["segments"][0].get("unmapped", [])) if content.get("segments") else set()
        arm = bpy.data.objects[self._state["armature"]]
        feet = report_feet(rig, segs, arrays, pick, _scene_fps(context), content)   # before any key is written
        written, bones_written = 0, set()
        reduce = self.reduce_options(100.0 / rig_units_per_metre(arm, _hips_bone(arm, rig["bones"])))
        reduce = None if reduce is None else {**reduce, "user_curve": self.user_curve}
        stats: dict[str, float] = {}
        for i, g in enumerate(segs):
            if f"known.{i}" in arrays:   # what the server was sent (whole frames for a group-frames model)
                g = {**g, "known_sent": np.asarray(arrays[f"known.{i}"], bool)}
            n, names = write_segment(arm, rig, g, outs[i][pick], arrays[f"root.{i}"][pick], unmapped, reduce, stats)
            written += n
            bones_written |= names
        settings_used = [f"temperature {float(self.temperature):g}"] if self.temperature else []
        if S > 1:
            settings_used.append(f"{S} variations (showing {pick + 1}; F9 to pick another)")
        if self.order != "bisection":
            settings_used.append(f"order {self.order}")
        if self.seed:
            settings_used.append(f"seed {self.seed}")
        n_gaps = sum(len(gap_runs(~g["known"].all(1))) for g in segs)
        root, n_b = ("; the root" if "root" in bones_written else ""), len(bones_written - {"root"})
        more = f" ({', '.join(settings_used)})" if settings_used else ""
        held = (content.get("segments") or [{}])[0].get("object")
        with_obj = f" with the object {self._state['held']!r}" if held and self._state.get("held") else ""
        if (content.get("segments") or [{}])[0].get("mirror"):
            with_obj += f" ({'left' if self._state.get('side') == 'l' else 'right'} hand, mirrored onto the model's)"
        gate = gate_message([g for seg in content.get("segments") or [] for g in seg.get("gate") or []])
        learnt = "; with this action learnt" if any((seg.get("adapted") or {}).get("used")
                                                      for seg in content.get("segments") or []) else ""
        plants = [seg["plant"] for seg in content.get("segments") or [] if seg.get("plant")]
        planted = f"; feet planted on {sum(p['frames'] for p in plants)} frames" if plants else ""
        what = (f"filled {written} keys on {n_b} bones{root} in {n_gaps} gap(s){with_obj}" if reduce is None else
                f"filled {n_gaps} gap(s) on {n_b} bones{root}{with_obj}: {keyreduce.report(written, stats)}")
        return (f"{what} (your keys kept){more}"
                f"{learnt}{planted}{gate}{feet}" + _not_filled(rig["bones"], bones_written, unmapped)
                + rates.rate_message([seg.get("rate") for seg in content.get("segments") or []]))


def _not_filled(bones: list[str], written: set[str], unmapped: set[str]) -> str:
    """The rig's bones the in-fill left alone, named with the reason (nothing left out in silence)."""
    def named(bs: list[str]) -> str:
        return ", ".join(bs[:12]) + (f" and {len(bs) - 12} more" if len(bs) > 12 else "")

    skipped = [b for b in bones if b not in written]
    no_joint = [b for b in skipped if b in unmapped]
    keyed = [b for b in skipped if b not in unmapped]
    out = f"; not filled: {named(no_joint)} (no model joint maps to them; Bone Map to map them)" if no_joint else ""
    return out + (f"; {'not filled: ' if not out else ''}{named(keyed)} (keyed on every frame of the gaps)"
                  if keyed else "")


class MOTIONCORE_OT_infill(_InfillBase):
    """Fill the frames between your keyed poses (keys you set are kept)"""

    bl_idname = "motioncore.infill"
    bl_label = "In-fill Between Keys"
    label = "In-fill"
    model = "use:infill"   # the server's default for the use (its `models` listing: default_for)
    whole_range = True
    plant_feet: bpy.props.BoolProperty(name="Plant Feet", default=True,  # type: ignore[valid-type]
                                       description="Keep feet in contact with the ground still (IK on the legs); "
                                                   "the server leaves them as filled for a gap length where test "
                                                   "gaps cut from your keys say planting costs error")

    def model_name(self, context: bpy.types.Context) -> str | None:
        """The deterministic body in-fill for the single best answer; the sampling model to draw variations."""
        return "use:infill.variations" if float(self.temperature) > 0.0 else "use:infill"

    def job_options(self) -> dict[str, Any]:
        """The body in-fill plants the feet unless Plant Feet is off (the any-order model ignores it)."""
        return {} if float(self.temperature) > 0.0 else {"plant_feet": bool(self.plant_feet)}


class MOTIONCORE_OT_adapt_action(_InfillBase):
    """Learn this action: fine-tune a copy of the in-fill model on your keyed frames (Esc cancels); In-fill then
    uses it until the keys change"""

    bl_idname = "motioncore.adapt_action"
    bl_label = "Learn This Action"
    label = "Learn This Action"
    whole_range = True
    steps: bpy.props.IntProperty(name="Steps", default=40, min=1, max=2000, description=(  # type: ignore[valid-type]
        "How much to learn, in learning steps (the same on any machine; 40 took 17 s on a busy 2-core machine)"))
    seconds: bpy.props.FloatProperty(name="At Most Seconds", default=300.0, min=2.0, max=600.0,  # type: ignore[valid-type]
                                     description="The time limit on learning: stops early on a slow machine")

    def model_name(self, context: bpy.types.Context) -> str | None:
        return "use:infill"

    def job_options(self) -> dict[str, Any]:
        return {"adapt": float(self.seconds), "adapt_steps": int(self.steps)}

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        content, _ = value
        _REPLIES.clear()   # In-fill's cached answers predate what was learnt: the next In-fill asks the server
        return adapt_message(content)


class MOTIONCORE_OT_hands_infill(_InfillBase):
    """Fill finger motion between keyed hand poses (keys you set are kept)"""

    bl_idname = "motioncore.hands_infill"
    bl_label = "In-fill Hands"
    label = "Hands in-fill"
    model = "use:infill.hands"
    user_curve = False   # a finger's whole motion is within the body's tolerance in cm: always write the fill

    def model_name(self, context: bpy.types.Context) -> str | None:
        """The panel's Hands Model; empty: the deterministic infill-hands (it reads the object when given one) for
        the single best answer; to draw variations (temperature > 0) anyorder-hands, or with an object the first
        model trained with one."""
        s = settings(context)
        if str(s.hands_model):
            return str(s.hands_model)
        if float(self.temperature) > 0.0:
            return None if s.hands_object is not None else "use:infill.hands.variations"
        return self.model

    def side(self, context: bpy.types.Context, arm: Any, bones: list[str]) -> str | None:
        pick = str(settings(context).hands_side)
        if pick != "AUTO":
            return "l" if pick == "LEFT" else "r"
        return rigmap.hand_side([arm.name, arm.data.name, *bones]) or "r"

    def manipulated(self, context: bpy.types.Context, arm: Any) -> Any:
        held = settings(context).hands_object
        if held is not None and held == arm:
            raise ValueError(f"the Object is the hand's own armature {arm.name!r}: pick the object the hand holds")
        return held

    def bones(self, arm: Any) -> list[str]:
        finger_roles = {r for p in rigmap.PRESETS.values() for r in p
                        if r.endswith("_hand") or any(f in r for f in ("thumb", "index", "middle", "ring", "pinky"))}
        names = {rigmap.normalise_name(b) for p in rigmap.PRESETS.values() for r, b in p.items() if r in finger_roles}
        return [pb.name for pb in arm.pose.bones if rigmap.normalise_name(pb.name) in names]


class MOTIONCORE_OT_style_adapt(_WalkBase):
    """Walk the active armature along the selected curve in the style of the Style Example action
    (one-shot adaptation: the server reads a style code from the example and fits it to the example; no training)"""

    bl_idname = "motioncore.style_adapt"
    bl_label = "Walk in Example's Style"
    label = "Style from example"

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        arm, points = self.path(context)
        s = settings(context)
        ex = s.style_action
        if ex is None:
            raise ValueError("choose a Style Example action (a clip of the style to copy, 3 s or longer)")
        lo, hi = (int(round(v)) for v in ex.frame_range)   # (T, B, 4) in any rotation mode; (T, 3) root motion
        rot, loc = read_pose(arm, ex, None, bones := self._state["bones"], np.arange(lo, hi + 1, dtype=np.float64))
        loc = loc / float(self._state.get("units", 1.0))     # in metres, as the path
        return requests.style_job(points, rot, bones, loc, _scene_fps(context), s.style_model or None,
                                  _preset(context), self._state["offsets"], s.gait or None, bone_map(arm),
                                  float(s.speed), self.until(context), self._state["parents"], self._state["heads"])

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        line, warn = quality.style_report(super().apply(context, value), value[0])
        if warn:   # the example's problems, above the INFO line
            self.report({"WARNING"}, f"{self.label}: {warn}")
        return line


# "Map For" entries -> (task, model): both in-fill models serve the task "infill"
MAP_FOR = {"infill": ("infill", "use:infill"), "infill.hands": ("infill", "use:infill.hands")}


class MOTIONCORE_OT_map_bones(_ServerOperator):
    """Fill the armature's bone map for the chosen model (your rows are kept; fix the rest in the list)"""

    bl_idname = "motioncore.map_bones"
    bl_label = "Map Bones"
    label = "Map bones"

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        arm = _armature(context)
        s = settings(context)
        self._state.update(armature=arm.name)
        task, model = MAP_FOR.get(str(s.map_task), (str(s.map_task), None))
        db = list(arm.data.bones)
        idx = {b.name: i for i, b in enumerate(db)}
        return requests.mapping_job([b.name for b in db], task, model, _preset(context), bone_map(arm),
                                    np.array([tuple(arm.pose.bones[b.name].head) for b in db], np.float64),
                                    [idx[b.parent.name] if b.parent else -1 for b in db],
                                    np.array([tuple(b.head_local) for b in db], np.float64))

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        if value.get("wrong_kind"):
            raise ValueError(value["wrong_kind"])
        arm: Any = bpy.data.objects[self._state["armature"]].data
        arm.motioncore_map.clear()
        for joint, bone in value["rows"]:
            row = arm.motioncore_map.add()
            row.joint, row.bone = joint, bone
        missing = [j for j, b in value["rows"] if not b]
        more = f"; unmapped: {', '.join(missing)}" if missing else ""
        return f"{value['model']}: {len(value['rows']) - len(missing)} of {len(value['rows'])} joints mapped{more}"


class MOTIONCORE_OT_retarget(_ServerOperator):
    """Retarget the active armature's action onto the other selected armature"""

    bl_idname = "motioncore.retarget"
    bl_label = "Retarget to Selected"
    label = "Retarget"

    def prepare(self, context: bpy.types.Context) -> Callable[[Any], Any]:
        src = _armature(context)
        targets = [o for o in context.selected_objects if o.type == "ARMATURE" and o != src]
        if not targets:
            raise ValueError("select the target armature as well (the active one is the source)")
        action, slot = fcurves.assigned_action(src)
        if action is None:
            raise ValueError(f"{src.name!r} has no action to retarget")
        lo, hi = _scene_frames(context)
        frames = np.arange(lo, hi + 1, dtype=np.float64)
        dst: Any = targets[0]
        sb, tb = _parents_first(src.data.bones), _parents_first(dst.data.bones)
        # any rotation mode; root motion from the hips bone and/or the object (BVH and FBX imports)
        pose, loc = read_pose(src, action, slot, [b.name for b in sb], frames)
        source, target = _rig_skeleton(sb), _rig_skeleton(tb)
        so, to = rest_offsets(src), rest_offsets(dst)
        self._state.update(target=dst.name, bones=target["joints"], frames=frames, skeleton=target,
                           offsets=[to[b.name] for b in tb])
        return requests.retarget_job(pose, loc, source, target, [so[b.name] for b in sb])

    def apply(self, context: bpy.types.Context, value: Any) -> str:
        content, arrays = value
        bones, frames = self._state["bones"], self._state["frames"]
        rot = arrays.get("rotations")
        if rot is None or rot.shape != (frames.size, len(bones), 4):
            raise ValueError(f"the server's rotations have shape {None if rot is None else rot.shape}")
        pose, loc = requests.retarget_to_rig(arrays, self._state["skeleton"], self._state["offsets"])
        tgt = bpy.data.objects[self._state["target"]]
        moved = float(np.abs(loc - loc[:1]).max()) if loc.size else 0.0
        turned = float(np.degrees(2 * np.arccos(np.clip(np.abs(pose[..., 0]), 0.0, 1.0))).max()) if pose.size else 0.0
        if moved < 1e-6 and turned < 1e-3:
            raise ValueError(f"the result leaves {tgt.name!r} in its rest pose (no rotation, no root motion): "
                             "nothing written; check the source's action and the bone map")
        fcurves.ensure_action(tgt)
        added = write_rotations_in_mode(tgt, bones, frames, pose)   # in each bone's own rotation mode
        added += fcurves.write_location(tgt, frames, loc)
        miss = f"; unmapped: {', '.join(content.get('unmapped', []))}" if content.get("unmapped") else ""
        return f"retargeted {frames.size} frames onto {tgt.name!r} ({added} keys){miss}"


classes = (MOTIONCORE_OT_connect, MOTIONCORE_OT_map_bones, MOTIONCORE_OT_walk_path, MOTIONCORE_OT_infill,
           MOTIONCORE_OT_adapt_action, MOTIONCORE_OT_hands_infill,
           MOTIONCORE_OT_style_adapt, MOTIONCORE_OT_retarget)
