"""Retarget a clip onto another skeleton by world-space rotation offsets.

Legend: T frames, J joints (Js source, Jt target), K direction pairs. Quaternions are WXYZ. All
numpy float64.

Reference pose: the *source* rest pose (all local rotations identity), so the source's global
rest rotations ``Rs`` are identity. ``rest_rotations`` poses the target to match it: walking the
target hierarchy parents first, each mapped target joint j starts from its parent's reference
rotation (identity local) and is turned by the smallest rotation that points its rest bones along
the source's. Bones of j are the vectors from j to the first mapped joint down each child branch
whose vector is non-zero in both rigs (zero-length ASF bones such as CMU ``lowerback`` are skipped).
One bone: shortest arc (``quat_between``), so twist is inherited from the parent. Several (hips,
chest): the best rotation (Kabsch, unit vectors) taking the unpaired bones (spine, neck) and the
left-minus-right across vectors of mirrored branches (legs, shoulders) onto the source's; this also
aligns the facing of the whole skeleton. No bone (leaves): the parent's rotation.

Per frame, with Gs the source global rotations and s(j) the source joint mapped to target joint j:

    Gt[j] = Gs[s(j)] * Rs[s(j)]^-1 * Rt[j]        (mapped j)
    Gt[j] = Gt[parent(j)]                          (unmapped j: held at rest, local identity)
    local[j] = Gt[parent(j)]^-1 * Gt[j]

so a bone that points along the source bone in the reference pose points along it in every frame.
The target root (the ``hips`` role, else the shallowest mapped joint) is placed at
``scale * (source world position of its mapped joint)``; every other joint keeps its rest offset.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ..core.kinematics import find_body_joints
from ..core.motion import Motion
from ..core.rotations import (
    quat_apply,
    quat_continuity,
    quat_inv,
    quat_mul,
    quat_normalize,
)
from ..core.skeleton import Skeleton
from . import rest
from .contacts import pin_feet, source_contacts
from .mapping import JointMap, RetargetError, _roles, detect_preset
from .twist import match_convention

__all__ = ["leg_length", "leg_scale", "own_convention", "rest_rotations", "retarget"]


def _pairs_of(joint_map: JointMap | Mapping[str, str], source: Skeleton, target: Skeleton) -> dict[int, int]:
    """target index -> source index, validated."""
    pairs = joint_map.pairs if isinstance(joint_map, JointMap) else dict(joint_map)
    out = {}
    for t, s in pairs.items():
        if t not in target._index:
            raise RetargetError(f"joint_map: target joint {t!r} is not in the target skeleton")
        if s not in source._index:
            raise RetargetError(f"joint_map[{t!r}]: source joint {s!r} is not in the source skeleton")
        out[target.index(t)] = source.index(s)
    if not out:
        raise RetargetError("joint_map: no joints mapped")
    return out


def rest_rotations(source: Skeleton, target: Skeleton,
                   joint_map: JointMap | Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Global reference rotations ``(Rs, Rt)``, each (Jt, 4) WXYZ, per *target* joint: ``Rs[j]`` the
    source rest rotation of j's source joint (identity; for unmapped j, identity) and ``Rt[j]`` the
    target joint's rotation when the target is posed like the source rest pose (see module doc)."""
    pairs = _pairs_of(joint_map, source, target)
    rs_all = source.forward_kinematics(np.tile([1.0, 0, 0, 0], (source.num_joints, 1)), source.offsets)[0]
    Rs = np.tile([1.0, 0, 0, 0], (target.num_joints, 1))
    for j, s in pairs.items():
        Rs[j] = rs_all[s]
    Rt = rest.rest_rotations(target.names, list(target.parents), target.offsets, pairs, source.rest_positions())
    return Rs, Rt


