"""The style judge and the walks it judges, for ``motioncore eval style`` (`families.style.evaluate` runs it).

1. **The judge** (`train_judge`): a `StyleJudge` classifier trained on real Bandai locomotion clips of
   every style (held-out ones included: it is a judge, not the model), on the clips' train split, with
   style-balanced sampling of 2 s windows; its accuracy is measured on the test split's clips (a clip's
   verdict is the mean of its windows' logits). Its features (`judge_features`) are the root-relative
   joint positions and the joints' velocities relative to the root joint's: the walking speed (which the
   path sets, the same for every model) is not a cue.
2. **Walks**: for each held-out style and each of ``n_exemplars`` exemplar clips of it, the same paths
   (`judge_paths`: straight, an arc, an S-curve, all at ``WALK_SPEED_MPS``: at an exemplar's own speed the
   base's slow walks were already named "elderly", the speed set the style) are walked by the base
   PFNN, the learnet with the exemplar's code fitted to it (``learnet``) and its encoder's code alone
   (``encoder``), and the learnet with a wrong (training) style's code; the
   judge names each walk's style (the first second, the start from the mean pose, is left out). A hit is
   the exemplar's style.
3. **Next-frame error** (cm, the 21 body joints, from ground-truth inputs) of each on every other
   clip of the held-out style; and base vs learnet on the training styles' test split (the learnet's
   code from each style's fixed exemplar, another clip of that style).

Legend: T frames, D judge features, S styles, W windows.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from motioncore.core.kinematics import find_body_joints
from motioncore.core.motion import Motion
from motioncore.data import Clip
from motioncore.errors import MotioncoreError
from motioncore.families.pfnn.features import locomotion_clips
from motioncore.families.style.model_judge import StyleJudge, StyleJudgeConfig
from motioncore.features.normaliser import Normaliser
from motioncore.features.poses import clip_features, ground_joints
from motioncore.io.atomic import atomic_write
from motioncore.tasks.paths import Path as RootPath

CONDITIONS = ("base", "learnet", "encoder", "wrong_code")  # learnet: the code fitted to the exemplar
WALK_SPEED_MPS = 1.2  # every judged walk's speed: a plain walk (Bandai's normal walks: 1.1-1.4 m/s)
SETTLE_S = 1.0  # seconds of each walk left out of the verdict (the start from the mean pose)


# ----------------------------------------------------------------------------- the judge
def judge_features(motion: Motion) -> np.ndarray:
    """(T - 1, D) float32: root-relative positions of the non-ground joints and their velocities relative
    to the root joint's (cm, cm per frame); the first frame (no velocity) is dropped."""
    sk = motion.skeleton
    body = find_body_joints(sk)
    cf = clip_features(motion, body)
    keep = np.setdiff1d(np.arange(sk.num_joints), ground_joints(sk, body))
    pos = cf.positions[1:, keep]  # (T-1, J', 3)
    vel = (cf.velocities[1:, keep] - cf.velocities[1:, body.root][:, None]) * motion.fps / 30.0  # per 1/30 s
    return np.concatenate([pos.reshape(len(pos), -1), vel.reshape(len(vel), -1)], 1).astype(np.float32)


@dataclass(frozen=True)
class JudgeConfig:
    window: int = 60  # frames per training window (2 s at 30 fps)
    steps: int = 3000  # optimiser steps
    batch: int = 64
    lr: float = 1e-3
    channels: int = 64
    seed: int = 0


def _windows(x: np.ndarray, window: int, stride: int) -> np.ndarray:
    """(W, window, D) windows of (T, D) with ``stride``; one window of the whole clip if T < window."""
    if len(x) <= window:
        return x[None]
    starts = np.arange(0, len(x) - window + 1, stride)
    return np.stack([x[s:s + window] for s in starts])


