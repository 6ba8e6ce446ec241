"""The in-fill demo's feet: foot skate of the fill and of Interp over the walk's (``core.feet``, on the filled frames
and the keys either side, the walk's ground), and the PNG rows that show each foot's contact and the skate per frame
across the filled spans.

Legend: T frames, J joints.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core import feet as foots
from ..core.gaps import runs as mask_runs


def demo_skate(truth_gp: np.ndarray, fills: dict[str, np.ndarray], known: np.ndarray, fps: float,
               legs: tuple[tuple[int, ...], ...]) -> dict[str, Any]:
    """{"walk_cm_s", "<name>_cm_s", "<name>_over_walk"} for the world positions (T, J, 3) of the walk and of each
    fill, over ``core.feet.fill_span(known)`` on the walk's ground."""
    feet = [j for leg in legs for j in leg]
    g, span = foots.ground(truth_gp, feet), foots.fill_span(known)
    walk = foots.skate(truth_gp, fps, feet, g, span)
    out: dict[str, Any] = {"walk_cm_s": walk}
    for name, gp in fills.items():
        s = foots.skate(gp, fps, feet, g, span)
        out[f"{name}_cm_s"], out[f"{name}_over_walk"] = s, s / walk if walk > 0 else float("nan")
    return out


def per_frame_skate(gp: np.ndarray, fps: float, feet: list[int], ground: np.ndarray) -> np.ndarray:
    """(T - 1,) sum(w v) / sum(w) over the feet per frame pair; NaN where no foot is near its ground."""
    v, w = foots.skate_pairs(gp, fps, feet, ground)
    den = w.sum(-1)
    return np.where(den > 0, (w * v).sum(-1) / np.maximum(den, 1e-12), np.nan)


def plot_feet(fig: Any, rows: int, first: int, t: np.ndarray, known: np.ndarray, series: dict[str, np.ndarray],
              fps: float, legs: tuple[tuple[int, ...], ...], colours: dict[str, str]) -> None:
    """Two panels at subplot rows ``first`` and ``first + 1`` of ``rows``: each leg's contact (``leg_contacts``,
    on the first series' ground) per series as bars, and the skate per frame pair; filled spans shaded."""
    feet = [j for leg in legs for j in leg]
    names = list(series)
    truth = series[names[0]]
    grounds = [foots.ground(truth, leg) for leg in legs]
    ax = fig.add_subplot(rows, 1, first)
    for s, e in mask_runs(~known):
        ax.axvspan(t[s], t[min(e, len(t) - 1)], color="0.92", lw=0)
    labels = []
    for li, side in enumerate(("left", "right")[:len(legs)]):
        for ni, name in enumerate(names):
            y = li * (len(names) + 1) + ni
            c = foots.leg_contacts(series[name], fps, [legs[li]], [grounds[li]])[:, 0]
            bars = [(t[s], t[min(e, len(t) - 1)] - t[s] + 1 / fps) for s, e in mask_runs(c)]
            ax.broken_barh(bars, (y - 0.4, 0.8), color=colours[name])
            labels.append((y, f"{side}: {name}"))
    ax.set_yticks([y for y, _ in labels], labels=[n for _, n in labels], fontsize=7)
    ax.set_ylim(len(legs) * (len(names) + 1) - 0.5, -0.6)
    ax.set_title("feet on the ground (bars: a foot or toe within 3 cm of its ground and under 40 cm/s; "
                 "shaded: filled frames)", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    ax = fig.add_subplot(rows, 1, first + 1)
    for s, e in mask_runs(~known):
        ax.axvspan(t[s], t[min(e, len(t) - 1)], color="0.92", lw=0)
    g = foots.ground(truth, feet)
    mid = (t[1:] + t[:-1]) / 2
    for name in names:
        ax.plot(mid, per_frame_skate(series[name], fps, feet, g), "-", color=colours[name], lw=1.2, label=name)
    ax.set_ylabel("foot skate\n(cm/s)", fontsize=8)
    ax.set_title("foot skate per frame: horizontal speed of the feet near the ground, weighted by closeness",
                 fontsize=9)
    ax.legend(loc="upper right", fontsize=7, ncol=len(names))
    ax.grid(alpha=0.3)