def own_convention(skeleton: Skeleton, model: Skeleton, convention: np.ndarray | None, rotations: np.ndarray,
                   frames: int = 2048) -> bool:
    """Whether a rig with the model's joints (names and hierarchy) is in the model's own convention, so its
    alignment is the identity and the model may read it directly (`rest.alignment`'s ``rest_same``): every bone
    below the body root points as the model's at rest (within ``rest.SAME_DEG``; the root's offset is its
    placement, not a bone) and, with the model's ``convention`` (J, 4), the bone rolls that bring the clip's
    locals closest to it are all within ``rest.TWIST_SAME_DEG``, judged on up to ``frames`` of ``rotations``
    (N, J, 4) (keyed frames of the clip). False for another hierarchy."""
    if not skeleton.same_topology(model):
        return False
    chain, j = [], find_body_joints(model).root
    while j >= 0:
        chain.append(j)
        j = int(model.parents[j])
    off = np.array(skeleton.offsets, np.float64)
    off[chain] = model.offsets[chain]
    heads = skeleton.forward_kinematics(np.tile([1.0, 0, 0, 0], (skeleton.num_joints, 1)), off)[1]
    q = np.asarray(rotations, np.float64).reshape(-1, skeleton.num_joints, 4)
    q = q[np.unique(np.linspace(0, len(q) - 1, min(len(q), frames)).round().astype(np.int64))] if len(q) else None
    sk = {"names": list(model.names), "parents": [int(p) for p in model.parents], "offsets": model.offsets,
          "convention": convention}
    J = model.num_joints
    return bool(rest.alignment(sk, list(range(J)), heads, [int(p) for p in model.parents], q)["rest_same"])


def leg_length(skeleton: Skeleton, hips: str, foot: str) -> float:
    """Rest length of the chain from ``hips`` down to ``foot``: the sum of the bone lengths (offset
    norms) of every joint below ``hips`` up to and including ``foot`` (pelvis + thigh + shin)."""
    j, stop, total = skeleton.index(foot), skeleton.index(hips), 0.0
    while j != stop:
        if j < 0:
            raise RetargetError(f"leg_length: {foot!r} is not below {hips!r}")
        total += float(np.linalg.norm(skeleton.offsets[j]))
        j = int(skeleton.parents[j])
    return total


def _target_roles(joint_map: JointMap | Mapping[str, str], target: Skeleton) -> dict[str, str]:
    if isinstance(joint_map, JointMap) and joint_map.roles:
        return joint_map.roles
    return _roles(target, detect_preset(target))


def leg_scale(source: Skeleton, target: Skeleton, joint_map: JointMap | Mapping[str, str]) -> float:
    """Target / source hip-to-foot chain length at rest (both legs summed). The target's hips and feet
    come from its preset roles (else ``find_body_joints``); the source's through the joint map."""
    pairs = joint_map.pairs if isinstance(joint_map, JointMap) else dict(joint_map)
    roles = _target_roles(joint_map, target)
    hips, feet = roles.get("hips"), [roles.get("l_foot"), roles.get("r_foot")]
    if not (hips and all(feet)):
        body = find_body_joints(target)
        named = [j for j in body.feet if "toe" not in target.names[j].lower()]
        if len(named) < 2:
            raise RetargetError("scale='legs': cannot find both feet in the target; pass scale=<float>")
        hips, feet = target.names[body.root], [target.names[j] for j in named[:2]]
    t_len = s_len = 0.0
    for ft in feet:
        if hips not in pairs or ft not in pairs:
            raise RetargetError(f"scale='legs': target joints {hips!r} and {ft!r} must be mapped; pass scale=<float>")
        t_len += leg_length(target, hips, ft)
        s_len += leg_length(source, pairs[hips], pairs[ft])
    if s_len <= 0 or t_len <= 0:
        raise RetargetError(f"scale='legs': zero leg length (target {t_len}, source {s_len})")
    return t_len / s_len


def _root_joint(pairs: dict[int, int], target: Skeleton, roles: dict[str, str]) -> int:
    if "hips" in roles and target.index(roles["hips"]) in pairs:
        return target.index(roles["hips"])
    depth = np.zeros(target.num_joints, dtype=np.int64)
    for j, p in enumerate(target.parents):
        depth[j] = depth[p] + 1 if p >= 0 else 0
    return min(pairs, key=lambda j: (depth[j], j))


