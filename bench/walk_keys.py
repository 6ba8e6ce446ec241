"""Walk Along Path and Style from Example in real Blender with Keys = Reduced against Keys = Every Frame (issue 55
item 3): the LAFAN1 clip's rig (../shared/mocap, evaluation only) imported with Blender's BVH importer at its
defaults walks the S path of tests/blender/walk_rigs.py (three points 300 / 200 cm apart, AUTO handles), and walks
it again in the style of its own clip; each operator timed with each Keys setting, alternately, best of
``--repeats`` (tests/blender/walk_keys.py, through a live server).

    PYTHONPATH=src:server python bench/walk_keys.py [--blender 5.0.1] [--repeats 3]

Prints per operator the seconds of Every Frame (the baseline), of Reduced and their ratio, and both reports.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import blender_infill as bi  # noqa: E402
from reduced_keys import lafan_clip  # noqa: E402

POINTS = [(0, 0, 0), (300, 200, 0), (600, 0, 0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blender", default="5.0.1")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="walk-keys-"))
    _, res = bi.run_driver({"bvh": lafan_clip(), "points": POINTS, "repeats": a.repeats}, a.blender, work,
                           "walk_keys.py")
    if "error" in res:
        raise SystemExit(res["error"])
    print(f"Blender {res['blender']}, LAFAN1 rig at the importer's defaults, best of {a.repeats}")
    for label in ("walk", "style"):
        ev, red = res[f"{label}/EVERY_FRAME"], res[f"{label}/REDUCED"]
        te, tr = min(ev["seconds"]), min(red["seconds"])
        print(f"  {label}: Every Frame {te:.2f} s, Reduced {tr:.2f} s: {tr / te:.2f}x")
        print(f"    Every Frame: {ev['report']}")
        print(f"    Reduced:     {red['report']}")


if __name__ == "__main__":
    main()
