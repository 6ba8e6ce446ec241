"""Bone-name presets and auto-mapping of a rig's bones to a model skeleton's joints (pure, no bpy).

Every preset maps canonical *roles* (``hips``, ``upper_arm_l``, ``index_2_r`` ...) to the bone names of
one naming scheme. Mapping a rig to a model goes rig name -> role -> model name, so any two presets
connect (Mixamo -> Bandai, Rigify DEF -> LaFAN1, ...). Names unknown to every preset fall back to
matching normalised names. Quaternions are WXYZ (as Blender).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..vendor.axes import Y_UP_TO_Z_UP
from ..vendor.quat_np import quat_conj, quat_mul

_SIDES = {"l": ("Left", "L", "l"), "r": ("Right", "R", "r")}
_FINGERS = ("thumb", "index", "middle", "ring", "pinky")


def _sided(make: Mapping[str, str]) -> dict[str, str]:
    """Expand ``{role: "pattern with {Side} {S} {s}"}`` into ``role_l`` and ``role_r`` entries."""
    out: dict[str, str] = {}
    for role, pat in make.items():
        for s, (side, S, sl) in _SIDES.items():
            out[f"{role}_{s}"] = pat.format(Side=side, S=S, s=sl)
    return out


def _mixamo() -> dict[str, str]:
    m = {"hips": "Hips", "spine": "Spine", "chest": "Spine1", "upper_chest": "Spine2", "neck": "Neck", "head": "Head"}
    m.update(_sided({"shoulder": "{Side}Shoulder", "upper_arm": "{Side}Arm", "forearm": "{Side}ForeArm",
                     "hand": "{Side}Hand", "thigh": "{Side}UpLeg", "shin": "{Side}Leg", "foot": "{Side}Foot",
                     "toes": "{Side}ToeBase"}))
    for f in _FINGERS:
        for i in (1, 2, 3):
            m.update(_sided({f"{f}_{i}": "{Side}Hand" + f.capitalize() + str(i)}))
    return m


def _rigify() -> dict[str, str]:
    m = {"hips": "DEF-spine", "spine": "DEF-spine.001", "chest": "DEF-spine.002", "upper_chest": "DEF-spine.003",
         "neck": "DEF-spine.004", "head": "DEF-spine.006"}
    m.update(_sided({"shoulder": "DEF-shoulder.{S}", "upper_arm": "DEF-upper_arm.{S}", "forearm": "DEF-forearm.{S}",
                     "hand": "DEF-hand.{S}", "thigh": "DEF-thigh.{S}", "shin": "DEF-shin.{S}", "foot": "DEF-foot.{S}",
                     "toes": "DEF-toe.{S}"}))
    for f in _FINGERS:
        base = "thumb" if f == "thumb" else f"f_{f}"
        for i in (1, 2, 3):
            m.update(_sided({f"{f}_{i}": f"DEF-{base}.0{i}.{{S}}"}))
    return m


def _cmu() -> dict[str, str]:
    m = {"hips": "root", "spine": "lowerback", "chest": "upperback", "upper_chest": "thorax", "neck": "lowerneck",
         "head": "head"}
    m.update(_sided({"hip": "{s}hipjoint", "thigh": "{s}femur", "shin": "{s}tibia", "foot": "{s}foot",
                     "toes": "{s}toes", "shoulder": "{s}clavicle", "upper_arm": "{s}humerus", "forearm": "{s}radius",
                     "wrist": "{s}wrist", "hand": "{s}hand", "thumb_1": "{s}thumb", "fingers": "{s}fingers"}))
    return m


def _lafan1() -> dict[str, str]:
    m = {"hips": "Hips", "spine": "Spine", "chest": "Spine1", "upper_chest": "Spine2", "neck": "Neck", "head": "Head"}
    m.update(_sided({"shoulder": "{Side}Shoulder", "upper_arm": "{Side}Arm", "forearm": "{Side}ForeArm",
                     "hand": "{Side}Hand", "thigh": "{Side}UpLeg", "shin": "{Side}Leg", "foot": "{Side}Foot",
                     "toes": "{Side}Toe"}))
    return m


def _bandai() -> dict[str, str]:
    m = {"root": "joint_Root", "hips": "Hips", "spine": "Spine", "chest": "Chest", "neck": "Neck", "head": "Head"}
    m.update(_sided({"shoulder": "Shoulder_{S}", "upper_arm": "UpperArm_{S}", "forearm": "LowerArm_{S}",
                     "hand": "Hand_{S}", "thigh": "UpperLeg_{S}", "shin": "LowerLeg_{S}", "foot": "Foot_{S}",
                     "toes": "Toes_{S}"}))
    return m


def _manipnet() -> dict[str, str]:
    """One ManipNet hand (its BVH files hold one hand each, so names carry no side: see ``side``)."""
    m = {"hand": "WRIST", "thumb_1": "THUMB_CMC_FE", "thumb_1b": "THUMB_CMC_AA", "thumb_2": "THUMB_MCP_FE",
         "thumb_3": "THUMB_IP_FE"}
    for f in _FINGERS[1:]:
        F = f.upper()
        m.update({f"{f}_1": f"{F}_MCP", f"{f}_2": f"{F}_PIP_FE", f"{f}_3": f"{F}_DIP_FE"})
    return m


# preset name -> {role: bone name}. Mixamo names usually carry a "mixamorig:" (or "mixamorigN:") prefix,
# removed by normalise().
PRESETS: dict[str, dict[str, str]] = {
    "MIXAMO": _mixamo(), "RIGIFY_DEF": _rigify(), "CMU": _cmu(), "LAFAN1": _lafan1(), "BANDAI": _bandai(),
    "MANIPNET": _manipnet(),
}

_PREFIX = re.compile(r"^(mixamorig\d*|[A-Za-z0-9_]+)[:|]")


def normalise(name: str) -> str:
    """Strip a namespace prefix (``mixamorig:``, ``Armature|``) and keep the rest verbatim."""
    return _PREFIX.sub("", name, count=1)


def _key(name: str) -> str:
    """Loose comparison key: no prefix, lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", normalise(name).lower())


