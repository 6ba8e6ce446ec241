"""The add-on on a LAFAN1-like rig in real Blender, against Blender's Bezier and the library (issue 42 item 1):
held-out Bandai walks (the three ``elderly`` takes, one after another: 1,145 frames) rewritten in LAFAN1's BVH
convention (scripts/lafan_like_rig.py: offsets along the parent's +x, hips ROOT far from the origin, ZYX),
imported with Blender's BVH importer at its defaults (the scene left at 24 fps), 12 gaps of 5, 15 and 30
frames cut at once, the add-on's In-fill over the whole action (with and without Learn This Action first).

    PYTHONPATH=src:server python bench/blender_lafan.py [--adapt 20] [--blender 5.0.1] [--lengths 5 15 30]

Prints per length: add-on / Bezier (cm, degrees), the library's ``batch infill`` path (``fill_motion``, the file
at its own 30 fps) / Bezier, the gate's estimate, and the add-on's parity with ``lafan_reference`` (the library's
``fill_clip_at`` on the file's values, carried as the add-on carries them). Never asserts.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import blender_infill as bi  # noqa: E402  (sibling module)
import lafan_reference as lr  # noqa: E402

TAKES = ("dataset-2_walk_elderly_005", "dataset-2_walk_elderly_010", "dataset-2_walk_elderly_015")


def gaps_spread(n_frames: int, length: int, count: int = 12, edge: int = 10, avoid: tuple[int, ...] = ()
                ) -> list[list[int]]:
    """``count`` gaps of ``length`` Blender frames (from 1, inclusive) spread evenly, ``edge`` keys from either
    end, none within 10 frames of a frame in ``avoid`` (the seams between takes)."""
    lo, hi = 1 + edge, n_frames - edge - length + 1
    cand = [s for s in range(lo, hi + 1) if all(not (s - 10 <= a <= s + length + 10) for a in avoid)]
    pick = np.linspace(0, len(cand) - 1, count).round().astype(int)
    out, last = [], -10**9
    for i in pick:
        s = cand[i]
        while s < last + length + 2 and i < len(cand) - 1:
            i += 1
            s = cand[i]
        out.append([s, s + length - 1])
        last = s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapt", type=float, default=20.0, help="Learn This Action seconds (0: skip that pass)")
    ap.add_argument("--blender", default="5.0.1")
    ap.add_argument("--lengths", type=int, nargs="+", default=[5, 15, 30])
    ap.add_argument("--fps", type=float, default=None, help="the scene's rate (default: as the importer leaves it)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work = Path(a.out or tempfile.mkdtemp(prefix="blender-lafan-"))
    work.mkdir(parents=True, exist_ok=True)
    bvh, seams = lr.lafan_action(work / "elderly_lafan.bvh", TAKES)
    n = lr.frames_of(bvh)
    spec = []
    for L in a.lengths:
        for mode, secs in (("default", 0.0), ("adapt", a.adapt)):
            if mode == "adapt" and not secs:
                continue
            spec.append({"name": f"lafan-{L}-{mode}", "path": str(bvh), "rotate_mode": None, "fps": a.fps,
                         "gaps": gaps_spread(n, L, avoid=seams), "full_range": True, "adapt": secs or None,
                         "length": L, "mode": mode})
    d, res = bi.run_driver({"clips": spec}, a.blender, work)
    rows = []
    print(f"real Blender {a.blender}, LAFAN1-like rig ({n} frames), 12 gaps at once (results: {work})")
    for c in spec:
        info = res[c["name"]]
        if "error" in info:
            print(f"  {c['name']}: ERROR {info['error'][-300:]}")
            continue
        add, bez = bi.errors(d, info, c["name"], "addon"), bi.errors(d, info, c["name"], "bezier")
        fps = bi.filled_fps(info, a.fps or info.get("scene_fps") or 24.0)   # Best Rate may fill at another
        par = lr.parity(d, info, c["name"], str(bvh), c["gaps"], fps) if c["mode"] == "default" else None
        lib = lr.library_errors(d, info, c["name"], str(bvh), c["gaps"]) if c["mode"] == "default" else None
        rep = info["reports"][0]
        est = re.search(r"model ([\d.]+) cm, Blender's curve ([\d.]+) cm", rep)
        row = {**c, "addon_cm": add[0], "addon_deg": add[1], "bezier_cm": bez[0], "bezier_deg": bez[1],
               "parity": par, "library": lib, "report": rep, "adapt_report": info.get("adapt_report"),
               "gate_est": float(est.group(1)) / float(est.group(2)) if est else None,
               "per_bone": lr.per_bone(d, info, c["name"])}
        rows.append(row)
        libs = f", library {lib[0] / bez[0]:.3f}x / {lib[1] / bez[1]:.3f}x" if lib else ""
        pars = f", parity {par['deg']:.4f} deg {par['cm']:.4f} cm" if par else ""
        gate = f", gate estimate {row['gate_est']:.3f}x" if row["gate_est"] else ""
        print(f"  {c['length']:>2} frames {c['mode']:<7}: add-on {add[0] / bez[0]:.3f}x / {add[1] / bez[1]:.3f}x Bezier "
              f"(cm {add[0]:.2f} / {bez[0]:.2f}, deg {add[1]:.2f} / {bez[1]:.2f}){libs}{gate}{pars}")
        print(f"      {rep[:300]}")
    (work / "results.json").write_text(json.dumps(rows, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else float(o)))


if __name__ == "__main__":
    main()
