"""The animator's benchmark (``motioncore eval clips``): whole clips keyed at every frame except N gaps of L
frames, filled the way the add-on and ``batch infill`` fill them (``tasks.infill.fill_clip`` on the model's
skeleton, other skeletons through ``eval.keyed.on_skeleton``), and scored against the deleted truth *and*
against Blender's Bezier of the same keys.

Rows, per clip and gap length:
- ``bezier``: Blender's Auto Clamped Bezier of the keys per channel (``eval.keyed.bezier_keys``);
- ``shipped``: the network as trained, no gate;
- ``gate``: the default in-fill: the correction's weights fitted on pseudo-gaps cut from the clip's own keys
  (``families.body.gate``);
- ``adapt``: Learn This Action first (``families.body.adapt``, ``adapt`` seconds), then the gate.

Measures over the gap frames: mean global joint position error (cm, the data's units) and mean global rotation
error (degrees); jerk over the gaps and ``JERK_PAD`` keyed frames either side, over the truth's. Ratios are
to Bezier on the same clip; the summary is the ratio of the sums over clips.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..core.gaps import runs as _runs
from ..core.rotations import quat_angle, quat_continuity
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from .infill import JERK_PAD, jerk_sum
from .keyed import bezier_keys

__all__ = ["cut_gaps", "evaluate_clips", "format_clips", "plot_clips"]

SPACING = 60  # frames at least between gaps (and from the clip's ends: CONTEXT keys at least)


def cut_gaps(T: int, n: int, length: int, spacing: int = SPACING) -> np.ndarray:
    """(T,) known: every frame but up to ``n`` gaps of ``length`` frames, evenly spread, at least ``spacing``
    frames apart and 10 keyed frames from either end (fewer gaps when the clip is short; none when too short)."""
    room = T - 20
    k = min(n, max(0, (room + spacing) // (length + spacing)))
    known = np.ones(T, bool)
    if k == 0:
        return known
    starts = 10 + (np.linspace(0, room - length, k).round().astype(int) if k > 1 else np.array([(room - length) // 2]))
    for s in starts:
        known[s:s + length] = False
    return known


def _scores(sk: Skeleton, q, p, tq, tp, known) -> tuple[float, float, float, float]:
    """(cm summed over gap frames x joints, deg likewise, count, jerk sum) for one filled clip."""
    gq, gp = sk.forward_kinematics(q, p)
    tgq, tgp = sk.forward_kinematics(tq, tp)
    gap = ~known
    cm = np.linalg.norm(gp - tgp, axis=-1)[gap].sum()
    deg = np.degrees(quat_angle(gq, tgq))[gap].sum()
    span = np.zeros_like(gap)
    for i in np.flatnonzero(gap):
        span[max(0, i - JERK_PAD):i + JERK_PAD + 1] = True
    jerk = sum(jerk_sum(gp[a:b]) for a, b in _runs(span))
    return float(cm), float(deg), float(gap.sum() * gq.shape[1]), float(jerk)


def evaluate_clips(clips, fills: dict[str, Callable], n_gaps: int = 12, lengths=(5, 15, 30),
                   progress: Callable[[str], None] | None = None) -> dict:
    """``clips``: Motions; ``fills``: name -> fill(skeleton, q (T, J, 4), p (T, J, 3), known (T,)) -> (q, p).
    Returns {"clips": [{clip, length, gaps, <model>: {cm, deg, jerk, seconds}}], "summary": {L: {model: {cm, deg,
    jerk}}}} with cm and deg as ratios to ``bezier`` and jerk over the truth's."""
    rows = []
    for m in clips:
        q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
        p = np.asarray(m.positions, np.float64)
        for L in lengths:
            known = cut_gaps(len(q), n_gaps, L)
            if known.all():
                continue
            row: dict = {"clip": m.name, "length": int(L), "gaps": int(len(_runs(~known))), "frames": len(q)}
            _, tgp = m.skeleton.forward_kinematics(q, p)
            truth_jerk = _scores(m.skeleton, q, p, q, p, known)[3]
            for name, fill in {"bezier": _bezier, **fills}.items():
                t0 = time.perf_counter()
                oq, op = fill(m.skeleton, q, p, known)
                dt = time.perf_counter() - t0
                if not (np.array_equal(oq[known], q[known]) and np.array_equal(op[known], p[known])):
                    raise MotioncoreError(f"{name} changed keyed frames of {m.name}")
                cm, deg, n, jerk = _scores(m.skeleton, oq, op, q, p, known)
                row[name] = {"cm": cm / n, "deg": deg / n, "jerk": jerk / max(truth_jerk, 1e-12),
                             "seconds": round(dt, 3), "_n": n, "_jerk": jerk, "_tjerk": truth_jerk}
                info = getattr(fill, "last_info", None)
                if info:
                    row[name].update(info())
            rows.append(row)
            if progress:
                progress(f"{m.name} L={L}: " + ", ".join(
                    f"{k} {row[k]['cm'] / max(row['bezier']['cm'], 1e-12):.2f}" for k in fills))
    return {"clips": [_public(r) for r in rows], "summary": _summary(rows, ["bezier", *fills], lengths)}


