"""One-shot style adaptation of a PFNN with a learnet (Bertinetto et al., NeurIPS 2016), on Bandai
dataset 2: does a PFNN adapt to an unseen style from ONE exemplar clip, without fine-tuning?

One style (``holdout``, default elderly) is held out entirely; the train split of the other six trains
- **base**: a PFNN with no style input;
- **learnet**: the same PFNN with a factorised adapter ``M1 diag(f(z)) M2`` on every layer, trained
  jointly with a ``StyleEncoder``. Each training row reads z from an *exemplar*: a random 2-4 s window
  of the z-scored X rows (all 216 input columns) of another training clip of the row's style. Per
  batch, two exemplar clips per style present are drawn and encoded; a row uses the first unless that
  is its own clip, then the second (so a row never sees its own clip). Exemplar clips are training
  clips with at least ``window_min_s`` of rows;
- **fine-tuned**: the base model trained further on the exemplar clip's rows alone, a fixed budget
  (``finetune_epochs`` at ``finetune_lr``, batch ``finetune_batch``, dropout and L1 as in training, no
  early stopping).

Evaluation, for each of ``n_exemplars`` exemplars (the first ``exemplar_content`` clips of the held-out
style in the train split, in file order): next-frame prediction error on every other held-out-style
clip of both splits (z-scored output MSE, and joint position error in cm after de-normalising, mean
over rows and the 21 body joints; Bandai's static ground joint is left out). z is encoded from the
exemplar's central <= ``window_max_s`` rows. Control: the learnet with z from a clip of
``control_style``. Reference: the three models on the six training styles' test split (learnet z from a
fixed walk clip of each row's own style, the fine-tuned model is the one adapted to the exemplar).
Training rows: the train split of the six styles, minus every 10th clip (validation, for the loss
curves only), as in ``train.controllers``; normalisers are fitted on the training rows.

Writes to ``cfg.out``: results.json, results.md, learnet_style.png, checkpoints ``base``, ``learnet``
(kind ``learnet-pfnn``: ``pfnn.*`` and ``encoder.*`` tensors, see `load_learnet`), ``finetuned_<i>``, and
the resumable training state of each stage in ``stages/<name>/``. A finished stage whose settings match
is loaded instead of retrained; an interrupted one resumes from its last epoch (the exemplar windows'
random stream restarts, so a resumed learnet is not bit-identical to an uninterrupted one).

Legend: N rows, B batch, W exemplar windows, L window rows, D features, Z style code, J joints.
"""
from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..core.kinematics import find_body_joints
from ..data import Clip, get_spec, load
from ..errors import DataError, MotioncoreError
from ..features.layout import Layout
from ..features.normaliser import Normaliser, layout_normalisers
from ..features.pfnn import GAITS, pfnn_dataset, pfnn_layout
from ..features.poses import ground_joints
from ..models.checkpoint import load_state_into, load_tensors, read_meta, save_model
from ..models.learnet import StyleEncoderConfig
from ..models.learnet_pfnn import LearnetPFNN
from ..models.pfnn import PFNN, PFNNConfig
from ..train.loop import TrainConfig, fit

CONDITIONS = ("base", "learnet", "learnet_wrong_style", "finetuned")


