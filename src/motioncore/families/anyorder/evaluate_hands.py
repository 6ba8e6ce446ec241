"""Hand in-filling benchmark (`motioncore eval hands`): the wrist is keyed every N frames, fill the fingers.

Data: the ManipNet right hand's *test* takes (held out from training), at 30 fps, cut into windows of
``window`` frames every ``stride`` frames and re-framed like the training windows (yaw about the wrist).

Keys (``hand_keys``), per window of T frames:

- the first ``context`` frames and the last frame: the whole hand (every joint's rotation and the root);
- every ``every`` frames after the context: the wrist's rotation and the root translation (the
  "wrist track" an animator or a tracker provides);
- with ``fingertips``: also the distal finger joints (``FINGERTIPS``) at those wrist keys.

Everything else is filled. Interp (the baseline) slerps every joint channel between its own nearest
keys and lerps the root, holding the value outside the keys. The model fills in the chosen order at
temperature 0 (the mean of each element's most likely mixture component) for the error, and draws
``n_samples`` completions at ``temperature`` for the diversity.

Metrics (degrees, over the finger joints, i.e. every joint but the wrist, at frames where they are
filled):

- ``finger_deg``: mean geodesic angle between filled and true local rotations;
- ``finger_deg_samples``: the same, averaged over the ``n_samples`` completions;
- ``diversity_deg``: mean pairwise geodesic angle between the completions (0 for a deterministic fill).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from motioncore.core.fcurve import keys_bezier
from motioncore.core.rotations import quat_angle, quat_continuity, quat_normalize
from motioncore.errors import MotioncoreError
from motioncore.infill import interp_channels
from motioncore.io.atomic import atomic_write

__all__ = ["HandsTask", "TASKS", "FINGERTIPS", "hand_keys", "evaluate_hands", "evaluate_tasks", "bezier_channels",
           "grasp_closings", "plot_hands", "plot_timing", "format_hands", "format_tasks"]

FINGERTIPS = ("THUMB_IP_FE", "INDEX_DIP_FE", "MIDDLE_DIP_FE", "RING_DIP_FE", "PINKY_DIP_FE")
FPS = 30.0
# the animator's tasks (issue 14): (a) the wrist keyed every 10 frames; (b) the wrist at every frame (from a
# body animation) and the whole hand every 30 frames; (c) the wrist at every frame and no finger key but
# the first 5 frames (nothing at the end: the fingers are predicted, Interp and Bezier hold the last key)
TASKS = {
    "wrist-every-10": lambda: HandsTask(every=10, window=40),
    "fingers-every-30": lambda: HandsTask(every=1, finger_every=30, window=65),
    "wrist-only": lambda: HandsTask(every=1, last=False, window=40),
}
FLEX_THRESHOLD = 0.5  # grasp closing: the curl rises through the midpoint of the window's true curl range
MIN_RANGE = 5.0  # degrees: windows whose true curl moves less than this hold a grip (no closing counted)
TIMING_CAP = 15  # frames: a missed closing (no crossing in the prediction) counts as this far off


@dataclass(frozen=True)
class HandsTask:
    every: int = 10  # wrist key spacing in frames (30 fps); 1: the wrist at every frame (a body animation)
    context: int = 5  # whole-hand frames at the start
    fingertips: bool = False  # also key the distal finger joints at the wrist keys
    window: int = 40  # frames per test window
    stride: int = 20  # window stride
    finger_every: int = 0  # also key the whole hand every N frames after the context (0: never)
    last: bool = True  # key the whole hand on the last frame

    def __post_init__(self) -> None:
        if self.every < 1 or self.context < 1 or self.stride < 1:
            raise ValueError(f"every, context and stride must be >= 1, got {self.every}, {self.context}, "
                             f"{self.stride}")
        if self.window < max(11, self.context + 2):  # re-framing faces +Z at frame 9
            raise ValueError(f"window must be >= max(11, context + 2), got {self.window}")


def hand_keys(task: HandsTask, names: tuple[str, ...], root_joint: int) -> np.ndarray:
    """(window, J + 1) bool keys: channel j < J joint j's rotation, channel J the root translation."""
    T, J = task.window, len(names)
    k = np.zeros((T, J + 1), dtype=bool)
    k[:task.context] = True
    k[T - 1] = task.last
    if task.finger_every:
        k[task.context - 1 + task.finger_every::task.finger_every] = True
    frames = np.arange(task.context - 1 + task.every, T - 1 if task.last else T, task.every)
    k[frames, root_joint] = True
    k[frames, J] = True
    if task.fingertips:
        tips = [names.index(n) for n in FINGERTIPS if n in names]
        if len(tips) != len(FINGERTIPS):
            raise MotioncoreError(f"fingertips: the skeleton lacks some of {FINGERTIPS}")
        k[np.ix_(frames, tips)] = True
    return k


