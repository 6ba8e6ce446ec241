"""The animator benchmark (issue 12): held-out clips imported with Blender's own BVH importer (defaults =
Euler, and rotate_mode='QUATERNION'), keys deleted strictly inside gaps of 5/15/30/45 frames, each gap
filled by ``bpy.ops.motioncore.infill`` through a live server, against the deleted truth and against
Blender's own BEZIER and LINEAR interpolation of the remaining keys (same run, same gaps).

    PYTHONPATH=src:server python bench/blender_infill.py [--quick] [--blender 5.0.1] [--out DIR]
    PYTHONPATH=src:server python bench/blender_infill.py --table-from DIR     # re-render, no Blender

Re-run it after a new ``infill-body`` checkpoint (what the add-on's In-fill uses at temperature 0): the table (Markdown, ready to paste) goes to stdout and
DIR/table.md, every figure to DIR/results.json, the raw poses to DIR/out.npz. Prints a table (mean world joint position error cm / mean local rotation error deg over the gap frames;
operator seconds) and the parity of the add-on's written pose with ``motioncore.infill.fill``
run in-process on the same keys (Bandai clips: the model's own skeleton).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from motioncore.core.gaps import CONTEXT, context_frames
from motioncore.data.cache import cache_root

ROOT = Path(__file__).resolve().parents[1]
RAW = cache_root() / "raw"   # the unpacked archives ($MOTIONCORE_CACHE, else the XDG cache dir)
A = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])   # model Y-up -> Blender Z-up: (x, y, z) -> (x, -z, y)


def local_rotations(m: np.ndarray, rest: np.ndarray, parents: list[int]) -> np.ndarray:
    """(F, B, 3, 3) parent-relative rotations (armature axes at rest) from pose matrices (F, B, 4, 4)."""
    g = m[..., :3, :3] @ np.swapaxes(rest[:, :3, :3], -1, -2)[None]   # rest -> pose, armature space
    out = g.copy()
    for j, p in enumerate(parents):
        if p >= 0:
            out[:, j] = np.swapaxes(g[:, p], -1, -2) @ g[:, j]
    return out


def angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between rotation matrices from |A - B|_F = 2 sqrt(2) sin(angle / 2) (arccos of the trace has a
    floor of ~0.02 deg on Blender's float32 matrices)."""
    d = np.linalg.norm(np.asarray(a, np.float64) - b, axis=(-2, -1))
    return np.degrees(2 * np.arcsin(np.clip(d / (2 * np.sqrt(2)), 0.0, 1.0)))


def errors(d: dict, info: dict, name: str, method: str) -> tuple[float, float]:
    """(mean world joint position error in cm, mean local rotation error in degrees) over the gap frames."""
    rest, par, obj = d[f"{name}/rest"], info["parents"], d[f"{name}/object"]
    t, m = d[f"{name}/truth"], d[f"{name}/{method}"]
    pos = lambda x: x[..., :3, 3] @ obj[:3, :3].T   # noqa: E731  world axes and scale
    world = pos(t)
    cm = info.get("unit_cm") or (1.0 if np.ptp(world[..., 2]) > 20 else 100.0)  # BVH at scale 1: cm; FBX: m
    e_pos = np.linalg.norm(pos(m) - world, axis=-1).mean() * cm
    e_rot = angle_deg(local_rotations(m, rest, par), local_rotations(t, rest, par)).mean()
    return float(e_pos), float(e_rot)


