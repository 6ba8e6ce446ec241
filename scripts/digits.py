"""The thesis's MNIST demonstration, on scikit-learn's bundled 8x8 digits (1,797 real images, no
download): train one any-order transformer with random orders, report held-out NLL in bits per pixel
under several orders, in-paint from a random 25% of the pixels and from the top half, and save PNGs.

An element is one pixel: row = frame, column = channel, value = intensity class 0..16.
Writes to ``cfg.out``: results.json, inpaint_random25.png, inpaint_top_half.png, samples.png, loss.png
(from ``train.loop.fit``: loss against epoch and wall time), model.{json,safetensors}.

Legend: B images, S samples, T = 8 rows, C = 8 columns.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from motioncore.families.anyorder.loss import conditioned_order, make_loss_fn
from motioncore.families.anyorder.model import AnyOrderConfig, AnyOrderTransformer
from motioncore.families.anyorder.model_sampling import ORDERS, log_likelihood, sample, static_order
from motioncore.models.checkpoint import save_model
from motioncore.train.loop import TrainConfig, fit

LEVELS = 17  # pixel intensities 0..16
SIDE = 8
LICENCE = "CC BY 4.0 (UCI Optical Recognition of Handwritten Digits, as bundled by scikit-learn)"


@dataclass(frozen=True)
class DigitsConfig:
    out: str = "out/digits"  # output folder
    seed: int = 0  # split, initialisation, orders and samples
    n_test: int = 300  # held-out images (the rest, 1,497, train)
    d_model: int = 96  # model width
    n_layers: int = 3  # transformer blocks
    n_heads: int = 4  # attention heads
    d_ff: int = 256  # feed-forward width
    dropout: float = 0.0  # dropout (random orders already regularise; 0.1 was no better at 2,000 steps)
    epochs: int = 40  # passes over the training set (one cosine learning-rate cycle)
    batch_size: int = 32  # images per step
    lr: float = 2e-3  # peak AdamW learning rate
    max_minutes: float = 5.0  # stop training after this wall time (0: no limit)
    threads: int = 1  # torch CPU threads (1: on a busy 2-core machine 2 threads ran 10x slower)
    random_orders: int = 4  # random orders averaged per held-out image for the random-order NLL
    n_images: int = 8  # held-out images shown in-painted
    n_samples: int = 5  # samples per in-painted image
    order: str = "random"  # sampling order for the in-painting figures
    temperature: float = 1.0  # sampling temperature
    progress: bool = True  # progress bars while training

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order: must be one of {ORDERS}, got {self.order!r}")
        for name in ("n_test", "epochs", "random_orders", "n_images", "n_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if not 0 < self.n_test < 1797:
            raise ValueError(f"n_test: must be in [1, 1796], got {self.n_test}")


def load_split(seed: int = 0, n_test: int = 300) -> tuple[Tensor, Tensor]:
    """Train and held-out images (B, 8, 8) long in 0..16, split by a seeded permutation."""
    from sklearn.datasets import load_digits

    x = torch.as_tensor(load_digits().images, dtype=torch.long)  # (1797, 8, 8)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    return x[perm[n_test:]], x[perm[:n_test]]


def model_config(cfg: DigitsConfig) -> AnyOrderConfig:
    return AnyOrderConfig(num_channels=SIDE, head="categorical", num_classes=LEVELS, d_model=cfg.d_model,
                          n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_ff=cfg.d_ff, dropout=cfg.dropout,
                          max_frames=SIDE)


def marginal_bpp(train: Tensor, test: Tensor) -> float:
    """Bits per pixel of an independent per-pixel histogram (add-one smoothing): a floor to beat."""
    counts = torch.ones(SIDE, SIDE, LEVELS).scatter_add_(-1, train.permute(1, 2, 0), torch.ones(train.permute(1, 2, 0).shape))
    logp = (counts / counts.sum(-1, keepdim=True)).log()  # (8, 8, 17)
    return float(-logp.gather(-1, test.permute(1, 2, 0)).sum() / test.numel() / math.log(2))


def order_bpp(model: AnyOrderTransformer, test: Tensor, order: str, repeats: int = 1, seed: int = 0) -> float:
    """Held-out bits per pixel, every pixel scored, in ``order`` (``random``: a fresh order per image
    and repeat, averaged over ``repeats``)."""
    model.eval()
    full = torch.ones(SIDE, SIDE, dtype=torch.bool)
    with torch.no_grad():
        if order == "entropy":
            nats = -log_likelihood(model, test, "entropy").sum(1).mean()
        else:
            gen = torch.Generator().manual_seed(seed)
            tot = 0.0
            for _ in range(repeats if order == "random" else 1):
                orders = torch.stack([static_order(order, full, gen) for _ in range(len(test))])  # (B, 64)
                tot += float(-log_likelihood(model, test, orders).sum(1).mean())
            nats = tot / (repeats if order == "random" else 1)
    return float(nats) / (SIDE * SIDE * math.log(2))


def visible_masks(kind: str, n: int, seed: int) -> Tensor:
    """(n, 8, 8) bool visible pixels: ``random25`` (16 random pixels each) or ``top_half`` (rows 0-3)."""
    if kind == "top_half":
        m = torch.zeros(n, SIDE, SIDE, dtype=torch.bool)
        m[:, : SIDE // 2] = True
        return m
    gen = torch.Generator().manual_seed(seed)
    rank = torch.rand(n, SIDE * SIDE, generator=gen).argsort(1).argsort(1)  # a random rank per pixel
    return (rank < SIDE * SIDE // 4).view(n, SIDE, SIDE)


def conditional_bits(model: AnyOrderTransformer, test: Tensor, visible: Tensor, seed: int) -> float:
    """Bits per hidden pixel given the visible ones (conditions first, then a random order)."""
    order, n_cond = conditioned_order(visible.flatten(1), torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logp = log_likelihood(model, test, order)  # (B, 64)
    hidden = torch.arange(SIDE * SIDE)[None] >= n_cond[:, None]
    return float(-logp[hidden].sum() / hidden.sum() / math.log(2))


def inpaint(model: AnyOrderTransformer, images: Tensor, visible: Tensor, cfg: DigitsConfig) -> Tensor:
    """(B, S, 8, 8) samples of every image given its visible pixels; image i is seeded seed + 1000 i."""
    return torch.stack([sample(model, img, vis, order=cfg.order, temperature=cfg.temperature,
                               n_samples=cfg.n_samples, seed=cfg.seed + 1000 * i)
                        for i, (img, vis) in enumerate(zip(images, visible, strict=True))])


# ----------------------------------------------------------------------------- figures and files
def _rgb(images: Tensor, visible: Tensor | None = None) -> np.ndarray:
    """(B, 8, 8) intensities -> (B, 8, 8, 3) RGB, ink dark on white; hidden pixels light blue."""
    grey = 1.0 - images.double().numpy() / (LEVELS - 1)
    rgb = np.repeat(grey[..., None], 3, -1)
    if visible is not None:
        rgb[~visible.numpy()] = (0.70, 0.82, 1.0)
    return rgb


def save_grid(path: Path, rows: list[tuple[str, np.ndarray]], title: str) -> None:
    """A PNG grid: one labelled row per ``(label, (B, 8, 8, 3) RGB)``; written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = rows[0][1].shape[0]
    fig = Figure(figsize=(max(1.0 * n, 3.0) + 1.2, 1.0 * len(rows) + 0.7))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), n, squeeze=False)
    for r, (label, imgs) in enumerate(rows):
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(imgs[c], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, path)


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def _inpainting(model: AnyOrderTransformer, test: Tensor, cfg: DigitsConfig, out: Path) -> tuple[dict, dict]:
    """Bits per hidden pixel on every held-out image, and sample grids for the first ``n_images``."""
    bits, secs = {}, {}
    for kind in ("random25", "top_half"):
        visible = visible_masks(kind, len(test), cfg.seed + 7)
        bits[kind] = conditional_bits(model, test, visible, cfg.seed + 11)
        imgs, vis = test[: cfg.n_images], visible[: cfg.n_images]
        t0 = time.perf_counter()
        samples = inpaint(model, imgs, vis, cfg)  # (B, S, 8, 8)
        secs[kind] = (time.perf_counter() - t0) / cfg.n_images
        rows = [("truth", _rgb(imgs)), ("visible", _rgb(imgs, vis))]
        rows += [(f"sample {s + 1}", _rgb(samples[:, s])) for s in range(cfg.n_samples)]
        save_grid(out / f"inpaint_{kind}.png", rows, f"in-painting from {kind}\n{cfg.order} order, "
                  f"T={cfg.temperature}; {bits[kind]:.3f} bits/hidden pixel")
    return bits, secs