def detect_preset(names: Iterable[str]) -> tuple[str | None, float]:
    """The preset whose names cover most of ``names`` (fraction of its bones found); (None, 0) if none."""
    have = {normalise(n) for n in names}
    best, score = None, 0.0
    for preset, roles in PRESETS.items():
        found = sum(1 for b in roles.values() if b in have)
        frac = found / len(roles)
        if found >= 3 and frac > score:
            best, score = preset, frac
    return best, score


@dataclass
class RigMap:
    """Model joint name -> rig bone name, for the joints that could be mapped."""

    mapping: dict[str, str]
    unmapped: list[str]                                   # model joints with no rig bone, in model order
    rig_preset: str | None = None
    model_preset: str | None = None

    def bones(self, joints: Sequence[str]) -> list[str | None]:
        """The rig bone for each model joint (None where unmapped)."""
        return [self.mapping.get(j) for j in joints]


def auto_map(rig_bones: Sequence[str], model_joints: Sequence[str], *, rig_preset: str | None = None,
             model_preset: str | None = None, side: str = "r", overrides: Mapping[str, str] | None = None) -> RigMap:
    """Map ``model_joints`` to ``rig_bones``: first the user's ``overrides`` (model joint -> rig bone, as
    stored on the armature; an empty bone means "leave unmapped"), then through the presets (detected
    unless given), then by normalised name. Each rig bone is used at most once. A role without a side
    (one-hand presets such as ManipNet) maps to the rig's ``side`` ("l" or "r") bone."""
    if side not in ("l", "r"):
        raise ValueError(f"side must be 'l' or 'r', got {side!r}")
    for p in (rig_preset, model_preset):
        if p is not None and p not in PRESETS:
            raise ValueError(f"unknown rig preset {p!r}; known: {sorted(PRESETS)}")
    rp = rig_preset or detect_preset(rig_bones)[0]
    mp = model_preset or detect_preset(model_joints)[0]
    by_norm = {normalise(b): b for b in rig_bones}
    by_key = {_key(b): b for b in rig_bones}
    role_of_model = {v: k for k, v in PRESETS[mp].items()} if mp else {}
    rig_roles = PRESETS[rp] if rp else {}
    mapping: dict[str, str] = {}
    used: set[str] = set()
    fixed = {j: b for j, b in (overrides or {}).items() if j in set(model_joints)}
    rig = set(rig_bones)
    for j, b in fixed.items():
        if b and b in rig and b not in used:
            mapping[j] = b
            used.add(b)
    for j in model_joints:
        if j in fixed:
            continue
        cand = None
        role = role_of_model.get(normalise(j))
        for r in (role, f"{role}_{side}") if role is not None else ():
            if r in rig_roles:
                cand = by_norm.get(rig_roles[r])
                break
        if cand is None:
            cand = by_norm.get(normalise(j)) or by_key.get(_key(j))
        if cand is not None and cand not in used:
            mapping[j] = cand
            used.add(cand)
    unmapped = [j for j in model_joints if j not in mapping]
    return RigMap(mapping, unmapped, rp, mp)


