"""The learnet style experiment's models and training (see `learnet_style`): the base PFNN and learnet
configs, style codes read from exemplar windows (`ExemplarSampler`), the loss, a resumable training stage
(`train_stage`) and the fine-tuning baseline (`finetune`). `style_oneshot` reuses them.

Legend: N rows, B batch, W exemplar windows, L window rows, D features, Z style code.
"""
from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.families.pfnn.model import PFNN, PFNNConfig
from motioncore.families.style.model import LearnetPFNN
from motioncore.families.style.model_layers import StyleEncoderConfig
from motioncore.families.style.train_data import LearnetStyleConfig, Prepared, clip_rows
from motioncore.models.checkpoint import load_state_into, load_tensors, read_meta, save_model
from motioncore.train.loop import TrainConfig, fit


def load_learnet(path: str | os.PathLike) -> tuple[LearnetPFNN, dict]:
    """(model in eval mode, metadata) of a ``learnet-pfnn`` checkpoint written by `learnet_style.main`."""
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
    return {"x": prep.x[i], "y": prep.y[i], "phase": prep.phase[i], "style": prep.style[i], "clip": prep.clip[i], "row": i}


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
