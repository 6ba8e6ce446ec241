"""A biped's body parts from its hierarchy and its pose; names only break ties.

Legend: J joints, F sampled frames. Positions in any units, any up axis.

``find_body`` reads a skeleton as a body: the *hips* are the shallowest joint with three or more branches of
two joints or more, one of which reaches the *chest* (the first joint down that branch with three such
branches); the two most alike of the hips' other branches are the legs, the two most alike of the chest's
are the arms, the longest one left is the neck and head. Along a limb, the hand is the joint where the
chain branches most (fingers and thumb; twist helpers branch less), else the hand or foot is where the last
long bone ends (a bone at least half the chain's longest; the toe bones after it are short); the
two joints above it are the upper and lower limb and any above those the collar (clavicle, CMU's hip joint).
Bone lengths are offset norms, so they hold whatever the rest pose.

Sides come from the pose: per sampled frame, up is hips -> chest and forward is where the knees bend and the toes point; the leg whose
upper joint lies on the up x forward side of the other's is the left one (right-handed axes, as BVH and
Blender) when four in five frames agree, else the names decide ('Left', '_L', 'l' + a CMU part); so for the
arms. ``pair_bodies`` maps two bodies part by part; chains of another length (a spine of two
bones onto three) are paired by their place along the chain. Only stdlib and numpy.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Body", "find_body", "find_legs", "foot_joints", "pair_bodies", "PARTS"]

_LIMB = ("top", "upper", "lower", "end", "tail")
PARTS: tuple[str, ...] = ("root", "hips", "spine", "chest", "neck", "head", "head_end") + tuple(
    f"{s}_{limb}_{k}" for s in "lr" for limb in ("leg", "arm") for k in _LIMB)
# how a chain of another length is paired: from its start, from its end, or by its place along it
_ANCHOR = {"root": "end", "spine": "spread", "neck": "spread", "head_end": "start"} | {
    f"{s}_{limb}_{k}": ("end" if k == "top" else "start") for s in "lr" for limb in ("leg", "arm") for k in _LIMB}
# canonical role (retarget.mapping.CANONICAL) of a part's joint: (part, index in its chain)
ROLE_OF: dict[str, tuple[str, int]] = {"hips": ("hips", 0), "spine": ("spine", 0), "chest": ("chest", 0),
                                       "neck": ("neck", 0), "head": ("head", 0), "head_end": ("head_end", 0)} | {
    f"{s}_{r}": (f"{s}_{limb}_{k}", i) for s in "lr" for r, limb, k, i in (
        ("hip", "leg", "top", -1), ("upper_leg", "leg", "upper", 0), ("lower_leg", "leg", "lower", 0),
        ("foot", "leg", "end", 0), ("toe", "leg", "tail", 0), ("shoulder", "arm", "top", -1),
        ("upper_arm", "arm", "upper", 0), ("forearm", "arm", "lower", 0), ("hand", "arm", "end", 0))}
_END_NAME = re.compile(r"(end|top|nub|site|tip)$", re.I)
_LEFT = re.compile(r"(^|[^a-z])(left|l)([^a-z]|$)|^l[a-z]+$|^left", re.I)
_RIGHT = re.compile(r"(^|[^a-z])(right|r)([^a-z]|$)|^r[a-z]+$|^right", re.I)


@dataclass(frozen=True)
class Body:
    """Body part -> joint indices in chain order (parent first); parts the rig lacks are empty."""

    parts: dict[str, tuple[int, ...]]
    sides_from: str  # "pose" or "names": what told left from right

    def roles(self, names: Sequence[str]) -> dict[str, str]:
        """Canonical role (``hips``, ``l_foot``, ...) -> joint name, for the roles this body has."""
        out = {}
        for role, (part, i) in ROLE_OF.items():
            chain = self.parts.get(part, ())
            if chain:
                out[role] = names[chain[i]]
        return out


class _Tree:
    def __init__(self, parents: np.ndarray, offsets: np.ndarray):
        self.parents = parents
        self.kids: list[list[int]] = [[] for _ in parents]
        for j, p in enumerate(parents):
            if p >= 0:
                self.kids[p].append(j)
        self.size = np.ones(len(parents), np.int64)
        for j in range(len(parents) - 1, 0, -1):
            if parents[j] >= 0:
                self.size[parents[j]] += self.size[j]
        self.length = np.linalg.norm(offsets, axis=1)

    def branches(self, j: int) -> list[int]:
        return [c for c in self.kids[j] if self.size[c] >= 2]

    def main_path(self, j: int) -> list[int]:
        """j, then down the child with the largest subtree (ties: the longer bone) to a leaf."""
        path = [j]
        while self.kids[path[-1]]:
            path.append(max(self.kids[path[-1]], key=lambda c: (self.size[c], self.length[c], -c)))
        return path

    def path_between(self, top: int, low: int) -> list[int]:
        path = [low]
        while path[-1] != top:
            path.append(int(self.parents[path[-1]]))
        return path[::-1]

    def signature(self, j: int) -> np.ndarray:
        path = self.main_path(j)
        return np.array([self.size[j], len(path), self.length[path[1:]].sum()])


def _alike_pair(tree: _Tree, cands: list[int], names: Sequence[str]) -> tuple[int, int] | None:
    """The two branches most alike in structure and length (mirror limbs); ties: names with a side."""
    best, key = None, None
    for a in range(len(cands)):
        for b in range(a + 1, len(cands)):
            sa, sb = tree.signature(cands[a]), tree.signature(cands[b])
            d = abs(sa[0] - sb[0]) + abs(sa[1] - sb[1]) + abs(sa[2] - sb[2]) / max(sa[2], sb[2], 1e-9)
            sided = _name_side(names[cands[a]]) is not None and _name_side(names[cands[b]]) is not None
            k = (round(d, 6), not sided)
            if key is None or k < key:
                best, key = (cands[a], cands[b]), k
    return best


def _limb(tree: _Tree, start: int, names: Sequence[str]) -> dict[str, tuple[int, ...]] | None:
    """top (collar), upper, lower, end (hand / foot), tail (fingers / toes) of the chain from ``start``."""
    chain = tree.main_path(start)
    bones = tree.length[chain[1:]]  # bones[k]: chain[k] -> chain[k + 1]
    if len(chain) < 3 or bones.max() <= 0:
        return None
    kids = [len(tree.kids[j]) for j in chain[2:]]
    if max(kids, default=0) >= 2:   # a hand: where the fingers (and thumb) branch most
        e = 2 + kids.index(max(kids))
    else:   # where the last long bone ends (a foot, or a hand without fingers)
        e = max(int(np.flatnonzero(bones >= 0.5 * bones.max())[-1]) + 1, 2)
    return {"top": tuple(chain[:e - 2]), "upper": (chain[e - 2],), "lower": (chain[e - 1],), "end": (chain[e],),
            "tail": tuple(chain[e + 1:])}


def _name_side(name: str) -> str | None:
    n = re.split(r"[:|]", name)[-1]
    if _LEFT.search(n):
        return "l"
    if _RIGHT.search(n):
        return "r"
    return None


def _chain_side(chain: Sequence[int], names: Sequence[str]) -> str | None:
    votes = [s for s in (_name_side(names[j]) for j in chain) if s]
    if not votes:
        return None
    return "l" if votes.count("l") > votes.count("r") else "r" if votes.count("r") > votes.count("l") else None


def _lateral(poses: np.ndarray, hips: int, chest: int, head: int, legs: Sequence[dict]) -> np.ndarray:
    """(F, 3) per frame up x forward (the body's left, right-handed axes); zero where forward is unclear. Up
    is hips -> chest; forward, across up, is where the knees bend (off the hip-ankle line, as a share of the
    leg's length) and the toes point (off the ankle). Zero too where the body is not upright (the head and
    either foot less than 135 deg apart at the hips: a quadruped, whose spine lies along its forward, or a rest
    pose with the bones along one axis)."""
    up = _unit(poses[:, chest] - poses[:, hips])
    fwd = np.zeros_like(up)
    for leg in legs:
        u, k, e = (poses[:, leg[p][0]] for p in ("upper", "lower", "end"))
        fwd += (k - (u + e) / 2) / np.maximum(np.linalg.norm(u - e, axis=-1, keepdims=True), 1e-12)
        if leg["tail"]:
            fwd += _unit(poses[:, leg["tail"][0]] - e)
    fwd -= (fwd * up).sum(-1, keepdims=True) * up
    head_dir = _unit(poses[:, head] - poses[:, hips])
    upright = np.ones((len(poses), 1), bool)
    for leg in legs:   # each foot on the other side of the hips from the head
        foot = _unit(poses[:, leg["end"][0]] - poses[:, hips])
        upright &= (head_dir * foot).sum(-1, keepdims=True) < np.cos(np.radians(135))
    clear = (np.linalg.norm(fwd, axis=-1, keepdims=True) > 0.1) & upright
    return np.where(clear, np.cross(up, _unit(fwd)), 0.0)


def _first_is_left(poses: np.ndarray, lateral: np.ndarray, a: dict, b: dict, names: Sequence[str]
                   ) -> tuple[bool, str]:
    """(limb a is the left one, "pose" or "names"): a's upper joint on the left of b's in four frames of
    five, else the names."""
    v = np.einsum("fi,fi->f", poses[:, a["upper"][0]] - poses[:, b["upper"][0]], lateral)
    ok = np.linalg.norm(lateral, axis=1) > 0.5
    if ok.mean() >= 0.5 and max((v[ok] > 0).mean(), (v[ok] < 0).mean()) >= 0.8:
        return bool((v[ok] > 0).mean() >= 0.8), "pose"
    ja, jb = [j for k in _LIMB for j in a[k]], [j for k in _LIMB for j in b[k]]
    sa, sb = _chain_side(ja, names), _chain_side(jb, names)
    return (sa == "l" or (sa is None and sb != "l")), "names"   # no word either way: the hierarchy's order


def _hips_and_chest(tree: _Tree, parents: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """Candidates (hips, chest, the hips' child toward the chest), shallowest first: a joint with three or
    more branches one of which reaches a joint with three (the largest such branch). A root whose other
    branches are IK helpers (Unreal's ik_foot_root) is tried first and fails as a body; its pelvis follows."""
    for j in np.argsort([_depth(parents, i) for i in range(len(parents))], kind="stable"):
        best: tuple[int, int] | None = None   # (chest, spine root)
        for c in tree.branches(int(j)) if len(tree.branches(int(j))) >= 3 else ():
            ch = next((k for k in tree.main_path(c) if len(tree.branches(k)) >= 3), None)
            if ch is not None and (best is None or tree.size[c] > tree.size[best[1]]):
                best = (ch, c)
        if best is not None:
            yield int(j), best[0], best[1]


def find_body(parents: Sequence[int] | np.ndarray, offsets: np.ndarray, names: Sequence[str],
              poses: np.ndarray | None = None) -> Body | None:
    """The body parts of a biped-like rig (also a quadruped: its front legs as arms), or None when the
    hierarchy has no hips with legs and a chest with arms and a neck. ``poses`` (F, J, 3) world positions of
    some of the clip's frames (default: the rest pose) tell left from right (module doc)."""
    parents = np.asarray(parents, np.int64)
    offsets = np.asarray(offsets, np.float64)
    tree = _Tree(parents, offsets)
    for hips, chest, spine_root in _hips_and_chest(tree, parents):
        body = _read_body(tree, parents, offsets, names, poses, hips, chest, spine_root)
        if body is not None:
            return body
    return None


def _read_body(tree: _Tree, parents: np.ndarray, offsets: np.ndarray, names: Sequence[str], poses: np.ndarray | None,
               hips: int, chest: int, spine_root: int) -> Body | None:
    """The body with these hips and chest, or None when its legs, arms or neck are not there."""
    legs_pair = _alike_pair(tree, [c for c in tree.branches(hips) if c != spine_root], names)
    arm_cands = [c for c in tree.branches(chest) if c not in tree.path_between(hips, chest)]
    arms_pair = _alike_pair(tree, arm_cands, names)
    if legs_pair is None or arms_pair is None:
        return None
    necks = [c for c in arm_cands if c not in arms_pair]
    limbs = [_limb(tree, c, names) for c in (*legs_pair, *arms_pair)]
    if not necks or any(x is None for x in limbs):
        return None
    legs: list[dict] = [x for x in limbs[:2] if x is not None]
    arms: list[dict] = [x for x in limbs[2:] if x is not None]
    neck_path = tree.main_path(max(necks, key=lambda c: (len(tree.main_path(c)), tree.size[c], -c)))
    head = len(neck_path) - 1
    while head > 0 and _END_NAME.search(re.split(r"[:|]", names[neck_path[head]])[-1]):
        head -= 1  # a head-top helper joint ('HeadTop_End')
    poses = (_rest(parents, offsets) if poses is None else np.asarray(poses, np.float64))
    poses = poses[None] if poses.ndim == 2 else poses
    lateral = _lateral(poses, hips, chest, neck_path[head], legs)
    leg_left, how = _first_is_left(poses, lateral, legs[0], legs[1], names)
    arm_left, how_arms = _first_is_left(poses, lateral, arms[0], arms[1], names)
    legs, arms = (legs if leg_left else legs[::-1]), (arms if arm_left else arms[::-1])
    how = "pose" if how == how_arms == "pose" else "names"
    top = hips
    while parents[top] >= 0:
        top = int(parents[top])
    root_chain = tree.path_between(top, hips)[:-1]
    spine = tree.path_between(hips, chest)[1:-1]
    parts = {"root": tuple(root_chain), "hips": (hips,), "spine": tuple(spine), "chest": (chest,),
             "neck": tuple(neck_path[:head]), "head": (neck_path[head],), "head_end": tuple(neck_path[head + 1:])}
    for s, leg, arm in zip("lr", legs, arms, strict=True):
        parts |= {f"{s}_leg_{k}": leg[k] for k in _LIMB} | {f"{s}_arm_{k}": arm[k] for k in _LIMB}
    return Body(parts, how)


def find_legs(parents: Sequence[int] | np.ndarray, offsets: np.ndarray, names: Sequence[str],
              poses: np.ndarray | None = None) -> list[tuple[int, int, int, int]]:
    """[(thigh, shin, foot, toe or -1)] joint indices of the left, then the right leg: the one leg finder of the
    library (``families.body.fill_plant.legs_of``) and the add-on (``core.rigplant.rig_legs``). The hierarchy
    first (``find_body``: each leg's upper, lower and end joint, its first tail joint the toe); on a skeleton that
    is no whole biped (no chest with arms and a neck), the names: a joint named like a foot or an ankle (not a toe
    or ball) with a side, its parent the shin, its grandparent the thigh, its first child the toe. [] when there
    are not two such legs."""
    parents = np.asarray(parents, np.int64)
    body = find_body(parents, offsets, names, poses)
    if body is not None:
        return [(body.parts[f"{s}_leg_upper"][0], body.parts[f"{s}_leg_lower"][0], body.parts[f"{s}_leg_end"][0],
                 (body.parts[f"{s}_leg_tail"] or (-1,))[0]) for s in "lr"]
    low = [re.split(r"[:|]", n)[-1].lower() for n in names]
    out = []
    for side in "lr":
        foot = next((j for j, n in enumerate(low) if ("foot" in n or "ankle" in n) and "toe" not in n
                     and "ball" not in n and _name_side(names[j]) == side), None)
        if foot is None or parents[foot] < 0 or parents[parents[foot]] < 0:
            return []
        toe = next((j for j, p in enumerate(parents) if p == foot), -1)
        out.append((int(parents[parents[foot]]), int(parents[foot]), int(foot), int(toe)))
    return out


def foot_joints(body: Body) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(left, right) legs' contact joints for ``core.feet``: each leg's foot (ankle) and its first toe joint, or
    the foot alone on a rig without toes."""
    return tuple(body.parts[f"{s}_leg_end"] + body.parts[f"{s}_leg_tail"][:1] for s in "lr")  # type: ignore[return-value]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _depth(parents: np.ndarray, j: int) -> int:
    d = 0
    while parents[j] >= 0:
        j, d = int(parents[j]), d + 1
    return d


def _rest(parents: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    pos = np.zeros_like(offsets)
    for j, p in enumerate(parents):
        pos[j] = offsets[j] + (pos[p] if p >= 0 else 0.0)
    return pos


def _chain_pairs(src: Sequence[int], tgt: Sequence[int], anchor: str) -> dict[int, int]:
    """target joint -> source joint for two chains of one part: in order from the start or the end when
    ``anchor`` says so, else by place along the chain ((i + 1) / (n + 1)), the shorter chain's joints each
    taking the nearest of the longer's (ties: the one nearer the start)."""
    n, m = len(src), len(tgt)
    if not n or not m:
        return {}
    if anchor == "start" or n == m:
        return dict(zip(tgt, src, strict=False))
    if anchor == "end":
        return dict(zip(tgt[::-1], src[::-1], strict=False))
    fs, ft = (np.arange(n) + 1) / (n + 1), (np.arange(m) + 1) / (m + 1)
    if m <= n:
        return {tgt[i]: src[int(np.argmin(np.abs(fs - ft[i]) + 1e-9 * np.arange(n)))] for i in range(m)}
    return {tgt[int(np.argmin(np.abs(ft - fs[k]) + 1e-9 * np.arange(m)))]: src[k] for k in range(n)}


def pair_bodies(src: Body, tgt: Body) -> dict[int, int]:
    """target joint index -> source joint index, part by part (chains of other lengths: see ``_chain_pairs``)."""
    out: dict[int, int] = {}
    for part in PARTS:
        out |= _chain_pairs(src.parts.get(part, ()), tgt.parts.get(part, ()), _ANCHOR.get(part, "start"))
    return out
