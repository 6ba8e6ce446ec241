"""The learnet style experiment's settings (`LearnetStyleConfig`) and data (`prepare`: every row of every
clip z-scored with the training rows' normalisers, the training, validation and test rows, the exemplar
banks and the held-out clips). The experiment itself, and what each setting means: `learnet_style`.

Legend: N rows, D features.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from motioncore.data import Clip
from motioncore.errors import DataError, MotioncoreError
from motioncore.families.pfnn.features import GAITS, pfnn_dataset, pfnn_layout
from motioncore.features.layout import Layout
from motioncore.features.normaliser import Normaliser, layout_normalisers


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