def _finger_err(a: np.ndarray, b: np.ndarray, fill: np.ndarray) -> float:
    """Mean angle in degrees between quaternions a, b (N, T, J, 4) over ``fill`` (T, J)."""
    return float(np.degrees(quat_angle(a, b))[:, fill].mean())


def bezier_channels(q: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Blender's Auto Clamped Bezier F-curves (``core.fcurve``, Continuous Acceleration, constant
    extrapolation) through each joint channel's own keys, on its W, X, Y, Z made sign-continuous over the
    keys (a quaternion-mode bone; ``bezier-quat``), normalised. q (N, T, J, 4), keys (T, >= J) -> (N, T, J, 4)."""
    q = np.asarray(q, np.float64)
    N, T, J = q.shape[:3]
    out = q.copy()
    groups: dict[tuple[int, ...], list[int]] = {}
    for j in range(J):
        x = tuple(np.flatnonzero(keys[:, j]).tolist())
        if x:
            groups.setdefault(x, []).append(j)
    for x, js in groups.items():
        xs = np.asarray(x)
        y = quat_continuity(quat_normalize(q[:, xs][:, :, js]), axis=1)  # (N, K, G, 4)
        if len(xs) == 1:
            out[:, :, js] = y[:, :1]
            continue
        curves = np.moveaxis(y, 1, -1).reshape(-1, len(xs))  # (N * G * 4, K)
        full = keys_bezier(xs, curves, T)   # held outside the keys
        out[:, :, js] = quat_normalize(np.moveaxis(full.reshape(N, len(js), 4, T), -1, 1))  # (N, T, G, 4)
    return out


def _curl(q: np.ndarray, joints: list[int]) -> np.ndarray:
    """Mean rotation angle (degrees) of the finger flexion joints ``joints`` from their rest (identity)
    local rotation: how closed the hand is. q (..., T, J, 4) -> (..., T)."""
    w = np.abs(np.clip(np.asarray(q)[..., joints, 0], -1.0, 1.0))
    return np.degrees(2.0 * np.arccos(w)).mean(-1)


def grasp_closings(curl: np.ndarray, threshold: float, start: int) -> list[int]:
    """Frames t >= start (and t >= 1) where ``curl`` (T,) rises through ``threshold``: curl[t-1] < thr <= curl[t]."""
    t = np.arange(max(start, 1), curl.shape[0])
    return t[(curl[t - 1] < threshold) & (curl[t] >= threshold)].tolist()


def _thresholds(truth_curl: np.ndarray) -> np.ndarray:
    """Per window (N, T) -> (N,): the midpoint of the true curl's range, NaN where it moves < MIN_RANGE."""
    lo, hi = truth_curl.min(1), truth_curl.max(1)
    return np.where(hi - lo >= MIN_RANGE, lo + FLEX_THRESHOLD * (hi - lo), np.nan)


def _timing(truth_curl: np.ndarray, pred_curl: np.ndarray, thresholds: np.ndarray, start: int) -> list[int]:
    """Per true closing in the filled frames of each window: |frames| to the nearest predicted closing
    (the same window's threshold), capped at TIMING_CAP (also the charge when the prediction never
    closes). (N, T) curls, (N,) thresholds (NaN: skipped) -> offsets."""
    out = []
    for tc, pc, threshold in zip(truth_curl, pred_curl, thresholds, strict=True):
        if not np.isfinite(threshold):
            continue
        pred = np.asarray(grasp_closings(pc, threshold, start))
        for t in grasp_closings(tc, threshold, start):
            out.append(int(min(TIMING_CAP, np.abs(pred - t).min())) if pred.size else TIMING_CAP)
    return out