@dataclass(frozen=True)
class LearnetStyleConfig:
    out: str = "out/learnet"  # output folder
    data: str = "bandai2"  # registered dataset with labels style and content
    holdout: str = "elderly"  # style left out of training entirely
    control_style: str = "normal"  # wrong-style control: the learnet's z from a clip of this style
    exemplar_content: str = "walk"  # content of the exemplar clips (held-out, control and per-style)
    n_exemplars: int = 3  # repeats, each with a different held-out exemplar clip
    hidden_dim: int = 256  # PFNN hidden units (all models)
    dropout: float = 0.3  # PFNN dropout on each layer's input
    style_rank: int = 16  # R: rank of each layer's adapter (learnet)
    z_dim: int = 32  # Z: style code size
    encoder_channels: int = 64  # style encoder conv channels (3 layers, kernel 5)
    window_min_s: float = 2.0  # training exemplar window, shortest (seconds)
    window_max_s: float = 4.0  # training exemplar window, longest; also the evaluation exemplar's length
    epochs: int = 40  # training epochs of base and learnet (one cosine cycle)
    batch_size: int = 256  # training batch
    lr: float = 1e-3  # peak AdamW learning rate
    l1: float = 0.01  # Holden's L1 cost on the PFNN weight sets (times mean |W|)
    finetune_epochs: int = 20  # fine-tuning passes over the exemplar's rows
    finetune_lr: float = 1e-4  # fine-tuning AdamW learning rate (constant)
    finetune_batch: int = 32  # fine-tuning batch
    seed: int = 0  # initialisation, batch order, exemplar windows
    threads: int = 1  # torch CPU threads
    resume: bool = True  # reuse finished stages and resume interrupted ones
    progress: bool = True  # progress bars and per-epoch lines

    def __post_init__(self) -> None:
        for name in ("n_exemplars", "hidden_dim", "style_rank", "z_dim", "encoder_channels", "epochs",
                     "batch_size", "finetune_epochs", "finetune_batch", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"LearnetStyleConfig.{name}: expected an int >= 1, got {getattr(self, name)!r}")
        if not 0 < self.window_min_s <= self.window_max_s:
            raise ValueError(f"window_min_s/window_max_s: need 0 < min <= max, got {self.window_min_s}, {self.window_max_s}")
        if self.holdout == self.control_style:
            raise ValueError(f"control_style: must differ from holdout, both are {self.holdout!r}")


# ----------------------------------------------------------------------------- data
@dataclass(eq=False)
class Prepared:
    """Every row of every clip, z-scored with the training rows' normalisers, and the index sets."""

    clips: list[Clip]
    styles: tuple[str, ...]  # style names; a row's style id indexes this
    layout: Layout
    x_norm: Normaliser
    y_norm: Normaliser
    x: Tensor  # (N, D_in) z-scored inputs
    y: Tensor  # (N, D_out) z-scored outputs
    y_raw: np.ndarray  # (N, D_out) outputs in data units
    phase: Tensor  # (N,) cycles
    style: Tensor  # (N,) long style id
    clip: Tensor  # (N,) long clip index
    starts: np.ndarray  # (C,) first row of each clip
    counts: np.ndarray  # (C,) rows of each clip (0: none)
    train_idx: np.ndarray  # rows that train (six styles, train split, not validation clips)
    val_idx: np.ndarray  # validation rows (every 10th training clip): loss curves only
    test_idx: np.ndarray  # the six styles' test split
    bank: dict[int, list[int]]  # style id -> training clips usable as exemplars
    style_exemplar: dict[int, int]  # style id -> fixed exemplar clip (validation and reference z)
    exemplars: list[int]  # held-out exemplar clips, one per repeat
    controls: list[int]  # wrong-style clips, one per repeat
    heldout: list[int]  # every held-out-style clip with rows


def _pick(clips: list[Clip], counts: np.ndarray, style: str, content: str, min_rows: int, n: int) -> list[int]:
    found = [i for i, c in enumerate(clips) if c.labels.get("style") == style and c.labels.get("content") == content
             and c.split == "train" and counts[i] >= min_rows]
    if not found:
        raise DataError(f"no {style!r} {content!r} clip in the train split with >= {min_rows} rows")
    return found[:n]