def parity(d: dict, info: dict, name: str, bvh: str, gaps: list[list[int]], fps: float,
           whole: bool = False) -> tuple[float, float]:
    """Max rotation difference (deg) and root difference (cm) between the add-on's written pose and the same
    in-fill computed in-process: ``fill_clip_at`` on the BVH file's own values (frame f of Blender = row
    f - 1), applied as the add-on applies a deterministic model's answer, a correction of Blender's own Bezier
    of the keys (``answer base^-1 bezier`` per joint, ``bezier + answer - base`` for the root; the Bezier
    read from the same run's ``bezier`` poses). ``whole``: the scene range was the whole action, so the add-on
    sent all of it (its gate fitted on every keyed frame): the reference fills the whole action too; else each
    gap with its ``CONTEXT`` keys either side, the range the add-on read."""
    from motioncore.core.rotations import quat_to_matrix
    from motioncore.infill import fill_clip_at
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model

    model, meta = load_model(MODEL)
    mo = read_bvh(bvh)
    names = list(mo.skeleton.names)
    bones, par = info["bones"], info["parents"]
    col = [bones.index(n) for n in names]
    rj = int(meta["root_joint"])
    rest = d[f"{name}/rest"]
    frames = d[f"{name}/frames"]
    h, p = bones.index(names[rj]), par[bones.index(names[rj])]

    def model_space(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Locals in model axes (F, B, 3, 3) and the root bone's head relative to its parent (F, 3), Y-up."""
        loc = A.T @ local_rotations(pose, rest, par) @ A
        g = pose[..., :3, :3] @ np.swapaxes(rest[:, :3, :3], -1, -2)[None]
        rel = pose[:, h, :3, 3] - (pose[:, p, :3, 3] if p >= 0 else 0.0)
        if p >= 0:
            rel = np.einsum("fji,fj->fi", g[:, p], rel)
        return loc, rel @ A

    add_loc, add_rel = model_space(d[f"{name}/addon"])
    bez_loc, bez_rel = model_space(d[f"{name}/bezier"])
    worst_r, worst_p = 0.0, 0.0
    spans = [(1, mo.num_frames)] if whole else [(a - CONTEXT, b + CONTEXT) for a, b in gaps]
    for lo, hi in spans:
        rows = np.arange(lo, hi + 1) - 1
        known = np.ones(hi - lo + 1, bool)
        for a, b in gaps:
            known &= ~((np.arange(lo, hi + 1) >= a) & (np.arange(lo, hi + 1) <= b))
        args = (model, meta, mo.rotations[rows], mo.positions[rows, rj], known, fps)
        f, base = fill_clip_at(*args, plant_feet=False), fill_clip_at(*args, residual=0.0, plant_feet=False)
        sel = np.flatnonzero(np.isin(frames, np.arange(lo, hi + 1)[~known]))
        ans, bas = quat_to_matrix(f.rotations[0][~known]), quat_to_matrix(base.rotations[0][~known])
        ref = ans @ np.swapaxes(bas, -1, -2) @ bez_loc[sel][:, col]                 # (G, J, 3, 3)
        worst_r = max(worst_r, float(angle_deg(add_loc[sel][:, col], ref).max()))
        ref_root = bez_rel[sel] + f.root[0][~known] - base.root[0][~known]
        worst_p = max(worst_p, float(np.linalg.norm(add_rel[sel] - ref_root, axis=-1).max()))
    return worst_r, worst_p


def bpy_python(version: str) -> Path:
    return cache_root() / "blender" / f"bpy-{version}" / "bin" / "python"


def run_driver(spec: dict, version: str, workdir: Path, script: str = "infill_bvh.py") -> tuple[dict, dict]:
    """Build the add-on, start a server, run the driver ``tests/blender/SCRIPT`` (default infill_bvh.py) under real
    bpy."""
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "tests"))
    import build_addon
    from conftest import server_process
    z = build_addon.build(dist_dir=workdir / "dist", skip_wheels=True)
    (workdir / "spec.json").write_text(json.dumps(spec))
    out = workdir / "out.npz"
    with server_process(workdir) as (_, conn, _):
        env = {**os.environ, "BLENDER_USER_RESOURCES": str(workdir / "user")}
        r = subprocess.run([str(bpy_python(version)), str(ROOT / "tests" / "blender" / script), str(z),
                            str(workdir / "spec.json"), str(out), str(conn)], capture_output=True, text=True,
                           env=env, timeout=3000)
    if r.returncode or not out.exists():
        raise RuntimeError(r.stdout[-3000:] + r.stderr[-3000:])
    return dict(np.load(out)), json.loads(Path(str(out) + ".json").read_text())


def filled_fps(info: dict, scene_fps: float) -> float:
    """The rate the add-on filled at: the one its report names ("filled at 30 fps": In-fill's Best Rate), else the
    scene's (a standard rate when within 0.1% of one, as the add-on reads it)."""
    import re
    m = re.search(r"filled at ([\d.]+) fps", str((info.get("reports") or [""])[0]))
    if m:
        return float(m.group(1))
    near = min((23.976, 24.0, 25.0, 29.97, 30.0, 48.0, 50.0, 59.94, 60.0, 100.0, 120.0), key=lambda r: abs(r - scene_fps))
    return near if abs(near - scene_fps) <= 0.001 * near else float(scene_fps)


def failure(info: dict) -> str | None:
    """Why a clip's run is not a result (None: it is): the driver's traceback, or an In-fill or Learn This Action
    that failed (reported an error, or nothing at all). The keys then stay Blender's Bezier, which would read as
    a 1.00x tie."""
    if "error" in info:
        return str(info["error"]).strip().splitlines()[-1]
    reports = list(info.get("reports", []))
    if "adapt_report" in info:
        reports.append(info["adapt_report"])
    for r in reports:
        text = str(r or "").strip()
        if not text or text.startswith("ERROR"):
            return text.splitlines()[-1] if text else "the operator reported nothing (it did not finish)"
    return None


