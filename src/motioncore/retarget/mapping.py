"""Joint maps for retargeting: the body's parts from the hierarchy and the pose, named presets over a small
canonical vocabulary for what is left, and user override files.

``auto_map`` first reads both rigs as bodies (`retarget.topology`: hips, spine, chest, neck, head, legs and
arms found from the hierarchy, sides from the clip's frames, names only breaking ties) and pairs them part
by part, chains of other lengths by their place along the chain. The joints outside the bodies (fingers,
helpers), and rigs that are no body (a hand), are then paired by preset: each skeleton's preset is detected,
joints with the same canonical name (``hips``, ``l_upper_leg``, ``r_index2``...) are paired, then what is
left by normalised name (lowercase, namespace such as ``mixamorig:`` and punctuation dropped). The result
maps *target* joint -> *source* joint.
"""
from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from . import topology
from .names import CANONICAL, PRESETS, normalise_name, pair_by_names, preset_of, roles_in

__all__ = ["CANONICAL", "PRESETS", "JointMap", "RetargetError", "SkeletonMismatch", "apply_overrides", "auto_map",
           "check_map", "clip_poses", "detect_preset", "load_overrides", "normalise_name"]


class RetargetError(MotioncoreError, ValueError):
    """A joint map, override file or retarget argument is invalid; the message names the joint or field."""


class SkeletonMismatch(RetargetError):
    """A clip's skeleton cannot be mapped onto the target's (a dog onto a biped, unknown joint names); the
    message names the unmapped target joints and says how to give a map (``--map FILE``)."""




def detect_preset(skeleton: Skeleton) -> str | None:
    """The preset whose joint names (normalised) best cover this skeleton's, or None if none covers
    at least half its own joints (and 3 joints). Ties go to the earlier preset in ``PRESETS`` (`names.preset_of`)."""
    return preset_of(skeleton.names)


def _roles(skeleton: Skeleton, preset: str | None) -> dict[str, str]:
    """canonical name -> this skeleton's joint name, for the preset's joints it has."""
    return roles_in(skeleton.names, preset)


@dataclass(frozen=True, eq=False)
class JointMap:
    """Target joint -> source joint, with what could not be matched."""

    pairs: dict[str, str]  # target joint name -> source joint name
    unmapped: tuple[str, ...] = ()  # target joints with no source joint (held at rest by `retarget`)
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)  # target joint -> tied source candidates
    roles: dict[str, str] = field(default_factory=dict)  # canonical name -> target joint (from the target preset)
    source_preset: str | None = None  # detected or given preset names, for reports
    target_preset: str | None = None
    sides_from: str | None = None  # "pose" or "names" when the bodies were paired by topology, else None
    overridden: bool = False  # a user's bone map (``overrides``) was applied: its word goes (`check_map`)

    def __len__(self) -> int:
        return len(self.pairs)


def clip_poses(motion: Any, frames: int = 64) -> Any:
    """(F, J, 3) world joint positions of up to ``frames`` evenly spaced frames of ``motion`` (what the
    body reading and the shape check look at instead of the rest pose)."""
    import numpy as np

    idx = np.unique(np.linspace(0, motion.num_frames - 1, min(frames, motion.num_frames)).astype(np.int64))
    return motion.skeleton.forward_kinematics(motion.rotations[idx], motion.positions[idx])[1]


def _body(skeleton: Skeleton, poses: Any) -> topology.Body | None:
    return topology.find_body(skeleton.parents, skeleton.offsets, skeleton.names, poses)


def _merge_roles(named: dict[str, str], body: dict[str, str]) -> dict[str, str]:
    """The body's roles, and the preset's for the joints the body gives no role."""
    taken = set(body.values())
    return {c: n for c, n in named.items() if n not in taken} | body


