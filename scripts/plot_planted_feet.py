"""Foot heights and ground speeds over filled spans of a CMU test clip: the capture, the in-fill with its feet as
the network leaves them, and with the feet planted (the product path, ``families.body.evaluate.load_body_clipfill``).

    .venv/bin/python scripts/plot_planted_feet.py 07_03 30 docs/img/plant_feet_cmu07.png
"""
from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clip", help="a CMU test clip name, e.g. 07_03")
    ap.add_argument("length", type=int, help="gap length in frames at 30 fps")
    ap.add_argument("out", help="PNG to write")
    a = ap.parse_args()
    import matplotlib
    import torch

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from motioncore.core.gaps import runs
    from motioncore.core.rotations import quat_continuity
    from motioncore.data.datasets import load
    from motioncore.eval.clips import cut_gaps
    from motioncore.families.body.evaluate import load_body_clipfill
    from motioncore.families.body.fill_plant import legs_of

    torch.set_num_threads(1)
    m = next(c.motion for c in load("cmu", "test", fps=30, progress=False) if c.name == a.clip)
    q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
    p = np.asarray(m.positions, np.float64)
    known = cut_gaps(len(q), 12, a.length)
    fills = {"capture": (q, p),
             "in-fill, feet not planted": load_body_clipfill("infill-body", plant_feet=False)(m.skeleton, q, p, known),
             "in-fill, feet planted": load_body_clipfill("infill-body")(m.skeleton, q, p, known)}
    sk, legs = m.skeleton, legs_of(m.skeleton)
    gps = {k: sk.forward_kinematics(rq, rp)[1] for k, (rq, rp) in fills.items()}
    gaps = runs(~known)
    lo, hi = max(0, gaps[0][0] - 12), min(len(known), gaps[min(1, len(gaps) - 1)][1] + 12)
    fig, axs = plt.subplots(4, 1, figsize=(13, 11), sharex=True)
    rows = [(legs[0].ankle, "left ankle"), (legs[0].toe, "left toe"), (legs[1].ankle, "right ankle"),
            (legs[1].toe, "right toe")]
    t = np.arange(lo, hi)
    for ax, (j, lab) in zip(axs, rows, strict=True):
        ax2 = ax.twinx()
        ground = np.percentile(gps["capture"][:, j, 1], 5)
        for k, c in zip(gps, ("k", "tab:red", "tab:blue"), strict=True):
            x = gps[k][lo:hi, j]
            ax.plot(t, x[:, 1] - ground, c, lw=1.6, label=f"{k}: height")
            ax2.plot(t, np.r_[np.nan, np.linalg.norm(np.diff(x[:, [0, 2]], axis=0), axis=-1) * m.fps], c, ls=":",
                     lw=1.1)
        for s, e in gaps:
            if e > lo and s < hi:
                ax.axvspan(s - 0.5, e - 0.5, color="gold", alpha=0.2)
        ax.set_ylabel(f"{lab}\nheight above ground (cm)")
        ax2.set_ylabel("ground speed (cm/s), dotted")
        ax.set_ylim(-3, 25)
        ax2.set_ylim(0, 450)
        ax.grid(alpha=0.3)
    axs[0].legend(loc="upper left", fontsize=8, ncol=3)
    axs[-1].set_xlabel("frame (30 fps); shaded: filled")
    fig.suptitle(f"CMU {a.clip} (never trained on), gaps of {a.length} frames: foot heights (solid) and ground "
                 "speeds (dotted)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=72)


if __name__ == "__main__":
    main()