def _bezier(sk, q, p, known):
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    return bq[0], bp[0]


def _public(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            b = row["bezier"]
            v = {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
            v.update(cm_ratio=v["cm"] / max(b["cm"], 1e-12), deg_ratio=v["deg"] / max(b["deg"], 1e-12))
        out[k] = v
    return out


def _summary(rows: list[dict], models: list[str], lengths) -> dict:
    out: dict = {}
    for L in lengths:
        rs = [r for r in rows if r["length"] == L]
        if not rs:
            continue
        b_cm = sum(r["bezier"]["cm"] * r["bezier"]["_n"] for r in rs)
        b_deg = sum(r["bezier"]["deg"] * r["bezier"]["_n"] for r in rs)
        out[str(L)] = {m: {"cm": sum(r[m]["cm"] * r[m]["_n"] for r in rs) / b_cm,
                           "deg": sum(r[m]["deg"] * r[m]["_n"] for r in rs) / b_deg,
                           "jerk": sum(r[m]["_jerk"] for r in rs) / sum(r[m]["_tjerk"] for r in rs),
                           "clips": len(rs)} for m in models}
        for m in models:
            w = [r[m]["weight"] for r in rs if "weight" in r[m]]
            if w:
                out[str(L)][m]["weight"] = float(np.mean(w))
            skipped = sum("adapt_skipped" in r[m] for r in rs)
            if skipped:
                out[str(L)][m]["adapt_skipped"] = skipped  # clips too short to learn from: the gate alone
    return out


def format_clips(res: dict) -> str:
    """One block per gap length: per model the cm and degree ratios to Bezier, jerk over the truth's and the
    gate's mean weight."""
    lines = []
    for L, per in res["summary"].items():
        lines.append(f"gaps of {L} frames ({next(iter(per.values()))['clips']} clips): "
                     "cm / Bezier, deg / Bezier, jerk / truth, mean weight")
        for m, v in per.items():
            w = f"{v['weight']:.2f}" if "weight" in v else "-"
            skip = f"  (not adapted on {v['adapt_skipped']} clips: too little keyed to learn from)" \
                if v.get("adapt_skipped") else ""
            lines.append(f"  {m:<8} {v['cm']:6.3f} {v['deg']:6.3f} {v['jerk']:6.3f}  {w}{skip}")
    return "\n".join(lines)


def plot_clips(res: dict, path) -> None:
    """PNG: per gap length, each model's cm and degree ratio to Bezier and its jerk over the truth's (atomic)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..io.atomic import atomic_write

    summ = res["summary"]
    Ls = list(summ)
    models = list(next(iter(summ.values()))) if summ else []
    fig = Figure(figsize=(13, 4), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, key, label in zip(fig.subplots(1, 3), ("cm", "deg", "jerk"),
                              ("position error / Bezier", "rotation error / Bezier", "jerk / truth"), strict=True):
        x = np.arange(len(Ls))
        for i, m in enumerate(models):
            ax.bar(x + (i - (len(models) - 1) / 2) * 0.8 / max(len(models), 1), [summ[L][m][key] for L in Ls],
                   0.8 / max(len(models), 1), label=m)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [f"{L} frames" for L in Ls])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    fig.axes[0].legend(fontsize=8)
    fig.suptitle("Whole clips keyed but N gaps (lower is better; 1 = Blender's Bezier, or the truth's jerk)")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
