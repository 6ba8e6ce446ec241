"""Joint names: a small canonical vocabulary (``hips``, ``l_upper_leg``, ``r_index2``...) and the presets that
map it to common rigs' names, for ``retarget.mapping`` and the Blender add-on alike (vendored by
scripts/build_addon.py: stdlib only). Names are hints: ``retarget.topology`` reads bodies from the hierarchy and
the pose first; the presets pair what is left (fingers, helpers) and rigs that are no body (a hand).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["CANONICAL", "PRESETS", "normalise_name", "preset_of", "roles_in"]

_BODY = ("root", "hips", "spine", "spine1", "chest", "neck", "neck1", "head", "head_end")
_SIDED = ("hip", "shoulder", "upper_arm", "forearm", "hand", "upper_leg", "lower_leg", "foot", "toe", "toe_end")
_FINGERS = tuple(f"{f}{i}" for f in ("index", "middle", "ring", "pinky") for i in (1, 2, 3)) + (
    "thumb1", "thumb1b", "thumb2", "thumb3")
CANONICAL: tuple[str, ...] = _BODY + tuple(f"{s}_{p}" for s in "lr" for p in _SIDED + _FINGERS)


def _sides(table: dict[str, str], left: str, right: str) -> dict[str, str]:
    """Expand ``{canonical part: name with {s}}`` for both sides ('{s}' -> the side token)."""
    return {f"{c}_{part}": name.format(s=tok) for c, tok in (("l", left), ("r", right)) for part, name in table.items()}


_LAFAN_SIDED = {"shoulder": "{s}Shoulder", "upper_arm": "{s}Arm", "forearm": "{s}ForeArm", "hand": "{s}Hand",
                "upper_leg": "{s}UpLeg", "lower_leg": "{s}Leg", "foot": "{s}Foot"}
_MIXAMO_FINGERS = {f"{f.lower()}{i}": f"mixamorig:{{s}}Hand{f}{i}" for f in ("Index", "Middle", "Ring", "Pinky")
                   for i in (1, 2, 3)} | {f"thumb{i}": f"mixamorig:{{s}}HandThumb{i}" for i in (1, 2, 3)}
_MANIPNET = {"hand": "WRIST", "thumb1": "THUMB_CMC_FE", "thumb1b": "THUMB_CMC_AA", "thumb2": "THUMB_MCP_FE",
             "thumb3": "THUMB_IP_FE"} | {f"{f.lower()}{i}": f"{f}_{k}" for f in ("INDEX", "MIDDLE", "RING", "PINKY")
                                         for i, k in ((1, "MCP"), (2, "PIP_FE"), (3, "DIP_FE"))}

PRESETS: dict[str, dict[str, str]] = {  # preset -> {canonical name: joint name}
    "cmu": {"hips": "root", "spine": "lowerback", "spine1": "upperback", "chest": "thorax", "neck": "lowerneck",
            "neck1": "upperneck", "head": "head"} | _sides(
        {"hip": "{s}hipjoint", "upper_leg": "{s}femur", "lower_leg": "{s}tibia", "foot": "{s}foot", "toe": "{s}toes",
         "shoulder": "{s}clavicle", "upper_arm": "{s}humerus", "forearm": "{s}radius", "hand": "{s}wrist"}, "l", "r"),
    "bandai": {"hips": "Hips", "spine": "Spine", "chest": "Chest", "neck": "Neck", "head": "Head"} | _sides(
        {"shoulder": "Shoulder_{s}", "upper_arm": "UpperArm_{s}", "forearm": "LowerArm_{s}", "hand": "Hand_{s}",
         "upper_leg": "UpperLeg_{s}", "lower_leg": "LowerLeg_{s}", "foot": "Foot_{s}", "toe": "Toes_{s}"}, "L", "R"),
    "lafan1": {"hips": "Hips", "spine": "Spine", "spine1": "Spine1", "chest": "Spine2", "neck": "Neck",
               "head": "Head"} | _sides(_LAFAN_SIDED | {"toe": "{s}Toe"}, "Left", "Right"),
    "mixamo": {k: f"mixamorig:{v}" for k, v in {"hips": "Hips", "spine": "Spine", "spine1": "Spine1", "chest": "Spine2",
                                                 "neck": "Neck", "head": "Head", "head_end": "HeadTop_End"}.items()}
    | _sides({k: f"mixamorig:{v}" for k, v in (_LAFAN_SIDED | {"toe": "{s}ToeBase", "toe_end": "{s}Toe_End"}).items()}
             | _MIXAMO_FINGERS, "Left", "Right"),
    "rigify": {"hips": "DEF-spine", "spine": "DEF-spine.001", "spine1": "DEF-spine.002", "chest": "DEF-spine.003",
               "neck": "DEF-spine.004", "neck1": "DEF-spine.005", "head": "DEF-spine.006"} | _sides(
        {"shoulder": "DEF-shoulder.{s}", "upper_arm": "DEF-upper_arm.{s}", "forearm": "DEF-forearm.{s}",
         "hand": "DEF-hand.{s}", "upper_leg": "DEF-thigh.{s}", "lower_leg": "DEF-shin.{s}", "foot": "DEF-foot.{s}",
         "toe": "DEF-toe.{s}"} | {f"thumb{i}": f"DEF-thumb.0{i}.{{s}}" for i in (1, 2, 3)}
        | {f"{f}{i}": f"DEF-f_{f}.0{i}.{{s}}" for f in ("index", "middle", "ring", "pinky") for i in (1, 2, 3)},
        "L", "R"),
    "manipnet-right": {f"r_{k}": v for k, v in _MANIPNET.items()},  # one hand; names carry no side
    "manipnet-left": {f"l_{k}": v for k, v in _MANIPNET.items()},
}
assert all(c in CANONICAL for p in PRESETS.values() for c in p), "preset uses a name outside CANONICAL"


def normalise_name(name: str) -> str:
    """Matching key: namespace ('mixamorig:', 'Armature|') dropped, lowercase, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", re.split(r"[:|]", name)[-1].lower())


