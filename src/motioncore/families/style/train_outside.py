"""The style outside the rollout (issue 56): train a learnet output term that turns the BASE controller's pose
into the styled pose, never fed back.

At request time (`families.style.generate.OutsideController`) the frozen base (`pfnn-style-base`) walks the
path on its own poses exactly as the base does; on each frame the learnet, whose shared weights ARE the base's
(frozen) and whose adapters ``M1 diag(f(z)) M2`` carry the style, reads the same base state and code z and its
pose columns (joint positions, velocities, rotations) are written. So the style term is
``learnet(x_base, z) - base(x_base)``, a function of the base's state (smooth along the rollout) and of a code
fixed per request: nothing styled goes back into the loop.

Training rows (teacher-forced, so the term learns exactly the states it will see):
- **base-state rows** (`base_states`): each training clip's trajectory, gait and phase, but the previous pose
  the base's own prediction of the previous row (the base rolled along the clip from the clip's first pose);
  target: the styled clip's pose at that row. This is "the base's state on the styled row -> the styled pose".
- **the styled rows themselves** (fraction ``1 - base_state_frac``): the clip's own state -> its pose, so the
  term on a styled state stays a next-frame predictor (the request's code fit and `eval style`'s next-frame
  error read it there).
The code z is read from a window of another clip of the row's style (`train.ExemplarSampler`), as the learnet
always was; only the encoder and the adapters train. Validation: the held-out styles (never trained on),
base-state rows of their clips other than one exemplar per style, that exemplar's encoder code.

Legend: N rows, C clips, D_in / D_out PFNN inputs / outputs, Z style code.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.data import get_spec, load
from motioncore.errors import MotioncoreError
from motioncore.families.style.generate_outside import POSE_BLOCKS, base_states, pose_columns
from motioncore.families.style.model import LearnetPFNN
from motioncore.families.style.train import (
    ExemplarSampler,
    _write,
    central_span,
    encode_spans,
    load_learnet,
    model_configs,
)
from motioncore.families.style.train_heldout import StyleConfig, StylePrepared, add_fit_metadata, given_base, prepare
from motioncore.models.checkpoint import save_model
from motioncore.models.registry import resolve
from motioncore.train.loop import TrainConfig, fit


@dataclass(frozen=True)
class OutsideConfig:
    out: str = "out/style-outside"  # output folder (resumable: out/stages/outside, snapshots out/epochs/)
    base_from: str = "pfnn-style-base"  # the frozen base (a pfnn checkpoint of the same data and held-out styles)
    init_learnet: str = "learnet-biped"  # encoder and adapters start from this learnet ("": adapters at zero)
    epochs: int = 12  # one cosine cycle
    batch_size: int = 256
    lr: float = 5e-4  # peak AdamW learning rate
    base_state_frac: float = 0.75  # fraction of a batch's rows read in the base's state (the rest: the styled state)
    z_noise: float = 0.1  # sd of the noise on z while training
    z_l2: float = 1e-3  # L2 cost on z
    val_rows: int = 3000  # held-out rows per held-out style in the validation loss (evenly spaced)
    seed: int = 0
    threads: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.base_state_frac <= 1:
            raise ValueError(f"OutsideConfig.base_state_frac: expected a number in [0, 1], got {self.base_state_frac!r}")
        for name in ("epochs", "batch_size", "val_rows", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"OutsideConfig.{name}: expected an int >= 1, got {getattr(self, name)!r}")


def heldout_validation(prep: StylePrepared, xb: Tensor, n_rows: int) -> tuple[dict[str, Tensor], dict[int, int]]:
    """(validation batch: base-state rows of each held-out style's clips but its exemplar, at most ``n_rows`` per
    style; style id -> exemplar clip (`evaluate.pick_exemplars`' first))."""
    from motioncore.families.style.evaluate import pick_exemplars

    min_rows = int(round(2.0 * prep.layout.fps))
    rows, ex = [], {}
    for h in prep.holdouts:
        e = pick_exemplars(prep, h, 1, min_rows)[0]
        ex[prep.styles.index(h)] = e
        r = np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c]) for c in prep.heldout_by_style[h] if c != e])
        rows.append(r[np.linspace(0, len(r) - 1, min(n_rows, len(r))).round().astype(np.int64)])
    i = torch.as_tensor(np.concatenate(rows))
    return {"x": prep.x[i], "xb": xb[i], "y": prep.y[i], "phase": prep.phase[i], "style": prep.style[i],
            "clip": prep.clip[i], "row": i}, ex


