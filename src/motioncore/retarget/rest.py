"""Rest alignment, one implementation for the library and the Blender add-on: a rig's pose carried onto the
model's skeleton and back by world-space rotation offsets. ``retarget.core`` (rest_rotations) and
``retarget.twist`` (match_convention) use it; scripts/build_addon.py vendors it into the add-on with
``core.quat_np`` (plain numpy, no other motioncore import).

The rig's rest pose is the reference (every rig bone's rest frame identity, as a retarget source). Each
mapped model joint j gets a constant world offset O_j = Rt_j T_j: Rt_j poses the model so its bones point
along the rig's rest bones (parents first: shortest arc for one child bone, Kabsch on the unpaired bones and
the left-minus-right across vectors for several), T_j the constant twist about j's bone that matches the
checkpoint's ``convention`` (the training data's mean local rotations; only when the rest poses differ).
Per frame, with D_b the rig bone's rest-to-pose rotation in world (model, Y-up) axes:

    G_j = D_f(j) O_j          D_f(j) = G_j O_j^-1          (exact inverses)

f(j), the joint's *frame bone*, is the rig bone that carries the bones of j's mapped children: j's own bone
b(j), or, when unmapped rig bones sit between b(j) and them (CMU's lowerneck -> upperneck -> head, radius ->
wrist -> hand, upperback -> thorax -> neck and clavicles), the lowest of those that all the children hang
from. With one mapped child k a constant frame cannot follow the bend of the unmapped bones between b(j) and b(k),
so G_j = D_f(j) E_j O_j with E_j (per frame) the shortest arc from b(k)'s rest offset from b(j) to its posed
one, both in f(j)'s frame: a mapped model bone points along the rig's bone to its child in every frame,
whatever the unmapped bones in between do. E_j depends only on those unmapped bones' locals. Back on the rig
the unmapped bones keep their own rotations (the rig's f-curves) and b(j) gets D_b(j) = D_f(j) (L_1 ... L_f)^-1,
L the locals of the bones from below b(j) down to f(j). Unmapped model
joints are held at rest (local identity, sent as known), as the retargeter's ``missing='rest'``.

Legend: T frames, B rig bones (the rig's keyed bones, parents first), J model joints. WXYZ quaternions.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.quat_np import (
    IDENT,
    matrix_to_quat,
    quat_about,
    quat_angle,
    quat_apply,
    quat_between,
    quat_conj,
    quat_mean,
    quat_mul,
)

SAME_DEG = 1.0   # every rest rotation within this of identity: the rig's rest is the model's (per-actor proportions)
TWIST_SAME_DEG = 70.0   # and every free twist within this: the rig is in the model's convention (alignment identity).
# A roll about a one-child bone leaves the rest pose as it is, so only the motion shows it: the twists that bring a
# clip's locals closest to the model's training mean (`twists`). On the model's own rig they are a performer's poses,
# not a convention: on 120 Bandai takes (2026-11-29) the largest per take is 58.5 deg (an upper arm waving goodbye),
# the median 17; a LAFAN1 clip retargeted onto Bandai's rest without matching them needs 74-112 (shoulders, spine,
# arms). Leaves are left out (a hand's mean turn is its pose). A roll under this with the rest unchanged is not seen;
# a take that holds one forearm far from the mean is judged off it (1 of 60 of Bandai's gestures, a right-hand wave at
# 87 deg; then it is aligned as a mapped rig is, on its own twists).


def _swap(name: str, a: str, b: str) -> str:
    if len(a) == 1:
        if name.startswith(a) and len(name) > 1 and name[1].isupper():
            return b + name[1:]
        return name
    return name.replace(a, b)


def mirror_map(names: Sequence[str]) -> np.ndarray:
    """(J,) index of each joint's left/right partner by name (itself when none) (as core.kinematics.mirror_map)."""
    idx = {n: i for i, n in enumerate(names)}
    out = np.arange(len(names))
    for j, n in enumerate(names):
        for a, b in (("Left", "Right"), ("left", "right"), ("_L", "_R"), ("_l", "_r"), (".L", ".R"), ("L", "R")):
            c = next((c for x, y in ((a, b), (b, a)) if (c := _swap(n, x, y)) != n and c in idx), None)
            if c is not None:
                out[j] = idx[c]
                break
    return out


