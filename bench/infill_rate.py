"""The body in-fill at 120 fps, as `batch infill` fills a capture: pops at the gaps' ends and jerk over the gaps.

CMU test subjects 05 (dance) and 07 (walks) at their own 120 fps (the cmu05-09 set as `motioncore.data` gives it:
ASF names, cm), keyed at every frame but up to --gaps gaps of --length frames (0.5 s at 60), each filled through
the model's skeleton and back (`batch.infill.fill_motion`, the gate fitted on the clip's keys). Per gap:

- **step**: the largest joint step (global position, cm per frame, over all joints) from the key before the gap to
  its first filled frame and from its last filled frame to the key after, against the capture's at the same frames
  (sums over gaps; the worst gap too);
- **jerk**: the third difference of global joint positions over the gap and 3 keyed frames either side, against
  the capture's, and Blender's Bezier of the same keys (Euler channels, as Blender imports a BVH) for comparison.

    python bench/infill_rate.py [--gaps 12] [--length 60] [--limit N] [--subject 05]

Prints a Markdown table (date, machine). Never asserts.
"""
from __future__ import annotations

import argparse
import os
import platform
from datetime import UTC, datetime

import numpy as np
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gaps", type=int, default=12)
    ap.add_argument("--length", type=int, default=60)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--subject", action="append", default=None)
    a = ap.parse_args()
    import torch

    from motioncore.batch.infill import fill_motion
    from motioncore.core.gaps import runs
    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton
    from motioncore.data import load
    from motioncore.eval.clips import cut_gaps
    from motioncore.eval.infill import JERK_PAD, jerk_sum
    from motioncore.eval.keyed import bezier_keys
    from motioncore.models.registry import load_model
    from motioncore.retarget import auto_map, clip_poses

    torch.set_num_threads(1)
    model, meta = load_model("infill-body")
    msk = Skeleton.from_dict(meta["skeleton"])
    clips = [c for c in load("cmu05-09", split="test", progress=False)
             if not a.subject or any(c.name.startswith(s) for s in a.subject)][: a.limit]
    rows = {s: {"step": [0.0, 0.0, 0.0], "worst": 0.0, "worst_bez": 0.0, "jerk": [0.0, 0.0, 0.0], "gaps": 0, "clips": 0}
            for s in ("05", "07")}
    for c in clips:
        m = c.motion
        known = cut_gaps(m.num_frames, a.gaps, a.length, spacing=4 * a.length)
        if known.all():
            continue
        jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
        out = fill_motion(m, model, meta, ~known, jm)
        bq, bp = bezier_keys(m.skeleton, m.rotations[None], m.positions[None], known[None])
        bez = Motion(m.skeleton, bq[0], bp[0], m.fps, m.name)
        _, tp = m.skeleton.forward_kinematics(m.rotations, m.positions)
        _, op = m.skeleton.forward_kinematics(out.rotations, out.positions)
        _, zp = m.skeleton.forward_kinematics(bez.rotations, bez.positions)
        r = rows[c.name[:2]]
        r["clips"] += 1
        for s, e in runs(~known):
            r["gaps"] += 1
            steps = []
            for x in (op, tp, zp):
                first = np.linalg.norm(x[s] - x[s - 1], axis=-1).max()
                last = np.linalg.norm(x[e] - x[e - 1], axis=-1).max()
                steps.append((first, last))
            for i in range(3):
                r["step"][i] += steps[i][0] + steps[i][1]
            for key, i in (("worst", 0), ("worst_bez", 2)):   # per gap end, over the capture's step there
                r[key] = max(r[key], *(steps[i][j] / max(steps[1][j], 1e-9) for j in (0, 1)))
            lo, hi = max(0, s - JERK_PAD), min(len(known), e + JERK_PAD)
            for i, x in enumerate((op, tp, zp)):
                r["jerk"][i] += jerk_sum(x[lo:hi])
    print(f"# bench/infill_rate.py, {datetime.now(UTC).date()}, {cpu_name()}, {os.cpu_count()} cores, one thread, "
          f"Python {platform.python_version()}; CMU test subjects at 120 fps, gaps of {a.length} frames\n")
    print("| subject | clips | gaps | step at gap ends / capture's (worst gap end) | Bezier's (worst) "
          "| jerk / capture's | Bezier's jerk / capture's |")
    print("|---|---:|---:|---|---|---|---|")
    for subj, r in rows.items():
        if not r["gaps"]:
            continue
        st, jk = r["step"], r["jerk"]
        print(f"| {subj} | {r['clips']} | {r['gaps']} | {st[0] / st[1]:.2f}x ({r['worst']:.2f}x) | {st[2] / st[1]:.2f}x "
              f"({r['worst_bez']:.2f}x) "
              f"| {jk[0] / jk[1]:.2f}x | {jk[2] / jk[1]:.2f}x |")


if __name__ == "__main__":
    main()