def prepare(cfg: LearnetStyleConfig, clips: list[Clip]) -> Prepared:
    """Rows, normalisers and index sets. Raises if the held-out style reaches the training rows."""
    rows = pfnn_dataset(clips)
    layout = pfnn_layout(clips[0].motion.skeleton, GAITS, clips[0].motion.fps)
    styles = tuple(sorted({str(c.labels.get("style", "")) for c in clips}))
    for name in (cfg.holdout, cfg.control_style):
        if name not in styles:
            raise DataError(f"style {name!r} not in {cfg.data}; styles: {styles}")
    clip_id, style_row = rows["clip"].astype(np.int64), rows["style"]
    assert np.all(np.diff(clip_id) >= 0), "pfnn_dataset rows are grouped by clip"
    C = len(clips)
    counts = np.bincount(clip_id, minlength=C)
    starts = np.searchsorted(clip_id, np.arange(C))
    split = np.array([c.split for c in clips])[clip_id]
    held = style_row == cfg.holdout
    train = (split == "train") & ~held
    val = train & (clip_id % 10 == 9)
    train_idx, val_idx = np.flatnonzero(train & ~val), np.flatnonzero(val)
    if cfg.holdout in set(style_row[train_idx].tolist()) or cfg.holdout in set(style_row[val_idx].tolist()):
        raise MotioncoreError(f"held-out style {cfg.holdout!r} reached the training rows")
    xn, yn = layout_normalisers(layout, rows["X"][train_idx].astype(np.float64), rows["Y"][train_idx].astype(np.float64))
    min_rows = int(round(cfg.window_min_s * layout.fps))
    train_clips = sorted(set(clip_id[train_idx].tolist()))
    bank = {s: [c for c in train_clips if clips[c].labels.get("style") == name and counts[c] >= min_rows]
            for s, name in enumerate(styles) if name != cfg.holdout}
    for s, pool in bank.items():
        if len(pool) < 2:
            raise DataError(f"style {styles[s]!r}: need >= 2 training clips with >= {min_rows} rows as exemplars")
    fixed = {s: next((c for c in pool if clips[c].labels.get("content") == cfg.exemplar_content), pool[0])
             for s, pool in bank.items()}
    return Prepared(
        clips, styles, layout, xn, yn, torch.from_numpy(xn.transform(rows["X"].astype(np.float64)).astype(np.float32)),
        torch.from_numpy(yn.transform(rows["Y"].astype(np.float64)).astype(np.float32)), rows["Y"],
        torch.from_numpy(rows["phase"].astype(np.float32)), torch.from_numpy(np.searchsorted(styles, style_row)),
        torch.from_numpy(clip_id), starts, counts, train_idx, val_idx,
        np.flatnonzero((split == "test") & ~held), bank, fixed,
        _pick(clips, counts, cfg.holdout, cfg.exemplar_content, min_rows, cfg.n_exemplars),
        _pick(clips, counts, cfg.control_style, cfg.exemplar_content, min_rows, cfg.n_exemplars),
        [c for c in range(C) if counts[c] > 0 and clips[c].labels.get("style") == cfg.holdout])


def eval_rows(prep: Prepared, exemplar: int) -> np.ndarray:
    """Rows of every held-out-style clip except ``exemplar`` (both splits)."""
    clips = [c for c in prep.heldout if c != exemplar]
    assert exemplar not in clips
    return np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c]) for c in clips])


def clip_rows(prep: Prepared, c: int) -> np.ndarray:
    return np.arange(prep.starts[c], prep.starts[c] + prep.counts[c])


# ----------------------------------------------------------------------------- models
def load_learnet(path: str | os.PathLike) -> tuple[LearnetPFNN, dict]:
    """(model in eval mode, metadata) of a ``learnet-pfnn`` checkpoint written by `main`."""
    tensors, meta = load_tensors(path)
    model = LearnetPFNN(PFNNConfig(**meta["config"]["pfnn"]), StyleEncoderConfig(**meta["config"]["encoder"]))
    load_state_into(model, tensors, str(path))
    return model.eval(), meta


def model_configs(cfg: LearnetStyleConfig, prep: Prepared) -> tuple[PFNNConfig, PFNNConfig, StyleEncoderConfig]:
    """(base PFNN, learnet PFNN, encoder) configs."""
    d_in, d_out = prep.layout.d_in, prep.layout.d_out
    base = PFNNConfig(d_in, d_out, hidden_dim=cfg.hidden_dim, dropout=cfg.dropout)
    styled = PFNNConfig(d_in, d_out, hidden_dim=cfg.hidden_dim, dropout=cfg.dropout, style_rank=cfg.style_rank,
                        style_dim=cfg.z_dim)
    return base, styled, StyleEncoderConfig(d_in, cfg.z_dim, cfg.encoder_channels)


def encode_spans(model: LearnetPFNN, x: Tensor, spans: list[tuple[int, int]]) -> Tensor:
    """z (W, Z) of W row spans (start, length) of the z-scored rows x, zero-padded and masked."""
    L = max(n for _, n in spans)
    buf = x.new_zeros(len(spans), L, x.shape[1])  # (W, L, D_in)
    for i, (s, n) in enumerate(spans):
        buf[i, :n] = x[s:s + n]
    return model.encode(buf, torch.tensor([n for _, n in spans]))