def place_gaps(n_frames: int, length: int, count: int, start: int = 1, context: int = CONTEXT) -> list[list[int]]:
    """``count`` gaps of ``length`` frames, each with >= ``context`` keyed frames before and after and no
    window overlapping another's (Blender frames start at ``start``)."""
    step = length + 2 * context + 1
    first = start + context + 1
    k = min(count, (n_frames - 2 * context - 2) // step)
    return [[first + i * step, first + i * step + length - 1] for i in range(k)]


def long_clip(out: Path, min_frames: int = 7200) -> Path:
    """A BVH of ``min_frames``+ frames: the Bandai dataset-2 test walks one after another (item 8's long
    action; the seams jump, which an in-fill away from them never sees)."""
    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh
    paths = sorted(glob.glob(str(RAW / "dataset-2*" / "dataset-2_*_0[01][05].bvh")))
    if not paths:
        raise FileNotFoundError(f"no Bandai dataset-2 clips under {RAW}")
    parts, n = [], 0
    while n < min_frames:
        mo = read_bvh(paths[len(parts) % len(paths)])
        parts.append(mo)
        n += mo.num_frames
    first = parts[0]
    write_bvh(out, Motion(first.skeleton, np.concatenate([m.rotations for m in parts]),
                          np.concatenate([m.positions for m in parts]), first.fps, "long"))
    return out


GAPS_PER_SET = 8
MODEL = "infill-body"   # the add-on's In-fill at temperature 0
CMU_TEST = ("07_01", "07_05", "05_02", "05_06")  # subjects 05 (dance) and 07 (walks): never trained on


def cmu_test_clips() -> list[str]:
    """CMU test-subject trials as the cmu_05-09 archive ships them (other joint names, ASF units: imported as
    they are, the rig in ASF units)."""
    sys.path.insert(0, str(ROOT / "src"))
    from motioncore.data.cache import data_root, unpack
    folder = unpack(data_root() / "cmu_05-09" / "cmu_bvh_hahne_subjects_05-09.tar.xz", progress=False)
    return [str(folder / "cmu_bvh_hahne" / f"{n}.bvh") for n in CMU_TEST]


def clips(quick: bool, fbx: bool = True) -> list[dict]:
    """Bandai dataset-2 test walks (take % 5 == 0: the model never trained on them) and CMU test-subject trials
    (``CMU_TEST``: performers never trained on), each imported at the BVH importer's defaults (Euler) and with rotate_mode='QUATERNION', plus the
    first Bandai clip through FBX: for each gap length, clips are taken until the set has 8 gaps."""
    from motioncore.io.bvh import read_bvh
    bandai = sorted(glob.glob(str(RAW / "dataset-2*" / "dataset-2_walk_*_0[01][05].bvh")))
    cmu = cmu_test_clips()
    want = 2 if quick else GAPS_PER_SET
    out = []
    for tag, paths in (("bandai", bandai), ("cmu", cmu)):
        motions = {}
        for length in ((15, 30) if quick else (5, 15, 30, 45)):
            have = 0
            for p in paths:
                if have >= want:
                    break
                mo = motions.setdefault(p, read_bvh(p))
                ctx = context_frames(mo.fps)
                gaps = place_gaps(mo.rotations.shape[0], length, want - have, context=ctx)
                if not gaps:
                    continue
                have += len(gaps)
                kinds = [(None, False), ("QUATERNION", False)] + ([(None, True)] if fbx and tag == "bandai" else [])
                for mode, via_fbx in kinds:
                    rig = "FBX" if via_fbx else (mode or "EULER")
                    out.append({"name": f"{tag}-{Path(p).stem}-{rig}-{length}", "path": p, "rotate_mode": mode,
                                "fbx": via_fbx, "fps": mo.fps, "gaps": gaps, "context": ctx,
                                "parity": tag == "bandai" and not via_fbx, "length": length,
                                "unit_cm": 2.54 / 0.45 if tag == "cmu" else None,   # cmu_05-09: ASF units
                                "set": f"{tag}|{rig}|{length}"})
    return out


def table(spec: dict, d: dict, res: dict) -> tuple[str, list[dict]]:
    """The Markdown table and one record per set (dataset x import x gap length; errors averaged over all
    its gap frames)."""
    sets: dict[str, list[dict]] = {}
    for c in spec["clips"]:
        sets.setdefault(c.get("set", c["name"]), []).append(c)
    rows, lines = [], [
        "| clips | rig (import) | gap frames | gaps | add-on in-fill | Blender Bezier | Blender linear "
        "| operator s (median) | parity deg / cm |", "|---|---|---:|---:|---|---|---|---:|---|"]
    for key, cs in sets.items():
        errs = [why for c in cs if (why := failure(res[c["name"]])) is not None]
        if errs:
            lines.append(f"| {key} | failed: {errs[0][:160]} |")
            rows.append({"set": key, "error": errs[0]})
            continue
        w = np.array([len(c["gaps"]) for c in cs], np.float64)
        cells = [tuple(np.average([errors(d, {**res[c["name"]], "unit_cm": c.get("unit_cm")}, c["name"], m)[i]
                                   for c in cs], weights=w)
                       for i in (0, 1)) for m in ("addon", "bezier", "linear")]
        pars = [parity(d, res[c["name"]], c["name"], c["path"], c["gaps"], c["fps"], bool(c.get("full_range")))
                for c in cs if c.get("parity")]
        par = (max(p[0] for p in pars), max(p[1] for p in pars)) if pars else None
        op_s = [t for c in cs for t in res[c["name"]]["op_s"]]
        reports = [r for c in cs for r in res[c["name"]]["reports"]]
        c = cs[0]
        rig = ("FBX re-import (defaults)" if c.get("fbx") else
               "BVH, quaternion" if c["rotate_mode"] else "BVH defaults (Euler)")
        bandai = c['set'].startswith('bandai')
        names = f"{'Bandai' if bandai else 'CMU'} " + ", ".join(Path(x['path']).stem.split('_', 1)[-1] if bandai
                                                               else Path(x['path']).stem for x in cs)
        bad = [r for r in reports if not r.startswith("In-fill: filled")]
        lines.append(f"| {names} | {rig} | {c['length']} | {int(w.sum())} | "
                     + " | ".join(f"{p:.1f} cm / {r:.1f}°" for p, r in cells)
                     + f" | {np.median(op_s):.3f} | "
                     + (f"{par[0]:.1e}° / {par[1]:.1e} cm" if par else "-") + " |"
                     + (f" {len(bad)} report(s) not a fill: {bad[0][:100]}" if bad else ""))
        rows.append({"set": key, "clips": [Path(x["path"]).stem for x in cs], "rig": rig, "gap": c["length"],
                     "gaps": int(w.sum()),
                     **{f"{m}_cm": e[0] for m, e in zip(("addon", "bezier", "linear"), cells)},
                     **{f"{m}_deg": e[1] for m, e in zip(("addon", "bezier", "linear"), cells)},
                     "op_s_median": float(np.median(op_s)), "op_s": op_s,
                     "parity_deg": par[0] if par else None, "parity_cm": par[1] if par else None,
                     "reports": reports})
    return "\n".join(lines), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 gaps of 15 and 30 frames per clip")
    ap.add_argument("--blender", default="5.0.1")
    ap.add_argument("--no-fbx", action="store_true", help="skip the FBX export + re-import clip")
    ap.add_argument("--out", type=Path, help="keep everything here (default: a temporary folder)")
    ap.add_argument("--only", default="", help="only the sets whose key (e.g. 'bandai|FBX') contains this")
    ap.add_argument("--table-from", type=Path, help="re-render the table from an earlier --out folder")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from _machine import cpu_name
    if a.table_from:
        out = a.table_from
        spec = json.loads((out / "spec.json").read_text())
        d, res = dict(np.load(out / "out.npz")), json.loads((out / "out.npz.json").read_text())
    else:
        spec = {"clips": [c for c in clips(a.quick, not a.no_fbx) if a.only in c["set"]]}
        out = a.out or Path(tempfile.mkdtemp(prefix="blender_infill_"))
        out.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        d, res = run_driver(spec, a.blender, out)
        res["wall_s"] = time.perf_counter() - t
    import hashlib

    from motioncore.models.registry import resolve
    base = resolve(MODEL)
    files = sorted(base.parent.glob(base.name + "*"))
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:10]
    head = (f"Blender {res['blender']} (bpy module), model {MODEL} (checkpoint sha256 {digest}), "
            f"{time.strftime('%Y-%m-%d')}, {cpu_name()}, {os.cpu_count()} cores; errors over the gap frames: "
            "mean world joint position (cm) / mean local rotation (deg)")
    md, rows = table(spec, d, res)
    print(head)
    print(md)
    (out / "table.md").write_text(head + "\n\n" + md + "\n")
    (out / "results.json").write_text(json.dumps({"header": head, "blender": res["blender"],
                                                  "wall_s": res.get("wall_s"), "rows": rows}, indent=1))
    print(f"written: {out / 'table.md'}, {out / 'results.json'}")
    failed = [r for r in rows if "error" in r]
    if failed:   # a failed In-fill is never a result
        print(f"{len(failed)} set(s) failed, first: {failed[0]['set']}: {failed[0]['error'][:300]}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
