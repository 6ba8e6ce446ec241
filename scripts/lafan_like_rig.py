"""A LAFAN1-like rig from the project's own data: a Bandai clip rewritten in LAFAN1's BVH convention.

    python scripts/lafan_like_rig.py IN.bvh OUT.bvh [--root-offset X Y Z] [--keep-names]

LAFAN1's files rest on a degenerate pose: every joint's rest frame is the world's, and the offset of a
joint's (first) child lies along the joint's local +x, so the rest pose is a line of bones; the hips are the
BVH ROOT with a large OFFSET (the capture volume's origin), and every rotation channel is Euler ZYX. This
rewrite keeps every joint's world position in every frame (the motion is the same) and changes only the rest
frames: joint j's new world frame is G_j R_j with R_j constant, R_j's +x along the offset to j's first child
(Spine for the hips, Neck for the chest) turned about that axis by a fixed twist per joint, so its twist is
no model's convention. A third spine bone (LAFAN1's Spine1) is inserted half way up Bandai's Spine
(`with_mid_spine`), which the model's skeleton lacks; Bandai's Chest becomes Spine2. The hips, as LAFAN1's, are turned 20 degrees further about their +z (LAFAN1's Spine
offset is 21 degrees off the hips' +x): Blender's BVH importer points a bone at the mean of its children's
heads, so the hips bone rests at a rotation no axis permutation gives (LAFAN1's 9 degrees off). Offsets become R_parent^-1 o (single-child chains: (|o|, 0, 0)), locals
R_parent^-1 q R_j. The static ``joint_Root`` of Bandai's files (identity at the origin) is dropped, so the
hips are the ROOT, and joints take LAFAN1's names (``--keep-names`` keeps Bandai's).

`check` compares the world positions of every joint, original against rewritten, after a BVH round trip.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_apply, quat_inv, quat_mul, quat_normalize
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError
from motioncore.io.bvh import read_bvh, write_bvh

LAFAN_NAMES = {"Hips": "Hips", "Spine": "Spine", "SpineMid": "Spine1", "Chest": "Spine2", "Neck": "Neck", "Head": "Head",
               "Shoulder_L": "LeftShoulder", "UpperArm_L": "LeftArm", "LowerArm_L": "LeftForeArm",
               "Hand_L": "LeftHand", "Shoulder_R": "RightShoulder", "UpperArm_R": "RightArm",
               "LowerArm_R": "RightForeArm", "Hand_R": "RightHand", "UpperLeg_L": "LeftUpLeg",
               "LowerLeg_L": "LeftLeg", "Foot_L": "LeftFoot", "Toes_L": "LeftToe", "UpperLeg_R": "RightUpLeg",
               "LowerLeg_R": "RightLeg", "Foot_R": "RightFoot", "Toes_R": "RightToe"}
ROOT_OFFSET = (193.6, 90.2, 358.2)   # Y-up cm: far from the origin, as the capture of issue 42 (head (193.6, -358.2, 90.2) Z-up)
HIPS_TILT = np.array([np.cos(np.radians(10.0)), 0.0, 0.0, np.sin(np.radians(10.0))])   # 20 degrees about +z
CHANNELS_ROOT = ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
CHANNELS = ("Zrotation", "Yrotation", "Xrotation")


def _about_x(th: float) -> np.ndarray:
    return np.array([np.cos(th / 2), np.sin(th / 2), 0.0, 0.0])


def _x_onto(d: np.ndarray) -> np.ndarray:
    """The shortest turn taking +x onto the unit vector ``d`` (180 degrees about +y for -x)."""
    x = np.array([1.0, 0.0, 0.0])
    c = float(np.dot(x, d))
    if c < -1.0 + 1e-12:
        return np.array([0.0, 0.0, 1.0, 0.0])
    q = np.concatenate([[1.0 + c], np.cross(x, d)])
    return q / np.linalg.norm(q)


def with_mid_spine(motion: Motion, chest: str = "Spine", name: str = "SpineMid") -> Motion:
    """``motion`` with a joint ``name`` inserted under ``chest``, half way to its first child, carrying the
    joint's children (LAFAN1's three spine bones: Spine, Spine1 = ``name``, Spine2 = Bandai's Chest, the bone the
    neck and shoulders hang from). Its local rotation is the identity, so every joint of ``motion`` keeps its
    world motion."""
    sk = motion.skeleton
    c = sk.index(chest)
    kids = [k for k in range(sk.num_joints) if sk.parents[k] == c]
    half = 0.5 * motion.positions[0, kids[0]]
    order = list(range(c + 1)) + [-1] + list(range(c + 1, sk.num_joints))
    new = c + 1
    par = [(-1 if j < 0 else int(sk.parents[j])) for j in order]
    par = [c if j < 0 else (new if p == c else (p + 1 if p > c else p)) for j, p in zip(order, par, strict=True)]
    T = motion.num_frames
    rot = np.concatenate([motion.rotations[:, :new], np.tile([1.0, 0, 0, 0], (T, 1, 1)), motion.rotations[:, new:]], 1)
    pos = np.concatenate([motion.positions[:, :new], np.broadcast_to(half, (T, 1, 3)), motion.positions[:, new:]], 1)
    for k in kids:
        pos[:, k + 1] -= half
    off = pos[0].copy()
    names = tuple(sk.names[j] if j >= 0 else name for j in order)
    chans = tuple(sk.channels[j] if j >= 0 else sk.channels[c] for j in order)
    ends = tuple((j + 1 if j > c else j, o) for j, o in sk.end_sites)
    return Motion(Skeleton(names, np.array(par), off, chans, ends), rot, pos, motion.fps, motion.name)


def world(motion: Motion) -> tuple[np.ndarray, np.ndarray]:
    """(T, J, 4) world rotations and (T, J, 3) world positions (forward kinematics of the file's values)."""
    sk = motion.skeleton
    return sk.forward_kinematics(motion.rotations, motion.positions)


def rewrite(motion: Motion, root_offset=ROOT_OFFSET, names: dict[str, str] | None = LAFAN_NAMES,
            seed: int = 42) -> Motion:
    """``motion`` (a Bandai clip: ``joint_Root`` static at the origin, the hips under it) in LAFAN1's convention
    (module docstring). Raises MotioncoreError when the clip's root joint moves or turns."""
    sk = motion.skeleton
    T, J = motion.rotations.shape[:2]
    if sk.names[0] == "joint_Root":
        rq, rp = motion.rotations[:, 0], motion.positions[:, 0]
        if np.abs(np.abs(rq[:, 0]) - 1.0).max() > 1e-9 or np.abs(rp).max() > 1e-9:
            raise MotioncoreError("joint_Root moves or turns in this clip: it cannot be dropped")
        keep = list(range(1, J))
    else:
        keep = list(range(J))
    gq, gp = world(motion)
    gq, gp = gq[:, keep], gp[:, keep]
    par = [keep.index(int(sk.parents[j])) if int(sk.parents[j]) in keep else -1 for j in keep]
    off = np.asarray(sk.offsets, np.float64)[keep]
    off[0] = np.asarray(root_offset, np.float64)
    # translations of non-root joints must be their offsets (constant): the rewrite moves offsets, not channels
    pos = motion.positions[:, keep]
    if np.abs(pos[:, 1:] - pos[:1, 1:]).max() > 1e-6:
        raise MotioncoreError("a non-root joint's translation varies: only the root may carry position channels")
    off[1:] = pos[0, 1:]
    n = len(keep)
    kids = [[c for c in range(n) if par[c] == j] for j in range(n)]
    rng = np.random.default_rng(seed)
    R = np.zeros((n, 4))
    for j in range(n):
        twist = _about_x(float(rng.uniform(-np.pi, np.pi)))
        first = next((c for c in kids[j] if np.linalg.norm(off[c]) > 1e-9), None)
        if first is None:   # a leaf: its parent's frame, twisted
            R[j] = quat_mul(R[par[j]], twist) if par[j] >= 0 else twist
        else:
            R[j] = quat_mul(_x_onto(off[first] / np.linalg.norm(off[first])), twist)
            if par[j] < 0:   # the hips as LAFAN1's: the first child 20 degrees off +x (its offset gets a -y part)
                R[j] = quat_mul(R[j], HIPS_TILT)
    new_off = np.zeros((n, 3))
    for j in range(n):
        new_off[j] = off[j] if par[j] < 0 else quat_apply(quat_inv(R[par[j]]), off[j])
    g_new = quat_mul(gq, R[None])
    loc = g_new.copy()
    for j in range(n):
        if par[j] >= 0:
            loc[:, j] = quat_mul(quat_inv(g_new[:, par[j]]), g_new[:, j])
    positions = np.broadcast_to(new_off, (T, n, 3)).copy()
    positions[:, 0] = gp[:, 0]   # the root's world position (the root joint was static at the origin)
    jnames = [sk.names[j] for j in keep]
    if names:
        jnames = [names.get(x, x) for x in jnames]
    ends = tuple((keep.index(j), tuple(quat_apply(quat_inv(R[keep.index(j)]), np.asarray(o, np.float64))))
                 for j, o in sk.end_sites if j in keep)
    chans = tuple(CHANNELS_ROOT if p < 0 else CHANNELS for p in par)
    skel = Skeleton(tuple(jnames), np.array(par), new_off, chans, ends)
    return Motion(skel, quat_normalize(loc), positions, motion.fps, motion.name + "_lafan")


def check(original: Motion, rewritten: Motion, names: dict[str, str] | None = LAFAN_NAMES) -> float:
    """Largest distance (the files' units) between a joint's world position in ``original`` and in
    ``rewritten``, joints matched by name (through ``names``; joints only one of them has left out)."""
    _, a = world(original)
    _, b = world(rewritten)
    idx = {n: i for i, n in enumerate(rewritten.skeleton.names)}
    pairs = [(i, idx[(names or {}).get(n, n)]) for i, n in enumerate(original.skeleton.names)
             if (names or {}).get(n, n) in idx]
    i, j = (list(x) for x in zip(*pairs, strict=True))
    return float(np.linalg.norm(a[:, i] - b[:, j], axis=-1).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bvh")
    ap.add_argument("out")
    ap.add_argument("--root-offset", type=float, nargs=3, default=ROOT_OFFSET)
    ap.add_argument("--keep-names", action="store_true")
    ap.add_argument("--two-spine", action="store_true", help="no third spine bone (Spine2)")
    a = ap.parse_args()
    mo = read_bvh(a.bvh)
    names = None if a.keep_names else LAFAN_NAMES
    new = rewrite(mo if a.two_spine else with_mid_spine(mo), a.root_offset, names)
    write_bvh(a.out, new, precision=8)
    err = check(mo, read_bvh(a.out), names)
    print(f"{Path(a.out).name}: {new.num_frames} frames, {new.skeleton.num_joints} joints; world positions "
          f"unchanged to {err:.2e} (file units) after the round trip")


if __name__ == "__main__":
    main()
