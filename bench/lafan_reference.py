"""The library's side of the add-on's In-fill on a LAFAN1-like rig (bench/blender_lafan.py and
tests/blender/test_blender_lafan.py): the rig's action from the BVH file, ``fill_clip_at`` in-process on the
model's skeleton, carried back as the add-on carries its reply, and compared with what the add-on wrote.

The rig's bones rest where the file's joints rest with every rotation zero (LAFAN1's convention: every BVH rest
frame is the world's), so a bone's rest-relative local rotation in Y-up axes is the file's own local rotation,
and the hips bone's head is the file's root position. Blender frame f is file row f - 1.
"""
from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
A = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])   # model Y-up -> Blender Z-up: (x, y, z) -> (x, -z, y)


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import lafan_like_rig
    finally:
        sys.path.pop(0)
    return lafan_like_rig


def lafan_action(out: Path, takes: tuple[str, ...]) -> tuple[Path, tuple[int, ...]]:
    """The Bandai dataset-2 ``takes`` (file stems) one after another, rewritten in LAFAN1's convention, written
    to ``out``; and the Blender frames where a take after the first starts (the seams)."""
    from blender_infill import RAW

    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh
    parts = []
    for t in takes:
        hits = sorted(glob.glob(str(RAW / "dataset-2*" / f"{t}.bvh")))
        if not hits:
            raise FileNotFoundError(f"{t}.bvh not under {RAW} (unpack the Bandai dataset-2 archive)")
        parts.append(read_bvh(hits[0]))
    first = parts[0]
    mo = Motion(first.skeleton, np.concatenate([m.rotations for m in parts]),
                np.concatenate([m.positions for m in parts]), first.fps, "elderly")
    rig = _script()
    write_bvh(out, rig.rewrite(rig.with_mid_spine(mo)), precision=8)
    seams = tuple(int(x) + 1 for x in np.cumsum([m.num_frames for m in parts])[:-1])
    return out, seams


def frames_of(bvh: Path) -> int:
    from motioncore.io.bvh import read_bvh_header
    return read_bvh_header(bvh)[2]