def auto_map(source: Skeleton, target: Skeleton, *, source_preset: str | None = None,
             target_preset: str | None = None, overrides: str | Path | Mapping[str, Any] | None = None,
             source_poses: Any = None, target_poses: Any = None) -> JointMap:
    """Match target joints to source joints: body part by body part when both rigs read as bodies
    (``source_poses`` / ``target_poses``: (F, J, 3) world positions of some frames, ``clip_poses``; default the
    rest pose), then, for the joints outside the bodies, same canonical name under the detected (or given)
    presets, then equal normalised names. A target joint whose normalised name fits several unused source
    joints is left out and listed in ``ambiguous``. ``overrides`` (a JSON/TOML path or an already-parsed
    dict, see ``load_overrides``) is applied last."""
    for p in (source_preset, target_preset):
        if p is not None and p not in PRESETS:
            raise RetargetError(f"preset: unknown {p!r}; known: {sorted(PRESETS)}")
    sp = source_preset or detect_preset(source)
    tp = target_preset or detect_preset(target)
    s_roles, t_roles = _roles(source, sp), _roles(target, tp)
    sb, tb = _body(source, source_poses), _body(target, target_poses)
    pairs: dict[str, str] = {}
    owned: set[str] = set()   # target joints the body pairing decides (mapped or left out)
    if sb is not None and tb is not None:
        pairs = {target.names[t]: source.names[s] for t, s in topology.pair_bodies(sb, tb).items()}
        owned = {target.names[j] for chain in tb.parts.values() for j in chain}
        t_roles, s_roles = _merge_roles(t_roles, tb.roles(target.names)), _merge_roles(s_roles, sb.roles(source.names))
    pairs, ambiguous = pair_by_names(source.names, target.names, s_roles, t_roles, pairs, owned)
    jm = JointMap(_ordered(pairs, target), tuple(n for n in target.names if n not in pairs), ambiguous,
                  t_roles, sp, tp, None if sb is None or tb is None else min(sb.sides_from, tb.sides_from,
                                                                             key=("names", "pose").index))
    if overrides is not None:
        if not isinstance(overrides, Mapping):
            overrides = load_overrides(overrides)
        jm = apply_overrides(jm, overrides, source, target)
    return jm


def _ordered(pairs: dict[str, str], target: Skeleton) -> dict[str, str]:
    return {n: pairs[n] for n in target.names if n in pairs}


def load_overrides(path: str | Path) -> dict[str, Any]:
    """Parse an override file (``.toml`` or ``.json``)::

        [map]                 # target joint = source joint
        Hips = "root"
        [unmap]
        joints = ["joint_Root"]   # target joints to hold at rest even if auto-matched

    (JSON: ``{"map": {...}, "unmap": {"joints": [...]}}``, or the add-on's flat bone map
    ``{"target joint": "source joint", ...}`` with "" for a joint to hold at rest.) Only the shape is checked
    here; joint names are checked against the skeletons by ``apply_overrides``."""
    path = Path(path)
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (OSError, ValueError) as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise RetargetError(f"{path}: cannot read override file: {e}") from e
    if not isinstance(data, dict):
        raise RetargetError(f"{path}: expected a table at top level, got {type(data).__name__}")
    if data and not set(data) & {"map", "unmap"} and all(isinstance(v, str) for v in data.values()):
        data = {"map": {t: s for t, s in data.items() if s}, "unmap": {"joints": [t for t, s in data.items() if not s]}}
    return data


def apply_overrides(joint_map: JointMap, overrides: Mapping[str, Any], source: Skeleton, target: Skeleton) -> JointMap:
    """A new JointMap with ``overrides['map']`` (target -> source) set and ``overrides['unmap']['joints']``
    removed. Raises RetargetError naming any unknown key or joint."""
    extra = set(overrides) - {"map", "unmap"}
    if extra:
        raise RetargetError(f"overrides: unknown section(s) {sorted(extra)}; expected 'map' and/or 'unmap'")
    mapping = overrides.get("map", {})
    unmap = overrides.get("unmap", {})
    if not isinstance(mapping, Mapping):
        raise RetargetError(f"overrides.map: expected a table of target = source, got {type(mapping).__name__}")
    if not isinstance(unmap, Mapping) or set(unmap) - {"joints"} or not isinstance(unmap.get("joints", []), list):
        raise RetargetError("overrides.unmap: expected a table with one key, joints = [target joint names]")
    pairs = dict(joint_map.pairs)
    for t, s in mapping.items():
        if t not in target._index:
            raise RetargetError(f"overrides.map: target joint {t!r} is not in the target skeleton")
        if not isinstance(s, str) or s not in source._index:
            raise RetargetError(f"overrides.map.{t}: source joint {s!r} is not in the source skeleton")
        pairs[t] = s
    for t in unmap.get("joints", []):
        if not isinstance(t, str) or t not in target._index:
            raise RetargetError(f"overrides.unmap.joints: target joint {t!r} is not in the target skeleton")
        pairs.pop(t, None)
    ambiguous = {k: v for k, v in joint_map.ambiguous.items() if k not in pairs}
    return JointMap(_ordered(pairs, target), tuple(n for n in target.names if n not in pairs), ambiguous,
                    joint_map.roles, joint_map.source_preset, joint_map.target_preset, joint_map.sides_from, True)


