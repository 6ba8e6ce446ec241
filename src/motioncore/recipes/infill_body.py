"""Training recipe for the deterministic body in-fill model (``infill-body``; ``motioncore train infill-body``).

Data (``build_data``): the Bandai train split and every CMU training subject (01-03, 06, 08, 09), the CMU
clips retargeted onto the Bandai skeleton (``retarget.retarget``, twists matched to Bandai's mean local
rotations, as an imported rig is in the add-on), all at 30 fps, each with its left-right mirror image and
played at 0.8x and 1.25x speed as well. ``--data cmu`` trains on the CMU subjects alone (the permissive
``infill-body-cmu``; CMU's terms allow products). The arrays are cached under the run folder.

Tasks (``sample_task``), one key pattern per batch, as an animator keys:
- dense context around a gap (LaFAN1): 1-10 context frames, a gap of 1-60 frames drawn with probability
  proportional to 1/length, then 1-10 keyed frames;
- sparse keys: a key pose every N frames (2-30), nothing else;
- on top of either, sometimes: some joints keyed at frames inside a gap; the root's translation keyed at every
  frame (a path) or only at the first key (poses keyed, the root not).

Loss over the frames not keyed: L1 on global rotation matrices + L1 on global positions (metres) + 0.5 x L1
on local rotation matrices, divided by the same L1 of the Bezier base on the batch (``loss="ratio"``): every
gap length and task is trained on how much it improves on the animator's curve, as the benchmark scores it.
(The probe's weighting, L1 x longest gap / 10, ``loss="length"``, improved long gaps at the cost of short
ones: after 1,186 steps Bandai L2Q/Interp was 1.04 / 0.91 / 0.87 at 5 / 15 / 30, worse than Bezier at 5.)
AdamW, warm-up, cosine decay over the run's wall-time budget, gradient clip 5, EMA 0.999 weights (what is
validated and exported). One torch thread by default.

Resumable: every ``save_every`` seconds the whole state (weights, EMA, optimiser, step, wall time, history) is
written atomically to ``RUN/state.safetensors`` + ``RUN/state.json``; each step's batch is drawn from
``default_rng([seed, step])``, so a resumed run continues exactly. Every ``val_every`` seconds the EMA model is
scored on fixed validation windows (L2Q over Interp at 5/15/30/45 on Bandai test windows and on CMU subject
05 mapped onto the Bandai skeleton; CMU subject 07 is never looked at during training) and ``RUN/curve.png``
is redrawn.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MotioncoreError

__all__ = ["BodyRecipe", "build_data", "sample_task", "train_infill_body", "add_infill_body_arguments",
           "train_infill_body_from_args", "export"]

FPS = 30.0
SPEEDS = (1.0, 0.8, 1.25)


@dataclass(frozen=True)
class BodyRecipe:
    data: str = "bandai+cmu"  # bandai+cmu | cmu
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 768
    tokens: int = 2560  # frames per batch (batch size = tokens // window length)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 200
    minutes: float = 110.0  # the cosine schedule's wall-time budget (cumulative over resumes)
    ema: float = 0.999
    max_gap: int = 60
    loss: str = "ratio"  # ratio (L1 over the Bezier base's, per batch) | length (L1 x gap / 10)
    seed: int = 0
    threads: int = 1
    save_every: float = 180.0
    val_every: float = 300.0
    val_windows: int = 160  # per validation set

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- data ---------------------------------------------------------------------------------------------------


def _bandai_skeleton():
    from ..data import load

    return load("bandai2", "train", fps=FPS, progress=False)[0].motion.skeleton


def body_convention(clips) -> np.ndarray:
    """Mean local rotation per joint of the Bandai training frames (every 10th): the twists retargeted clips match."""
    from ..retarget.twist import mean_rotations

    return mean_rotations(np.concatenate([c.motion.rotations[::10] for c in clips]))


def onto_bandai(motion, skeleton, convention):
    """A clip on another body skeleton (CMU) retargeted onto the Bandai skeleton, as the add-on's rest alignment
    does for an imported rig."""
    from ..retarget import auto_map, retarget

    return retarget(motion, skeleton, auto_map(motion.skeleton, skeleton), convention=convention)


def _augment(motion, frames) -> list:
    from ..core.kinematics import mirror, resample
    from ..core.motion import Motion

    out = []
    for m in (motion, mirror(motion, frames=frames)):
        for s in SPEEDS:
            out.append(m if s == 1.0 else resample(Motion(m.skeleton, m.rotations, m.positions, FPS * s, m.name), FPS))
    return out


def build_data(data: str, cache: Path, progress: bool = True) -> dict[str, Any]:
    """Training arrays (cached in ``cache``): frames of every augmented clip concatenated, with clip bounds and
    the source of each clip ("bandai" | "cmu"). Also the skeleton and the convention."""
    from ..core.skeleton import Skeleton
    from ..data import load

    if data not in ("bandai+cmu", "cmu"):
        raise MotioncoreError(f"--data: expected 'bandai+cmu' or 'cmu', got {data!r}")
    f = cache / f"data-{data.replace('+', '_')}.npz"
    meta_f = f.with_suffix(".json")
    if f.is_file() and meta_f.is_file():
        meta = json.loads(meta_f.read_text())
        with np.load(f) as z:
            arrays = {k: z[k] for k in z.files}
        return {**arrays, "skeleton": Skeleton.from_dict(meta["skeleton"]),
                "convention": np.asarray(meta["convention"]), "describe": meta["describe"]}
    bandai = load("bandai", "train", fps=FPS, progress=progress)
    sk = bandai[0].motion.skeleton
    conv = body_convention(bandai)
    cmu = [onto_bandai(c.motion, sk, conv) for c in load("cmu", "train", fps=FPS, progress=progress)]
    groups = ([("bandai", [c.motion for c in bandai])] if data == "bandai+cmu" else []) + [("cmu", cmu)]
    from ..core.kinematics import mirror_frames

    rots, poss, bounds, source = [], [], [], []
    start = 0
    frames = mirror_frames(sk, rotations=np.concatenate([m.rotations[::10] for _, ms in groups for m in ms]))
    for name, motions in groups:
        for m in motions:
            for a in _augment(m, frames):
                if a.num_frames < 16:
                    continue
                rots.append(a.rotations.astype(np.float32))
                poss.append(a.positions.astype(np.float32))
                bounds.append((start, start + a.num_frames))
                source.append(0 if name == "bandai" else 1)
                start += a.num_frames
    describe = (f"{'Bandai train split (' + str(len(bandai)) + ' clips) + ' if data == 'bandai+cmu' else ''}"
                f"CMU train subjects 01-03, 06, 08, 09 ({len(cmu)} clips, retargeted onto the Bandai skeleton), "
                f"30 fps, mirrored, at speeds {list(SPEEDS)}: {start:,} frames")
    arrays = {"rotations": np.concatenate(rots), "positions": np.concatenate(poss),
              "bounds": np.asarray(bounds, np.int64), "source": np.asarray(source, np.int64)}
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / ".data-tmp.npz"
    np.savez(tmp, **arrays)
    tmp.replace(f)
    meta_f.write_text(json.dumps({"skeleton": sk.to_dict(), "convention": conv.tolist(), "describe": describe}))
    return {**arrays, "skeleton": sk, "convention": conv, "describe": describe}


def validation_sets(skeleton, convention, n: int, progress: bool = True) -> dict[str, tuple]:
    """Fixed LaFAN1 test windows (65 frames every 40) on the Bandai skeleton: Bandai test and CMU subject 05."""
    from ..data import load
    from ..data.windows import TEST, TRAIN, lafan1_windows
    from ..eval.metrics import position_stats

    train = load("bandai", "train", fps=FPS, progress=progress)
    tw = lafan1_windows(train[::4], *TRAIN)
    _, gp = tw.skeleton.forward_kinematics(tw.rotations, tw.positions)
    mean, std = position_stats(gp)
    out = {}
    bw = lafan1_windows(load("bandai", "test", fps=FPS, progress=progress), *TEST)
    idx = np.linspace(0, len(bw) - 1, min(n, len(bw))).astype(int)
    out["bandai"] = (bw.rotations[idx], bw.positions[idx])
    from ..data.datasets import Clip

    c05 = [Clip(onto_bandai(c.motion, skeleton, convention), "test") for c in load("cmu", "test", fps=FPS,
                                                                                     progress=progress)
           if c.labels.get("subject") == "05"]
    cw = lafan1_windows(c05, *TEST)
    idx = np.linspace(0, len(cw) - 1, min(n, len(cw))).astype(int)
    out["cmu05"] = (cw.rotations[idx], cw.positions[idx])
    return {"sets": out, "mean": mean, "std": std}


# --- tasks --------------------------------------------------------------------------------------------------


def sample_task(rng: np.random.Generator, J: int, max_gap: int = 60) -> tuple[np.ndarray, int]:
    """One key pattern ``known`` (T, J + 1) bool (channel J: the root translation) and its longest gap."""
    if rng.random() < 0.6:  # dense context around a gap
        lengths = np.arange(1, max_gap + 1)
        p = 1.0 / lengths
        gap = int(rng.choice(lengths, p=p / p.sum()))
        ctx = 10 if rng.random() < 0.7 else int(rng.integers(1, 11))
        post = 1 if rng.random() < 0.7 else int(rng.integers(1, 11))
        T = ctx + gap + post
        frames = np.zeros(T, bool)
        frames[:ctx] = True
        frames[ctx + gap:] = True
    else:  # sparse keys every N frames
        N = int(rng.integers(2, 31))
        k = max(2, int(math.ceil(48 / N)))
        while N * k + 1 > 121:
            k -= 1
        T = N * k + 1
        frames = np.zeros(T, bool)
        frames[::N] = True
        gap = N - 1
    known = np.repeat(frames[:, None], J + 1, axis=1)
    holes = np.flatnonzero(~frames)
    u = rng.random()
    if u < 0.2 and holes.size:  # some joints keyed inside the gap
        at = rng.choice(holes, size=min(holes.size, int(rng.integers(1, 4))), replace=False)
        joints = rng.choice(J + 1, size=int(rng.integers(1, J // 2 + 1)), replace=False)
        known[np.ix_(at, joints)] = True
    elif u < 0.35:  # a path: the root keyed at every frame
        known[:, J] = True
    elif u < 0.5:  # poses keyed, the root only at the first key
        first = int(np.flatnonzero(frames)[0])
        known[:, J] = False
        known[first, J] = True
    return known, gap


def sample_batch(rng: np.random.Generator, data: dict[str, Any], recipe: BodyRecipe):
    """(rotations (B, T, J, 4), positions (B, T, J, 3), known (B, T, J + 1), gap)."""
    J = data["skeleton"].num_joints
    known, gap = sample_task(rng, J, recipe.max_gap)
    T = known.shape[0]
    B = int(np.clip(recipe.tokens // T, 16, 160))
    bounds, source = data["bounds"], data["source"]
    lengths = bounds[:, 1] - bounds[:, 0] - T
    ok = lengths > 0
    w = np.where(ok, lengths, 0).astype(np.float64)
    if source.min() != source.max():  # half the windows from each source
        for s in (0, 1):
            w[source == s] /= max(w[source == s].sum(), 1e-9)
    clip = rng.choice(len(bounds), size=B, p=w / w.sum())
    start = bounds[clip, 0] + (rng.random(B) * lengths[clip]).astype(np.int64)
    idx = start[:, None] + np.arange(T)
    return (data["rotations"][idx].astype(np.float64), data["positions"][idx].astype(np.float64),
            np.broadcast_to(known, (B,) + known.shape).copy(), gap)


# --- the model on a batch --------------------------------------------------------------------------------------


class Net:
    """The model's skeleton geometry (parents, offsets) for torch forward kinematics, and the batch plumbing."""

    def __init__(self, skeleton) -> None:
        from ..tasks.body_fill import BodyLayout

        self.layout = BodyLayout.of(skeleton)
        pos = {j: i for i, j in enumerate(self.layout.joints)}
        self.parents = [-1] + [pos[int(skeleton.parents[j])] for j in self.layout.joints[1:]]

    def truth(self, prep, rotations, positions):
        """Truth in the canonical model representation: local rotations (B, T, R, 4) (root: global) and root (cm)."""
        from ..core.rotations import quat_apply, quat_mul
        from ..tasks.body_fill import _fold

        g, x = _fold(self.layout, rotations, positions)
        yb = prep.yaw[:, None]
        rot = rotations[:, :, list(self.layout.joints)].copy()
        rot[:, :, 0] = quat_mul(yb, g)
        return rot, quat_apply(yb, x - prep.centre[:, None])

    def fk(self, mats, root_m, offsets_m):
        """Global rotation matrices and positions (metres) of the model joints."""
        import torch

        G, P = [mats[:, :, 0]], [root_m]
        for i in range(1, len(self.parents)):
            p = self.parents[i]
            G.append(G[p] @ mats[:, :, i])
            P.append(P[p] + (G[p] @ offsets_m[:, :, i, :, None])[..., 0])
        return torch.stack(G, 2), torch.stack(P, 2)