def evaluate_hands(model: str, task: HandsTask = HandsTask(), data: str = "manipnet-right", n_samples: int = 5,
                   temperature: float = 1.0, order: str = "bisection", k: int = 1, seed: int = 0,
                   max_windows: int = 0, progress: bool = True, use_object: bool = True) -> dict:
    """Run Interp, Bezier and the any-order checkpoint ``model`` on the hand task; returns a JSON-ready dict
    with the figures, the task, and arrays for ``plot_hands`` / ``plot_timing`` under "curves" and
    "timing_offsets". ``use_object``: give an object-conditioned model (``cfg.cond_dim``) the object in
    the wrist frame at every frame (``data.hand_object``); otherwise (or for a model without conditions)
    no object. ``k``: elements per decoding step (0: one frame's filled elements)."""
    import torch
    from tqdm import tqdm

    from motioncore.data import lafan1_windows, load
    from motioncore.data.hand_object import normalise_cond, window_cond
    from motioncore.families.anyorder.model import AnyOrderTransformer
    from motioncore.families.anyorder.model_elements import body_joints, elements_to_motion, to_elements
    from motioncore.families.anyorder.model_sampling import sample
    from motioncore.models.registry import load_model

    net, meta = load_model(model)
    if meta.get("kind") != "anyorder" or not isinstance(net, AnyOrderTransformer) or net.cfg.group_frames:
        raise MotioncoreError(f"{model}: expected a per-element any-order checkpoint (wrist-only keys are partial "
                              f"frames), got kind {meta.get('kind')!r}")
    clips = load(data, "test", fps=FPS, progress=progress)
    sk = clips[0].motion.skeleton
    if net.cfg.num_channels != sk.num_joints + 1:
        raise MotioncoreError(f"{model}: trained on {net.cfg.num_channels - 1} joints, {data} has {sk.num_joints}")
    w = lafan1_windows(clips, task.window, task.stride, body=body_joints(sk))
    sel = np.arange(len(w)) if not max_windows or max_windows >= len(w) else \
        np.linspace(0, len(w) - 1, max_windows).round().astype(np.int64)  # evenly spread over the takes
    n = len(sel)
    rot, pos = w.rotations[sel], w.positions[sel]
    rj = int(meta["root_joint"])
    names = tuple(sk.names)
    keys = hand_keys(task, names, rj)
    J = sk.num_joints
    fingers = np.zeros((task.window, J), dtype=bool)
    fingers[:, [j for j in range(J) if j != rj]] = True
    fill = ~keys[:, :J] & fingers  # (T, J) finger elements that are filled
    iq, _ = interp_channels(rot, pos[:, :, rj], keys)
    bq = bezier_channels(rot, keys)
    grid = to_elements(rot, pos, meta["root_norm"], rj)  # (N, T, J + 1, 6) float32
    conditioned = bool(getattr(net.cfg, "cond_dim", 0)) and use_object
    cond = None
    if conditioned:
        cond = torch.as_tensor(normalise_cond(window_cond(clips, task.window, task.stride, rj)[sel],
                                              meta["cond"]["norm"]))
    known = torch.as_tensor(keys)
    kk = int(k) if k else int((~keys).sum(1).max())
    mode = np.empty_like(rot)
    samples = np.empty((n, n_samples) + rot.shape[1:])
    for i in tqdm(range(n), desc="hands", unit="window", disable=not progress):
        x = grid[i].to(next(net.parameters()).dtype)
        fc = None if cond is None else cond[i]
        m = sample(net, x, known, order=order, temperature=0.0, k=kk, seed=seed + i, frame_cond=fc)
        s = sample(net, x, known, order=order, temperature=temperature, n_samples=n_samples, k=kk,
                   seed=seed + 1000 * (i + 1), frame_cond=fc)
        qm, _ = elements_to_motion(m[0].to(torch.float64))
        qs, _ = elements_to_motion(s.to(torch.float64))
        mode[i], samples[i] = qm.numpy(), qs.numpy()
    pair = [_finger_err(samples[:, a], samples[:, b], fill) for a in range(n_samples) for b in range(a + 1, n_samples)]
    per_sample = np.stack([np.degrees(quat_angle(samples[:, s], rot))[:, fill].mean(1) for s in range(n_samples)], 1)
    res = {
        "model": str(model), "data": data, "task": asdict(task), "windows": n, "order": order, "k": kk,
        "object": conditioned, "temperature": temperature, "n_samples": n_samples,
        "filled_finger_elements_per_window": int(fill.sum()),
        "interp": {"finger_deg": _finger_err(iq, rot, fill)},
        "bezier": {"finger_deg": _finger_err(bq, rot, fill)},
        "anyorder": {"finger_deg": _finger_err(mode, rot, fill),
                     "finger_deg_samples": float(per_sample.mean()),
                     "finger_deg_best_of": float(per_sample.min(1).mean()),
                     "diversity_deg": float(np.mean(pair)) if pair else 0.0},
    }
    res["ratio_to_interp"] = res["anyorder"]["finger_deg"] / max(res["interp"]["finger_deg"], 1e-12)
    # grasp timing: the curl of the four fingers' flexion joints rising through the midpoint of its true range
    flex = [names.index(nm) for nm in names if nm.endswith("_FE") and not nm.startswith("THUMB")]
    tc = _curl(rot, flex)
    thr = _thresholds(tc)
    offs = {name: _timing(tc, _curl(q, flex), thr, task.context)
            for name, q in (("interp", iq), ("bezier", bq), ("model", mode))}
    offs["samples"] = [o for s in range(n_samples) for o in _timing(tc, _curl(samples[:, s], flex), thr, task.context)]
    res["timing"] = {"windows_with_range": int(np.isfinite(thr).sum()), "closings": len(offs["interp"]),
                     "cap_frames": TIMING_CAP,
                     **{f"{name}_frames": float(np.mean(v)) if v else None for name, v in offs.items()},
                     **{f"{name}_missed": int(sum(o >= TIMING_CAP for o in v)) for name, v in offs.items()}}
    res["timing_offsets"] = offs
    res["summary"] = {"interp": res["interp"]["finger_deg"], "bezier": res["bezier"]["finger_deg"],
                      "model": res["anyorder"]["finger_deg"], "best_of_5" if n_samples == 5 else
                      f"best_of_{n_samples}": res["anyorder"]["finger_deg_best_of"],
                      "mean_of_5" if n_samples == 5 else f"mean_of_{n_samples}": res["anyorder"]["finger_deg_samples"],
                      "diversity": res["anyorder"]["diversity_deg"],
                      "timing_frames": {m: res["timing"][f"{m}_frames"] for m in ("interp", "bezier", "model", "samples")}}
    best = int(np.argmax(np.degrees(quat_angle(rot, iq))[:, fill].mean(1)))  # the window Interp finds hardest
    res["curves"] = {"window": best, "names": list(names), "keys": keys.tolist(),
                     "truth": rot[best].tolist(), "interp": iq[best].tolist(), "bezier": bq[best].tolist(),
                     "mode": mode[best].tolist(), "samples": samples[best].tolist()}
    return res


