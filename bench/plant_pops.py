"""Planting's pops, feet under the ground, skate and jerk (`eval.fill_quality`) as `batch infill` fills a capture.

The shared LAFAN1 clip (../shared/mocap/lafan1_sample, 30 fps, never trained on; evaluation only) with gaps of
--length frames at --at frames (issue 46: 30 frames at 500, 1200, 3000, 5000), and/or CMU test subject 07 (walks,
120 fps, `motioncore.data` cmu05-09) with --cmu-gaps gaps of --cmu-length frames. Each clip filled through the
model's skeleton and back (`batch.infill.fill_motion`, the gate fitted on the clip's keys), planted (the default)
and not, beside Blender's Bezier of the same keys (Euler channels). Per fill: pops (the worst gap and the median
gap, of the worst joint's ratio; the worst joint and its degrees against the capture's), the deepest foot under
the capture's ground (cm; the capture's own), skate and jerk over the capture's.

    python bench/plant_pops.py [--lafan] [--cmu] [--length 30] [--at 500 --at 1200 ...]

Prints a Markdown table (date, machine). Never asserts.
"""
from __future__ import annotations

import argparse
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

LAFAN = Path(__file__).resolve().parents[1] / ".." / "shared" / "mocap" / "lafan1_sample" / "lafan1_sample.tar.xz"


def _rows(m, known, model, meta, jm, name):
    from motioncore.batch.infill import fill_motion
    from motioncore.core.motion import Motion
    from motioncore.eval.fill_quality import fill_quality
    from motioncore.eval.keyed import bezier_keys
    from motioncore.retarget.contacts import feet_of

    sk = m.skeleton
    _, tp = sk.forward_kinematics(m.rotations, m.positions)
    feet = [int(j) for leg in feet_of(sk, tp[::50]) for j in leg]
    bq, bp = bezier_keys(sk, m.rotations[None], m.positions[None], known[None])
    bez = Motion(sk, bq[0], bp[0], m.fps, m.name)
    fills = {"Bezier": bez}
    for plant in (True, False):
        fills["planted" if plant else "unplanted"] = fill_motion(m, model, meta, ~known, jm, plant_feet=plant)
    _, zp = sk.forward_kinematics(bez.rotations, bez.positions)
    out = []
    for k, f in fills.items():
        _, fp = sk.forward_kinematics(f.rotations, f.positions)
        r = fill_quality(f.rotations, fp, m.rotations, tp, known, m.fps, feet, zp)
        g, j, deg, cap = r["pops_worst"]
        out.append(f"| {name} | {k} | {r['pops_max']:.2f}x / {r['pops_median']:.2f}x | {sk.names[j]} at gap {g}: "
                   f"{deg:.1f} vs {cap:.1f} deg | {r['under']:.1f} ({r['under_capture']:.1f}) | "
                   f"{r['skate_ratio']:.2f}x | {r['jerk_ratio']:.2f}x ({r['jerk_bezier_ratio']:.2f}x) |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lafan", action="store_true")
    ap.add_argument("--cmu", action="store_true")
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--at", type=int, action="append", default=None)
    ap.add_argument("--cmu-gaps", type=int, default=6)
    ap.add_argument("--cmu-length", type=int, default=60)
    ap.add_argument("--cmu-limit", type=int, default=2)
    a = ap.parse_args()
    if not (a.lafan or a.cmu):
        a.lafan = a.cmu = True
    import torch

    from motioncore.core.skeleton import Skeleton
    from motioncore.data import load
    from motioncore.data.cache import unpack
    from motioncore.eval.clips import cut_gaps
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model
    from motioncore.retarget import auto_map, clip_poses

    torch.set_num_threads(1)
    model, meta = load_model("infill-body")
    msk = Skeleton.from_dict(meta["skeleton"])
    rows = []
    if a.lafan:
        m = read_bvh(next(unpack(LAFAN.resolve(), progress=False).glob("*.bvh")))
        known = np.ones(m.num_frames, bool)
        for s in a.at or [500, 1200, 3000, 5000]:
            known[s:s + a.length] = False
        jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
        rows += _rows(m, known, model, meta, jm, f"LAFAN1 sample, {a.length}-frame gaps")
    if a.cmu:
        clips = [c for c in load("cmu05-09", split="test", progress=False) if c.name.startswith("07")][: a.cmu_limit]
        for c in clips:
            m = c.motion
            known = cut_gaps(m.num_frames, a.cmu_gaps, a.cmu_length, spacing=4 * a.cmu_length)
            jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
            rows += _rows(m, known, model, meta, jm, f"CMU {c.name} (120 fps), {a.cmu_length}-frame gaps")
    print(f"# bench/plant_pops.py, {datetime.now(UTC).date()}, {cpu_name()}, {os.cpu_count()} cores, one thread, "
          f"Python {platform.python_version()}\n")
    print("| clip | fill | pops worst / median gap | worst joint | cm under ground (capture's) | skate / capture's "
          "| jerk / capture's (Bezier's) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
