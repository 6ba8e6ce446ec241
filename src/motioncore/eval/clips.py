"""The animator's benchmark (``motioncore eval clips``): whole clips keyed at every frame except N gaps of L
frames, filled the way the add-on and ``batch infill`` fill them (``infill.fill`` on the model's
skeleton, other skeletons through ``eval.keyed.on_skeleton``), and scored against the deleted truth *and*
against Blender's Bezier of the same keys.

Rows, per clip and gap length:
- ``bezier``: Blender's Auto Clamped Bezier of the keys per channel (``eval.keyed.bezier_keys``);
- ``shipped``: the network as trained, no gate, feet not planted;
- ``unplanted``: the gate, feet not planted (the default before planting);
- ``gate``: the default in-fill: the correction's weights fitted on pseudo-gaps cut from the clip's own keys
  (``families.body.gate``), then the feet planted (``families.body.fill_plant``) where those pseudo-gaps say it
  costs no error;
- ``adapt``: Learn This Action first (``families.body.adapt``, ``adapt`` seconds), then the gate.

Units: every clip is measured in cm. A registered set's clips are in cm (its cache converts them); an outside
clip's unit is `clip_unit`: CMU's ASF unit (2.54 / 0.45 cm, ``data.registry.ASF_UNIT_CM``) for a clip in CMU's
joint naming whose legs say it is not in a power of ten of cm, else its legs against a human's
(``retarget.contacts.source_cm_per_unit``: 1 for cm, 100 for metres; the ratio itself when neither). `in_cm` scales
a clip to cm before anything is measured, so the feet's thresholds are in cm too and the summary pools one unit;
each row names its clip's ``cm_per_unit`` and where it came from (``unit``).

Measures over the gap frames: mean global joint position error (cm) and mean global rotation
error (degrees); jerk over the gaps and ``JERK_PAD`` keyed frames either side, over the truth's; foot skate
(``core.feet``, cm/s) over the gaps and the keys either side, on the truth's ground, over the truth's skate there,
and GMD's skating ratio. cm and degree ratios are to Bezier on the same clip; the summary is the ratio of the sums
over clips (skate: of the pooled weighted speeds).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from ..core import feet as foots
from ..core.gaps import runs as _runs
from ..core.motion import Motion
from ..core.rotations import quat_angle, quat_continuity
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError
from .infill import JERK_PAD, jerk_sum, skate_feet
from .keyed import bezier_keys

__all__ = ["clip_unit", "cut_gaps", "evaluate_clips", "format_clips", "in_cm", "plot_clips"]

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


def clip_unit(motion: Motion) -> tuple[float, str]:
    """(cm per unit of ``motion``'s positions, where that comes from) for an outside clip (module doc)."""
    from ..data.registry import ASF_UNIT_CM, HAHNE_TO_ASF
    from ..retarget.contacts import source_cm_per_unit

    legs = source_cm_per_unit(motion.skeleton)
    power = bool(np.isclose(np.log10(legs), np.round(np.log10(legs)), atol=1e-9))
    if power:
        return legs, "cm" if legs == 1.0 else f"x {legs:g} (a power of ten of cm, from its legs)"
    names = set(motion.skeleton.names)
    if names <= set(HAHNE_TO_ASF) | set(HAHNE_TO_ASF.values()):
        return ASF_UNIT_CM, f"CMU's ASF units (x {ASF_UNIT_CM:.4f})"
    return legs, f"x {legs:.3f} (from its legs against a human's)"


def in_cm(motion: Motion, cm_per_unit: float) -> Motion:
    """``motion`` with its lengths (offsets, end sites, translations) in cm: times ``cm_per_unit``."""
    if cm_per_unit == 1.0:
        return motion
    sk = motion.skeleton
    scaled = Skeleton(sk.names, sk.parents, sk.offsets * cm_per_unit, sk.channels,
                      tuple((j, tuple(float(v) * cm_per_unit for v in o)) for j, o in sk.end_sites))
    return Motion(scaled, motion.rotations, motion.positions * cm_per_unit, motion.fps, motion.name)


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


def _skate(sk: Skeleton, q, p, truth_gp: np.ndarray, fps: float, feet: list[int], known: np.ndarray) -> dict:
    """Foot skate of one filled clip on the truth's ground: {skate, _swv, _sw, skating_ratio}."""
    _, gp = sk.forward_kinematics(q, p)
    span = foots.fill_span(known)
    wv, w = foots.skate_sums(gp, fps, feet, foots.ground(truth_gp, feet), span)
    toes = feet[1::2] if len(feet) == 4 else feet
    return {"skate": wv / w if w > 0 else float("nan"), "_swv": wv, "_sw": w,
            "skating_ratio": foots.skating_ratio(gp, fps, toes, foots.ground(truth_gp, toes), span),
            "_pairs": int(foots.pair_mask(len(span), span).sum())}


def evaluate_clips(clips, fills: dict[str, Callable], n_gaps: int = 12, lengths=(5, 15, 30),
                   progress: Callable[[str], None] | None = None, units: list[tuple[float, str]] | None = None) -> dict:
    """``clips``: Motions; ``fills``: name -> fill(skeleton, q (T, J, 4), p (T, J, 3), known (T,)) -> (q, p);
    ``units``: per clip (cm per unit, where from) (`clip_unit`; default: every clip in cm), each clip scaled to cm
    first (`in_cm`). Returns {"clips": [{clip, length, gaps, cm_per_unit, unit, <model>: {cm, deg, jerk,
    seconds}}], "summary": {L: {model: {cm, deg, jerk}}}, "units": {where from: clips}} with cm and deg as ratios to
    ``bezier`` and jerk over the truth's, all in cm."""
    units = list(units) if units is not None else [(1.0, "cm")] * len(clips)
    if len(units) != len(clips):
        raise MotioncoreError(f"units: expected one per clip ({len(clips)}), got {len(units)}")
    rows = []
    for m0, (k, unit) in zip(clips, units, strict=True):
        m = in_cm(m0, k)
        q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
        p = np.asarray(m.positions, np.float64)
        for L in lengths:
            known = cut_gaps(len(q), n_gaps, L)
            if known.all():
                continue
            row: dict = {"clip": m.name, "length": int(L), "gaps": int(len(_runs(~known))), "frames": len(q),
                         "cm_per_unit": round(float(k), 6), "unit": unit}
            _, tgp = m.skeleton.forward_kinematics(q, p)
            truth_jerk = _scores(m.skeleton, q, p, q, p, known)[3]
            feet = skate_feet(m.skeleton, q[None], p[None])
            if feet:
                row["capture"] = _skate(m.skeleton, q, p, tgp, m.fps, feet, known)
            for name, fill in {"bezier": _bezier, **fills}.items():
                t0 = time.perf_counter()
                oq, op = fill(m.skeleton, q, p, known)
                dt = time.perf_counter() - t0
                if not (np.array_equal(oq[known], q[known]) and np.array_equal(op[known], p[known])):
                    raise MotioncoreError(f"{name} changed keyed frames of {m.name}")
                cm, deg, n, jerk = _scores(m.skeleton, oq, op, q, p, known)
                row[name] = {"cm": cm / n, "deg": deg / n, "jerk": jerk / max(truth_jerk, 1e-12),
                             "seconds": round(dt, 3), "_n": n, "_jerk": jerk, "_tjerk": truth_jerk}
                if feet:
                    sk8 = _skate(m.skeleton, oq, op, tgp, m.fps, feet, known)
                    sk8["skate_over_truth"] = sk8["skate"] / row["capture"]["skate"] if row["capture"]["_sw"] > 0 \
                        and row["capture"]["skate"] > 0 else float("nan")
                    row[name].update(sk8)
                info = getattr(fill, "last_info", None)
                if info:
                    row[name].update(info())
            rows.append(row)
            if progress:
                progress(f"{m.name} L={L}: " + ", ".join(
                    f"{k} {row[k]['cm'] / max(row['bezier']['cm'], 1e-12):.2f}" for k in fills))
    return {"clips": [_public(r) for r in rows], "summary": _summary(rows, ["bezier", *fills], lengths),
            "units": dict(Counter(u for _, u in units))}


def _bezier(sk, q, p, known):
    bq, bp = bezier_keys(sk, q[None], p[None], known[None])
    return bq[0], bp[0]


def _public(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if k == "capture":
            out[k] = {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
        elif isinstance(v, dict):
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
        sk = [r for r in rs if "capture" in r and r["capture"]["_sw"] > 0]
        if sk:
            truth = sum(r["capture"]["_swv"] for r in sk) / sum(r["capture"]["_sw"] for r in sk)
        for m in models:
            if sk:   # pooled: a clip whose fill has no foot near the ground adds nothing to either sum
                w_m = sum(r[m]["_sw"] for r in sk)
                s_m = sum(r[m]["_swv"] for r in sk) / w_m if w_m > 0 else float("nan")
                n = sum(r[m]["_pairs"] for r in sk)   # GMD's ratio, pooled over the clips' frame pairs
                out[str(L)][m].update(skate=s_m, skate_truth=truth,
                                      skate_over_truth=s_m / truth if truth > 0 else float("nan"),
                                      skating_ratio=sum(r[m]["skating_ratio"] * r[m]["_pairs"] for r in sk) / n,
                                      skating_ratio_truth=sum(r["capture"]["skating_ratio"] * r["capture"]["_pairs"]
                                                              for r in sk) / n)
            w = [r[m]["weight"] for r in rs if "weight" in r[m]]
            if w:
                out[str(L)][m]["weight"] = float(np.mean(w))
            skipped = sum("adapt_skipped" in r[m] for r in rs)
            if skipped:
                out[str(L)][m]["adapt_skipped"] = skipped  # clips too short to learn from: the gate alone
    return out


def format_clips(res: dict) -> str:
    """A line saying the clips' units, then one block per gap length: per model the cm and degree ratios to
    Bezier, jerk over the truth's and the gate's mean weight."""
    lines = ["units: every figure in cm (" + ", ".join(f"{n} clip(s) in {u}" for u, n in res.get("units", {}).items())
             + ")"] if res.get("units") else []
    for L, per in res["summary"].items():
        first = next(iter(per.values()))
        truth = f", skate / truth (truth {first['skate_truth']:.1f} cm/s)" if "skate_truth" in first else ""
        lines.append(f"gaps of {L} frames ({first['clips']} clips): "
                     f"cm / Bezier, deg / Bezier, jerk / truth, mean weight{truth}")
        for m, v in per.items():
            w = f"{v['weight']:.2f}" if "weight" in v else "-"
            skip = f"  (not adapted on {v['adapt_skipped']} clips: too little keyed to learn from)" \
                if v.get("adapt_skipped") else ""
            sk8 = f"  {v['skate_over_truth']:5.2f}x ({v['skate']:.1f} cm/s; GMD {v['skating_ratio']:.3f}, truth " \
                f"{v['skating_ratio_truth']:.3f})" if "skate" in v else ""
            lines.append(f"  {m:<8} {v['cm']:6.3f} {v['deg']:6.3f} {v['jerk']:6.3f}  {w:>4}{sk8}{skip}")
    return "\n".join(lines)


def plot_clips(res: dict, path) -> None:
    """PNG: per gap length, each model's cm and degree ratio to Bezier, its jerk and foot skate over the truth's
    (atomic)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..io.atomic import atomic_write

    summ = res["summary"]
    Ls = list(summ)
    models = list(next(iter(summ.values()))) if summ else []
    panels = [("cm", "position error / Bezier"), ("deg", "rotation error / Bezier"), ("jerk", "jerk / truth")]
    if models and all("skate_over_truth" in summ[L][m] for L in Ls for m in models):
        panels.append(("skate_over_truth", "foot skate / truth"))
    fig = Figure(figsize=(4.4 * len(panels), 4), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (key, label) in zip(np.atleast_1d(fig.subplots(1, len(panels))), panels, strict=True):
        x = np.arange(len(Ls))
        for i, m in enumerate(models):
            ax.bar(x + (i - (len(models) - 1) / 2) * 0.8 / max(len(models), 1), [summ[L][m][key] for L in Ls],
                   0.8 / max(len(models), 1), label=m)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [f"{L} frames" for L in Ls])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    fig.axes[0].legend(fontsize=8)
    fig.suptitle("Whole clips keyed but N gaps (lower is better; 1 = Blender's Bezier, or the truth's jerk and skate)")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