@torch.no_grad()
def judge_logits(model: StyleJudge, norm: Normaliser, feats: np.ndarray, window: int) -> np.ndarray:
    """(S,) mean logits over the clip's windows (stride window / 4)."""
    model.eval()
    w = torch.from_numpy(norm.transform(_windows(feats, window, max(1, window // 4))).astype(np.float32))
    return model(w).mean(0).numpy()


class Judge:
    """A trained style judge: ``name(motion)`` -> style name."""

    def __init__(self, model: StyleJudge, meta: dict[str, Any]):
        self.model, self.meta = model.eval(), meta
        self.styles: list[str] = list(meta["styles"])
        self.norm = Normaliser.from_dict(meta["x_norm"])
        self.window = int(meta["judge"]["window"])

    @staticmethod
    def load(name_or_path: str | os.PathLike = "style-judge") -> Judge:
        from motioncore.models.registry import load_model

        model, meta = load_model(str(name_or_path))
        if meta.get("kind") != "style-judge":
            raise MotioncoreError(f"{name_or_path}: kind {meta.get('kind')!r} is not a style judge")
        return Judge(model, meta)  # type: ignore[arg-type]

    def logits(self, motion: Motion, skip_s: float = 0.0) -> np.ndarray:
        f = judge_features(motion)[int(round(skip_s * motion.fps)):]
        if len(f) < 2:
            raise MotioncoreError(f"{motion.name or 'motion'}: too short to judge ({motion.num_frames} frames)")
        return judge_logits(self.model, self.norm, f, self.window)

    def name(self, motion: Motion, skip_s: float = 0.0) -> str:
        return self.styles[int(np.argmax(self.logits(motion, skip_s)))]


def train_judge(clips: list[Clip], cfg: JudgeConfig = JudgeConfig(), progress: bool = True) -> tuple[StyleJudge, dict]:
    """(model, metadata with styles, normaliser, test accuracy and confusion) from labelled clips."""
    clips = [c for c in locomotion_clips(clips) if c.motion.num_frames > 2]
    styles = sorted({str(c.labels["style"]) for c in clips})
    feats = [judge_features(c.motion) for c in clips]
    sid = np.array([styles.index(str(c.labels["style"])) for c in clips])
    train = [i for i, c in enumerate(clips) if c.split == "train" and len(feats[i]) >= cfg.window]
    test = [i for i, c in enumerate(clips) if c.split == "test"]
    allf = np.concatenate([feats[i] for i in train]).astype(np.float64)
    norm = Normaliser(allf.mean(0), np.maximum(allf.std(0), 1e-3))
    by_style = {s: [i for i in train if sid[i] == s] for s in range(len(styles))}
    missing = [styles[s] for s, v in by_style.items() if not v]
    if missing:
        raise MotioncoreError(f"judge: no training clip of {missing} with >= {cfg.window} frames")
    mcfg = StyleJudgeConfig(allf.shape[1], len(styles), channels=cfg.channels)
    torch.manual_seed(cfg.seed)
    model, rng = StyleJudge(mcfg), np.random.default_rng(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.steps)
    normed = [norm.transform(f).astype(np.float32) for f in feats]
    t0, losses = time.perf_counter(), []
    model.train()
    for step in range(cfg.steps):
        ys = rng.integers(0, len(styles), cfg.batch)
        xb = np.empty((cfg.batch, cfg.window, allf.shape[1]), np.float32)
        for b, s in enumerate(ys):
            i = by_style[int(s)][rng.integers(len(by_style[int(s)]))]
            st = rng.integers(0, len(normed[i]) - cfg.window + 1)
            xb[b] = normed[i][st:st + cfg.window]
        xb += rng.normal(0, 0.05, xb.shape).astype(np.float32)
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(xb)), torch.from_numpy(ys))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if progress and (step + 1) % 500 == 0:
            print(f"[judge] step {step + 1}/{cfg.steps} loss {np.mean(losses[-500:]):.3f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    model.eval()
    pred = np.array([int(np.argmax(judge_logits(model, norm, feats[i], cfg.window))) for i in test])
    truth = sid[test]
    conf = np.zeros((len(styles), len(styles)), np.int64)
    np.add.at(conf, (truth, pred), 1)
    meta = {"styles": styles, "x_norm": norm.to_dict(), "judge": asdict(cfg), "test_clips": len(test),
            "test_accuracy": float((pred == truth).mean()) if len(test) else float("nan"),
            "confusion": conf.tolist(), "train_clips": len(train), "train_wall_s": time.perf_counter() - t0,
            "loss_every_100": [float(np.mean(losses[i:i + 100])) for i in range(0, len(losses), 100)]}
    return model, meta


# ----------------------------------------------------------------------------- walks
def judge_paths(speed_mps: float) -> list[Any]:
    """Three paths (straight 6 m; 2 m then a quarter arc of radius 2.5 m then 2 m; an S-curve 6 m long)
    walked at ``speed_mps``."""
    a = np.linspace(0, np.pi / 2, 12)
    arc = np.concatenate([np.stack([np.zeros(5), np.linspace(0, 2, 5)], 1),
                          np.stack([2.5 - 2.5 * np.cos(a), 2 + 2.5 * np.sin(a)], 1)[1:],
                          np.stack([np.linspace(2.5, 4.5, 5), np.full(5, 4.5)], 1)[1:]])
    z = np.linspace(0, 6, 25)
    shapes = [np.stack([np.zeros(7), np.linspace(0, 6, 7)], 1), arc, np.stack([0.8 * np.sin(z * np.pi / 3), z], 1)]
    return [RootPath(p, speed=np.full(len(p), speed_mps), gait=("walk",) * len(p)) for p in shapes]


def walks(controller: Any, speed: float, max_s: float = 8.0) -> list[Motion]:
    paths = judge_paths(speed)
    ro = controller.rollout(paths, frames=None)
    T = min(ro.frames, int(round(max_s * controller.fps)))
    return [Motion(ro.skeleton, ro.rotations[b, :T], ro.positions[b, :T], ro.fps, f"walk{b}") for b in range(ro.batch)]


def format_style(res: dict) -> str:
    h, t = res["held_out"], res["training_styles"]
    lines = [f"One-shot style, held-out styles {', '.join(h['styles'])} ({res['walks_per_condition']} walks per model; "
             f"judge test accuracy {res['classifier_test_accuracy']:.2f} on {res['classifier_test_clips']} clips)", "",
             "| style | next-frame cm: base | learnet (fitted code) | encoder alone | wrong code "
             "| judge hits: base | learnet | encoder | wrong code |", "|---|---|---|---|---|---|---|---|---|"]
    rows = [(s, v["next_frame_cm"], v["classifier_hits"]) for s, v in h["per_style"].items()]
    rows.append(("**all held-out**", h["next_frame_cm"], h["classifier_hits"]))
    for name, nf, hit in rows:
        lines.append(f"| {name} | " + " | ".join(f"{nf[c]:.2f}" for c in CONDITIONS) + " | "
                     + " | ".join(f"{hit[c]:.2f}" for c in CONDITIONS) + " |")
    lines += ["", f"Training styles (test split, {t['test_rows']} rows): next-frame base {t['next_frame_cm']['base']:.2f} cm, "
              f"learnet {t['next_frame_cm']['learnet']:.2f} cm; the judge names the code's style in "
              f"{t['classifier_hits']['learnet']:.2f} of the learnet's walks ({t['classifier_hits']['base']:.2f} of the base's).",
              "Targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in res["targets"].items())]
    return "\n".join(lines)


def plot_style(res: dict, path: str | os.PathLike) -> Path:
    """Two panels per held-out style: next-frame error and judge hit rate of each condition."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    styles = list(res["held_out"]["per_style"])
    x = np.arange(len(styles))
    for k, (key, title) in enumerate((("next_frame_cm", "next-frame joint error (cm), lower is better"),
                                      ("classifier_hits", "judge names the exemplar's style (fraction of walks)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for j, c in enumerate(CONDITIONS):
            w = 0.8 / len(CONDITIONS)
            ax.bar(x + (j - (len(CONDITIONS) - 1) / 2) * w, [res["held_out"]["per_style"][s][key][c] for s in styles], w, label=c)
        ax.set_xticks(x, styles)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    return path