def retarget(source: Motion, target_skeleton: Skeleton, joint_map: JointMap | Mapping[str, str], *,
             scale: str | float | None = "legs", missing: str = "rest", contacts: bool = False,
             joint_fill: Callable[[Motion, np.ndarray], Motion] | None = None,
             convention: np.ndarray | None = None) -> Motion:
    """``source`` moved onto ``target_skeleton``. ``joint_map``: target joint -> source joint
    (a JointMap from ``auto_map`` or a plain dict). ``scale``: "legs" (``leg_scale``: target/source
    hip-to-foot chain length),
    a number, or None (1.0) multiplies the root's world position. ``missing``: "rest" holds unmapped
    target joints at their rest local rotation; "error" raises if any target joint is unmapped; "infill"
    fills them from the mapped joints with ``joint_fill(clip, unmapped)`` (``tasks.joints.joint_filler`` of a
    per-element any-order checkpoint on the target skeleton).
    ``contacts``: pin the target's ankles wherever the source's are planted (two-bone leg IK,
    `retarget.contacts`), so the feet do not slide. ``convention`` (J, 4): the target data's mean local
    rotations; the free twists are matched to them (`retarget.twist.match_convention`; positions kept)."""
    if missing not in ("rest", "error", "infill"):
        raise RetargetError(f"missing: expected 'rest', 'error' or 'infill', got {missing!r}")
    target = target_skeleton
    pairs = _pairs_of(joint_map, source.skeleton, target)
    if missing == "error" and len(pairs) < target.num_joints:
        absent = [n for j, n in enumerate(target.names) if j not in pairs]
        raise RetargetError(f"missing='error': target joints without a source joint: {absent}")
    if scale == "legs":
        k = leg_scale(source.skeleton, target, joint_map)
    elif scale is None:
        k = 1.0
    elif isinstance(scale, (int, float)) and not isinstance(scale, bool) and np.isfinite(scale) and scale > 0:
        k = float(scale)
    else:
        raise RetargetError(f"scale: expected 'legs', a positive number or None, got {scale!r}")
    Rs, Rt = rest_rotations(source.skeleton, target, joint_map)
    offset = quat_mul(quat_inv(Rs), Rt)  # (Jt, 4) Rs^-1 Rt
    gs_rot, gs_pos = source.global_transforms()  # (T, Js, 4), (T, Js, 3)
    T, Jt = source.num_frames, target.num_joints
    g = np.empty((T, Jt, 4))
    local = np.empty((T, Jt, 4))
    for j in range(Jt):
        p = target.parents[j]
        if j in pairs:
            g[:, j] = quat_mul(gs_rot[:, pairs[j]], offset[j])
        else:
            g[:, j] = g[:, p] if p >= 0 else np.array([1.0, 0, 0, 0])
        local[:, j] = quat_mul(quat_inv(g[:, p]), g[:, j]) if p >= 0 else g[:, j]
    local = quat_continuity(quat_normalize(local), axis=0)
    pos = np.broadcast_to(target.offsets, (T, Jt, 3)).copy()
    r = _root_joint(pairs, target, _target_roles(joint_map, target))
    want = k * gs_pos[:, pairs[r]]  # (T, 3) world position of the target root
    p = target.parents[r]
    if p >= 0:
        gq, gp = target.forward_kinematics(local, pos)
        want = quat_apply(quat_inv(gq[:, p]), want - gp[:, p])
    pos[:, r] = want
    out = Motion(target, local, pos, source.fps, source.name)
    if convention is not None:
        out = match_convention(out, convention)
    unmapped = np.array([j not in pairs for j in range(Jt)])
    if missing == "infill" and unmapped.any():
        if joint_fill is None:
            raise RetargetError("missing='infill' needs joint_fill (tasks.joints.joint_filler of a per-element "
                                "any-order checkpoint)")
        out = joint_fill(out, unmapped)
    if contacts:
        out = pin_feet(out, source_contacts(source))
    return out
