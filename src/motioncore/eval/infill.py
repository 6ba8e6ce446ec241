"""LaFAN1 in-betweening benchmark (Harvey et al. 2020): run fill models on test windows, report
L2Q / L2P / NPSS per transition length, jerk and foot skate over the truth's, and write the results as a table,
Markdown, PNG or JSON.

Legend: N windows, T frames, J joints. Windows are expected already centred on the mean root XZ and
rotated to face a fixed direction at frame ``n_past - 1`` (the caller's job, as LaFAN1's extraction).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from ..core import feet as foots
from ..core.rotations import quat_continuity
from ..core.skeleton import Skeleton
from ..errors import MotioncoreError, ShapeError
from ..io.atomic import atomic_write, atomic_write_text
from ..retarget.contacts import feet_of
from .baselines import Fill
from .metrics import l2p_frames, l2q_frames, npss_terms

METRICS = ("L2Q", "L2P", "NPSS", "Jerk", "Skate", "Weight")
SKATE_CM = ("Skate cm/s", "Skate truth cm/s", "GMD", "GMD truth")   # in the JSON beside the ratio, not the table
JERK_PAD = 3  # keyed frames on each side of the gap in the jerk span
Results = dict[str, dict[str, dict[str, float]]]


@dataclass
class _Sums:
    """Running sums for one (model, length), so batching gives the full-set value."""

    l2q: float = 0.0
    l2p: float = 0.0
    frames: int = 0
    emd_w: float = 0.0  # sum(emd * weight)
    w: float = 0.0  # sum(weight)
    emd: float = 0.0  # plain sum(emd), for the all-zero-weight fallback
    channels: int = 0
    jerk: float = 0.0  # sum of the prediction's jerk over the jerk span
    jerk_true: float = 0.0  # the same for the truth
    weight: float = 0.0  # sum over windows of the weight the model's correction got (a model that says)
    weighted: int = 0  # windows counted in ``weight``
    skate: tuple[float, float] = (0.0, 0.0)  # the prediction's (sum w v, sum w) of ``core.feet.skate_sums``
    skate_true: tuple[float, float] = (0.0, 0.0)  # the truth's, on the same frames and ground
    gmd: tuple[float, float, float] = (0.0, 0.0, 0.0)  # GMD's skating pairs: the prediction's, the truth's, all pairs

    def add_gmd(self, pred_gp: np.ndarray, true_gp: np.ndarray, frames: np.ndarray, ground: np.ndarray, fps: float,
                toes: list[int]) -> None:
        """GMD's skating ratio (``core.feet.skating_ratio``) on ``frames`` of (N, S, J, 3), its running mean over
        all S frames; ``ground`` (N, len(toes)) from the truth."""
        n = float(pred_gp.shape[0] * foots.pair_mask(pred_gp.shape[1], frames).sum())
        p, t = (foots.skating_ratio(gp, fps, toes, ground, frames) for gp in (pred_gp, true_gp))
        self.gmd = (self.gmd[0] + p * n, self.gmd[1] + t * n, self.gmd[2] + n)

    def add_skate(self, pred_gp: np.ndarray, true_gp: np.ndarray, ground: np.ndarray, fps: float,
                  feet: list[int]) -> None:
        """Global positions (N, S, J, 3) over the span to score; ``ground`` (N, F): each window's own, from
        the truth."""
        for name, gp in (("skate", pred_gp), ("skate_true", true_gp)):
            a, b = foots.skate_sums(gp, fps, feet, ground)
            old = getattr(self, name)
            setattr(self, name, (old[0] + a, old[1] + b))

    def add_jerk(self, pred_gp: np.ndarray, true_gp: np.ndarray) -> None:
        """Global positions (N, S, J, 3) over the gap plus its keyed frames on either side."""
        self.jerk += float(jerk_sum(pred_gp))
        self.jerk_true += float(jerk_sum(true_gp))

    def add(self, pq: np.ndarray, gq: np.ndarray, pp: np.ndarray, gp: np.ndarray,
            mean: np.ndarray, std: np.ndarray, npss_on: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """``npss_on``: (predicted, true) global quaternions to take NPSS on instead of ``pq``, ``gq``."""
        q_err, p_err = l2q_frames(pq, gq), l2p_frames(pp, gp, mean, std)
        emd, w = npss_terms(*(npss_on or (pq, gq)))
        self.l2q += float(q_err.sum())
        self.l2p += float(p_err.sum())
        self.frames += q_err.size
        self.emd_w += float(np.sum(emd * w))
        self.w += float(w.sum())
        self.emd += float(emd.sum())
        self.channels += emd.size

    def values(self) -> dict[str, float]:
        npss = self.emd_w / self.w if self.w > 0 else self.emd / self.channels
        jerk = self.jerk / self.jerk_true if self.jerk_true > 0 else float("nan")
        out = {"L2Q": self.l2q / self.frames, "L2P": self.l2p / self.frames, "NPSS": npss, "Jerk": jerk}
        if self.skate_true[1] > 0 and self.skate[1] > 0:
            s, st = self.skate[0] / self.skate[1], self.skate_true[0] / self.skate_true[1]
            out.update({"Skate": s / st if st > 0 else float("nan"), SKATE_CM[0]: s, SKATE_CM[1]: st})
        if self.gmd[2] > 0:
            out.update({SKATE_CM[2]: self.gmd[0] / self.gmd[2], SKATE_CM[3]: self.gmd[1] / self.gmd[2]})
        if self.weighted:
            out["Weight"] = self.weight / self.weighted
        return out


def jerk_sum(gp: np.ndarray) -> float:
    """The sum over windows, frames and joints of the size of the third difference of global positions
    (..., S, J, 3) along the frame axis: the jerk an animator sees as jitter."""
    return float(np.linalg.norm(np.diff(gp, n=3, axis=-3), axis=-1).sum())


def _run_model(name: str, fill: Fill, skeleton: Skeleton, q: np.ndarray, p: np.ndarray,
               n_past: int, n_trans: int) -> tuple[np.ndarray, np.ndarray]:
    """Call one model on a copy of the windows whose transition frames are NaN; check its output."""
    end = n_past + n_trans
    q_in, p_in = q.copy(), p.copy()
    q_in[:, n_past:end] = np.nan
    p_in[:, n_past:end] = np.nan
    out = fill(skeleton, q_in, p_in, n_past, n_trans)
    try:
        q_out, p_out = (np.asarray(a, dtype=np.float64) for a in out)
    except (TypeError, ValueError) as e:
        raise MotioncoreError(f"model {name!r}: expected a (rotations, positions) pair, got {type(out)}") \
            from e
    if q_out.shape != q.shape or p_out.shape != p.shape:
        raise MotioncoreError(
            f"model {name!r} (n_trans={n_trans}): expected shapes {q.shape} and {p.shape}, "
            f"got {q_out.shape} and {p_out.shape}"
        )
    if not (np.isfinite(q_out).all() and np.isfinite(p_out).all()):
        raise MotioncoreError(
            f"model {name!r} (n_trans={n_trans}) returned non-finite values; "
            "it may read the (NaN-masked) transition frames"
        )
    return q_out, p_out


def _check_inputs(skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray,
                  lengths: tuple[int, ...], n_past: int) -> None:
    J = skeleton.num_joints
    if rotations.ndim != 4 or rotations.shape[2:] != (J, 4) or rotations.shape[0] == 0:
        raise ShapeError(f"rotations: expected (N>0, T, {J}, 4), got {rotations.shape}")
    if positions.shape != rotations.shape[:3] + (3,):
        raise ShapeError(f"positions: expected {rotations.shape[:3] + (3,)}, got {positions.shape}")
    if not lengths or min(lengths) < 1 or n_past < 1:
        raise ShapeError(f"need n_past >= 1 and transition lengths >= 1: n_past={n_past}, lengths={lengths}")
    need = n_past + max(lengths) + 1
    if rotations.shape[1] < need:
        raise ShapeError(f"windows of {rotations.shape[1]} frames; n_past + max(lengths) + 1 = {need} needed")


def evaluate_infill(models: Mapping[str, Fill], skeleton: Skeleton, rotations: np.ndarray,
                    positions: np.ndarray, x_mean: np.ndarray, x_std: np.ndarray,
                    lengths: Iterable[int] = (5, 15, 30, 45), n_past: int = 10, progress: bool = True,
                    batch_size: int = 256, fps: float = 30.0, feet: list[int] | None = None) -> Results:
    """Benchmark fill models on test windows: local rotations (N, T, J, 4) WXYZ and local
    translations (N, T, J, 3); ``x_mean``/``x_std`` (J*3,) from :func:`position_stats` on the
    training set. For each length n the first ``n_past + n + 1`` frames are used and the metrics are
    taken on frames ``[n_past, n_past + n)``. Local quaternions get sign continuity over time first
    (``quat_continuity``), as LaFAN1; predictions are scored as returned. "Jerk" is the prediction's jerk over
    the truth's (``jerk_sum`` of global positions over the gap and ``JERK_PAD`` keyed frames on either side,
    the keyed frames after the window's target taken from the data where the windows have them). "Weight" (models
    that report it: ``infill-body``) is the mean weight of the network's correction over the windows (1: as
    trained; less where the keys lie past its training data's limits). "Skate" is the prediction's foot skate
    over the truth's (``core.feet``: cm/s at ``fps``, positions in cm) over the gap and its keys either side, each
    window's ground from its truth; ``feet`` (default: `skate_feet`) the foot and toe joints (none: no Skate).
    The JSON also has "GMD" and "GMD truth": GMD's skating ratio of the toes on the same frames.
    Returns ``{model: {"L2Q" | "L2P" | "NPSS": {str(n): float}}}`` (JSON-ready)."""
    rotations, positions = np.asarray(rotations, np.float64), np.asarray(positions, np.float64)
    lengths = tuple(int(n) for n in lengths)
    _check_inputs(skeleton, rotations, positions, lengths, n_past)
    N = rotations.shape[0]
    starts = range(0, N, max(1, int(batch_size)))
    sums = {(m, n): _Sums() for m in models for n in lengths}
    feet = skate_feet(skeleton, rotations, positions) if feet is None else list(feet)
    grounds: dict[int, np.ndarray] = {}
    with tqdm(total=len(lengths) * len(starts), desc="in-betweening", unit="batch",
              disable=not progress) as bar:
        for n in lengths:
            end = n_past + n
            for s in starts:
                q = quat_continuity(rotations[s : s + batch_size, : end + 1], axis=1)
                p = positions[s : s + batch_size, : end + 1]
                gq, gp = skeleton.forward_kinematics(q[:, n_past:end], p[:, n_past:end])
                for name, fill in models.items():
                    q_out, p_out = _run_model(name, fill, skeleton, q, p, n_past, n)
                    ws = getattr(fill, "weights", None)
                    if ws:  # the body model says how much of its correction each window got (safety limits)
                        w = np.concatenate(ws)
                        ws.clear()
                        sums[name, n].weight += float(w.sum())
                        sums[name, n].weighted += int(w.size)
                    pq, pp = skeleton.forward_kinematics(q_out[:, n_past:end], p_out[:, n_past:end])
                    sums[name, n].add(pq, gq, pp, gp, x_mean, x_std)
                    a = max(0, n_past - JERK_PAD)
                    tail = positions[s : s + batch_size, end + 1 : end + JERK_PAD]  # keys past the window, if any
                    tq = rotations[s : s + batch_size, end + 1 : end + JERK_PAD]
                    jq = np.concatenate([q_out[:, a:end + 1], tq], 1)
                    jp = np.concatenate([p_out[:, a:end + 1], tail], 1)
                    _, jgp = skeleton.forward_kinematics(jq, jp)
                    _, tgp = skeleton.forward_kinematics(np.concatenate([q[:, a:end + 1], tq], 1),
                                                         np.concatenate([p[:, a:end + 1], tail], 1))
                    sums[name, n].add_jerk(jgp, tgp)
                    if feet:   # the gap and its keys either side, on each window's ground from its truth
                        if s not in grounds:
                            full = skeleton.forward_kinematics(rotations[s:s + batch_size],
                                                               positions[s:s + batch_size])
                            grounds[s] = foots.ground(full[1], feet)
                        span = slice(n_past - 1 - a, end + 1 - a)
                        sums[name, n].add_skate(jgp[:, span], tgp[:, span], grounds[s], fps, feet)
                        toes = feet[1::2] if len(feet) == 4 else feet   # GMD: SMPL's foot joints, at the ball
                        k = [feet.index(j) for j in toes]
                        sums[name, n].add_gmd(jgp, tgp, np.arange(span.start, span.stop), grounds[s][:, k], fps,
                                              toes)
                bar.update(1)
    return results_of(models, sums)


def skate_feet(skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, frames: int = 64) -> list[int]:
    """The foot and toe joints foot skate is measured on (``retarget.contacts.feet_of``, left and right read from
    up to ``frames`` frames spread over the windows (N, T, J, ...)); [] for a body without two legs (a hand)."""
    q = np.asarray(rotations).reshape(-1, *np.shape(rotations)[-2:])
    p = np.asarray(positions).reshape(-1, *np.shape(positions)[-2:])
    idx = np.unique(np.linspace(0, len(q) - 1, min(frames, len(q))).astype(np.int64))
    legs = feet_of(skeleton, skeleton.forward_kinematics(q[idx], p[idx])[1])
    return [] if legs is None else [j for leg in legs for j in leg]


def results_of(models: Iterable[str], sums: Mapping[tuple[str, int], _Sums]) -> Results:
    """``{model: {metric: {str(n): value}}}`` from the running sums per (model, n)."""
    out: Results = {m: {k: {} for k in METRICS + SKATE_CM} for m in models}
    for (m, n), acc in sums.items():
        for k, v in acc.values().items():
            out[m][k][str(n)] = float(v)
    return {m: {k: v for k, v in per.items() if v} for m, per in out.items()}  # "Weight" only where reported


# --- reporting -----------------------------------------------------------------------------------


def _lengths(results: Mapping[str, Mapping[str, Mapping[str, float]]]) -> list[str]:
    keys = {n for per_model in results.values() for per_metric in per_model.values() for n in per_metric}
    return sorted(keys, key=int)


def _table(results: Results) -> tuple[list[str], list[list[str]]]:
    """Header and rows of formatted cells (3 decimals for L2Q/L2P, 4 for NPSS; '-' when missing)."""
    lengths = _lengths(results)
    metrics = [k for k in METRICS if any(k in per for per in results.values())]
    header = ["model"] + [f"{k}@{n}" for k in metrics for n in lengths]
    rows = []
    for model, per_model in results.items():
        row = [model]
        for k in metrics:
            fmt = "{:.4f}" if k == "NPSS" else "{:.3f}"
            vals = per_model.get(k, {})
            row += [fmt.format(vals[n]) if n in vals else "-" for n in lengths]
        rows.append(row)
    return header, rows


def format_table(results: Results) -> str:
    """Plain-text table: one row per model, columns L2Q@n..., L2P@n..., NPSS@n...."""
    header, rows = _table(results)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return " | ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)])

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def results_to_markdown(results: Results) -> str:
    """The same table as GitHub Markdown (numbers right-aligned)."""
    header, rows = _table(results)
    lines = ["| " + " | ".join(header) + " |", "|:---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_json(results: Results, path: str | os.PathLike) -> None:
    """Write the results dict as indented JSON, atomically."""
    text = json.dumps(results, indent=2) + "\n"
    atomic_write_text(path, text)


def plot_results(results: Results, path: str | os.PathLike) -> None:
    """PNG with L2Q, L2P and NPSS against transition length, one line per model; atomic write.
    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lengths = _lengths(results)
    metrics = [k for k in METRICS if any(k in per for per in results.values())]
    fig = Figure(figsize=(3.3 * len(metrics), 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(metrics))
    for ax, k in zip(axes, metrics, strict=True):
        for model, per_model in results.items():
            vals = per_model.get(k, {})
            xs = [int(n) for n in lengths if n in vals]
            ax.plot(xs, [vals[str(x)] for x in xs], marker="o", label=model)
        ax.set_title(k)
        ax.set_xlabel("transition length (frames)")
        ax.set_ylabel(k)
        ax.set_xticks([int(n) for n in lengths])
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.suptitle("In-betweening benchmark (lower is better)")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
