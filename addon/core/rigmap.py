"""Auto-mapping of a rig's bones to a model skeleton's joints by name (pure, no bpy), with the library's
name presets (the vendored ``retarget/names.py``: one vocabulary for the library and the add-on), and the rest
pose corrections. Quaternions are WXYZ (as Blender).

Each preset maps canonical *roles* (``hips``, ``l_upper_arm``, ``r_index2`` ...) to the bone names of one
naming scheme; mapping a rig to a model goes rig name -> role -> model name, so any two presets connect
(Mixamo -> Bandai, Rigify DEF -> LaFAN1, ...). Names unknown to every preset fall back to matching normalised
names. Given the rig's hierarchy and the model's, bodies are paired first by topology, as the library does
(the vendored ``retarget/topology.py``: spine, limbs and sides from the hierarchy and the heads, names only
breaking ties), and names only map what the bodies leave. The *Rig Names* ids (``MIXAMO``, ``RIGIFY_DEF``...) name the library's presets (``UI_PRESETS``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..vendor.axes import Y_UP_TO_Z_UP
from ..vendor.names import PRESETS as NAMES
from ..vendor.names import normalise_name, pair_by_names, preset_of, roles_in  # noqa: F401 (normalise_name: the add-on's key)
from ..vendor.quat_np import quat_conj, quat_mul
from ..vendor.topology import find_body, pair_bodies

# Rig Names id -> the library's preset (``MANIPNET``: one hand, its side from ``auto_map``'s ``side``)
UI_PRESETS = {"MIXAMO": "mixamo", "RIGIFY_DEF": "rigify", "CMU": "cmu", "LAFAN1": "lafan1", "BANDAI": "bandai",
              "MANIPNET": "manipnet-right"}
PRESETS: dict[str, dict[str, str]] = {ui: NAMES[lib] for ui, lib in UI_PRESETS.items()}   # role -> bone name
_UI_OF = {lib: ui for ui, lib in UI_PRESETS.items()} | {"manipnet-left": "MANIPNET"}


def detect_preset(names: Iterable[str]) -> tuple[str | None, float]:
    """The Rig Names id of the library preset that covers ``names`` (`names.preset_of`), and 1.0; (None, 0)
    if none does."""
    lib = preset_of(list(names))
    return (_UI_OF[lib], 1.0) if lib is not None else (None, 0.0)


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


def _roles(names: Sequence[str], ui: str | None, side: str) -> dict[str, str]:
    """role -> name for the preset's names present; a one-hand preset (ManipNet) on ``side``."""
    if ui is None:
        return {}
    lib = UI_PRESETS[ui]
    if lib.startswith("manipnet"):
        lib = f"manipnet-{'left' if side == 'l' else 'right'}"
    return roles_in(names, lib)


def body_pairs(rig_bones: Sequence[str], rig_parents: Sequence[int], rig_heads: np.ndarray,
               model_joints: Sequence[str], model_parents: Sequence[int], model_offsets: np.ndarray
               ) -> tuple[dict[str, str], set[str]]:
    """(model joint -> rig bone for the bodies paired by topology, the model joints the bodies decide), or
    ({}, set()) when either is no body. The rig's body is read from its bones' heads (armature space, any
    up axis), the model's from its rest offsets; both as the library's ``retarget.auto_map`` reads them."""
    heads = np.asarray(rig_heads, np.float64).reshape(-1, 3)
    par = np.asarray(rig_parents, np.int64)
    if len(par) != len(rig_bones) or np.any(par >= np.arange(len(par))):
        return {}, set()   # not parents-first: leave it to the names
    off = heads - np.where(par[:, None] >= 0, heads[np.maximum(par, 0)], 0.0)
    rb = find_body(par, off, list(rig_bones), heads)
    mb = find_body(model_parents, np.asarray(model_offsets, np.float64), list(model_joints))
    if rb is None or mb is None:
        return {}, set()
    pairs = {model_joints[t]: rig_bones[s] for t, s in pair_bodies(rb, mb).items()}
    return pairs, {model_joints[j] for chain in mb.parts.values() for j in chain}


def auto_map(rig_bones: Sequence[str], model_joints: Sequence[str], *, rig_preset: str | None = None,
             model_preset: str | None = None, side: str = "r", overrides: Mapping[str, str] | None = None,
             rig_parents: Sequence[int] | None = None, rig_heads: np.ndarray | None = None,
             model_parents: Sequence[int] | None = None, model_offsets: np.ndarray | None = None) -> RigMap:
    """Map ``model_joints`` to ``rig_bones``: first the user's ``overrides`` (model joint -> rig bone, as
    stored on the armature; an empty bone means "leave unmapped"), then the bodies by topology when both
    hierarchies are given (`body_pairs`), then through the presets (detected unless given), then by
    normalised name (ties left out, as the library leaves them). A one-hand model (ManipNet) maps to the rig's
    ``side`` ("l" or "r") hand."""
    if side not in ("l", "r"):
        raise ValueError(f"side must be 'l' or 'r', got {side!r}")
    for p in (rig_preset, model_preset):
        if p is not None and p not in PRESETS:
            raise ValueError(f"unknown rig preset {p!r}; known: {sorted(PRESETS)}")
    rp = rig_preset or detect_preset(rig_bones)[0]
    mp = model_preset or detect_preset(model_joints)[0]
    one_hand = mp is not None and UI_PRESETS[mp].startswith("manipnet")
    model_roles = {(f"{side}_{r[2:]}" if one_hand else r): j for r, j in _roles(model_joints, mp, side).items()}
    mapping: dict[str, str] = {}
    used: set[str] = set()
    fixed = {j: b for j, b in (overrides or {}).items() if j in set(model_joints)}
    rig = set(rig_bones)
    for j, b in fixed.items():
        if b and b in rig and b not in used:
            mapping[j] = b
            used.add(b)
    owned: set[str] = set()
    if rig_parents is not None and rig_heads is not None and model_parents is not None and model_offsets is not None:
        pairs, owned = body_pairs(rig_bones, rig_parents, rig_heads, model_joints, model_parents, model_offsets)
        for j, b in pairs.items():
            if j not in fixed and b not in used:
                mapping[j] = b
                used.add(b)
    # then the library's name step (`vendor.names.pair_by_names`): roles under the presets (a one-hand model's hand
    # onto the rig's hand on ``side``), then equal normalised names, ties left out
    mapping, _ = pair_by_names(rig_bones, model_joints, _roles(rig_bones, rp, side), model_roles, mapping,
                               set(fixed) | owned)
    mapping = {j: mapping[j] for j in model_joints if j in mapping}
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