def central_span(prep: Prepared, c: int, max_rows: int) -> tuple[int, int]:
    n = int(prep.counts[c])
    L = min(n, max_rows)
    return int(prep.starts[c]) + (n - L) // 2, L


class ExemplarSampler:
    """Style codes for a batch: random windows of other same-style clips (training), or each style's
    fixed exemplar (evaluation mode)."""

    def __init__(self, prep: Prepared, cfg: LearnetStyleConfig):
        self.prep, self.fps = prep, prep.layout.fps
        self.min_rows, self.max_rows = int(round(cfg.window_min_s * self.fps)), int(round(cfg.window_max_s * self.fps))
        self.gen = torch.Generator().manual_seed(cfg.seed + 1)

    def random_span(self, c: int) -> tuple[int, int]:
        n = int(self.prep.counts[c])
        L = min(n, int(torch.randint(self.min_rows, self.max_rows + 1, (1,), generator=self.gen)))
        return int(self.prep.starts[c]) + int(torch.randint(0, n - L + 1, (1,), generator=self.gen)), L

    def train_codes(self, model: LearnetPFNN, style: Tensor, clip: Tensor) -> Tensor:
        """z (B, Z): two exemplar clips per style in the batch; a row takes the second iff the first is its own."""
        present = torch.unique(style).tolist()
        slot = torch.zeros(len(self.prep.styles), dtype=torch.long)  # style id -> position in ``present``
        first = torch.zeros(len(self.prep.styles), dtype=torch.long)  # style id -> its first exemplar clip
        spans = []
        for k, s in enumerate(present):
            pool = self.prep.bank[s]
            i, j = torch.randperm(len(pool), generator=self.gen)[:2].tolist()
            spans += [self.random_span(pool[i]), self.random_span(pool[j])]
            slot[s], first[s] = k, pool[i]
        z = encode_spans(model, self.prep.x, spans)  # (2 * styles present, Z)
        return z[2 * slot[style] + (clip == first[style]).long()]  # (B, Z)

    def fixed_codes(self, model: LearnetPFNN, style: Tensor) -> Tensor:
        """z (B, Z) from each row's style's fixed exemplar (central window)."""
        ids = sorted(self.prep.style_exemplar)
        z = encode_spans(model, self.prep.x, [central_span(self.prep, self.prep.style_exemplar[s], self.max_rows) for s in ids])
        table = torch.zeros(len(self.prep.styles), dtype=torch.long)
        table[ids] = torch.arange(len(ids))
        return z[table[style]]


def _pfnn_of(model: nn.Module) -> PFNN:
    return model.pfnn if isinstance(model, LearnetPFNN) else model  # type: ignore[return-value]


def make_loss(l1: float, sampler: ExemplarSampler | None = None):
    """MSE on z-scored Y plus ``l1 * mean|W|`` over the PFNN weight sets (training only), as
    ``train.controllers``; with a sampler, z is read from exemplars."""

    def loss_fn(m: nn.Module, b: dict[str, Tensor]) -> Tensor:
        z = None
        if sampler is not None:
            assert isinstance(m, LearnetPFNN)
            z = sampler.train_codes(m, b["style"], b["clip"]) if m.training else sampler.fixed_codes(m, b["style"])
        loss = nn.functional.mse_loss(m(b["x"], b["phase"], z), b["y"])
        if l1 and m.training:
            loss = loss + l1 * torch.stack([layer.weight.abs().mean() for layer in _pfnn_of(m).net.layer_list()]).mean()
        return loss

    return loss_fn


def batch_tensors(prep: Prepared, idx: np.ndarray) -> dict[str, Tensor]:
    i = torch.from_numpy(idx)
    return {"x": prep.x[i], "y": prep.y[i], "phase": prep.phase[i], "style": prep.style[i], "clip": prep.clip[i]}