def rig_space(pose: np.ndarray, rest: np.ndarray, parents: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Blender pose matrices (F, B, 4, 4) -> (F, B, 4) rest-relative locals in Y-up axes and (F, 3) the root
    bone's head (Y-up, armature units)."""
    from blender_infill import local_rotations

    from motioncore.core.rotations import matrix_to_quat
    loc = A.T @ local_rotations(pose, rest, parents) @ A
    return matrix_to_quat(loc), pose[:, 0, :3, 3] @ A


def _mapping(mo, meta: dict) -> list[int]:
    """(J,) the rig bone of each model joint, -1: none: the library's map (`retarget.auto_map`, the bodies read
    from the clip's frames, as `eval.keyed.on_skeleton` maps)."""
    from motioncore.core.skeleton import Skeleton
    from motioncore.retarget import auto_map

    msk = Skeleton.from_dict(meta["skeleton"])
    idx = np.unique(np.linspace(0, mo.num_frames - 1, 64).astype(np.int64))
    jm = auto_map(mo.skeleton, msk, source_poses=mo.skeleton.forward_kinematics(mo.rotations[idx], mo.positions[idx])[1])
    pairs = jm.pairs if hasattr(jm, "pairs") else dict(jm)
    bones = list(mo.skeleton.names)
    return [bones.index(pairs[n]) if n in pairs else -1 for n in msk.names]


def library_fill(bvh: str, gaps: list[list[int]], fps: float, bez: np.ndarray | None = None,
                 bez_root: np.ndarray | None = None, adapt: float = 0.0, curve: str | None = None,
                 plant: bool = False) -> dict[str, np.ndarray]:
    """The library's in-fill of the file's action with ``gaps`` (Blender frames, inclusive) cut, the clip
    at ``fps`` (the scene's rate, as the add-on sends it), carried onto the rig: per gap frame (rows ``frames``)
    the rig locals (G, B, 4) and the root (G, 3) Y-up of the model's answer (``answer``, ``answer_root``),
    its base (``base``), and with Blender's Bezier of the keys (``bez`` (G, B, 4) / ``bez_root`` (G, 3) on the
    gap frames: the rig's curves there, as the add-on reads them) the add-on's composition (``correct``,
    ``correct_root``). Also ``truth`` / ``truth_root``, ``gate`` (per bucket: length, weights) and ``gate_est``
    (per bucket: the gated pseudo-gaps' cm and degrees over Blender's curve's)."""
    from blender_infill import MODEL

    from motioncore.core.rotations import quat_conj, quat_mul
    from motioncore.infill import fill_clip_at
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model
    from motioncore.retarget import rest
    model, meta = load_model(MODEL)
    mo = read_bvh(bvh)
    sk = meta["skeleton"]
    mnames, rj = list(sk["names"]), int(meta["root_joint"])
    parents = [int(p) for p in mo.skeleton.parents]
    T, B = mo.rotations.shape[:2]
    heads = mo.skeleton.forward_kinematics(np.tile([1.0, 0, 0, 0], (B, 1)), mo.skeleton.offsets)[1]
    cols = _mapping(mo, meta)
    known = np.ones(T, bool)
    for a, b in gaps:
        known[a - 1:b] = False
    locs = mo.rotations.copy()
    truth = locs[~known].copy()
    if bez is not None:   # the rig's curves on the gap frames, as the add-on reads them (the unmapped bones keep them)
        locs[~known] = bez
    model_sk = {"names": mnames, "parents": sk["parents"], "offsets": np.asarray(sk["offsets"], np.float64),
                "convention": np.asarray((meta.get("convention") or {})["mean_local_rotations"], np.float64)}
    al = rest.alignment(model_sk, cols, heads, parents, locs[known])
    q, g = rest.rig_to_model(locs, al)
    rel = mo.positions[:, 0].copy()
    mp = al["parents"][rj]
    J = len(mnames)
    km = np.ones((T, J + 1), bool)
    for j, c in enumerate(cols):
        if c >= 0:
            km[:, j] = known
    km[:, -1] = known
    # the add-on's run is Plant Feet off (tests/blender/infill_bvh.py's default), or judged (the add-on plants its rig);
    # ``curve``: the user's keys' interpolation, for the gate's blend from the curve they have
    kw: dict = {"plant_feet": "judge" if plant else False, "curve": curve}
    if adapt:
        from motioncore.families.body.adapt import adapt_infill
        from motioncore.infill import at_model_rate
        ad = adapt_infill(model, meta, *at_model_rate(meta, q, rel, km, fps), seconds=adapt)
        model, kw = ad.model, {**kw, "gate_limit": ad.held or None}
    f = fill_clip_at(model, meta, q, rel, km, fps, **kw)
    todo = np.broadcast_to(~known[:, None], (T, B))
    sel = ~known
    out: dict[str, np.ndarray] = {"frames": np.flatnonzero(sel) + 1, "truth": truth,
                                  "truth_root": mo.positions[sel, 0], "mapped": np.isin(np.arange(B), cols)}
    for key, rq, rr in (("answer", f.rotations[0], f.root[0]), ("base", f.base_rotations[0], f.base_root[0])):
        r = np.asarray(rr, np.float64)
        if mp >= 0:
            r = rest.quat_apply(rest.model_globals(rq, al["parents"])[:, mp], r)
        out[key], out[key + "_root"] = rest.model_to_rig(rq, locs, todo, al)[sel], r[sel]
    if bez is not None and bez_root is not None:
        delta = quat_mul(out["answer"], quat_conj(out["base"]))
        fixed = quat_mul(delta, bez)
        out["correct"] = fixed / np.linalg.norm(fixed, axis=-1, keepdims=True)
        out["correct_root"] = bez_root + out["answer_root"] - out["base_root"]
    fits = sorted(f.gate.fits.items()) if f.gate else []
    out["gate"] = np.array([[k, v.rot, v.root, v.blend, v.length] for k, v in fits]).reshape(-1, 5)
    # with ``curve``: the gate's estimate over the user's curve (its pseudo-gaps, blended): cm, deg
    out["curve_est"] = np.array([[v.curve_error["blended"][i] / v.curve_error["curve"][i] for i in (0, 1)]
                                 for _, v in fits if v.curve_error.get("curve")]).reshape(-1, 2)
    # the gate's estimate of what the gaps get, over Blender's curve (its pseudo-gaps, gated weights): cm, deg
    out["gate_est"] = np.array([[v.error["gated"][i] / v.error["bezier"][i] for i in (0, 1)] for _, v in fits
                                if v.error.get("gated")]).reshape(-1, 2)
    return out


def angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Degrees between unit quaternions."""
    d = np.abs(np.sum(np.asarray(a) * np.asarray(b), -1))
    return np.degrees(2 * np.arccos(np.clip(d, -1.0, 1.0)))


def world(bvh: str, locs: np.ndarray, root: np.ndarray) -> np.ndarray:
    """(G, B, 3) world joint positions (Y-up, cm) of rig locals (the file's skeleton) and roots."""
    from motioncore.io.bvh import read_bvh
    sk = read_bvh(bvh).skeleton
    pos = np.broadcast_to(sk.offsets, locs.shape[:2] + (3,)).copy()
    pos[:, 0] = root
    return sk.forward_kinematics(locs, pos)[1]


def scores(bvh: str, ref: dict[str, np.ndarray], locs: np.ndarray, root: np.ndarray) -> tuple[float, float]:
    """(mean joint position error cm, mean local rotation error deg) against the truth on the gap frames."""
    p, t = world(bvh, locs, root), world(bvh, ref["truth"], ref["truth_root"])
    return float(np.linalg.norm(p - t, axis=-1).mean()), float(angle(locs, ref["truth"]).mean())


def gap_weights(gaps: list[list[int]], gate: np.ndarray, fps: float, model_fps: float = 30.0) -> np.ndarray:
    """(G,) per gap frame the gate's blend from the user's curve (``gate`` rows: bucket, rot, root, blend, length):
    each gap takes the fit whose length (model frames) is nearest its own, as the add-on does (addon/core/correct.gap_blend)."""
    out = []
    for a, b in gaps:
        n = max(1.0, (b - a + 1) * model_fps / fps)
        row = min(gate, key=lambda g: abs(np.log(g[4] / n))) if len(gate) else None
        out.append(np.full(b - a + 1, 1.0 if row is None else float(row[3])))
    return np.concatenate(out)


def parity(d: dict, info: dict, name: str, bvh: str, gaps: list[list[int]], fps: float,
           curve: str | None = None) -> dict[str, float]:
    """The largest difference between the add-on's written pose on the gap frames and ``library_fill``'s
    composition on Blender's Bezier of the same keys: rotations (deg, per bone) and the root (cm); with the
    reference's gate (``gate``, ``gate_est``: see ``library_fill``). ``curve`` ("linear", "constant": the keys'
    interpolation when In-fill ran): the composition blended from the user's curve (NAME/user) by the reference
    gate's blend per gap, as the add-on blends it (``blend``: the weights per gap frame)."""
    rest_m, par = d[f"{name}/rest"], info["parents"]
    add, add_root = rig_space(d[f"{name}/addon"], rest_m, par)
    bez, bez_root = rig_space(d[f"{name}/bezier"], rest_m, par)
    ref = library_fill(bvh, gaps, fps, bez, bez_root, curve=curve)
    want, want_root = ref["correct"], ref["correct_root"]
    w = np.ones(len(want))
    if curve in ("linear", "constant"):
        user, user_root = rig_space(d[f"{name}/user"], rest_m, par)
        w = gap_weights(gaps, ref["gate"], fps)
        f = np.where(np.sum(user * want, -1, keepdims=True) < 0, -want, want)
        q = user + w[:, None, None] * (f - user)
        want = np.where(w[:, None, None] == 0.0, user, q / np.linalg.norm(q, axis=-1, keepdims=True))
        want_root = user_root + w[:, None] * (want_root - user_root)
    if f"{name}/user" in d:   # a bone no model joint maps to is not filled: it keeps the user's curve (the report
        user, _ = rig_space(d[f"{name}/user"], rest_m, par)   # names it), whatever its interpolation
        want = np.where(ref["mapped"][None, :, None], want, user)
    deg = angle(add, want).max(axis=0)
    return {"deg": float(deg.max()), "cm": float(np.linalg.norm(add_root - want_root, axis=-1).max()),
            "worst_bone": info["bones"][int(np.argmax(deg))], "gate_est": ref["gate_est"], "gate": ref["gate"],
            "curve_est": ref["curve_est"], "blend": w, "per_bone": dict(zip(info["bones"], deg.tolist(), strict=True))}


def library_errors(d: dict, info: dict, name: str, bvh: str, gaps: list[list[int]]) -> tuple[float, float]:
    """(cm, deg) of the library's ``batch infill`` path (``batch.infill.fill_motion``: the file at its own rate)
    on the same gaps, scored as ``blender_infill.errors`` scores the add-on (world bone heads, local rotations)."""
    from blender_infill import MODEL

    from motioncore.batch.infill import fill_motion
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model
    model, meta = load_model(MODEL)
    mo = read_bvh(bvh)
    todo = np.zeros(mo.num_frames, bool)
    for a, b in gaps:
        todo[a - 1:b] = True
    m = fill_motion(mo, model, meta, todo)
    sel = todo
    tq, tp = mo.skeleton.forward_kinematics(mo.rotations[sel], mo.positions[sel])
    fq, fp = mo.skeleton.forward_kinematics(m.rotations[sel], m.positions[sel])
    return float(np.linalg.norm(fp - tp, axis=-1).mean()), float(angle(m.rotations[sel], mo.rotations[sel]).mean())


def per_bone(d: dict, info: dict, name: str) -> dict[str, list[float]]:
    """Per bone: [add-on cm, Bezier cm] of its head over the gap frames."""
    t = d[f"{name}/truth"][..., :3, 3]
    return {b: [float(np.linalg.norm(d[f"{name}/{m}"][:, i, :3, 3] - t[:, i], axis=-1).mean())
                for m in ("addon", "bezier")] for i, b in enumerate(info["bones"])}


def alignment_errors(d: dict, info: dict, name: str, bvh: str) -> dict[str, float]:
    """Rest alignment on the rig Blender built: per mapped model bone (joint -> mapped child), the largest angle
    (deg) over the evaluated frames (every frame with ``all_frames``, else the gaps' truth) between its direction on the model's skeleton, posed by
    `retarget.rest` (``alignment`` from Blender's rest heads, ``rig_to_model`` of Blender's poses), and the rig's
    (Blender's posed heads of the bones the two joints map to)."""
    from blender_infill import MODEL

    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model
    from motioncore.retarget import rest
    _, meta = load_model(MODEL)
    sk = meta["skeleton"]
    mnames, mpar = list(sk["names"]), [int(p) for p in sk["parents"]]
    off = np.asarray(sk["offsets"], np.float64)
    rest_m, par = d[f"{name}/rest"], info["parents"]
    pose = d.get(f"{name}/all", d[f"{name}/truth"])
    cols = _mapping(read_bvh(bvh), meta)
    if [info["bones"][c] for c in cols if c >= 0] != [read_bvh(bvh).skeleton.names[c] for c in cols if c >= 0]:
        raise ValueError("Blender's bones are not in the file's order")
    locs, _ = rig_space(pose, rest_m, par)
    model_sk = {"names": mnames, "parents": mpar, "offsets": off,
                "convention": np.asarray((meta.get("convention") or {})["mean_local_rotations"], np.float64)}
    al = rest.alignment(model_sk, cols, rest_m[:, :3, 3] @ A, par, locs)
    _, g = rest.rig_to_model(locs, al)
    heads = pose[..., :3, 3] @ A
    out = {}
    for k, j in enumerate(mpar):
        if j < 0 or cols[j] < 0 or cols[k] < 0 or np.linalg.norm(off[k]) < 1e-6:
            continue
        m = rest.quat_apply(g[:, j], np.broadcast_to(off[k], (len(g), 3)))
        r = heads[:, cols[k]] - heads[:, cols[j]]
        c = np.sum(m * r, -1) / (np.linalg.norm(m, axis=-1) * np.linalg.norm(r, axis=-1))
        out[f"{mnames[j]}->{mnames[k]}"] = float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))).max())
    return out