def make_loss(cfg: OutsideConfig, prep: StylePrepared, sampler: ExemplarSampler, heldout_ex: dict[int, int]):
    """Pose-column MSE (z-scored) of the learnet on a mix of base-state and styled rows (training) or on the
    held-out base-state rows with each held-out style's exemplar code (evaluation), plus the L2 cost on z."""
    cols = torch.as_tensor(pose_columns(prep.layout, "y"))
    max_rows = int(round(4.0 * prep.layout.fps))

    def loss_fn(m: nn.Module, b: dict[str, Tensor]) -> Tensor:
        assert isinstance(m, LearnetPFNN)
        extra: Tensor | float = 0.0
        if m.training:
            z = sampler.train_codes(m, b["style"], b["clip"])
            extra = cfg.z_l2 * z.pow(2).mean()
            z = z + cfg.z_noise * torch.randn_like(z)
            use = (torch.rand(len(z)) < cfg.base_state_frac)[:, None]
            x = torch.where(use, b["xb"], b["x"])
        else:
            ids = sorted(heldout_ex)
            codes = encode_spans(m, prep.x, [central_span(prep, heldout_ex[s], max_rows) for s in ids])
            table = torch.zeros(len(prep.styles), dtype=torch.long)
            table[ids] = torch.arange(len(ids))
            z, x = codes[table[b["style"]]], b["xb"]
        pred = m(x, b["phase"], z)
        return nn.functional.mse_loss(pred[:, cols], b["y"][:, cols]) + extra

    return loss_fn


def build(cfg: OutsideConfig, prep: StylePrepared, scfg: StyleConfig) -> tuple[LearnetPFNN, nn.Module]:
    """(the learnet with the base's weights as its frozen shared weights and the encoder and adapters of
    ``init_learnet``, the base)."""
    base, _ = given_base(replace(scfg, base_from=cfg.base_from), prep)
    _, lcfg, ecfg = model_configs(scfg, prep)  # type: ignore[arg-type]
    torch.manual_seed(cfg.seed)
    learnet = LearnetPFNN(lcfg, ecfg)
    if cfg.init_learnet:
        start, _ = load_learnet(resolve(cfg.init_learnet))
        learnet.load_state_dict({k: v.float() for k, v in start.state_dict().items()})
    missing, unexpected = learnet.pfnn.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all("adapter" in k for k in missing), (missing, unexpected)
    for p in learnet.pfnn.net.layers.parameters():
        p.requires_grad_(False)  # the shared weights are the base: the rollout is the base's
    return learnet, base