# ----------------------------------------------------------------------------- training
def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def train_stage(name: str, model: nn.Module, loss_fn, prep: Prepared, cfg: LearnetStyleConfig, kind: str,
                config: dict, meta: dict) -> tuple[nn.Module, dict]:
    """Train ``model`` with `fit` (resumable in ``out/stages/name``) and save ``out/name``; a saved
    checkpoint with the same ``meta["stage_key"]`` is loaded instead."""
    out, key = Path(cfg.out), meta["stage_key"]
    if cfg.resume and (out / f"{name}.json").is_file() and read_meta(out / name).get("stage_key") == key:
        tensors, saved = load_tensors(out / name)
        load_state_into(model, tensors, str(out / name))
        print(f"[{name}] loaded {out / name} (trained in {saved['train_wall_s']:.0f} s)", flush=True)
        return model.eval(), {"wall_s": saved["train_wall_s"], "loaded": True, "history": saved["history"]}
    stage = out / "stages" / name
    stage.mkdir(parents=True, exist_ok=True)
    marker = stage / "stage_key.json"
    resume = cfg.resume and marker.is_file() and json.loads(marker.read_text()) == key
    _write(marker, json.dumps(key))
    tcfg = TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, restart_epochs=cfg.epochs,
                       seed=cfg.seed, device="cpu", threads=cfg.threads)
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    history = fit(model, loss_fn, batch_tensors(prep, prep.train_idx), batch_tensors(prep, prep.val_idx), tcfg, stage,
                  resume=resume, progress=cfg.progress)
    wall = history[-1]["wall_s"] if history else time.perf_counter() - t0  # includes time before a resume
    save_model(out / name, model, kind, config, {**meta, "history": history, "train_wall_s": wall})
    print(f"[{name}] trained {len(history)} epochs in {wall:.0f} s", flush=True)
    return model.eval(), {"wall_s": wall, "loaded": False, "history": history}


def finetune(base: PFNN, prep: Prepared, c: int, cfg: LearnetStyleConfig) -> tuple[PFNN, list[float]]:
    """A copy of ``base`` trained on clip ``c``'s rows only: fixed epochs, constant lr; returns the
    model (eval mode) and the mean training loss of each epoch."""
    model = copy.deepcopy(base).train()
    data = batch_tensors(prep, clip_rows(prep, c))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.finetune_lr, weight_decay=TrainConfig.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed + 1000 + c)
    loss_fn, losses = make_loss(cfg.l1), []
    n = data["x"].shape[0]
    for _ in range(cfg.finetune_epochs):
        tot = []
        for idx in torch.randperm(n, generator=gen).split(cfg.finetune_batch):
            loss = loss_fn(model, {k: v[idx] for k, v in data.items()})
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot.append(float(loss.detach()))
        losses.append(float(np.mean(tot)))
    return model.eval(), losses


# ----------------------------------------------------------------------------- evaluation
def body_joints(prep: Prepared) -> np.ndarray:
    """Joint ids without the ground joints (Bandai's static ``joint_Root``: always 0 in root space)."""
    sk = prep.clips[0].motion.skeleton
    return np.setdiff1d(np.arange(len(prep.layout.joints)), ground_joints(sk, find_body_joints(sk)))


@torch.no_grad()
def prediction_errors(model: nn.Module, prep: Prepared, idx: np.ndarray, z: Tensor | None = None) -> dict[str, float]:
    """z-scored output MSE and mean joint position error (cm, body joints) of next-frame predictions
    on rows ``idx``; z (len(idx), Z), (1, Z) or None."""
    model.eval()
    i = torch.from_numpy(idx)
    zz = None if z is None else z.expand(len(idx), -1)
    preds = [model(prep.x[i[s:s + 8192]], prep.phase[i[s:s + 8192]], None if zz is None else zz[s:s + 8192])
             for s in range(0, len(idx), 8192)]
    pred = torch.cat(preds)  # (N, D_out) z-scored
    mse = float(((pred - prep.y[i]) ** 2).mean())
    J, cols, body = len(prep.layout.joints), prep.layout.output_block("joint_pos").slice, body_joints(prep)
    raw = prep.y_norm.inverse(pred.double().numpy())[:, cols].reshape(-1, J, 3)
    true = prep.y_raw[idx][:, cols].astype(np.float64).reshape(-1, J, 3)
    return {"z_mse": mse, "joint_cm": float(np.linalg.norm(raw - true, axis=-1)[:, body].mean())}