def _children(parents: Sequence[int], j: int) -> list[int]:
    return [c for c, p in enumerate(parents) if p == j]


def _chain(c: int, pairs: dict[int, int], parents: Sequence[int]) -> list[int]:
    out, stack = [], [c]
    while stack:
        k = stack.pop(0)
        if k in pairs:
            out.append(k)
            stack = _children(parents, k)
        else:
            stack = _children(parents, k) + stack
    return out


def _bone_pairs(j: int, pairs: dict[int, int], parents: Sequence[int], pt: np.ndarray, ps: np.ndarray,
                eps: float, mirror: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(model, rig) rest direction vectors fixing joint j's rotation ."""
    def ok(a: np.ndarray, b: np.ndarray) -> bool:
        return bool(np.linalg.norm(a) > eps and np.linalg.norm(b) > eps)

    chains = [ch for ch in (_chain(c, pairs, parents) for c in _children(parents, j)) if ch]
    firsts = [ch[0] for ch in chains]
    single: tuple[list, list] = ([], [])
    across: tuple[list, list] = ([], [])
    mean: tuple[list, list] = ([], [])
    for n, ch in enumerate(chains):
        partner = firsts.index(mirror[ch[0]]) if mirror[ch[0]] in firsts and mirror[ch[0]] != ch[0] else -1
        if partner > n:
            other = chains[partner]
            a = pt[ch[0]] - pt[other[0]]
            b = next((ps[pairs[x]] - ps[pairs[y]] for x, y in zip(ch, other) if ok(a, ps[pairs[x]] - ps[pairs[y]])), None)
            if b is not None:
                across[0].append(a)
                across[1].append(b)
        dst = mean if partner >= 0 else single
        for k in ch:
            a, b = pt[k] - pt[j], ps[pairs[k]] - ps[pairs[j]]
            if ok(a, b):
                dst[0].append(a)
                dst[1].append(b)
                break
    if not single[0] and len(mean[0]) == 2:
        u = [mean[i][0] / np.linalg.norm(mean[i][0]) + mean[i][1] / np.linalg.norm(mean[i][1]) for i in (0, 1)]
        single = ([u[0]], [u[1]]) if ok(u[0], u[1]) else ([], [])
    if not single[0] and not across[0]:
        single = mean
    return single[0] + across[0], single[1] + across[1]


def _align(vt: list[np.ndarray], vs: list[np.ndarray]) -> np.ndarray:
    a = np.array([v / np.linalg.norm(v) for v in vt])
    b = np.array([v / np.linalg.norm(v) for v in vs])
    if len(a) > 1:
        U, S, Vt = np.linalg.svd(b.T @ a)
        if S[1] > 1e-9 * S[0]:
            d = np.sign(np.linalg.det(U @ Vt))
            return matrix_to_quat(U @ np.diag([1.0, 1.0, d]) @ Vt)
    return quat_between(a[0], b[0])


def rest_rotations(names: Sequence[str], parents: Sequence[int], offsets: np.ndarray, pairs: dict[int, int],
                   rig_heads: np.ndarray) -> np.ndarray:
    """(J, 4) Rt: the model's world joint rotations when posed like the rig's rest pose. ``pairs``: model
    joint -> rig bone index; ``rig_heads`` (B, 3) the rig's rest heads in model axes (any units)."""
    J = len(parents)
    pt = np.zeros((J, 3))
    for j, p in enumerate(parents):
        pt[j] = offsets[j] + (pt[p] if p >= 0 else 0.0)
    ps = np.asarray(rig_heads, np.float64)
    eps = 1e-9 * max(np.ptp(pt, axis=0).max(), np.ptp(ps, axis=0).max(), 1.0)
    mirror = mirror_map(names)
    Rt = np.tile(IDENT, (J, 1))
    for j in range(J):
        p = parents[j]
        pre = Rt[p] if p >= 0 else IDENT
        if j in pairs:
            vt, vs = _bone_pairs(j, pairs, parents, pt, ps, eps, mirror)
            if vt:
                pre = quat_mul(_align([quat_apply(pre, v) for v in vt], vs), pre)
        Rt[j] = pre / np.linalg.norm(pre)
    return Rt


def twists(g: np.ndarray, parents: Sequence[int], offsets: np.ndarray, ref: np.ndarray, mapped: np.ndarray
           ) -> np.ndarray:
    """(J, 4) constant twists T_j (right factors of the world rotations ``g`` (N, J, 4)) that bring the mapped
    joints' local rotations closest to ``ref`` (J, 4) without moving any joint (``retarget.twist``):
    one child bone: the twist about it (5 degree grid, refined to 0.25); a leaf: the turn onto the mean;
    several bones: none."""
    g = np.array(g, np.float64)
    J = len(parents)
    out = np.tile(IDENT, (J, 1))
    ident = np.tile(IDENT, (len(g), 1))
    for j in range(J):
        p = parents[j]
        gp = g[:, p] if p >= 0 else ident
        kids = _children(parents, j)
        if not mapped[j]:
            g[:, j] = gp
            continue
        if not kids:
            loc = quat_mul(quat_conj(gp), g[:, j])
            out[j] = quat_mul(quat_conj(quat_mean(loc)), ref[j])
        else:
            bones = [c for c in kids if np.linalg.norm(offsets[c]) > 1e-9]
            if len(bones) != 1:
                continue
            u = offsets[bones[0]] / np.linalg.norm(offsets[bones[0]])
            loc = quat_mul(quat_conj(gp), g[:, j])

            def cost(th: float, loc: np.ndarray = loc, u: np.ndarray = u, r: np.ndarray = ref[j]) -> float:
                return float(quat_angle(quat_mul(loc, quat_about(u, th)), r).mean())

            coarse = np.radians(np.arange(0.0, 360.0, 5.0))
            best = coarse[int(np.argmin([cost(t) for t in coarse]))]
            fine = best + np.radians(np.arange(-5.0, 5.01, 0.25))
            out[j] = quat_about(u, fine[int(np.argmin([cost(t) for t in fine]))])
        g[:, j] = quat_mul(g[:, j], out[j])
    return out


def twists_same(T: np.ndarray, parents: Sequence[int], offsets: np.ndarray) -> bool:
    """Whether twists ``T`` (J, 4) (`twists`) are a performer's poses rather than another rig's bone rolls: every
    joint with a child bone within ``TWIST_SAME_DEG`` of identity (leaves left out: module constants)."""
    has_bone = np.zeros(len(parents), bool)
    for c, p in enumerate(parents):
        if p >= 0 and np.linalg.norm(offsets[c]) > 1e-9:
            has_bone[p] = True
    return bool(not has_bone.any() or quat_angle(T[has_bone], IDENT).max() < np.radians(TWIST_SAME_DEG))


# ---------------------------------------------------------------------------------------- the carry

def _rig_path(top: int, b: int, up: Sequence[int]) -> list[int] | None:
    """Rig bones from below ``top`` down to ``b`` (inclusive, top first); None if ``top`` is not above b."""
    out: list[int] = []
    while b >= 0 and b != top:
        out.insert(0, b)
        b = up[b]
    return out if b == top else None


def frame_bones(cols: Sequence[int], parents: Sequence[int], up: Sequence[int]) -> list[int]:
    """(J,) per mapped model joint its frame bone (module docstring): the deepest rig bone between its own
    bone and the bones of its mapped children that is an ancestor (or self) of every such bone's parent;
    its own bone when it has no mapped child, -1 for unmapped joints."""
    out = [int(c) for c in cols]
    for j, c in enumerate(cols):
        if c < 0:
            continue
        kids = [int(cols[k]) for k in _mapped_children(j, cols, parents)]
        paths = [_rig_path(int(c), up[k], up) if up[k] != c else [] for k in kids]
        if not kids or any(p is None for p in paths):
            continue
        common: list[int] = []
        mapped = {int(x) for x in cols if x >= 0}
        for step in zip(*paths):
            if len(set(step)) > 1 or step[0] in mapped:   # only unmapped bones (they keep their own rotations)
                break
            common.append(step[0])
        out[j] = common[-1] if common else int(c)
    return out


def _mapped_children(j: int, cols: Sequence[int], parents: Sequence[int]) -> list[int]:
    """Model joints whose nearest mapped ancestor is j (the first mapped joint down each chain)."""
    out = []
    for k, p in enumerate(parents):
        if cols[k] < 0 or k == j:
            continue
        while p >= 0 and cols[p] < 0:
            p = parents[p]
        if p == j:
            out.append(k)
    return out


def alignment(model: dict[str, Any], cols: Sequence[int], rig_heads: np.ndarray, rig_up: Sequence[int],
              keyed_locals: np.ndarray | None = None) -> dict[str, Any]:
    """The constant offsets O (J, 4) for a rig: ``model`` {"names", "parents", "offsets", "convention"
    (J, 4) or None}; ``cols`` (J,) the rig bone of each model joint (-1: none); ``rig_heads`` (B, 3) rest
    heads in model axes; ``rig_up`` (B,) each bone's nearest keyed ancestor (-1: none); ``keyed_locals``
    (N, B, 4) sample frames of the rig's keyed poses (`rig_to_model` input) for the twist. ``rest_same``:
    the rig is in the model's own convention, O the identity: its rest pose is the model's (every Rt within
    ``SAME_DEG`` of identity) and, where keyed poses and the convention are given, so are its bone rolls (every
    twist within ``TWIST_SAME_DEG``, `twists_same`); otherwise O = Rt T, as any mapped rig."""
    parents = [int(p) for p in model["parents"]]
    off = np.asarray(model["offsets"], np.float64)
    pairs = {j: int(c) for j, c in enumerate(cols) if c >= 0}
    Rt = rest_rotations(model["names"], parents, off, pairs, rig_heads)
    same = bool(quat_angle(Rt, IDENT).max() < np.radians(SAME_DEG))
    O = np.tile(IDENT, (len(parents), 1)) if same else Rt.copy()   # the same rest, up to the import's float32
    ref = model.get("convention")
    if ref is not None and keyed_locals is not None and len(keyed_locals):
        ref = np.asarray(ref, np.float64)
        ref = ref / np.linalg.norm(ref, axis=-1, keepdims=True)
        base = {**_carry(cols, parents, rig_up, rig_heads), "O": Rt}
        g = _model_globals(rig_globals(keyed_locals, rig_up), base, bends(keyed_locals, base))
        T = twists(g, parents, off, ref, np.asarray(cols) >= 0)
        same = same and twists_same(T, parents, off)   # the same rest and bone rolls: the model's own convention
        O = np.tile(IDENT, (len(parents), 1)) if same else quat_mul(Rt, T)
    O = O / np.linalg.norm(O, axis=-1, keepdims=True)
    return {**_carry(cols, parents, rig_up, rig_heads), "O": O, "rest_same": same, "rt": Rt}


def _carry(cols: Sequence[int], parents: list[int], up: Sequence[int], heads: np.ndarray) -> dict[str, Any]:
    """The alignment's rig-side fields: frame bones and, per joint with one mapped child, that child's bone."""
    one = {}
    for j, c in enumerate(cols):
        kids = _mapped_children(j, cols, parents) if c >= 0 else []
        if len(kids) == 1 and up[int(cols[kids[0]])] != c:
            one[j] = int(cols[kids[0]])
    return {"cols": np.asarray(cols), "parents": parents, "up": list(up), "frames": frame_bones(cols, parents, up),
            "heads": np.asarray(heads, np.float64), "one": one}


def bends(locals_: np.ndarray, al: dict[str, Any]) -> np.ndarray:
    """(T, J, 4) E_j (module docstring): identity except for joints with one mapped child reached through
    unmapped rig bones."""
    T = len(locals_)
    E = np.tile(IDENT, (T, len(al["parents"]), 1))
    h, up = al["heads"], al["up"]
    for j, k in al["one"].items():
        b = int(al["cols"][j])
        path = (_rig_path(b, up[k], up) or []) + [k]
        R, pos = np.tile(IDENT, (T, 1)), np.zeros((T, 3))
        prev = b
        for x in path:   # b(k)'s head in b(j)'s rest-relative frame, R: the frame bone's rotation in it
            pos = pos + quat_apply(R, np.broadcast_to(h[x] - h[prev], (T, 3)))
            if x != k:
                R = quat_mul(R, locals_[:, x])
            prev = x
        w = quat_apply(quat_conj(R), pos)
        rest = h[k] - h[b]
        nuv = np.linalg.norm(w, axis=-1) * np.linalg.norm(rest)
        q = np.concatenate([(nuv + w @ rest)[:, None], np.cross(rest, w)], -1)
        ok = q[:, 0] > 1e-12 * np.maximum(nuv, 1e-300)
        q[~ok] = np.array([quat_between(rest, v) for v in w[~ok]]).reshape(-1, 4)   # antiparallel (or zero)
        E[:, j] = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return E


def rig_globals(locals_: np.ndarray, up: Sequence[int]) -> np.ndarray:
    """(T, B, 4) world rest-to-pose rotations D from per-bone locals (T, B, 4) (`rigmap.to_model` of the
    pose rotations: model axes, the rig's rest as identity), bones parents first."""
    d = np.array(locals_, np.float64)
    for b, u in enumerate(up):
        if u >= 0:
            d[:, b] = quat_mul(d[:, u], d[:, b])
    return d


def _model_globals(d: np.ndarray, al: dict[str, Any], E: np.ndarray) -> np.ndarray:
    T, J = d.shape[0], len(al["parents"])
    g = np.empty((T, J, 4))
    for j, p in enumerate(al["parents"]):
        f = al["frames"][j]
        g[:, j] = quat_mul(quat_mul(d[:, f], E[:, j]), al["O"][j]) if f >= 0 else (g[:, p] if p >= 0 else IDENT)
    return g


def rig_to_model(locals_: np.ndarray, al: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Rig bone locals (T, B, 4) -> (model local rotations (T, J, 4), model world rotations (T, J, 4))."""
    g = _model_globals(rig_globals(locals_, al["up"]), al, bends(locals_, al))
    q = g.copy()
    for j, p in enumerate(al["parents"]):
        if p >= 0:
            q[:, j] = quat_mul(quat_conj(g[:, p]), g[:, j])
    return q, g


def model_globals(q: np.ndarray, parents: Sequence[int]) -> np.ndarray:
    """World rotations (..., J, 4) of model locals."""
    g = np.array(q, np.float64)
    for j, p in enumerate(parents):
        if p >= 0:
            g[..., j, :] = quat_mul(g[..., p, :], g[..., j, :])
    return g


def model_to_rig(q: np.ndarray, locals_: np.ndarray, todo: np.ndarray, al: dict[str, Any]) -> np.ndarray:
    """Model locals (T, J, 4) -> rig bone locals (T, B, 4): where ``todo`` (T, B) and the bone is mapped, the
    local that puts the bone's world rotation at G_j O_j^-1; elsewhere the bone's own ``locals_`` (its
    world rotation follows its parent's new one)."""
    g = model_globals(q, al["parents"])
    E = bends(locals_, al)   # from the unmapped bones' locals, which are kept
    joint_of = {int(c): j for j, c in enumerate(al["cols"]) if c >= 0}
    out = np.array(locals_, np.float64)
    d = np.array(locals_, np.float64)
    for b, u in enumerate(al["up"]):
        par = d[:, u] if u >= 0 else np.tile(IDENT, (len(d), 1))
        d[:, b] = quat_mul(par, out[:, b])
        if b in joint_of:
            j = joint_of[b]
            want = quat_mul(quat_mul(g[:, j], quat_conj(al["O"][j])), quat_conj(E[:, j]))
            for k in reversed(_rig_path(b, al["frames"][j], al["up"]) or []):   # unmapped bones down to the frame
                want = quat_mul(want, quat_conj(out[:, k]))
            m = np.asarray(todo[:, b], bool)
            d[m, b] = want[m]
            out[m, b] = quat_mul(quat_conj(par[m]), want[m])
    return out
