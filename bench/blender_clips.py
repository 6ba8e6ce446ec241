"""The animator's test in real Blender, on performers the model never saw (issue 32 item 6, issue 46 item 8): CMU
subjects 05 (dance) and 07 (walks), and the shared LAFAN1 clip (subject lafan1: evaluation only), imported with
Blender's own BVH importer at its defaults (Euler bones, the scene left at 24 fps: ``--imports defaults``) or with
Update Scene FPS (``scene-fps``), keys deleted inside up to 12 gaps of 5, 15 and 30 frames (at 30 fps; scaled to the
clip's rate), the keys left as the importer leaves them (LINEAR: ``--keys imported``) or set to Bezier as an animator
keys (``BEZIER``), then the add-on's In-fill once over the whole action at its defaults (Plant Feet on; off too with
``--unplanted``), with and without Learn This Action first (its default budget: 40 steps, at most ``--adapt``
seconds). Against the deleted truth and Blender's Bezier of the same keys: cm, degrees (ratios to Bezier), jerk (the
gaps and 3 frames either side, over the truth's), foot skate (``core.feet``: cm/s over the gaps and the key either
side, on each foot and toe joint's ground from the whole capture, over the capture's skate there), pops (per joint
its largest one-frame turn over the gaps and the frame pairs meeting the keys, over the capture's, at least 1 degree)
and how far a foot or toe goes under the capture's ground.

    PYTHONPATH=src:server python bench/blender_clips.py [--adapt 20] [--blender 5.0.1] [--out DIR] [--quick]
        [--subject lafan1] [--keys imported BEZIER] [--imports defaults scene-fps] [--unplanted] [--blocking 10]

Writes DIR/results.json and prints one line per (subject, length, mode). Never asserts timings; a clip whose
In-fill or Learn This Action failed gets its error printed instead of a ratio, and the script exits 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import blender_infill as bi  # noqa: E402  (sibling module)

CLIPS = {"05": ("05_02", "05_06", "05_10", "05_14"), "07": ("07_01", "07_03", "07_05", "07_07", "07_09", "07_11"),
         "lafan1": ("lafan1_walk_7184f",)}   # the shared LAFAN1 clip (evaluation only): the real LAFAN1 rig
KEYS = ("imported", "BEZIER")   # the keys as Blender's BVH importer leaves them (LINEAR), and as an animator sets them
IMPORTS = ("defaults", "scene-fps")   # the importer at its defaults (the scene left at 24 fps), Update Scene FPS


def gaps_for(n_frames: int, length: int, fps: float, count: int = 12, spacing: int = 60) -> list[list[int]]:
    """Up to ``count`` gaps of ``length`` frames at 30 fps (scaled to ``fps``), ``spacing`` 30-fps frames apart
    and 10 from either end (Blender frames from 1, inclusive)."""
    k = fps / 30.0
    L, sp, edge = int(round(length * k)), int(round(spacing * k)), int(round(10 * k))
    room = n_frames - 2 * edge
    n = min(count, max(0, (room + sp) // (L + sp)))
    if n == 0:
        return []
    starts = edge + 1 + (np.linspace(0, room - L, n).round().astype(int) if n > 1 else np.array([(room - L) // 2]))
    return [[int(s), int(s + L - 1)] for s in starts]


def blocking_gaps(n_frames: int, every: int, fps: float, span: int = 600, edge: int = 10) -> list[list[int]]:
    """An animator's blocking: a key every ``every`` frames at 30 fps (scaled to ``fps``) over ``span`` 30-fps
    frames from ``edge`` in (the rest of the clip keyed as captured); the frames between the keys are the gaps
    (Blender frames from 1, inclusive), each run of them separated from the next by one key."""
    k = fps / 30.0
    step, first = max(2, int(round(every * k))), int(round(edge * k)) + 1
    last = min(n_frames - int(round(edge * k)), first + int(round(span * k)))
    keys = list(range(first, last + 1, step))
    return [[a + 1, b - 1] for a, b in zip(keys, keys[1:]) if b - a > 1]


def lafan_folder() -> Path:
    """The shared LAFAN1 clip's folder, unpacked into the data cache (evaluation only)."""
    from motioncore.data.cache import data_root, unpack
    return Path(unpack(data_root() / "lafan1_sample" / "lafan1_sample.tar.xz", progress=False))