@torch.no_grad()
def exemplar_code(model: LearnetPFNN, prep: Prepared, c: int, max_rows: int) -> Tensor:
    """z (1, Z) from clip ``c``'s central <= max_rows rows."""
    model.eval()
    return encode_spans(model, prep.x, [central_span(prep, c, max_rows)])


def run_repeat(cfg: LearnetStyleConfig, prep: Prepared, base: PFNN, learnet: LearnetPFNN, r: int, meta: dict) -> dict:
    """One exemplar: the four conditions on the held-out clips, and the fine-tuned model on the reference rows."""
    ex, ctrl = prep.exemplars[r], prep.controls[r % len(prep.controls)]
    rows, max_rows = eval_rows(prep, ex), int(round(cfg.window_max_s * prep.layout.fps))
    t0 = time.perf_counter()
    name, key = f"finetuned_{r}", {**meta["stage_key"], "finetune": [cfg.finetune_epochs, cfg.finetune_lr,
                                                                     cfg.finetune_batch], "exemplar": prep.clips[ex].name}
    out = Path(cfg.out)
    if cfg.resume and (out / f"{name}.json").is_file() and read_meta(out / name).get("stage_key") == key:
        tuned, losses = copy.deepcopy(base), read_meta(out / name)["finetune_losses"]
        load_state_into(tuned, load_tensors(out / name)[0], str(out / name))
    else:
        tuned, losses = finetune(base, prep, ex, cfg)
        save_model(out / name, tuned, "pfnn", asdict(tuned.cfg), {
            **meta, "stage_key": key, "finetune_losses": losses,
            "training_data": f"{meta['training_data']}, then fine-tuned on {prep.clips[ex].name}"})
    tune_s = time.perf_counter() - t0
    held = {"base": prediction_errors(base, prep, rows),
            "learnet": prediction_errors(learnet, prep, rows, exemplar_code(learnet, prep, ex, max_rows)),
            "learnet_wrong_style": prediction_errors(learnet, prep, rows, exemplar_code(learnet, prep, ctrl, max_rows)),
            "finetuned": prediction_errors(tuned, prep, rows)}
    return {"exemplar": prep.clips[ex].name, "exemplar_rows": int(prep.counts[ex]), "control": prep.clips[ctrl].name,
            "eval_clips": len(prep.heldout) - 1, "eval_rows": len(rows), "heldout": held,
            "reference_finetuned": prediction_errors(tuned, prep, prep.test_idx), "finetune_losses": losses,
            "finetune_s": tune_s}


def stat(values: list[float]) -> dict:
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "values": v.tolist()}


def summarise(repeats: list[dict], reference: dict) -> dict:
    """Mean and sample sd over the exemplars of every condition and metric."""
    held = {c: {m: stat([r["heldout"][c][m] for r in repeats]) for m in ("z_mse", "joint_cm")} for c in CONDITIONS}
    ref = {c: {m: stat([reference[c][m]]) for m in ("z_mse", "joint_cm")} for c in ("base", "learnet")}
    ref["finetuned"] = {m: stat([r["reference_finetuned"][m] for r in repeats]) for m in ("z_mse", "joint_cm")}
    return {"heldout": held, "reference": ref}


# ----------------------------------------------------------------------------- report
LABELS = {"base": "base PFNN (no style input)", "learnet": "learnet, z from the held-out exemplar",
          "learnet_wrong_style": "learnet, z from a wrong-style clip ({control})",
          "finetuned": "base fine-tuned on the exemplar"}


