"""``motioncore eval hands`` for the deterministic ``infill-hands``: per held-out take and on the mean, with a
bootstrap interval over windows, with and without the object, and the ``--adapt SECONDS`` track.

The windows, keys and metric are ``families.anyorder.evaluate_hands``' (ManipNet's test takes at 30 fps, windows of the task's
length every ``stride`` frames; the mean angle over the filled finger elements). Each window is filled through
the product path (``infill.fill``, as the server and the add-on do) and compared with Interp and
Blender's Bezier of the same keys.

The adapt track learns the take itself, as an animator's own take with keyed finger stretches would teach it
(``families.hands.gate``). Each take is split in two halves; the windows lying wholly in one half are scored
with the model adapted (for SECONDS) and gated on pseudo-gaps cut *only from frames outside every scored
window of that half*, i.e. from the other half, where the fingers count as keyed. So no scored frame is
ever seen. The same windows are also scored with the gate alone (no fine-tune), the bundled model and Bezier.

Intervals: 95% percentile bootstrap over windows (2,000 resamples, seed 0). Windows overlap (stride < length)
and there are two takes, so treat the intervals as optimistic.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from motioncore.core.rotations import quat_angle
from motioncore.errors import MotioncoreError
from motioncore.families.anyorder.evaluate_hands import HandsTask, bezier_channels, hand_keys
from motioncore.families.hands import gate as hg
from motioncore.infill import fill_clip, interp_channels
from motioncore.io.atomic import atomic_write

__all__ = ["evaluate_infill_hands", "bootstrap", "fold_windows", "format_infill_hands", "plot_infill_hands"]

BOOT = 2000


def bootstrap(x: np.ndarray, y: np.ndarray | None = None, seed: int = 0) -> list[float]:
    """95% interval of mean(x) (or of mean(x) / mean(y), paired) over resampled windows."""
    x = np.asarray(x, np.float64)
    idx = np.random.default_rng(seed).integers(0, len(x), (BOOT, len(x)))
    v = x[idx].mean(1) if y is None else x[idx].mean(1) / np.asarray(y, np.float64)[idx].mean(1)
    return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]


def fold_windows(starts: np.ndarray, length: int, num_frames: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two folds of a take's windows: (indices of the windows wholly inside one half, (T,) bool frames outside
    every one of those windows: where the fold's pseudo-gaps may be cut)."""
    mid = num_frames // 2
    out = []
    for inside in (starts + length <= mid, starts >= mid):
        free = np.ones(num_frames, bool)
        for s in starts[inside]:
            free[s:s + length] = False
        out.append((np.flatnonzero(inside), free))
    return out


def _err(f: np.ndarray, truth: np.ndarray, fill: np.ndarray) -> float:
    return float(np.degrees(quat_angle(f, truth))[fill].mean())


def _fill(model, meta, q, root, keys, obj, residual=1.0) -> np.ndarray:
    return fill_clip(model, meta, q, root, keys, object_track=obj, residual=residual).rotations[0]


def _adapted(model, meta, clip, task: HandsTask, free: np.ndarray, seconds: float, use_object: bool, seed: int):
    """(learnt model, its gate, the bundled model's gate on every pseudo-gap, report) from the take's free frames."""
    m = clip.motion
    J = m.skeleton.num_joints
    keys = np.zeros((m.num_frames, J + 1), bool)
    keys[free] = True
    shape = hg.gap_shapes(hand_keys(task, tuple(m.skeleton.names), 0))[0]
    obj = (clip.extras["object_rotations"], clip.extras["object_positions"]) if use_object else None
    ex = hg.gap_examples(m.rotations, m.positions[:, 0], keys, hg.pseudo_gaps(free, shape, stride=2), shape[2], obj)
    net, gate, report = hg.learn_take(model, ex, seconds, seed=seed)
    return net, gate, hg.fit_gate(model, ex), report