def batch_loss(model, net: Net, rotations, positions, known, gap: int, kind: str = "ratio"):
    """(loss to minimise, the plain L1 sum for the log). ``kind``: "ratio" (the L1 over the Bezier base's L1 on
    the same batch: every gap length and task counts by how much it improves on the animator's curve, as the
    benchmark's ratios do) or "length" (the L1 times longest gap / 10, the probe's weighting)."""
    import torch

    from ..core.rotations import quat_to_matrix
    from ..models.infill_body import assemble
    from ..tasks.body_fill import POS_SCALE, prepare

    prep = prepare(net.layout, rotations, positions, known)
    t_rot, t_root = net.truth(prep, rotations, positions)
    feats = torch.from_numpy(prep.features)
    kn = torch.from_numpy(prep.known)
    mats, _, root = assemble(feats, model(feats), kn)
    t_mats = torch.from_numpy(quat_to_matrix(t_rot)).float()
    t_root_m = torch.from_numpy(t_root * POS_SCALE).float()
    off = torch.from_numpy(positions[:, :, list(net.layout.joints)] * POS_SCALE).float()
    hole = torch.from_numpy(~prep.known.all(-1)).float()[..., None]  # (B, T, 1)
    n = hole.sum().clamp_min(1.0) * mats.shape[2]
    tG, tP = net.fk(t_mats, t_root_m, off)

    def l1(m, r):
        G, P = net.fk(m, r, off)
        return (((G - tG).abs().sum((-1, -2)) + (P - tP).abs().sum(-1)
                 + 0.5 * (m - t_mats).abs().sum((-1, -2))) * hole).sum() / n

    loss = l1(mats, root)
    if kind == "length":
        return loss * min(max(gap / 10.0, 0.1), 6.0), loss
    with torch.no_grad():
        zero = torch.zeros(feats.shape[:2] + (mats.shape[2] * 6 + 3,))
        bm, _, br = assemble(feats, zero, kn)
        base = l1(bm, br)
    return loss / base.clamp_min(1e-6), loss