def train(cfg: OutsideConfig) -> dict:
    """Train (resumable, one epoch per `fit` call so every epoch leaves a snapshot in out/epochs/) and write
    out/learnet (the last epoch) with its request-time metadata; returns the history."""
    torch.set_num_threads(cfg.threads)
    out, t0 = Path(cfg.out), time.perf_counter()
    (out / "epochs").mkdir(parents=True, exist_ok=True)
    scfg = StyleConfig(out=str(out), seed=cfg.seed, threads=cfg.threads, progress=cfg.progress)
    prep = prepare(scfg, load(scfg.data, None, progress=cfg.progress))
    learnet, base = build(cfg, prep, scfg)
    xb = base_states(base, prep.layout, prep.x_norm, prep.y_norm, prep.x, prep.phase, prep.starts, prep.counts)
    print(f"[rows] {len(prep.x)} rows, {len(prep.train_idx)} training rows; base states in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    val, ex = heldout_validation(prep, xb, cfg.val_rows)
    i = torch.as_tensor(prep.train_idx)
    data = {"x": prep.x[i], "xb": xb[i], "y": prep.y[i], "phase": prep.phase[i], "style": prep.style[i],
            "clip": prep.clip[i], "row": i}
    loss_fn = make_loss(cfg, prep, ExemplarSampler(prep, scfg), ex)  # type: ignore[arg-type]
    _, lcfg, ecfg = model_configs(scfg, prep)  # type: ignore[arg-type]
    spec = get_spec(scfg.data)
    names = ", ".join(prep.styles[s] for s in sorted(prep.bank))
    meta = {"task": "controller", "training_data": f"{scfg.data}: Bandai Namco datasets 1 and 2, locomotion, "
                                                   f"{len(prep.bank)} styles ({names}); held out: {', '.join(prep.holdouts)}",
            "held_out_styles": list(prep.holdouts), "training_styles": [prep.styles[s] for s in sorted(prep.bank)],
            "licence": spec.licence, "citation": spec.citation, "layout": prep.layout.to_dict(),
            "x_norm": prep.x_norm.to_dict(), "y_norm": prep.y_norm.to_dict(), "fps": prep.layout.fps,
            "skeleton": prep.clips[0].motion.skeleton.to_dict(), "experiment": experiment(cfg, scfg),
            "style_outside": {"base": cfg.base_from, "columns": list(POSE_BLOCKS),
                              "what": "the base walks on its own poses; these pose columns of the learnet, on the "
                                      "base's state and the code, are written and never fed back (issue 56)"},
            "validation": "held-out styles: base-state rows of their clips but one exemplar each, its encoder code"}
    config = {"pfnn": asdict(lcfg), "encoder": asdict(ecfg)}
    stage = out / "stages" / "outside"
    history: list[dict] = []
    for e in range(1, cfg.epochs + 1):
        snap = out / "epochs" / f"epoch{e:02d}"
        if Path(f"{snap}.json").is_file() and (stage / "train.state.json").is_file():
            continue  # this epoch is done (resume)
        tcfg = TrainConfig(epochs=e, batch_size=cfg.batch_size, lr=cfg.lr, restart_epochs=cfg.epochs, seed=cfg.seed,
                           device="cpu", threads=cfg.threads)
        history = fit(learnet, loss_fn, data, val, tcfg, stage, resume=True, progress=cfg.progress)
        save_model(snap, learnet, "learnet-pfnn", config, {**meta, "history": history, "train_wall_s": history[-1]["wall_s"]})
        print(f"[epoch {e}] train {history[-1]['train_loss']:.4f}  held-out val {history[-1]['val_loss']:.4f}  "
              f"({history[-1]['wall_s']:.0f} s)", flush=True)
    final = out / "learnet"
    hist = json.loads((stage / "train.state.json").read_text())["history"] if not history else history
    save_model(final, learnet, "learnet-pfnn", config, {**meta, "history": hist, "train_wall_s": hist[-1]["wall_s"]})
    add_fit_metadata(final, learnet, prep, scfg.window_max_s)
    return {"history": hist}


def experiment(cfg: OutsideConfig, scfg: StyleConfig) -> dict:
    """The checkpoint's ``experiment``: the rows' settings (`StyleConfig`: data, held-out styles, balance, exemplar
    windows; what `eval style` rebuilds the rows from) overridden by this training's (`OutsideConfig`)."""
    return {**asdict(scfg), **asdict(cfg), "trained_by": "families.style.train_outside"}


def finish_snapshot(path: str | Path, cfg: OutsideConfig | None = None) -> dict:
    """Write the request-time metadata (`train_heldout.fit_metadata`) into an epoch snapshot, so that it can be
    loaded as a style model."""
    cfg = cfg or OutsideConfig()
    scfg = StyleConfig(seed=cfg.seed, threads=cfg.threads, progress=False)
    prep = prepare(scfg, load(scfg.data, None, progress=False))
    model, _ = load_learnet(path)
    js = Path(f"{Path(path).with_suffix('')}.json")
    meta = json.loads(js.read_text())
    if "style_outside" not in meta:
        raise MotioncoreError(f"{path}: not an outside-the-rollout style model")
    if "holdouts" not in meta["experiment"]:  # snapshots written before `experiment` held the rows' settings
        known = {k: v for k, v in meta["experiment"].items() if k in OutsideConfig.__dataclass_fields__}
        meta["experiment"] = experiment(OutsideConfig(**known), scfg)
        _write(js, json.dumps(meta, indent=1) + "\n")
    return add_fit_metadata(path, model.float(), prep, scfg.window_max_s)