def _take_rows(model, meta, clip, task, keys, fill, use_object, adapt_s, seed) -> dict:
    """Per-window errors of one take: interp, bezier, model, model_no_object (and adapt / gate)."""
    from motioncore.data.windows import window_starts

    m = clip.motion
    starts = np.asarray(list(window_starts(m.num_frames, task.window, task.stride)))
    idx = starts[:, None] + np.arange(task.window)
    q, root = m.rotations[idx], m.positions[idx][:, :, 0]
    oq, op = clip.extras.get("object_rotations"), clip.extras.get("object_positions")
    iq, _ = interp_channels(q, root, keys)
    bq = bezier_channels(q, keys)
    rows: dict[str, list] = {"interp": [], "bezier": [], "model": [], "model_no_object": []}
    for i in range(len(starts)):
        obj = (oq[idx[i]], op[idx[i]]) if use_object and oq is not None else None
        rows["interp"].append(_err(iq[i], q[i], fill))
        rows["bezier"].append(_err(bq[i], q[i], fill))
        rows["model"].append(_err(_fill(model, meta, q[i], root[i], keys, obj), q[i], fill))
        rows["model_no_object"].append(_err(_fill(model, meta, q[i], root[i], keys, None), q[i], fill))
    out = {k: np.asarray(v) for k, v in rows.items()}
    if adapt_s is None:
        return out
    scored, ad, gt = [], [], []
    info = []
    for fold, (win, free) in enumerate(fold_windows(starts, task.window, m.num_frames)):
        net, gate, gate0, report = _adapted(model, meta, clip, task, free, adapt_s, use_object, seed + fold)
        info.append({"windows": int(win.size), **report, "gate_only": {int(k): v for k, v in gate0.items()}})
        for i in win:
            obj = (oq[idx[i]], op[idx[i]]) if use_object and oq is not None else None
            scored.append(i)
            ad.append(_err(_fill(net, meta, q[i], root[i], keys, obj, gate), q[i], fill))
            gt.append(_err(_fill(model, meta, q[i], root[i], keys, obj, gate0), q[i], fill))
    out["adapt_windows"] = np.asarray(scored)
    out["adapt"], out["gate"] = np.asarray(ad), np.asarray(gt)
    out["adapt_info"] = info
    return out


def _summary(rows: dict) -> dict:
    s = {k: float(rows[k].mean()) for k in ("interp", "bezier", "model", "model_no_object")}
    s["windows"] = int(rows["model"].size)
    s["model_interval"] = bootstrap(rows["model"])
    s["model_over_bezier"] = s["model"] / s["bezier"]
    s["model_over_bezier_interval"] = bootstrap(rows["model"], rows["bezier"])
    s["model_over_interp"] = s["model"] / s["interp"]
    s["model_over_interp_interval"] = bootstrap(rows["model"], rows["interp"])
    s["object_worth"] = s["model"] / s["model_no_object"]  # < 1: the object helps
    s["object_worth_interval"] = bootstrap(rows["model"], rows["model_no_object"])
    if "adapt" in rows:
        w = rows["adapt_windows"]
        s["adapt"] = {"windows": int(w.size), "adapt": float(rows["adapt"].mean()), "gate": float(rows["gate"].mean()),
                      "model": float(rows["model"][w].mean()), "bezier": float(rows["bezier"][w].mean()),
                      "interp": float(rows["interp"][w].mean()),
                      "adapt_over_bezier_interval": bootstrap(rows["adapt"], rows["bezier"][w])}
        s["adapt"]["adapt_over_bezier"] = s["adapt"]["adapt"] / s["adapt"]["bezier"]
        if "adapt_info" in rows:
            s["adapt"]["folds"] = rows["adapt_info"]
    return s