def validate(model, net: Net, val: dict, lengths=(5, 15, 30, 45)) -> dict[str, dict[str, float]]:
    """L2Q of the model over Interp's, per validation set and length."""
    from ..eval.baselines import interp
    from ..eval.infill import evaluate_infill
    from ..tasks.body_fill import run_model

    def fill(skeleton, q, p, n_past, n_trans):
        T, J = q.shape[1], q.shape[2]
        known = np.ones((len(q), T, J + 1), bool)
        known[:, n_past:n_past + n_trans] = False
        return run_model(model, net.layout, np.nan_to_num(q), np.nan_to_num(p), known)

    out = {}
    for name, (q, p) in val["sets"].items():
        res = evaluate_infill({"model": fill, "interp": interp}, net.layout.skeleton, q, p, val["mean"], val["std"],
                              lengths=lengths, progress=False)
        out[name] = {str(n): res["model"]["L2Q"][str(n)] / res["interp"]["L2Q"][str(n)] for n in lengths}
    return out


# --- the loop ---------------------------------------------------------------------------------------------------


def _lr(recipe: BodyRecipe, step: int, wall: float) -> float:
    warm = min(1.0, (step + 1) / recipe.warmup)
    frac = min(1.0, wall / (recipe.minutes * 60.0))
    return recipe.lr * warm * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * frac)))