def jerk(x: np.ndarray, frames: np.ndarray) -> float:
    """Sum over runs of consecutive frames of the size of the third difference of world joint positions."""
    pos = x[..., :3, 3]
    cut = np.flatnonzero(np.diff(frames) != 1) + 1
    return float(sum(np.linalg.norm(np.diff(p, n=3, axis=0), axis=-1).sum()
                     for p in np.split(pos, cut) if len(p) > 3))


def skate_sums(x: np.ndarray, frames: np.ndarray, gaps: list[list[int]], obj: np.ndarray, feet: list[int],
               ground: np.ndarray, fps: float, unit_cm: float) -> tuple[float, float]:
    """(sum w v, sum w) of ``core.feet`` over each gap and the key either side, from pose matrices (F, B, 4, 4) on
    ``frames`` (Blender frames, runs of consecutive ones), in world axes (Z up); ``ground`` (len(feet),) in the
    same units."""
    from motioncore.core import feet as foots

    world = x[..., :3, 3] @ obj[:3, :3].T + obj[:3, 3]
    span = np.zeros(len(frames), bool)
    for a, b in gaps:
        span |= (frames >= a - 1) & (frames <= b + 1)
    pairs = np.flatnonzero(span[:-1] & span[1:] & (np.diff(frames) == 1))
    v, w = foots.skate_pairs(world, fps, feet, ground, unit=unit_cm, up=2)
    m = np.zeros(len(frames) - 1, bool)
    m[pairs] = True
    return float((w * v)[m].sum()), float(w[m].sum())


def pops(x: np.ndarray, truth: np.ndarray, frames: np.ndarray, gaps: list[list[int]], rest: np.ndarray,
         parents: list[int]) -> tuple[float, float]:
    """Per joint, its largest one-frame turn (local rotation, degrees) over the filled frames and the two frame pairs
    meeting the keys, over the capture's largest there (taken as at least 1 degree): (the largest ratio over the
    joints, their median). ``x`` / ``truth`` pose matrices (F, B, 4, 4) on ``frames``."""
    from blender_infill import angle_deg, local_rotations

    qa, qt = (local_rotations(m, rest, parents) for m in (x, truth))
    idx = {int(f): i for i, f in enumerate(frames)}
    pa = [(idx[f], idx[f + 1]) for a, b in gaps for f in range(a - 1, b + 1) if f in idx and f + 1 in idx]
    i0, i1 = np.array([p[0] for p in pa]), np.array([p[1] for p in pa])
    turn_a = angle_deg(qa[i0], qa[i1]).max(axis=0)
    turn_t = np.maximum(angle_deg(qt[i0], qt[i1]).max(axis=0), 1.0)
    r = turn_a / turn_t
    return float(r.max()), float(np.median(r))


def under_ground(x: np.ndarray, frames: np.ndarray, gaps: list[list[int]], obj: np.ndarray, feet: list[int],
                 ground: np.ndarray, unit_cm: float) -> float:
    """How far (cm) a foot or toe joint goes under the capture's ground in the gap frames (0: never)."""
    z = (x[:, feet][..., :3, 3] @ obj[:3, :3].T + obj[:3, 3])[..., 2]
    m = np.zeros(len(frames), bool)
    for a, b in gaps:
        m |= (frames >= a) & (frames <= b)
    return float(max(0.0, (ground[None] - z[m]).max()) * unit_cm) if m.any() else 0.0