def preset_of(names: Iterable[str]) -> str | None:
    """The preset whose joint names (normalised) best cover ``names``, or None if none covers at least half
    its own joints (and 3 joints). Ties go to the earlier preset in ``PRESETS``."""
    have = {normalise_name(n) for n in names}
    best, best_score = None, 0.0
    for preset, table in PRESETS.items():
        hits = sum(normalise_name(n) in have for n in table.values())
        score = hits / len(table)
        if hits >= 3 and score >= 0.5 and score > best_score:
            best, best_score = preset, score
    return best


def roles_in(names: Iterable[str], preset: str | None) -> dict[str, str]:
    """canonical name -> the joint of ``names`` the preset gives it, for the preset's joints present."""
    if preset is None:
        return {}
    by_key = {normalise_name(n): n for n in names}
    return {c: by_key[normalise_name(n)] for c, n in PRESETS[preset].items() if normalise_name(n) in by_key}


def pair_by_names(source: Iterable[str], target: Iterable[str], source_roles: Mapping[str, str],
                  target_roles: Mapping[str, str], pairs: Mapping[str, str] | None = None,
                  decided: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """The name step of a joint map, one rule for the library's ``retarget.auto_map`` and the add-on's bone map:
    ``pairs`` (target -> source, already decided: a user's choices, the bodies paired by topology) extended, for
    the target joints not in ``decided``, with the source joint of the same canonical role (``*_roles``:
    canonical name -> joint, `roles_in`), then the one unused source joint of equal normalised name. Returns
    (pairs, ambiguous): a target joint whose normalised name fits several unused source joints is left out
    and listed with them."""
    out = dict(pairs or {})
    skip = set(decided) | set(out)
    used = set(out.values())
    for c in CANONICAL:
        t, s = target_roles.get(c), source_roles.get(c)
        if t and s and t not in skip and t not in out and s not in used:
            out[t] = s
            used.add(s)
    by_key: dict[str, list[str]] = {}
    for n in source:
        if n not in used:
            by_key.setdefault(normalise_name(n), []).append(n)
    ambiguous: dict[str, tuple[str, ...]] = {}
    for n in target:
        if n in out or n in skip:
            continue
        cands = by_key.get(normalise_name(n), [])
        if len(cands) == 1:
            out[n] = cands[0]
        elif len(cands) > 1:
            ambiguous[n] = tuple(cands)
    return out, ambiguous