def _unconditional(model: AnyOrderTransformer, cfg: DigitsConfig, out: Path) -> None:
    none = torch.zeros(SIDE, SIDE, dtype=torch.bool)
    blank = torch.zeros(SIDE, SIDE, dtype=torch.long)
    rows = [(order, _rgb(sample(model, blank, none, order=order, temperature=cfg.temperature,
                                n_samples=max(cfg.n_images, 8), seed=cfg.seed)))
            for order in ("random", "sequential", "bisection", "entropy")]
    save_grid(out / "samples.png", rows, f"unconditional samples by order\n(T={cfg.temperature})")


def markdown(results: dict) -> str:
    bpp = results["bits_per_pixel"]
    lines = ["| held-out NLL | bits per pixel |", "|---|---|"]
    names = {"random": f"random order (mean of {results['config']['random_orders']} per image)",
             "sequential": "raster (sequential) order", "bisection": "bisection (coarse-to-fine rows)",
             "entropy": "lowest-entropy-first (dynamic)", "marginal": "baseline: per-pixel histogram",
             "uniform": "baseline: uniform over 17 levels"}
    lines += [f"| {names[k]} | {v:.3f} |" for k, v in bpp.items()]
    lines += ["", "| in-painting, visible pixels | bits per hidden pixel |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in results["inpainting_bits_per_hidden_pixel"].items()]
    return "\n".join(lines)


def main(cfg: DigitsConfig) -> dict:
    """Train, evaluate, draw; returns (and writes) the results dictionary."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    train, test = load_split(cfg.seed, cfg.n_test)
    mcfg = model_config(cfg)
    model = AnyOrderTransformer(mcfg)
    tcfg = TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, restart_epochs=cfg.epochs,
                       seed=cfg.seed, threads=cfg.threads, max_minutes=cfg.max_minutes)
    t0 = time.perf_counter()
    history = fit(model, make_loss_fn("subset", seed=cfg.seed), {"values": train}, {"values": test}, tcfg, out,
                  resume=False, progress=cfg.progress)
    train_s = time.perf_counter() - t0
    model.cpu().eval()
    t0 = time.perf_counter()
    bpp = {o: order_bpp(model, test, o, cfg.random_orders, cfg.seed + 3) for o in ORDERS}
    bpp["marginal"], bpp["uniform"] = marginal_bpp(train, test), math.log2(LEVELS)
    eval_s = time.perf_counter() - t0
    bits, secs = _inpainting(model, test, cfg, out)
    _unconditional(model, cfg, out)
    save_model(out / "model", model, "anyorder", asdict(mcfg),
               {"training_data": "sklearn digits, seeded split", "licence": LICENCE, "digits_config": asdict(cfg)})
    results = {
        "config": asdict(cfg), "model": asdict(mcfg), "parameters": sum(p.numel() for p in model.parameters()),
        "train_images": len(train), "test_images": len(test), "train_seconds": train_s, "epochs_run": len(history),
        "eval_seconds": eval_s, "bits_per_pixel": bpp, "inpainting_bits_per_hidden_pixel": bits,
        "inpainting_seconds_per_image": secs,
        "history": [{**h, "val_bits_per_predicted_pixel": h["val_loss"] / math.log(2)} for h in history],
        "figures": ["inpaint_random25.png", "inpaint_top_half.png", "samples.png", "loss.png"],
    }
    _write_json(out / "results.json", results)
    print(markdown(results))
    return results