def capture_ground(path: str, bones: list[str]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(the feet's bone indices, their ground, the BVH's heights of them (T, F)) from the BVH itself: the
    importer's world height is the BVH's Y (scale 1, its frame 1 the BVH's first), so the ground is taken over the
    whole capture, as ``core.feet`` defines it (`main` checks the heights against Blender's)."""
    from motioncore.core import feet as foots
    from motioncore.io.bvh import read_bvh
    from motioncore.retarget.contacts import feet_of

    mo = read_bvh(path)
    _, gp = mo.global_transforms()
    legs = feet_of(mo.skeleton, gp[::20])
    joints = [j for leg in legs for j in leg]
    return [bones.index(mo.skeleton.names[j]) for j in joints], foots.ground(gp, joints), gp[:, joints, 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapt", type=float, default=300.0,
                    help="Learn This Action's time limit in seconds, its steps the operator's default (0: skip that pass)")
    ap.add_argument("--blender", default="5.0.1")
    ap.add_argument("--lengths", type=int, nargs="+", default=[5, 15, 30])
    ap.add_argument("--blocking", type=int, nargs="+", metavar="N", default=None,
                    help="instead of --lengths: block 600 frames (at 30 fps) with a key every N frames and fill between "
                         "them (keys Bezier as an animator sets them unless --keys says otherwise)")
    ap.add_argument("--quick", action="store_true", help="two clips per subject")
    ap.add_argument("--subject", action="append", choices=sorted(CLIPS), help="only this subject (repeatable)")
    ap.add_argument("--unplanted", action="store_true", help="also In-fill with Plant Feet off (mode 'unplanted')")
    ap.add_argument("--keys", nargs="+", choices=KEYS, default=list(KEYS), help="the keys when In-fill runs")
    ap.add_argument("--imports", nargs="+", choices=IMPORTS, default=list(IMPORTS), help="the importer's settings")
    ap.add_argument("--out", default=None)
    ap.add_argument("--table-from", metavar="DIR", help="re-read DIR/spec.json and DIR/out.npz of an earlier run "
                    "(same --subject, --lengths, --adapt): the figures again, no Blender")
    a = ap.parse_args()
    from motioncore.io.bvh import read_bvh

    lengths = [-n for n in a.blocking] if a.blocking else a.lengths   # negative: a key every -L frames
    if a.blocking and "--keys" not in sys.argv:
        a.keys = ["BEZIER"]
    spec = []
    for subj, names in ({} if a.table_from else CLIPS).items():   # --table-from: the spec is the earlier run's
        if a.subject and subj not in a.subject:
            continue
        folder = lafan_folder() if subj == "lafan1" else Path(bi.cmu_test_clips()[0]).parent
        for n in names[:2] if a.quick else names:
            path = folder / f"{n}.bvh"
            if not path.is_file():
                continue
            mo = read_bvh(path)
            for L, keys, imp in ((L, k, i) for L in lengths for k in a.keys for i in a.imports):
                # the gaps in the scene's frames: the importer keys one BVH frame per scene frame at either setting
                gaps = blocking_gaps(mo.num_frames, -L, mo.fps) if L < 0 else gaps_for(mo.num_frames, L, mo.fps)
                if not gaps:
                    continue
                for mode, secs in (("default", 0.0), ("unplanted", 0.0), ("adapt", a.adapt)):
                    if (mode == "adapt" and not secs) or (mode == "unplanted" and not a.unplanted):
                        continue
                    spec.append({"name": f"{n}-{L}-{mode}-{keys}-{imp}", "path": str(path), "rotate_mode": None,
                                 "fps": None, "update_fps": imp == "scene-fps", "keys": keys, "once": True,
                                 "gaps": gaps, "full_range": True, "jerk": True, "adapt": secs or None,
                                 "unit_cm": 1.0 if subj == "lafan1" else 2.54 / 0.45, "subject": subj, "length": L,
                                 "mode": mode, "keys_as": keys, "import": imp, "capture_fps": mo.fps,
                                 "plant_feet": mode != "unplanted"})   # the add-on's default: planted
    if a.table_from:
        work = Path(a.table_from)
        spec = json.loads((work / "spec.json").read_text())["clips"]
        d, res = dict(np.load(work / "out.npz")), json.loads((work / "out.npz.json").read_text())
    else:
        work = Path(a.out or tempfile.mkdtemp(prefix="blender-clips-"))
        work.mkdir(parents=True, exist_ok=True)
        d, res = bi.run_driver({"clips": spec}, a.blender, work)
    rows = []
    for c in spec:
        info = {**res[c["name"]], "unit_cm": c["unit_cm"]}
        why = bi.failure(info)
        if why is not None:   # a failed In-fill or Learn This Action is never a result (its keys stay Bezier)
            rows.append({**c, "error": why[-400:]})
            continue
        add, bez = bi.errors(d, info, c["name"], "addon"), bi.errors(d, info, c["name"], "bezier")
        jf = d[f"{c['name']}/jframes"]
        jt = jerk(d[f"{c['name']}/j_truth"], jf)
        feet, ground, heights = capture_ground(c["path"], info["bones"])
        obj = d[f"{c['name']}/object"]
        z = (d[f"{c['name']}/j_truth"][:, feet][..., :3, 3] @ obj[:3, :3].T + obj[:3, 3])[..., 2]
        ground_check = float(np.abs(z - heights[jf - 1]).max() * c["unit_cm"])   # Blender's heights against the BVH's
        fps = c.get("capture_fps") or c["fps"]   # speeds in the capture's time, whatever the scene plays it at
        sk8 = {k: skate_sums(d[f"{c['name']}/j_{k}"], jf, c["gaps"], obj, feet, ground, fps, c["unit_cm"])
               for k in ("truth", "addon", "bezier")}
        rest_m, par = d[f"{c['name']}/rest"], info["parents"]
        pop = pops(d[f"{c['name']}/j_addon"], d[f"{c['name']}/j_truth"], jf, c["gaps"], rest_m, par)
        under = {k: under_ground(d[f"{c['name']}/j_{k}"], jf, c["gaps"], obj, feet, ground, c["unit_cm"])
                 for k in ("truth", "addon")}
        rows.append({**c, "addon_cm": add[0], "addon_deg": add[1], "bezier_cm": bez[0], "bezier_deg": bez[1],
                     "jerk_addon": jerk(d[f"{c['name']}/j_addon"], jf) / jt,
                     "jerk_bezier": jerk(d[f"{c['name']}/j_bezier"], jf) / jt, "reports": info["reports"][:1],
                     "adapt_report": info.get("adapt_report"), "gaps_n": len(c["gaps"]), "ground_check_cm": ground_check,
                     "pops_max": pop[0], "pops_median": pop[1], "under_addon_cm": under["addon"],
                     "under_truth_cm": under["truth"],
                     **{f"skate_{k}": v[0] / v[1] if v[1] > 0 else None for k, v in sk8.items()},
                     **{f"_skate_{k}": v for k, v in sk8.items()}})
    (work / "results.json").write_text(json.dumps([{k: v for k, v in r.items() if not k.startswith("_")}
                                                    for r in rows], indent=1))
    print(f"real Blender {a.blender}, CMU test subjects and the LAFAN1 clip, In-fill once over the whole action "
          f"(results: {work})")
    for subj, L, keys, imp, mode in ((s, L, k, i, m) for s in CLIPS for L in lengths for k in a.keys
                                     for i in a.imports for m in ("default", "unplanted", "adapt")):
        group = [r for r in rows if r["subject"] == subj and r["length"] == L and r["mode"] == mode
                 and r.get("keys_as", "BEZIER") == keys and r.get("import", "defaults") == imp]   # older runs: Bezier
        bad = [r for r in group if "error" in r]
        if bad:   # never a ratio over the clips that happened to work
            print(f"  subject {subj}, {L:>2} (negative: a key every -L), {mode:<7}, keys {keys}, import {imp}: FAILED ({len(bad)} of {len(group)} clips; "
                  f"{bad[0]['name']}): {bad[0]['error'][-300:]}")
            continue
        rs = group
        if not rs:
            continue
        w = np.array([r["gaps_n"] for r in rs], float)
        f = {k: float(np.average([r[k] for r in rs], weights=w)) for k in
             ("addon_cm", "bezier_cm", "addon_deg", "bezier_deg", "jerk_addon", "jerk_bezier")}
        sk8 = {k: sum(r[f"_skate_{k}"][0] for r in rs) / max(sum(r[f"_skate_{k}"][1] for r in rs), 1e-12)
               for k in ("truth", "addon", "bezier")}   # pooled over the clips' gaps
        pm = max(r["pops_max"] for r in rs)
        und = max(r["under_addon_cm"] for r in rs), max(r["under_truth_cm"] for r in rs)
        what = f"a key every {-L}" if L < 0 else f"{L:>2} frames"
        print(f"  subject {subj}, {what}, {mode:<9}, keys {keys}, import {imp} "
              f"({int(w.sum())} gaps in {len(rs)} clips): "
              f"cm {f['addon_cm'] / f['bezier_cm']:.2f}x Bezier, deg {f['addon_deg'] / f['bezier_deg']:.2f}x, "
              f"jerk {f['jerk_addon']:.2f}x truth (Bezier {f['jerk_bezier']:.2f}x), "
              f"skate {sk8['addon'] / sk8['truth']:.2f}x truth (Bezier {sk8['bezier'] / sk8['truth']:.2f}x; "
              f"cm/s: truth {sk8['truth']:.1f}, In-fill {sk8['addon']:.1f}, Bezier {sk8['bezier']:.1f}), "
              f"pops {pm:.2f}x the capture's (median joint {np.median([r['pops_median'] for r in rs]):.2f}x), "
              f"feet under the ground {und[0]:.1f} cm (capture {und[1]:.1f})")
    ok = [r["ground_check_cm"] for r in rows if "error" not in r]
    if ok:
        print(f"  the capture's feet heights from the BVH against Blender's: at most {max(ok):.3f} cm apart")
    errs = [r for r in rows if "error" in r]
    if errs:
        print(f"{len(errs)} clip(s) failed; no ratio is given for them", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
