"""Planting's pops, feet under the ground, skate and jerk (`eval.fill_quality`) as `batch infill` fills a capture.

The shared LAFAN1 clip (../shared/mocap/lafan1_sample, 30 fps, never trained on; evaluation only) with gaps of
--length frames at --at frames (issue 46: 30 frames at 500, 1200, 3000, 5000), and/or CMU test subject 07 (walks,
120 fps, `motioncore.data` cmu05-09) with --cmu-gaps gaps of --cmu-length frames (pooled over the clips). Each clip filled through the
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


def _fills(m, known, model, meta, jm):
    """{fill name: fill_quality dict} for Bezier, planted and unplanted fills of ``m`` with the frames not ``known``
    deleted."""
    from motioncore.batch.infill import fill_motion
    from motioncore.core.motion import Motion
    from motioncore.core.rotations import quat_angle
    from motioncore.eval.fill_quality import fill_quality
    from motioncore.eval.keyed import bezier_keys
    from motioncore.retarget.contacts import feet_of

    sk = m.skeleton
    _, tp = sk.forward_kinematics(m.rotations, m.positions)
    feet = [int(j) for leg in feet_of(sk, tp[::50]) for j in leg]
    bq, bp = bezier_keys(sk, m.rotations[None], m.positions[None], known[None])
    fills = {"Bezier": Motion(sk, bq[0], bp[0], m.fps, m.name)}
    for plant in (True, False):
        fills["planted" if plant else "unplanted"] = fill_motion(m, model, meta, ~known, jm, plant_feet=plant)
    _, zp = sk.forward_kinematics(bq[0], bp[0])
    out = {}
    for k, f in fills.items():
        _, fp = sk.forward_kinematics(f.rotations, f.positions)
        out[k] = fill_quality(f.rotations, fp, m.rotations, tp, known, m.fps, feet, zp)
        out[k]["err_sums"] = [float(np.linalg.norm(fp - tp, axis=-1)[~known].sum()),   # cm, local degrees, count
                              float(np.degrees(quat_angle(f.rotations, m.rotations))[~known].sum()),
                              float((~known).sum() * sk.num_joints)]
        g, j, deg, cap = out[k]["pops_worst"]
        out[k]["worst"] = f"{sk.names[j]} at {m.name} frame {g}: {deg:.1f} vs {cap:.1f} deg"
    return out


def _pooled(rs: list[dict]) -> dict:
    """One clip's or many clips' fill_quality dicts pooled: pops over every gap, the deepest foot, skate and jerk
    sums."""
    gaps = [x for r in rs for x in r["pops_gaps"]]
    sk = np.sum([r["skate_sums"] for r in rs], 0)
    jk = np.sum([r["jerk_sums"] for r in rs], 0)
    worst = max(rs, key=lambda r: r["pops_max"])["worst"]
    es = np.sum([r["err_sums"] for r in rs], 0)
    return {"pops": f"{max(gaps):.2f}x / {np.median(gaps):.2f}x", "worst": worst, "gaps": len(gaps),
            "under": f"{max(r['under'] for r in rs):.2f} ({max(r['under_capture'] for r in rs):.2f})",
            "skate": f"{(sk[0] / sk[1]) / (sk[2] / sk[3]):.2f}x", "jerk": f"{jk[0] / jk[1]:.2f}x ({jk[2] / jk[1]:.2f}x)",
            "cm": es[0] / es[2], "deg": es[1] / es[2]}


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
        rows.append((f"LAFAN1 sample, {a.length}-frame gaps at {a.at or [500, 1200, 3000, 5000]}",
                     [_fills(m, known, model, meta, jm)]))
    if a.cmu:
        clips = [c for c in load("cmu05-09", split="test", progress=False) if c.name.startswith("07")][: a.cmu_limit]
        got = []
        for c in clips:
            m = c.motion
            known = cut_gaps(m.num_frames, a.cmu_gaps, a.cmu_length, spacing=4 * a.cmu_length)
            jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
            got.append(_fills(m, known, model, meta, jm))
        rows.append((f"CMU 07, {len(clips)} clips at 120 fps, {a.cmu_length}-frame gaps", got))
    print(f"# bench/plant_pops.py, {datetime.now(UTC).date()}, {cpu_name()}, {os.cpu_count()} cores, one thread, "
          f"Python {platform.python_version()}\n")
    print("| clips | fill | gaps | pops worst / median gap | worst joint | cm under the keys' ground (capture's) "
          "| skate / capture's | jerk / capture's (Bezier's) | cm / Bezier's | local deg / Bezier's |")
    print("|---|---|---:|---|---|---|---|---|---|---|")
    for name, got in rows:
        bez = _pooled([g["Bezier"] for g in got])
        for k in ("Bezier", "unplanted", "planted"):
            r = _pooled([g[k] for g in got])
            print(f"| {name} | {k} | {r['gaps']} | {r['pops']} | {r['worst']} | {r['under']} | {r['skate']} "
                  f"| {r['jerk']} | {r['cm'] / bez['cm']:.3f}x | {r['deg'] / bez['deg']:.3f}x |")


if __name__ == "__main__":
    main()