def markdown(res: dict) -> str:
    cfg, s = res["config"], res["summary"]
    pm = lambda d, f: f"{d['mean']:{f}} ± {d['sd']:{f}}" if len(d["values"]) > 1 else f"{d['mean']:{f}}"  # noqa: E731
    lines = [f"## Learnet one-shot style adaptation: {cfg['data']}, held-out style {cfg['holdout']}", "",
             f"| model | held-out {cfg['holdout']}: z-MSE | held-out: joint error (cm) | 6 training styles, test: z-MSE "
             "| training styles: joint error (cm) |", "|---|---|---|---|---|"]
    for c in CONDITIONS:
        ref = s["reference"].get(c)
        tail = f"{pm(ref['z_mse'], '.4f')} | {pm(ref['joint_cm'], '.2f')}" if ref else "– | –"
        lines.append(f"| {LABELS[c].format(control=cfg['control_style'])} | {pm(s['heldout'][c]['z_mse'], '.4f')} | "
                     f"{pm(s['heldout'][c]['joint_cm'], '.2f')} | {tail} |")
    reps, sz, w = res["repeats"], res["sizes"], res["wall_s"]
    lines += ["", f"Mean ± sample sd over {len(reps)} exemplar clip(s): "
              + ", ".join(f"{r['exemplar']} ({r['exemplar_rows']} rows; control {r['control']})" for r in reps) + ". "
              f"Held-out rows: every other {cfg['holdout']} clip of both splits ({reps[0]['eval_clips']} clips, "
              f"{reps[0]['eval_rows']} rows). Next-frame prediction from ground-truth inputs; joint error over "
              f"the {sz['body_joints']} body joints, root-relative. Reference learnet z: a fixed "
              f"{cfg['exemplar_content']} clip of each row's own style.", "",
              f"Sizes: PFNN {sz['pfnn']['input_dim']}→{sz['pfnn']['hidden_dim']}→{sz['pfnn']['hidden_dim']}→"
              f"{sz['pfnn']['output_dim']}, 4 phase control points, {sz['params_base']:,} parameters; learnet adds "
              f"rank-{cfg['style_rank']} adapters (z {cfg['z_dim']}) and a 3×{cfg['encoder_channels']} conv encoder: "
              f"{sz['params_learnet']:,} parameters. Training: {sz['train_rows']:,} rows ({sz['train_clips']} clips), "
              f"{res['epochs_run']['base']}/{res['epochs_run']['learnet']} epochs (base/learnet), batch {cfg['batch_size']}, "
              f"AdamW lr {cfg['lr']:g} (one cosine cycle), dropout {cfg['dropout']}, L1 {cfg['l1']}; fine-tuning "
              f"{cfg['finetune_epochs']} epochs, lr {cfg['finetune_lr']:g}, batch {cfg['finetune_batch']}.", "",
              "Wall time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in w.items()) + f". {res['budget']}"]
    return "\n".join(lines)


def bar_chart(res: dict, path: Path) -> None:
    """Two panels (z-MSE, joint cm): each condition on the held-out style and the training styles."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    x = np.arange(len(CONDITIONS))
    for k, (metric, title) in enumerate((("z_mse", "z-scored output MSE"), ("joint_cm", "joint position error (cm)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for off, (part, label) in ((-0.2, ("heldout", f"held-out {res['config']['holdout']}")),
                                   (0.2, ("reference", "6 training styles, test"))):
            d = [res["summary"][part].get(c, {}).get(metric) for c in CONDITIONS]
            ax.bar(x + off, [v["mean"] if v else np.nan for v in d], 0.4, yerr=[v["sd"] if v else 0 for v in d],
                   capsize=3, label=label)
        ax.set_xticks(x, ["base", "learnet", "learnet\nwrong style", "fine-tuned"])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- main
def train_models(cfg: LearnetStyleConfig, prep: Prepared) -> tuple[PFNN, LearnetPFNN, dict, dict, dict]:
    """(base, learnet, base info, learnet info, checkpoint metadata)."""
    spec, (bcfg, lcfg, ecfg) = get_spec(cfg.data), model_configs(cfg, prep)
    fields = ("data", "holdout", "hidden_dim", "dropout", "epochs", "batch_size", "lr", "l1", "seed")
    key = {**{f: getattr(cfg, f) for f in fields}, "clips": [c.name for c in prep.clips]}
    meta = {"task": "controller", "training_data": f"{cfg.data} ({len(prep.bank)} styles, held out: {cfg.holdout})",
            "licence": spec.licence, "citation": spec.citation, "layout": prep.layout.to_dict(),
            "x_norm": prep.x_norm.to_dict(), "y_norm": prep.y_norm.to_dict(), "fps": prep.layout.fps,
            "skeleton": prep.clips[0].motion.skeleton.to_dict(), "experiment": asdict(cfg), "stage_key": key}
    torch.manual_seed(cfg.seed)
    base, info_b = train_stage("base", PFNN(bcfg), make_loss(cfg.l1), prep, cfg, "pfnn", asdict(bcfg), meta)
    lkey = {**key, "learnet": [cfg.style_rank, cfg.z_dim, cfg.encoder_channels, cfg.window_min_s, cfg.window_max_s]}
    torch.manual_seed(cfg.seed)
    learnet, info_l = train_stage("learnet", LearnetPFNN(lcfg, ecfg), make_loss(cfg.l1, ExemplarSampler(prep, cfg)),
                                  prep, cfg, "learnet-pfnn", {"pfnn": asdict(lcfg), "encoder": asdict(ecfg)},
                                  {**meta, "stage_key": lkey})
    return base, learnet, info_b, info_l, meta  # type: ignore[return-value]


def sizes(prep: Prepared, base: PFNN, learnet: LearnetPFNN) -> dict:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    return {"pfnn": asdict(base.cfg), "learnet_pfnn": asdict(learnet.pfnn.cfg), "encoder": asdict(learnet.encoder.cfg),
            "params_base": count(base), "params_learnet": count(learnet), "train_rows": len(prep.train_idx),
            "train_clips": len(set(prep.clip[prep.train_idx].tolist())), "val_rows": len(prep.val_idx),
            "test_rows": len(prep.test_idx), "body_joints": len(body_joints(prep))}


def main(cfg: LearnetStyleConfig, clips: list[Clip] | None = None) -> dict:
    """Train base and learnet, fine-tune per exemplar, evaluate, write the report; returns the results.
    ``clips`` replaces ``load(cfg.data)`` (tests pass a handful)."""
    torch.set_num_threads(cfg.threads)
    out, t_all, wall = Path(cfg.out), time.perf_counter(), {}
    out.mkdir(parents=True, exist_ok=True)
    prep = prepare(cfg, load(cfg.data, None, progress=cfg.progress) if clips is None else clips)
    wall["features"] = time.perf_counter() - t_all
    print(f"[features] {len(prep.x)} rows, {len(prep.train_idx)} training rows in {wall['features']:.1f} s", flush=True)
    base, learnet, info_b, info_l, meta = train_models(cfg, prep)
    wall["base"], wall["learnet"] = info_b["wall_s"], info_l["wall_s"]
    t0 = time.perf_counter()
    repeats = [run_repeat(cfg, prep, base, learnet, r, meta) for r in range(len(prep.exemplars))]
    with torch.no_grad():
        z_ref = ExemplarSampler(prep, cfg).fixed_codes(learnet.eval(), prep.style[torch.from_numpy(prep.test_idx)])
    reference = {"base": prediction_errors(base, prep, prep.test_idx),
                 "learnet": prediction_errors(learnet, prep, prep.test_idx, z_ref)}
    wall["finetune"] = sum(r["finetune_s"] for r in repeats)
    wall["evaluation"] = time.perf_counter() - t0 - wall["finetune"]
    wall["total"] = time.perf_counter() - t_all  # this invocation; a reloaded stage shows its original time above
    print(f"[finetune+eval] {wall['finetune']:.1f} + {wall['evaluation']:.1f} s", flush=True)
    loaded = [n for n, i in (("base", info_b), ("learnet", info_l)) if i["loaded"]]
    res = {"config": asdict(cfg), "summary": summarise(repeats, reference), "repeats": repeats, "reference": reference,
           "sizes": sizes(prep, base, learnet), "wall_s": wall,
           "epochs_run": {"base": len(info_b["history"]), "learnet": len(info_l["history"])},
           "histories": {"base": info_b["history"], "learnet": info_l["history"]},
           "stages_loaded": {"base": info_b["loaded"], "learnet": info_l["loaded"]},
           "budget": f"Budget: about 25 min wall on a shared 2-core CPU (nice 15, {cfg.threads} torch thread(s))."
                     + "".join(f" Stage {n} was reloaded from its checkpoint (its time is the original training)."
                               for n in loaded),
           "training_data": meta["training_data"], "licence": meta["licence"], "figures": ["learnet_style.png"]}
    _write(out / "results.json", json.dumps(res, indent=1))
    text = markdown(res)
    _write(out / "results.md", text + "\n")
    bar_chart(res, out / "learnet_style.png")
    print(text, flush=True)
    return res