# ---------------------------------------------------------------------------------------- rest pose

def correct_rest(q: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Express model-space local rotations ``q`` (..., 4) in a rig bone whose rest frame differs from the
    model joint's by the unit rotation ``offset`` (4,) (model rest frame -> rig rest frame, WXYZ):
    ``offset^-1 * q * offset``. The identity offset returns ``q`` unchanged; the result has the same
    rotation angle as ``q`` about the axis carried into the rig bone's frame. This is the roll /
    rest-pose correction: :func:`rest_offset` gives each bone's offset from its rest matrix."""
    off = np.asarray(offset, np.float64)
    if off.shape != (4,) or not np.isclose(np.linalg.norm(off), 1.0, atol=1e-6):
        raise ValueError(f"offset must be a unit WXYZ quaternion of shape (4,), got {off.shape}")
    return quat_mul(quat_mul(quat_conj(off), q), off)


# Model skeletons are Y-up with every joint's rest frame on the world axes (BVH); Blender is Z-up and a
# bone's rest frame has Y along the bone, rolled about it. Y-up -> Z-up is +90 degrees about X.
# Y_UP_TO_Z_UP: vendor/axes.py (the library's core/axes.py).


def rest_offset(bone_rest: np.ndarray) -> np.ndarray:
    """The offset (WXYZ) of a bone whose rest rotation in armature space is ``bone_rest`` (WXYZ, from
    ``bone.matrix_local``): C = A^-1 M, with A the model's Y-up -> Blender's Z-up rotation.

    With the rig's rest pose shaped like the model's, a model local rotation q_j and the bone's pose
    rotation p_b are related by p = C^-1 q C (``correct_rest(q, C)``) and q = C p C^-1
    (``correct_rest(p, quat_conj(C))``): the posed bone's armature-space rotation is then A G_j A^-1 M,
    the model joint's global rotation G_j carried into Blender's axes and applied to the bone's rest
    frame, whatever its roll or direction."""
    m = np.asarray(bone_rest, np.float64)
    return quat_mul(quat_conj(Y_UP_TO_Z_UP), m / np.linalg.norm(m))


def to_rig(q: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """Model local rotations (..., 4) -> the bone's pose rotations (``offset`` None: unchanged)."""
    return np.asarray(q, np.float64) if offset is None else correct_rest(q, offset)


def to_model(p: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """The bone's pose rotations (..., 4) -> model local rotations (the inverse of :func:`to_rig`)."""
    return np.asarray(p, np.float64) if offset is None else correct_rest(p, quat_conj(offset))


_LEFT = re.compile(r"(^|[^a-z])(left|l)([^a-z]|$)|left", re.IGNORECASE)
_RIGHT = re.compile(r"(^|[^a-z])(right|r)([^a-z]|$)|right", re.IGNORECASE)


def hand_side(names: Sequence[str]) -> str | None:
    """"l" or "r" when the names (the armature object's and data's, the hand's bones) say which hand it is
    ("leftHand" as Blender names a ManipNet leftHand.bvh import, "hand.L", "Left_wrist"), None when they
    do not or disagree."""
    left = any(_LEFT.search(n) for n in names)
    right = any(_RIGHT.search(n) for n in names)
    return "l" if left and not right else "r" if right and not left else None
