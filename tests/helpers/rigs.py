"""A Bandai clip's 22 joints renamed into the common name sets of biped rigs (tests/retarget/test_rig_topology.py,
tests/addon/test_addon_maps_like_the_library.py)."""
from __future__ import annotations

from motioncore.core.motion import Motion
from motioncore.core.skeleton import Skeleton

BANDAI = ("joint_Root", "Hips", "Spine", "Chest", "Neck", "Head", "Shoulder_L", "UpperArm_L", "LowerArm_L", "Hand_L",
          "Shoulder_R", "UpperArm_R", "LowerArm_R", "Hand_R", "UpperLeg_L", "LowerLeg_L", "Foot_L", "Toes_L",
          "UpperLeg_R", "LowerLeg_R", "Foot_R", "Toes_R")
_LIMBS = ("Shoulder", "UpperArm", "LowerArm", "Hand", "UpperLeg", "LowerLeg", "Foot", "Toes")


def _set(root: str, hips: str, spine: str, chest: str, neck: str, head: str, limbs: tuple[str, ...], left: str,
         right: str) -> dict[str, str]:
    """Bandai name -> this set's name; ``limbs`` in _LIMBS order with {s} for the side token."""
    out = dict(zip(BANDAI[:6], (root, hips, spine, chest, neck, head), strict=True))
    for s, tok in (("L", left), ("R", right)):
        out |= {f"{b}_{s}": n.format(s=tok) for b, n in zip(_LIMBS, limbs, strict=True)}
    return out


_MIX = ("{s}Shoulder", "{s}Arm", "{s}ForeArm", "{s}Hand", "{s}UpLeg", "{s}Leg", "{s}Foot", "{s}ToeBase")
NAME_SETS = {
    "bandai": dict(zip(BANDAI, BANDAI, strict=True)),
    "lafan1": _set("Root", "Hips", "Spine", "Spine2", "Neck", "Head",
                   ("{s}Shoulder", "{s}Arm", "{s}ForeArm", "{s}Hand", "{s}UpLeg", "{s}Leg", "{s}Foot", "{s}Toe"),
                   "Left", "Right"),
    "cmu-asf": _set("world", "root", "lowerback", "thorax", "lowerneck", "head",
                    ("{s}clavicle", "{s}humerus", "{s}radius", "{s}wrist", "{s}femur", "{s}tibia", "{s}foot",
                     "{s}toes"), "l", "r"),
    "cmu-3dsmax": _set("Root", "Hips", "lowerback", "Chest", "Neck", "Head",
                       ("{s}Collar", "{s}Shoulder", "{s}Elbow", "{s}Wrist", "{s}Hip", "{s}Knee", "{s}Ankle",
                        "{s}Toe"), "Left", "Right"),
    "cmu-motionbuilder": _set("Root", "Hips", "LowerBack", "Spine1", "Neck", "Head", _MIX, "Left", "Right"),
    "mixamo": {k: f"mixamorig:{v}" for k, v in _set("Root", "Hips", "Spine", "Spine1", "Neck", "Head", _MIX, "Left",
                                                      "Right").items()},
    "humanik": _set("Reference", "Hips", "Spine", "Spine1", "Neck", "Head", _MIX, "Left", "Right"),
    "unreal": _set("root", "pelvis", "spine_01", "spine_03", "neck_01", "head",
                   ("clavicle_{s}", "upperarm_{s}", "lowerarm_{s}", "hand_{s}", "thigh_{s}", "calf_{s}", "foot_{s}",
                    "ball_{s}"), "l", "r"),
    "rigify-def": _set("root", "DEF-spine", "DEF-spine.001", "DEF-spine.003", "DEF-spine.004", "DEF-spine.006",
                       ("DEF-shoulder.{s}", "DEF-upper_arm.{s}", "DEF-forearm.{s}", "DEF-hand.{s}", "DEF-thigh.{s}",
                        "DEF-shin.{s}", "DEF-foot.{s}", "DEF-toe.{s}"), "L", "R"),
    "metarig": _set("Armature", "spine", "spine.001", "spine.003", "spine.004", "spine.006",
                    ("shoulder.{s}", "upper_arm.{s}", "forearm.{s}", "hand.{s}", "thigh.{s}", "shin.{s}", "foot.{s}",
                     "toe.{s}"), "L", "R"),
}


def renamed(m: Motion, names: dict[str, str]) -> Motion:
    sk = m.skeleton
    return Motion(Skeleton(tuple(names[n] for n in sk.names), sk.parents, sk.offsets, sk.channels, sk.end_sites),
                  m.rotations, m.positions, m.fps, m.name)