def evaluate_infill_hands(model: str, task: HandsTask, data: str = "manipnet-right", use_object: bool = True,
                          adapt_s: float | None = None, seed: int = 0, progress: bool = True) -> dict:
    """Interp, Bezier and the ``infill-hands`` checkpoint ``model`` per test take and on the mean of the windows
    (``summary``), JSON-ready; ``adapt_s``: also the adapt track with that many seconds per fold."""
    from motioncore.data import load
    from motioncore.models.registry import load_model

    net, meta = load_model(model)
    if meta.get("kind") != "infill-hands":
        raise MotioncoreError(f"{model}: expected an infill-hands checkpoint, got kind {meta.get('kind')!r}")
    t0 = time.perf_counter()
    clips = load(data, "test", fps=30.0, progress=progress)
    sk = clips[0].motion.skeleton
    J = sk.num_joints
    keys = hand_keys(task, tuple(sk.names), 0)
    fill = ~keys[:, :J]
    fill[:, 0] = False
    per = {}
    for c in clips:
        per[c.name.split("/")[0]] = _take_rows(net, meta, c, task, keys, fill, use_object, adapt_s, seed)
        if progress:
            print(f"  {c.name}: {per[c.name.split('/')[0]]['model'].size} windows", flush=True)
    allr = {k: np.concatenate([r[k] for r in per.values()]) for k in ("interp", "bezier", "model", "model_no_object")}
    if adapt_s is not None:
        off = np.cumsum([0] + [r["model"].size for r in per.values()])[:-1]
        allr["adapt_windows"] = np.concatenate([r["adapt_windows"] + o for r, o in zip(per.values(), off, strict=True)])
        allr["adapt"] = np.concatenate([r["adapt"] for r in per.values()])
        allr["gate"] = np.concatenate([r["gate"] for r in per.values()])
    summary = _summary(allr)
    return {"model": str(model), "kind": "infill-hands", "data": data, "task": asdict(task), "object": use_object,
            "adapt_seconds": adapt_s, "summary": summary, "takes": {t: _summary(r) for t, r in per.items()},
            "filled_finger_elements_per_window": int(fill.sum()), "wall_s": round(time.perf_counter() - t0, 1)}


def format_infill_hands(results: dict[str, dict]) -> str:
    """One line per task and take: Interp, Bezier, the model (its interval), without the object, adapt."""
    rows = [f"{'task':16s} {'take':8s} {'interp':>7s} {'bezier':>7s} {'model':>7s} {'95% CI':>13s} {'/bez':>5s} "
            f"{'/interp':>7s} {'no-obj':>7s} {'adapt':>7s} {'gate':>7s} {'(same windows: model, bezier)':>30s}"]
    for t, r in results.items():
        for take, s in [*r["takes"].items(), ("mean", r["summary"])]:
            a = s.get("adapt")
            ad = f"{a['adapt']:7.2f} {a['gate']:7.2f} {a['model']:14.2f} {a['bezier']:7.2f}" if a else ""
            rows.append(f"{t:16s} {take:8s} {s['interp']:7.2f} {s['bezier']:7.2f} {s['model']:7.2f} "
                        f"{s['model_interval'][0]:6.2f}-{s['model_interval'][1]:<6.2f} {s['model_over_bezier']:5.2f} "
                        f"{s['model_over_interp']:7.2f} {s['model_no_object']:7.2f} {ad}")
    return "\n".join(rows)


def plot_infill_hands(results: dict[str, dict], path: str | Path) -> Path:
    """PNG: per task, the finger error per held-out take and on the mean for Interp, Bezier, the model with and
    without the object (and the adapt track's windows, when run), the model's 95% interval as a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.0 * len(results), 3.4), squeeze=False)
    names = [("interp", "Interp"), ("bezier", "Bezier"), ("model", "model"), ("model_no_object", "no object")]
    for ax, (task, r) in zip(axes[0], results.items(), strict=True):
        groups = [*r["takes"].items(), ("mean", r["summary"])]
        width = 0.8 / len(names)
        for j, (key, label) in enumerate(names):
            x = np.arange(len(groups)) + (j - len(names) / 2 + 0.5) * width
            ax.bar(x, [s[key] for _, s in groups], width, label=label)
            if key == "model":
                lo = [s[key] - s["model_interval"][0] for _, s in groups]
                hi = [s["model_interval"][1] - s[key] for _, s in groups]
                ax.errorbar(x, [s[key] for _, s in groups], yerr=[lo, hi], fmt="none", color="k", lw=1)
        ax.set_xticks(np.arange(len(groups)), [g for g, _ in groups])
        ax.set_title(task, fontsize=9)
        ax.set_ylabel("finger error (deg)")
        ax.legend(fontsize=7)
    fig.suptitle(f"{next(iter(results.values()))['model']} on the ManipNet test takes", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
    return path
