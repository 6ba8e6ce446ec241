"""The animator benchmark (issue 12): held-out clips imported with Blender's own BVH importer (defaults =
Euler, and rotate_mode='QUATERNION'), keys deleted strictly inside gaps of 5/15/30/45 frames, each gap
filled by ``bpy.ops.motioncore.infill`` through a live server, against the deleted truth and against
Blender's own BEZIER and LINEAR interpolation of the remaining keys (same run, same gaps).

    PYTHONPATH=src:server python bench/blender_infill.py [--quick] [--blender 5.0.1]

Prints a table (mean world joint position error cm / mean local rotation error deg over the gap frames;
operator seconds) and the parity of the add-on's written pose with ``motioncore.tasks.infill.fill_clip``
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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RAW = Path.home() / ".cache" / "motioncore" / "raw"
CONTEXT = 10
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
    cm = 1.0 if np.ptp(world[..., 2]) > 20 else 100.0   # a BVH at scale 1 is in cm; an FBX round trip in m
    e_pos = np.linalg.norm(pos(m) - world, axis=-1).mean() * cm
    e_rot = angle_deg(local_rotations(m, rest, par), local_rotations(t, rest, par)).mean()
    return float(e_pos), float(e_rot)


def parity(d: dict, info: dict, name: str, bvh: str, gaps: list[list[int]], fps: float) -> tuple[float, float]:
    """Max rotation difference (deg) and root difference (cm) between the add-on's written pose and
    ``fill_clip_at`` run in-process on the BVH file's own values (frame f of Blender = row f - 1)."""
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model
    from motioncore.tasks.infill import fill_clip_at

    model, meta = load_model("anyorder-body")
    mo = read_bvh(bvh)
    names = list(mo.skeleton.names)
    bones, par = info["bones"], info["parents"]
    col = [bones.index(n) for n in names]
    rj = int(meta["root_joint"])
    loc = local_rotations(d[f"{name}/addon"], d[f"{name}/rest"], par)          # (F, B, 3, 3) Z-up
    loc_model = A.T @ loc @ A                                                   # model axes
    frames = d[f"{name}/frames"]
    m = d[f"{name}/addon"]
    g = m[..., :3, :3] @ np.swapaxes(d[f"{name}/rest"][:, :3, :3], -1, -2)[None]
    worst_r, worst_p = 0.0, 0.0
    from motioncore.core.rotations import quat_to_matrix
    for a, b in gaps:
        lo, hi = a - CONTEXT, b + CONTEXT
        rows = np.arange(lo, hi + 1) - 1
        known = ~((np.arange(lo, hi + 1) >= a) & (np.arange(lo, hi + 1) <= b))
        f = fill_clip_at(model, meta, mo.rotations[rows], mo.positions[rows, rj], known, fps)
        sel = np.flatnonzero(np.isin(frames, np.arange(a, b + 1)))
        ref = quat_to_matrix(f.rotations[0][~known])                           # (G, J, 3, 3)
        worst_r = max(worst_r, float(angle_deg(loc_model[sel][:, col], ref).max()))
        h, p = bones.index(names[rj]), par[bones.index(names[rj])]
        rel = m[sel, h, :3, 3] - (m[sel, p, :3, 3] if p >= 0 else 0.0)
        if p >= 0:
            rel = np.einsum("fji,fj->fi", g[sel, p], rel)
        worst_p = max(worst_p, float(np.linalg.norm(rel @ A - f.root[0][~known], axis=-1).max()))
    return worst_r, worst_p


def bpy_python(version: str) -> Path:
    return Path.home() / ".cache" / "motioncore" / "blender" / f"bpy-{version}" / "bin" / "python"


def run_driver(spec: dict, version: str, workdir: Path) -> tuple[dict, dict]:
    """Build the add-on, start a server, run tests/blender/infill_bvh.py under real bpy."""
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "tests"))
    import build_addon
    from conftest import server_process
    z = build_addon.build(dist_dir=workdir / "dist", skip_wheels=True)
    (workdir / "spec.json").write_text(json.dumps(spec))
    out = workdir / "out.npz"
    with server_process(workdir) as (_, conn, _):
        env = {**os.environ, "BLENDER_USER_RESOURCES": str(workdir / "user")}
        r = subprocess.run([str(bpy_python(version)), str(ROOT / "tests" / "blender" / "infill_bvh.py"), str(z),
                            str(workdir / "spec.json"), str(out), str(conn)], capture_output=True, text=True,
                           env=env, timeout=3000)
    if r.returncode or not out.exists():
        raise RuntimeError(r.stdout[-3000:] + r.stderr[-3000:])
    return dict(np.load(out)), json.loads(Path(str(out) + ".json").read_text())


def place_gaps(n_frames: int, length: int, count: int, start: int = 1) -> list[list[int]]:
    """``count`` gaps of ``length`` frames, each with >= CONTEXT keyed frames before and after and no
    window overlapping another's (Blender frames start at ``start``)."""
    step = length + 2 * CONTEXT + 1
    first = start + CONTEXT + 1
    k = min(count, (n_frames - 2 * CONTEXT - 2) // step)
    return [[first + i * step, first + i * step + length - 1] for i in range(k)]


def clips(quick: bool) -> list[dict]:
    from motioncore.io.bvh import read_bvh
    bandai = sorted(glob.glob(str(RAW / "dataset-2*" / "dataset-2_walk_*_005.bvh")))[:1]
    cmu = sorted(glob.glob(str(RAW / "cmu*" / "cmu_bvh" / "*_05.bvh")))[:1]
    out = []
    for tag, paths in (("bandai", bandai), ("cmu", cmu)):
        for p in paths:
            mo = read_bvh(p)
            for length in ((15, 30) if quick else (5, 15, 30, 45)):
                gaps = place_gaps(mo.rotations.shape[0], length, 2 if quick else 8)
                for mode in (None, "QUATERNION"):
                    out.append({"name": f"{tag}-{Path(p).stem}-{mode or 'EULER'}-{length}", "path": p,
                                "rotate_mode": mode, "fps": mo.fps, "gaps": gaps, "parity": tag == "bandai",
                                "length": length})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--blender", default="5.0.1")
    a = ap.parse_args()
    spec = {"clips": clips(a.quick)}
    with tempfile.TemporaryDirectory() as tmp:
        d, res = run_driver(spec, a.blender, Path(tmp))
    print(f"Blender {res['blender']}")
    print("| clip | rig | gap | gaps | add-on in-fill | Blender Bezier | Blender linear | operator s | parity deg / cm |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in spec["clips"]:
        info = res[c["name"]]
        if "error" in info:
            print(c["name"], info["error"])
            continue
        cells = [errors(d, info, c["name"], m) for m in ("addon", "bezier", "linear")]
        par = parity(d, info, c["name"], c["path"], c["gaps"], c["fps"]) if c["parity"] else None
        rig = c["rotate_mode"] or "Euler (default)"
        print(f"| {Path(c['path']).stem} | {rig} | {c['length']} | {len(c['gaps'])} | "
              + " | ".join(f"{p:.1f} cm / {r:.1f}°" for p, r in cells)
              + f" | {np.median(info['op_s']):.3f} | "
              + (f"{par[0]:.1e} / {par[1]:.1e}" if par else "-") + " |")


if __name__ == "__main__":
    main()