MIN_MAPPED = 0.5        # `check_map`: at least this share of the target's joints must have a source joint
UPRIGHT_DEG = 122.0     # and both bodies upright or neither: the median head-hips-feet angle of a clip's frames
# is 132-178 deg on every Bandai and CMU clip and 75-113 on every dog clip (measured on all 1,280 clips)


def _head_feet_angle(skeleton: Skeleton, joints: Mapping[str, str], poses: Any = None) -> float:
    """Degrees between hips->head and hips->(mid of the feet), the median over ``poses`` ((F, J, 3) world
    positions of the clip's frames, ``clip_poses``; default the rest pose): ~180 for a biped standing, ~90
    for a quadruped (head forward, hind feet down). Invariant to the rig's up axis and facing."""
    import numpy as np

    p = skeleton.rest_positions()[None] if poses is None else np.asarray(poses, np.float64).reshape(
        -1, skeleton.num_joints, 3)
    at = {c: p[:, skeleton.index(n)] for c, n in joints.items()}
    a, b = at["head"] - at["hips"], (at["l_foot"] + at["r_foot"]) / 2 - at["hips"]
    cos = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    return float(np.median(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))))


def check_map(joint_map: JointMap, source: Skeleton, target: Skeleton, what: str = "clip", *,
              source_poses: Any = None, target_poses: Any = None) -> JointMap:
    """``joint_map`` if ``source`` can be moved onto ``target`` with it, else `SkeletonMismatch` in one line
    naming the unmapped target joints: fewer than half the target's joints mapped, or (when both rigs have
    hips, head and feet) bodies of another shape (a quadruped onto a biped: one upright, the other not, see
    ``UPRIGHT_DEG``), measured on the clips' own
    frames (``source_poses`` / ``target_poses``, ``clip_poses``; the rest pose only where none are given:
    a rest pose may be degenerate, every bone along one axis); a user's bone map (``--map``) is taken as
    it is, without the shape test, and so is a clip on the target's own rig. Unmapped joints are otherwise allowed (held at rest by `retarget`)."""
    unmapped = ", ".join(joint_map.unmapped[:12]) + (f" and {len(joint_map.unmapped) - 12} more"
                                                     if len(joint_map.unmapped) > 12 else "")
    fix = "give --map FILE (a JSON bone map {\"map\": {target joint: source joint}}) to map them"
    if len(joint_map.pairs) < MIN_MAPPED * target.num_joints:
        raise SkeletonMismatch(f"{what}: its skeleton cannot be mapped onto the target's: only {len(joint_map.pairs)} "
                               f"of {target.num_joints} target joints found; unmapped: {unmapped}; {fix}")
    roles = {c: t for c, t in joint_map.roles.items() if c in ("hips", "head", "l_foot", "r_foot")}
    same_rig = source.same_topology(target)   # a rig onto itself has its own shape, whatever the clip does
    if len(roles) == 4 and all(t in joint_map.pairs for t in roles.values()) and not joint_map.overridden \
            and not same_rig:
        got = _head_feet_angle(source, {c: joint_map.pairs[t] for c, t in roles.items()}, source_poses)
        want = _head_feet_angle(target, roles, target_poses)
        if (got >= UPRIGHT_DEG) != (want >= UPRIGHT_DEG):
            mapped = "every target joint mapped" if not unmapped else f"unmapped: {unmapped}"
            raise SkeletonMismatch(f"{what}: its body is another shape than the target's (head and feet {got:.0f} "
                                   f"deg apart at the hips over its frames, the target's {want:.0f}; upright from "
                                   f"{UPRIGHT_DEG:.0f}: a quadruped onto a biped?); {mapped}; retarget it onto a "
                                   "rig of its own kind, or give --map FILE (a JSON bone map) to move it anyway")
    return joint_map