def _save_state(run: Path, model, ema, opt, state: dict) -> None:
    from safetensors.torch import save_file

    from ..io.atomic import atomic_write, atomic_write_text
    from ..train.loop import _opt_state_tensors

    tensors = {f"model/{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    tensors.update({f"ema/{k}": v.detach().contiguous() for k, v in ema.state_dict().items()})
    opt_t, groups = _opt_state_tensors(opt)
    tensors.update({k: v.contiguous() for k, v in opt_t.items()})
    atomic_write(run / "state.safetensors", lambda tmp: save_file(tensors, tmp))
    atomic_write_text(run / "state.json", json.dumps({**state, "opt_groups": groups}, indent=1))


def _load_state(run: Path, model, ema, opt) -> dict | None:
    if not (run / "state.json").is_file():
        return None
    from safetensors.torch import load_file

    from ..train.loop import _restore_opt

    state = json.loads((run / "state.json").read_text())
    t = load_file(str(run / "state.safetensors"))
    model.load_state_dict({k[6:]: v for k, v in t.items() if k.startswith("model/")})
    ema.load_state_dict({k[4:]: v for k, v in t.items() if k.startswith("ema/")})
    _restore_opt(opt, {k: v for k, v in t.items() if k.startswith("opt/")}, state.pop("opt_groups"))
    return state


def plot_curve(history: list[dict], path: Path) -> None:
    """Training loss and validation L2Q / Interp against wall time (PNG, atomic)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..io.atomic import atomic_write

    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    a, b = fig.subplots(1, 2)
    tr = [h for h in history if "loss" in h]
    a.plot([h["wall_s"] / 60 for h in tr], [h["loss"] for h in tr], "-")
    a.set_xlabel("wall time (min)")
    a.set_ylabel("training loss (unweighted)")
    a.set_yscale("log")
    a.grid(alpha=0.3)
    va = [h for h in history if "val" in h]
    for name in (va[0]["val"] if va else {}):
        for n, style in zip(("5", "15", "30", "45"), ("-", "--", "-.", ":")):
            b.plot([h["wall_s"] / 60 for h in va], [h["val"][name][n] for h in va], style,
                   color="C0" if name == "bandai" else "C1", label=f"{name} @{n}")
    b.axhline(1.0, color="k", lw=0.8)
    b.set_xlabel("wall time (min)")
    b.set_ylabel("L2Q / Interp (validation)")
    b.grid(alpha=0.3)
    b.legend(fontsize=7, ncol=2)
    fig.suptitle("infill-body training (one CPU thread)")
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))


def train_infill_body(recipe: BodyRecipe, run: Path, max_minutes: float | None = None, progress: bool = True,
                      val_sets: dict | None = None, data: dict | None = None, max_steps: int | None = None,
                      warm_start: str | None = None) -> dict:
    """Train (or resume) in ``run``; stops after ``max_minutes`` of this call, at ``max_steps`` (in all) or at the
    recipe's budget. Returns the final state dict. ``warm_start``: a checkpoint (e.g. the bundled infill-body) whose
    weights start a run that has no state in ``run`` (a new machine: the schedule and optimiser start afresh)."""
    import torch

    from ..models.infill_body import InfillBody, InfillBodyConfig

    torch.set_num_threads(recipe.threads)
    run.mkdir(parents=True, exist_ok=True)
    data = data or build_data(recipe.data, run.parent / "cache", progress)
    net = Net(data["skeleton"])
    torch.manual_seed(recipe.seed)  # weight initialisation
    cfg = InfillBodyConfig(net.layout.num_model_joints, recipe.d_model, recipe.n_layers, recipe.n_heads, recipe.d_ff)
    model = InfillBody(cfg)
    ema = InfillBody(cfg)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    state = _load_state(run, model, ema, opt)
    if state is None:
        state = {"step": 0, "wall_s": 0.0, "history": [], "recipe": recipe.to_dict(), "config": cfg.to_dict()}
        if warm_start:  # a new machine without the run's state: start from a checkpoint's weights (fp16 -> fp32)
            from ..models.registry import load_model

            init, meta = load_model(warm_start)
            if meta.get("config") != cfg.to_dict():
                raise MotioncoreError(f"--warm-start {warm_start}: its config {meta.get('config')} is not this "
                                      f"recipe's {cfg.to_dict()}")
            model.load_state_dict(init.state_dict())
            ema.load_state_dict(init.state_dict())
            state["warm_start"] = {"from": str(warm_start), "steps": meta.get("steps"),
                                   "train_wall_s": meta.get("train_wall_s")}
    elif state["recipe"] != recipe.to_dict():
        changed = {k: (state["recipe"].get(k), v) for k, v in recipe.to_dict().items() if state["recipe"].get(k) != v}
        print(f"resuming {run} with changed recipe fields {changed}", file=sys.stderr)
        state["recipe"] = recipe.to_dict()
    if val_sets is None:
        val_sets = validation_sets(data["skeleton"], data["convention"], recipe.val_windows, progress)
    print(f"{data['describe']}; {sum(p.numel() for p in model.parameters()):,} parameters; "
          f"resuming at step {state['step']} ({state['wall_s'] / 60:.1f} min)" if state["step"] else
          f"{data['describe']}; {sum(p.numel() for p in model.parameters()):,} parameters", file=sys.stderr)
    t0 = time.monotonic()
    wall0 = state["wall_s"]
    last_save = last_val = time.monotonic()
    run_loss, run_n = 0.0, 0
    budget = recipe.minutes * 60.0
    stop = None if max_minutes is None else max_minutes * 60.0
    model.train()
    while True:
        now = time.monotonic()
        wall = wall0 + now - t0
        done = wall >= budget or (stop is not None and now - t0 >= stop) or (
            max_steps is not None and state["step"] >= max_steps)
        if done or now - last_val >= recipe.val_every or state["step"] == 0:
            val = validate(ema, net, val_sets)
            state["history"].append({"step": state["step"], "wall_s": wall, "val": val})
            print(f"step {state['step']} {wall / 60:.1f} min: L2Q/Interp " + "; ".join(
                f"{k} " + " / ".join(f"{v[n]:.3f}" for n in v) for k, v in val.items()), file=sys.stderr, flush=True)
            plot_curve(state["history"], run / "curve.png")
            last_val = time.monotonic()
        if done or time.monotonic() - last_save >= recipe.save_every:
            state["wall_s"] = wall0 + time.monotonic() - t0
            _save_state(run, model, ema, opt, state)
            last_save = time.monotonic()
        if done:
            return state
        rng = np.random.default_rng([recipe.seed, state["step"]])
        r, p, k, gap = sample_batch(rng, data, recipe)
        for g in opt.param_groups:
            g["lr"] = _lr(recipe, state["step"], wall)
        loss, raw = batch_loss(model, net, r, p, k, gap, recipe.loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1.0 - recipe.ema)
        state["step"] += 1
        run_loss += float(raw.detach())
        run_n += 1
        if run_n == 100:
            state["history"].append({"step": state["step"], "wall_s": wall0 + time.monotonic() - t0,
                                     "loss": run_loss / run_n})
            run_loss, run_n = 0.0, 0


def export(run: Path, out: Path, name: str = "infill-body", metrics: dict | None = None, data: dict | None = None
           ) -> Path:
    """The run's EMA weights as a bundled-style checkpoint (fp16 safetensors + JSON metadata)."""
    import platform

    import torch
    from safetensors.torch import load_file

    from ..data.registry import BANDAI_LICENCE, CMU_CITE, CMU_LICENCE
    from ..models.checkpoint import save_tensors

    state = json.loads((run / "state.json").read_text())
    state["recipe"] = {"loss": "length", **state["recipe"]}  # runs from before the field trained with "length"
    recipe = BodyRecipe(**state["recipe"])
    data = data or build_data(recipe.data, run.parent / "cache", progress=False)
    t = load_file(str(run / "state.safetensors"))
    tensors = {k[4:]: v for k, v in t.items() if k.startswith("ema/")}
    licence = CMU_LICENCE if recipe.data == "cmu" else f"{BANDAI_LICENCE} (Bandai Namco data); CMU data: {CMU_LICENCE}"
    meta = {
        "kind": "infill-body", "task": "infill", "config": state["config"], "recipe": state["recipe"],
        "skeleton": data["skeleton"].to_dict(), "fps": FPS, "root_joint": Net(data["skeleton"]).layout.body.root,
        "convention": {"mean_local_rotations": np.asarray(data["convention"]).tolist()},
        "training_data": data["describe"], "licence": licence,
        "citation": ("" if recipe.data == "cmu" else "Kobayashi et al. 2023, arXiv:2306.08861 (Bandai Namco); ")
        + CMU_CITE,
        "device": state.get("device", f"cpu ({platform.machine()}, {recipe.threads} thread(s))"),
        "steps": state["step"], "train_wall_s": round(state["wall_s"], 1),
        "validation": next(({"step": h["step"], "wall_s": round(h["wall_s"], 1), "l2q_over_interp": h["val"]}
                            for h in reversed(state["history"]) if "val" in h), None),
        "validation_note": "L2Q over Interp on fixed validation windows (Bandai test; CMU subject 05 on the Bandai "
                           "skeleton), the EMA weights",
        "bundled_name": name, "torch": torch.__version__,
    }
    from ..tasks.body_fill import safety_limits

    meta["safety"] = safety_limits(Net(data["skeleton"]).layout, data["rotations"], data["positions"], data["bounds"],
                                   data["convention"])
    if metrics:
        meta["metrics"] = metrics
    return save_tensors(out, tensors, meta, half=True)


def add_infill_body_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("infill-body")
    g.add_argument("--body-data", choices=["bandai+cmu", "cmu"], default=None,
                   help="training data: Bandai train + CMU train subjects (default), or CMU alone (permissive)")
    g.add_argument("--minutes", type=float, default=None,
                   help="wall-time budget of the learning-rate schedule, cumulative over resumes (default 110)")
    g.add_argument("--warm-start", default=None, metavar="CHECKPOINT",
                   help="a run without saved state starts from these weights (e.g. infill-body: the last bundled)")
    g.add_argument("--export", default=None, help="(infill-body; run folder: --out) write the EMA weights as a checkpoint (fp16) to this path and exit")


def train_infill_body_from_args(args: argparse.Namespace) -> int:
    over = {"data": args.body_data, "minutes": args.minutes, "threads": args.threads,
            "seed": getattr(args, "seed", None), "d_model": getattr(args, "d_model", None),
            "n_layers": getattr(args, "n_layers", None)}
    recipe = BodyRecipe(**{**BodyRecipe().to_dict(), **{k: v for k, v in over.items() if v is not None}})
    run = Path(args.out or ("runs/infill-body-cmu" if recipe.data == "cmu" else "runs/infill-body"))
    if args.export:
        if not (run / "state.json").is_file():
            raise MotioncoreError(f"--export: no training state in {run} (train first)")
        print(export(run, Path(args.export), Path(args.export).stem))
        return 0
    state = train_infill_body(recipe, run, args.max_minutes or None, progress=not getattr(args, "quiet", False),
                              warm_start=args.warm_start)
    print(f"{run}: step {state['step']}, {state['wall_s'] / 60:.1f} min; curve {run / 'curve.png'}; "
          f"export with --export PATH")
    return 0