def evaluate_tasks(model: str, tasks: list[str], use_object: bool = True, **kw) -> dict[str, dict]:
    """``evaluate_hands`` on each named task of TASKS; returns {task: full result}."""
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise MotioncoreError(f"task: unknown {bad}; known {sorted(TASKS)}")
    return {t: evaluate_hands(model, TASKS[t](), use_object=use_object, **kw) for t in tasks}


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def format_tasks(results: dict[str, dict]) -> str:
    rows = [f"{'task':18s} {'interp':>7s} {'bezier':>7s} {'model':>7s} {'best5':>7s} {'mean5':>7s} {'div':>6s} "
            f"{'timing I/B/M frames':>20s}"]
    for t, r in results.items():
        s, tm = r["summary"], r["timing"]
        rows.append(f"{t:18s} {s['interp']:7.2f} {s['bezier']:7.2f} {s['model']:7.2f} "
                    f"{r['anyorder']['finger_deg_best_of']:7.2f} {r['anyorder']['finger_deg_samples']:7.2f} "
                    f"{s['diversity']:6.2f} {_f(tm['interp_frames'])}/{_f(tm['bezier_frames'])}/{_f(tm['model_frames'])}"
                    f" ({tm['closings']} closings)")
    return "\n".join(rows)


def plot_timing(results: dict[str, dict], path: str | Path) -> Path:
    """PNG: per task, the distribution of grasp-closing offsets (frames from the true closing to the
    nearest predicted one, capped) for Interp, Bezier, the model (T = 0) and its samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [("interp", "Interp", "tab:blue"), ("bezier", "Bezier", "tab:green"), ("model", "model (T=0)", "tab:red"),
               ("samples", "samples", "tab:orange")]
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.2), squeeze=False)
    bins = np.arange(TIMING_CAP + 2) - 0.5
    for ax, (task, r) in zip(axes[0], results.items(), strict=True):
        for key, label, color in methods:
            v = np.asarray(r["timing_offsets"][key])
            if v.size:
                ax.hist(v, bins=bins, histtype="step", density=True, color=color, lw=1.5,
                        label=f"{label}: {v.mean():.1f}")
        ax.set_title(f"{task} ({r['timing']['closings']} closings)", fontsize=9)
        ax.set_xlabel(f"|predicted - true| closing (frames at 30 fps; {TIMING_CAP} = missed)")
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("fraction of closings")
    obj = next(iter(results.values()))["object"]
    fig.suptitle(f"Grasp timing, ManipNet right hand test takes ({'with' if obj else 'without'} the object)",
                 fontsize=10)
    fig.tight_layout()
    path = Path(path)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
    return path


def _flexion(q: np.ndarray, like: np.ndarray | None = None) -> np.ndarray:
    """Signed rotation angle in degrees of quaternions (..., 4) about their dominant axis (flexion for
    the *_FE joints; the axis of ``like``, e.g. the truth, when given, so curves compare); continuous."""
    q = quat_continuity(np.asarray(q), axis=0)
    q = q * np.sign(q[..., :1] + 1e-12)
    ang = 2.0 * np.arctan2(np.linalg.norm(q[..., 1:], axis=-1), q[..., 0])
    ref = q if like is None else np.asarray(like) * np.sign(np.asarray(like)[..., :1] + 1e-12)
    axis = ref[..., 1:].reshape(-1, 3).sum(0)
    sign = np.sign((q[..., 1:] * axis).sum(-1) + 1e-12)
    return np.degrees(np.unwrap(ang * sign, axis=0))  # no jumps where a joint passes +-180 deg


def plot_hands(res: dict, path: str | Path, joints: tuple[str, ...] = ("INDEX_PIP_FE", "MIDDLE_MCP", "THUMB_MCP_FE",
                                                                         "RING_PIP_FE")) -> Path:
    """PNG: angle curves of a few finger joints for the truth, Interp, the model's mode and its samples,
    with the keys marked, on the test window Interp finds hardest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = res["curves"]
    names = c["names"]
    joints = tuple(j for j in joints if j in names)
    keys = np.asarray(c["keys"])
    t = np.arange(keys.shape[0])
    fig, axes = plt.subplots(len(joints), 1, figsize=(8, 2.2 * len(joints)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], joints, strict=True):
        j = names.index(name)
        tr = np.asarray(c["truth"])[:, j]
        for s in np.asarray(c["samples"])[:, :, j]:
            ax.plot(t, _flexion(s, tr), color="tab:orange", alpha=0.35, lw=1)
        ax.plot(t, _flexion(tr, tr), color="black", lw=2, label="truth")
        ax.plot(t, _flexion(np.asarray(c["interp"])[:, j], tr), color="tab:blue", ls="--", label="Interp")
        if "bezier" in c:
            ax.plot(t, _flexion(np.asarray(c["bezier"])[:, j], tr), color="tab:green", ls=":", label="Bezier")
        ax.plot(t, _flexion(np.asarray(c["mode"])[:, j], tr), color="tab:red", label="any-order (mode)")
        kf = t[keys[:, j]]
        ax.plot(kf, _flexion(np.asarray(c["truth"])[:, j])[kf], "ko", ms=4, label="keys")
        ax.set_ylabel(f"{name}\n(deg)")
    axes[0, 0].plot([], [], color="tab:orange", alpha=0.6, label=f"{res['n_samples']} samples (T={res['temperature']:g})")
    axes[0, 0].legend(fontsize=7, ncol=3, loc="best")
    axes[-1, 0].set_xlabel(f"frame (30 fps), test window {c['window']}")
    task = res["task"]
    extra = (f"; whole hand every {task['finger_every']}" if task.get("finger_every") else "") + \
        ("" if task.get("last", True) else "; no end key")
    fig.suptitle(f"ManipNet right hand: wrist keyed every {task['every']} frame(s)"
                 f"{' + fingertips' if task['fingertips'] else ''}{extra}; fingers filled"
                 f"{' (object given)' if res.get('object') else ''}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
    return path


def format_hands(res: dict) -> str:
    a, i = res["anyorder"], res["interp"]
    return (f"Hands ({res['data']} test, {res['windows']} windows of {res['task']['window']} frames; wrist every "
            f"{res['task']['every']}{' + fingertips' if res['task']['fingertips'] else ''}): finger error "
            f"Interp {i['finger_deg']:.2f} deg, any-order {a['finger_deg']:.2f} deg (ratio "
            f"{res['ratio_to_interp']:.2f}), samples {a['finger_deg_samples']:.2f} deg, diversity "
            f"{a['diversity_deg']:.2f} deg ({res['n_samples']} samples, T={res['temperature']:g})")
