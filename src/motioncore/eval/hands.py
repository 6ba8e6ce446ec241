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

from ..core.rotations import quat_angle, quat_continuity
from ..errors import MotioncoreError
from ..tasks.infill import interp_channels

__all__ = ["HandsTask", "FINGERTIPS", "hand_keys", "evaluate_hands", "plot_hands", "format_hands"]

FINGERTIPS = ("THUMB_IP_FE", "INDEX_DIP_FE", "MIDDLE_DIP_FE", "RING_DIP_FE", "PINKY_DIP_FE")
FPS = 30.0


@dataclass(frozen=True)
class HandsTask:
    every: int = 10  # wrist key spacing in frames (30 fps)
    context: int = 5  # whole-hand frames at the start
    fingertips: bool = False  # also key the distal finger joints at the wrist keys
    window: int = 40  # frames per test window
    stride: int = 20  # window stride

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
    k[T - 1] = True
    frames = np.arange(task.context - 1 + task.every, T - 1, task.every)
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


def evaluate_hands(model: str, task: HandsTask = HandsTask(), data: str = "manipnet-right", n_samples: int = 5,
                   temperature: float = 1.0, order: str = "bisection", k: int = 1, seed: int = 0,
                   max_windows: int = 0, progress: bool = True) -> dict:
    """Run Interp and the any-order checkpoint ``model`` on the hand task; returns a JSON-ready dict with
    the figures, the task, and arrays for ``plot_hands`` under "curves"."""
    import torch
    from tqdm import tqdm

    from ..data import lafan1_windows, load
    from ..models.anyorder import AnyOrderTransformer, elements_to_motion
    from ..models.registry import load_model
    from ..models.sampling import sample
    from ..train.anyorder import body_joints, to_elements

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
    grid = to_elements(rot, pos, meta["root_norm"], rj)  # (N, T, J + 1, 6) float32
    known = torch.as_tensor(keys)
    mode = np.empty_like(rot)
    samples = np.empty((n, n_samples) + rot.shape[1:])
    for i in tqdm(range(n), desc="hands", unit="window", disable=not progress):
        x = grid[i].to(next(net.parameters()).dtype)
        m = sample(net, x, known, order=order, temperature=0.0, k=k, seed=seed + i)
        s = sample(net, x, known, order=order, temperature=temperature, n_samples=n_samples, k=k,
                   seed=seed + 1000 * (i + 1))
        qm, _ = elements_to_motion(m[0].to(torch.float64))
        qs, _ = elements_to_motion(s.to(torch.float64))
        mode[i], samples[i] = qm.numpy(), qs.numpy()
    pair = [_finger_err(samples[:, a], samples[:, b], fill) for a in range(n_samples) for b in range(a + 1, n_samples)]
    res = {
        "model": str(model), "data": data, "task": asdict(task), "windows": n, "order": order, "k": k,
        "temperature": temperature, "n_samples": n_samples, "filled_finger_elements_per_window": int(fill.sum()),
        "interp": {"finger_deg": _finger_err(iq, rot, fill)},
        "anyorder": {"finger_deg": _finger_err(mode, rot, fill),
                     "finger_deg_samples": float(np.mean([_finger_err(samples[:, s], rot, fill)
                                                         for s in range(n_samples)])),
                     "diversity_deg": float(np.mean(pair)) if pair else 0.0},
    }
    res["ratio_to_interp"] = res["anyorder"]["finger_deg"] / max(res["interp"]["finger_deg"], 1e-12)
    best = int(np.argmax(np.degrees(quat_angle(rot, iq))[:, fill].mean(1)))  # the window Interp finds hardest
    res["curves"] = {"window": best, "names": list(names), "keys": keys.tolist(),
                     "truth": rot[best].tolist(), "interp": iq[best].tolist(), "mode": mode[best].tolist(),
                     "samples": samples[best].tolist()}
    return res


def _flexion(q: np.ndarray) -> np.ndarray:
    """Signed rotation angle in degrees of quaternions (..., 4) about their dominant axis (flexion for
    the *_FE joints); continuous over time."""
    q = quat_continuity(np.asarray(q), axis=0)
    q = q * np.sign(q[..., :1] + 1e-12)
    ang = 2.0 * np.arctan2(np.linalg.norm(q[..., 1:], axis=-1), q[..., 0])
    axis = q[..., 1:].reshape(-1, 3).sum(0)
    sign = np.sign((q[..., 1:] * axis).sum(-1) + 1e-12)
    return np.degrees(np.unwrap(ang * sign, axis=0))  # no jumps where a joint passes +-180 deg


def plot_hands(res: dict, path: str | Path, joints: tuple[str, ...] = ("INDEX_PIP_FE", "MIDDLE_MCP", "THUMB_MCP_FE",
                                                                         "RING_PIP_FE")) -> Path:
    """PNG: angle curves of a few finger joints for the truth, Interp, the model's mode and its samples,
    with the keys marked, on the test window Interp finds hardest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io.atomic import atomic_write

    c = res["curves"]
    names = c["names"]
    joints = tuple(j for j in joints if j in names)
    keys = np.asarray(c["keys"])
    t = np.arange(keys.shape[0])
    fig, axes = plt.subplots(len(joints), 1, figsize=(8, 2.2 * len(joints)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], joints, strict=True):
        j = names.index(name)
        for s in np.asarray(c["samples"])[:, :, j]:
            ax.plot(t, _flexion(s), color="tab:orange", alpha=0.35, lw=1)
        ax.plot(t, _flexion(np.asarray(c["truth"])[:, j]), color="black", lw=2, label="truth")
        ax.plot(t, _flexion(np.asarray(c["interp"])[:, j]), color="tab:blue", ls="--", label="Interp")
        ax.plot(t, _flexion(np.asarray(c["mode"])[:, j]), color="tab:red", label="any-order (mode)")
        kf = t[keys[:, j]]
        ax.plot(kf, _flexion(np.asarray(c["truth"])[:, j])[kf], "ko", ms=4, label="keys")
        ax.set_ylabel(f"{name}\n(deg)")
    axes[0, 0].plot([], [], color="tab:orange", alpha=0.6, label=f"{res['n_samples']} samples (T={res['temperature']:g})")
    axes[0, 0].legend(fontsize=7, ncol=3, loc="best")
    axes[-1, 0].set_xlabel(f"frame (30 fps), test window {c['window']}")
    task = res["task"]
    fig.suptitle(f"ManipNet right hand: wrist keyed every {task['every']} frames"
                 f"{' + fingertips' if task['fingertips'] else ''}; fingers filled", fontsize=10)
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
