"""One-shot style on styles the model never saw: a learnet PFNN trained episodically on every Bandai
locomotion style (dataset 1's 15 and dataset 2's 7; the names both share, active, feminine and normal,
are one style each), with ``holdouts`` (at least 3, chosen before training) left out entirely.

What differs from `learnet_style` (one held-out style, dataset 2's six training styles):
- **many styles**: 16 training styles instead of 6, so the style space has points around the held-out ones;
- **balance**: dataset 1 has 400-900 training rows per style, dataset 2 8,000-10,000; each style's
  training rows are repeated until it has ``balance`` x the largest style's rows, so the small styles are
  not drowned (the base is trained on the same repeated rows: the comparison stays fair);
- **a regularised style code**: ``z_dim`` 16, an L2 cost ``z_l2`` on z, and Gaussian noise ``z_noise``
  on z while training, so nearby codes give nearby weights and an unseen style lands between seen ones;
- **episodic training** as before (`learnet_train.ExemplarSampler`): a training row's code is read from
  a random 2-4 s window of a *different* training clip of the row's style.

Both networks (base PFNN, learnet PFNN) are trained by `train.loop.fit` (resumable per stage in
``out/stages/<name>``). ``out/base`` and ``out/learnet`` are the checkpoints; ``out/split.json`` names
the held-out styles and every clip's role. Judging (classifier, walks, next-frame error) is in
`motioncore.families.style.evaluate_judge`.

Legend: N rows, S styles.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.core.kinematics import rotation_step_limits
from motioncore.data import Clip, get_spec, load
from motioncore.errors import DataError, MotioncoreError
from motioncore.families.pfnn.features import GAITS, ROTATION_ENCODINGS, locomotion_clips, pfnn_dataset, pfnn_layout
from motioncore.families.pfnn.model import PFNN
from motioncore.families.style.adapt import CodePrior, foot_floor
from motioncore.families.style.model import LearnetPFNN
from motioncore.families.style.train import (
    ExemplarSampler,
    _pfnn_of,
    _write,
    central_span,
    encode_spans,
    model_configs,
    train_stage,
)
from motioncore.families.style.train_data import Prepared
from motioncore.families.style.train_smooth import Smoothness, batch_seed
from motioncore.features.normaliser import layout_normalisers
from motioncore.models.registry import resolve

HELD_OUT = ("elderly", "not-confident", "proud")  # chosen from the walk statistics before any training (docs/models.md)


@dataclass(frozen=True)
class StyleConfig:
    out: str = "out/style"  # output folder
    data: str = "bandai"  # registered set (both Bandai datasets) with style and content labels
    holdouts: tuple[str, ...] = field(default=HELD_OUT)  # styles left out of training entirely
    exemplar_content: str = "walk"  # content of each style's fixed exemplar (validation code)
    hidden_dim: int = 256  # PFNN hidden units (base and learnet)
    dropout: float = 0.3  # PFNN dropout on each layer's input
    style_rank: int = 16  # R: rank of each layer's adapter
    z_dim: int = 16  # Z: style code size
    encoder_channels: int = 64  # style encoder conv channels (3 layers, kernel 5)
    z_noise: float = 0.1  # sd of the Gaussian noise added to z while training
    z_l2: float = 1e-3  # L2 cost on z (mean of z^2)
    window_min_s: float = 2.0  # training exemplar window, shortest (seconds)
    window_max_s: float = 4.0  # longest; also the evaluation exemplar's length
    balance: float = 0.25  # repeat a style's training rows up to this fraction of the largest style's rows
    epochs: int = 40  # epochs of each network (one cosine cycle)
    base_epochs: int = 0  # epochs of the base alone (0: ``epochs``)
    init_base: bool = False  # start the learnet's PFNN from the trained base's weights (adapters at zero)
    code_dropout: float = 0.0  # fraction of training rows run without the adapters (the shared net stays a base)
    batch_size: int = 256
    lr: float = 1e-3  # peak AdamW learning rate
    l1: float = 0.01  # L1 cost on the PFNN weight sets (times mean |W|)
    seed: int = 0
    threads: int = 1  # torch CPU threads
    resume: bool = True  # reuse finished stages, resume interrupted ones
    progress: bool = True
    rotations: str = "axes"  # Y's joint rotation encoding (families.pfnn.features; "logmap": checkpoints from before issue 27)
    # continuity (families.style.train_smooth; all 0: off, as the checkpoints from before issue 40)
    turn_weight: float = 0.0  # cost of a joint's local turn between frames i-1 and i over turn_margin x the data's p99.9
    turn_margin: float = 0.9  # the turn cost starts at this fraction of each joint's p99.9 turn in the training data
    vel_weight: float = 0.0  # MSE of the rotation outputs' change i-1 -> i against the data's change
    turn_mix: float = 0.0  # > 0: the continuity costs also on mixed codes, blend weight in [-turn_mix, 1 + turn_mix]
    turn_mix_noise: float = 0.5  # noise on the mixed codes, times the batch codes' sd
    turn_rows: int = 64  # rows of each batch the continuity costs are computed on (the first ones: batches are shuffled)
    adapter_layers: str = ""  # comma-separated PFNN layers that keep a style adapter ("": every layer); the others are
    # zeroed and frozen (f's last layer at zero: the adapter adds exactly nothing)
    roll_weight: float = 0.0  # the turn cost on consecutive frames of the starting network's own walks (train_rollouts)
    roll_clips: int = 24  # training clips whose codes walk (plus roll_mix blends of them)
    roll_mix: int = 8
    roll_paths: int = 4  # random paths per code
    roll_frames: int = 240  # frames per walk
    input_noise: float = 0.0  # sd (z-scored units) of noise on the previous-pose inputs of training rows: the rollout
    # feeds the network its own poses, so it learns to walk back to the data from near it (0: off)
    init_learnet: str = ""  # start the learnet from this learnet-pfnn checkpoint (same architecture)
    base_from: str = ""  # take the base from this pfnn checkpoint instead of training it (same data and holdouts)

    def __post_init__(self) -> None:
        if isinstance(self.holdouts, str):
            object.__setattr__(self, "holdouts", tuple(s for s in self.holdouts.split(",") if s))
        if self.rotations not in ROTATION_ENCODINGS:
            raise ValueError(f"StyleConfig.rotations: expected one of {ROTATION_ENCODINGS}, got {self.rotations!r}")
        for name in ("hidden_dim", "style_rank", "z_dim", "encoder_channels", "epochs", "batch_size", "threads", "turn_rows"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"StyleConfig.{name}: expected an int >= 1, got {getattr(self, name)!r}")
        if not 0 < self.window_min_s <= self.window_max_s:
            raise ValueError(f"window_min_s/window_max_s: need 0 < min <= max, got {self.window_min_s}, {self.window_max_s}")
        if not self.holdouts:
            raise ValueError("holdouts: name at least one style to hold out")
        if self.z_noise < 0 or self.z_l2 < 0 or self.balance < 0 or not 0 <= self.code_dropout < 1:
            raise ValueError("z_noise, z_l2 and balance must be >= 0, code_dropout in [0, 1)")
        for name in ("turn_weight", "vel_weight", "turn_mix", "turn_mix_noise", "input_noise", "roll_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"StyleConfig.{name}: expected a number >= 0, got {getattr(self, name)!r}")
        if self.adapter_layers and not all(p.strip().isdigit() for p in self.adapter_layers.split(",")):
            raise ValueError(f"StyleConfig.adapter_layers: expected layer numbers like '0,1', got {self.adapter_layers!r}")
        if not self.turn_margin > 0:
            raise ValueError(f"StyleConfig.turn_margin: expected a number > 0, got {self.turn_margin!r}")


@dataclass(eq=False)
class StylePrepared(Prepared):
    """`learnet_setup.Prepared` plus the held-out styles' clips."""

    holdouts: tuple[str, ...] = ()
    heldout_by_style: dict[str, list[int]] = field(default_factory=dict)  # style name -> clips with rows
    repeats: dict[str, float] = field(default_factory=dict)  # style name -> training row repeat factor


def prepare(cfg: StyleConfig, clips: list[Clip]) -> StylePrepared:
    """Rows, normalisers (fitted on the training rows), balanced training index, exemplar banks.
    Raises if a held-out style reaches the training or validation rows."""
    clips = locomotion_clips(clips)
    if not clips:
        raise DataError("no locomotion clips")
    rows = pfnn_dataset(clips, rotations=cfg.rotations)
    layout = pfnn_layout(clips[0].motion.skeleton, GAITS, clips[0].motion.fps, cfg.rotations)
    styles = tuple(sorted({str(c.labels.get("style", "")) for c in clips}))
    for name in cfg.holdouts:
        if name not in styles:
            raise DataError(f"held-out style {name!r} not in {cfg.data}; styles: {', '.join(styles)}")
    clip_id, style_row = rows["clip"].astype(np.int64), rows["style"]
    C = len(clips)
    counts = np.bincount(clip_id, minlength=C)
    starts = np.searchsorted(clip_id, np.arange(C))
    split = np.array([c.split for c in clips])[clip_id]
    held = np.isin(style_row, list(cfg.holdouts))
    train = (split == "train") & ~held
    val = train & (clip_id % 10 == 9)
    plain_idx, val_idx = np.flatnonzero(train & ~val), np.flatnonzero(val)
    if set(cfg.holdouts) & set(style_row[plain_idx].tolist()) or set(cfg.holdouts) & set(style_row[val_idx].tolist()):
        raise MotioncoreError(f"held-out styles {cfg.holdouts} reached the training rows")
    xn, yn = layout_normalisers(layout, rows["X"][plain_idx].astype(np.float64), rows["Y"][plain_idx].astype(np.float64))
    # balance: repeat each style's rows (whole copies, then a seeded random part) up to balance * largest
    per = {s: plain_idx[style_row[plain_idx] == s] for s in sorted(set(style_row[plain_idx].tolist()))}
    target = cfg.balance * float(max(len(v) for v in per.values()))
    rng, parts, repeats = np.random.default_rng(cfg.seed), [], {}
    for s, idx in per.items():
        factor = max(1.0, target / len(idx))
        whole, frac = int(factor), factor - int(factor)
        parts += [idx] * whole + [rng.choice(idx, int(round(frac * len(idx))), replace=False)]
        repeats[s] = factor
    train_idx = np.sort(np.concatenate(parts))
    min_rows = int(round(cfg.window_min_s * layout.fps))
    train_clips = sorted(set(clip_id[plain_idx].tolist()))
    bank = {s: [c for c in train_clips if clips[c].labels.get("style") == name and counts[c] >= min_rows]
            for s, name in enumerate(styles) if name not in cfg.holdouts}
    for s, pool in bank.items():
        if len(pool) < 2:
            raise DataError(f"style {styles[s]!r}: need >= 2 training clips with >= {min_rows} rows as exemplars")
    fixed = {s: next((c for c in pool if clips[c].labels.get("content") == cfg.exemplar_content), pool[0])
             for s, pool in bank.items()}
    held_by = {h: [c for c in range(C) if counts[c] > 0 and clips[c].labels.get("style") == h] for h in cfg.holdouts}
    return StylePrepared(
        clips, styles, layout, xn, yn, torch.from_numpy(xn.transform(rows["X"].astype(np.float64)).astype(np.float32)),
        torch.from_numpy(yn.transform(rows["Y"].astype(np.float64)).astype(np.float32)), rows["Y"],
        torch.from_numpy(rows["phase"].astype(np.float32)), torch.from_numpy(np.searchsorted(styles, style_row)),
        torch.from_numpy(clip_id), starts, counts, train_idx, val_idx,
        np.flatnonzero((split == "test") & ~held), bank, fixed, [], [], [c for v in held_by.values() for c in v],
        tuple(cfg.holdouts), held_by, repeats)


def make_loss(cfg: StyleConfig, sampler: ExemplarSampler | None = None, smooth: Smoothness | None = None):
    """z-scored output MSE + L1 on the PFNN weight sets; with a sampler, the learnet's z comes from an
    exemplar (training: another clip of the row's style, plus the L2 cost and noise on z; evaluation:
    the style's fixed exemplar); with ``smooth`` (training only), the continuity costs of `train_smooth`
    on the row's code and on mixed codes, every random draw seeded by the batch's rows (exact resume)."""

    def loss_fn(m: nn.Module, b: dict[str, Tensor]) -> Tensor:
        z, extra = None, 0.0
        if smooth is not None and m.training:
            seed = batch_seed(b["row"], cfg.seed)
            torch.manual_seed(seed)  # dropout, z noise, code dropout
            if sampler is not None:
                sampler.gen.manual_seed(seed + 1)  # exemplar windows
        if smooth is not None and m.training and cfg.input_noise > 0:
            b = {**b, "noise": smooth.pose_noise(len(b["x"]))}
            b["x"] = b["x"] + b["noise"]
        if sampler is not None:
            assert isinstance(m, LearnetPFNN)
            if m.training:
                z = sampler.train_codes(m, b["style"], b["clip"])
                extra = cfg.z_l2 * z.pow(2).mean()
                z = z + cfg.z_noise * torch.randn_like(z)
            else:
                z = sampler.fixed_codes(m, b["style"])
        if z is not None and m.training and cfg.code_dropout > 0:
            drop = torch.rand(len(z)) < cfg.code_dropout  # these rows: the shared network alone
            pred = torch.empty_like(b["y"])
            pred[~drop] = m(b["x"][~drop], b["phase"][~drop], z[~drop])
            pred[drop] = m(b["x"][drop], b["phase"][drop], None)
            loss = nn.functional.mse_loss(pred, b["y"]) + extra
        else:
            loss = nn.functional.mse_loss(m(b["x"], b["phase"], z), b["y"]) + extra
        if cfg.l1 and m.training:
            loss = loss + cfg.l1 * torch.stack([layer.weight.abs().mean() for layer in _pfnn_of(m).net.layer_list()]).mean()
        if smooth is not None and m.training:
            loss = loss + smooth.cost(m, b, z)
        return loss

    return loss_fn


def split_record(cfg: StyleConfig, prep: StylePrepared) -> dict:
    """Who is what: held-out and training styles, every clip's style, content, split and role."""
    role = np.full(len(prep.clips), "unused", dtype=object)
    role[sorted(set(prep.clip[torch.from_numpy(prep.train_idx)].tolist()))] = "train"
    role[sorted(set(prep.clip[torch.from_numpy(prep.val_idx)].tolist()))] = "validation"
    role[sorted(set(prep.clip[torch.from_numpy(prep.test_idx)].tolist()))] = "test"
    role[prep.heldout] = "held-out"
    return {"held_out": list(cfg.holdouts), "training_styles": [prep.styles[s] for s in sorted(prep.bank)],
            "repeat_factor": prep.repeats,
            "clips": [{"name": c.name, "style": c.labels.get("style"), "content": c.labels.get("content"),
                       "split": c.split, "rows": int(prep.counts[i]), "role": str(role[i])}
                      for i, c in enumerate(prep.clips)]}


@torch.no_grad()
def fit_metadata(model: LearnetPFNN, prep: StylePrepared, max_s: float) -> dict:
    """What request-time fitting (`families.style.adapt`) needs in the checkpoint's metadata: ``stance_floor_cm``
    (the median over the training styles' exemplar clips of `foot_floor`) and ``code_prior`` (a Gaussian
    over the encoder's codes of those clips' central ``max_s`` seconds). Held-out styles are never read."""
    clips = sorted({c for pool in prep.bank.values() for c in pool})
    spans = [central_span(prep, c, int(round(max_s * prep.layout.fps))) for c in clips]
    codes = torch.cat([encode_spans(model.eval(), prep.x, spans[i:i + 64]) for i in range(0, len(spans), 64)])
    prior = CodePrior.from_codes(codes.double().numpy())
    floor = float(np.median([foot_floor(prep.clips[c].motion) for c in clips]))
    errs = np.array([clip_error_cm(model, prep, c, codes[i]) for i, c in enumerate(clips)])
    return {"stance_floor_cm": round(floor, 3),
            "exemplar_error_cm": {"p50": round(float(np.median(errs)), 3), "p99": round(float(np.percentile(errs, 99)), 3),
                                  "max": round(float(errs.max()), 3), "clips": len(errs),
                                  "what": "next-frame joint error (cm, body joints) on each training clip's last quarter "
                                          "with its encoder code: what a usable exemplar's held-out error looks like"},
            "code_prior": {**prior.to_dict(), "from": f"the encoder's codes of {len(clips)} training clips of "
                           f"{len(prep.bank)} training styles (central {max_s:g} s); held out: {', '.join(prep.holdouts)}"}}


@torch.no_grad()
def clip_error_cm(model: LearnetPFNN, prep: StylePrepared, c: int, z: Tensor) -> float:
    """Mean body-joint next-frame error (cm) of clip ``c``'s last quarter of rows with code z (Z,)."""
    from motioncore.core.kinematics import find_body_joints
    from motioncore.features.poses import ground_joints

    n, s = int(prep.counts[c]), int(prep.starts[c])
    i = torch.arange(s + n - max(1, n // 4), s + n)
    pred = model.pfnn(prep.x[i], prep.phase[i], z.reshape(1, -1).expand(len(i), -1))
    sk, cols = prep.clips[0].motion.skeleton, prep.layout.output_block("joint_pos").slice
    body = np.setdiff1d(np.arange(sk.num_joints), ground_joints(sk, find_body_joints(sk)))
    raw = prep.y_norm.inverse(pred.double().numpy())[:, cols].reshape(len(i), -1, 3)
    true = prep.y_raw[i.numpy()][:, cols].astype(np.float64).reshape(len(i), -1, 3)
    return float(np.linalg.norm(raw - true, axis=-1)[:, body].mean())


def add_fit_metadata(path: str | Path, model: LearnetPFNN, prep: StylePrepared, max_s: float) -> dict:
    """Write `fit_metadata` into the checkpoint JSON at ``path`` (``NAME`` or ``NAME.json``); returns it."""
    js = Path(path).with_suffix(".json")
    meta = json.loads(js.read_text())
    extra = fit_metadata(model, prep, max_s)
    _write(js, json.dumps({**meta, **extra}, indent=1) + "\n")
    return extra


def drop_adapters(model: LearnetPFNN, keep: set[int]) -> None:
    """Zero and freeze the style adapter of every PFNN layer not in ``keep``: its f's last layer is zero, so
    ``M1 diag(f(z)) M2 x`` is exactly 0 for every z, and no optimiser step moves it."""
    adapters = model.pfnn.net.adapter_list()
    if not keep <= set(range(len(adapters))):
        raise MotioncoreError(f"adapter_layers {sorted(keep)}: the PFNN has layers 0..{len(adapters) - 1}")
    for k, ad in enumerate(adapters):
        if k not in keep:
            last = ad.f[-1]
            with torch.no_grad():
                last.weight.zero_()
                last.bias.zero_()
            for p in ad.parameters():
                p.requires_grad_(False)


def walk_states(cfg: StyleConfig, prep: StylePrepared, model: LearnetPFNN, meta: dict) -> dict[str, Tensor]:
    """`train_rollouts.rollout_states` of ``model`` in ``roll_clips`` training clips' codes and ``roll_mix``
    blends, on ``roll_paths`` random paths (seeded; never the evaluation's paths). Held-out styles are never read."""
    from motioncore.families.style.generate import StyleAdapter
    from motioncore.families.style.train_rollouts import random_paths, rollout_states, training_codes

    t0 = time.perf_counter()
    pool = sorted({c for p in prep.bank.values() for c in p})
    pick = np.random.default_rng(cfg.seed + 5).choice(pool, min(cfg.roll_clips, len(pool)), replace=False)
    ad = StyleAdapter(model.eval(), meta)
    codes = training_codes(ad, [prep.clips[c].motion for c in pick], cfg.roll_mix, cfg.seed + 6)
    states = rollout_states(ad, codes, random_paths(cfg.roll_paths, cfg.seed + 7), cfg.roll_frames)
    print(f"[walks] {states['x'].shape[0]} walks of {cfg.roll_frames} frames in {len(codes)} codes "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return states


def given_base(cfg: StyleConfig, prep: StylePrepared) -> tuple[nn.Module, dict]:
    """The base from ``cfg.base_from`` (a pfnn checkpoint of the same experiment: the same held-out styles and
    normalisers), not trained again."""
    from motioncore.models.registry import load_model

    base, bmeta = load_model(resolve(cfg.base_from))
    if bmeta.get("held_out_styles") != list(cfg.holdouts):
        raise MotioncoreError(f"base_from {cfg.base_from}: held out {bmeta.get('held_out_styles')}, not {list(cfg.holdouts)}")
    if not np.allclose(bmeta["x_norm"]["mean"], prep.x_norm.to_dict()["mean"], rtol=1e-4, atol=1e-4):
        raise MotioncoreError(f"base_from {cfg.base_from}: its normaliser differs from these rows (other data?)")
    print(f"[base] taken from {cfg.base_from} (trained in {bmeta.get('train_wall_s', 0):.0f} s)", flush=True)
    return base.float().eval(), {"wall_s": float(bmeta.get("train_wall_s", 0.0)), "loaded": True, "history": []}


def train(cfg: StyleConfig, clips: list[Clip] | None = None) -> dict:
    """Train base and learnet; write out/base, out/learnet, out/split.json; returns a summary."""
    torch.set_num_threads(cfg.threads)
    out, t0 = Path(cfg.out), time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    prep = prepare(cfg, load(cfg.data, None, progress=cfg.progress) if clips is None else clips)
    _write(out / "split.json", json.dumps(split_record(cfg, prep), indent=1))
    print(f"[features] {len(prep.x)} rows, {len(prep.train_idx)} training rows (balanced), "
          f"{len(prep.bank)} training styles, held out {', '.join(cfg.holdouts)} in {time.perf_counter() - t0:.1f} s",
          flush=True)
    spec = get_spec(cfg.data)
    bcfg, lcfg, ecfg = model_configs(cfg, prep)  # type: ignore[arg-type]  # reads the shared fields
    names = ", ".join(prep.styles[s] for s in sorted(prep.bank))
    key = {**{f: getattr(cfg, f) for f in ("data", "hidden_dim", "dropout", "batch_size", "lr", "l1", "seed", "balance")},
           "epochs": cfg.base_epochs or cfg.epochs, "holdouts": list(cfg.holdouts), "clips": [c.name for c in prep.clips]}
    meta = {"task": "controller", "training_data": f"{cfg.data}: Bandai Namco datasets 1 and 2, locomotion, "
                                                   f"{len(prep.bank)} styles ({names}); held out: {', '.join(cfg.holdouts)}",
            "held_out_styles": list(cfg.holdouts), "training_styles": [prep.styles[s] for s in sorted(prep.bank)],
            "licence": spec.licence, "citation": spec.citation, "layout": prep.layout.to_dict(),
            "x_norm": prep.x_norm.to_dict(), "y_norm": prep.y_norm.to_dict(), "fps": prep.layout.fps,
            "skeleton": prep.clips[0].motion.skeleton.to_dict(), "experiment": asdict(cfg), "stage_key": key}
    torch.manual_seed(cfg.seed)
    bc = replace(cfg, epochs=cfg.base_epochs or cfg.epochs)
    if cfg.base_from:
        base, info_b = given_base(cfg, prep)
    else:
        base, info_b = train_stage("base", PFNN(bcfg), make_loss(cfg), prep, bc, "pfnn", asdict(bcfg), meta)  # type: ignore[arg-type]
    lkey = {**key, "epochs": cfg.epochs, "learnet": [cfg.style_rank, cfg.z_dim, cfg.encoder_channels, cfg.window_min_s,
                                                     cfg.window_max_s, cfg.z_noise, cfg.z_l2, cfg.init_base, cfg.code_dropout]}
    smooth = None
    if cfg.turn_weight or cfg.vel_weight or cfg.input_noise or cfg.roll_weight:
        lkey["continuity"] = [cfg.turn_weight, cfg.turn_margin, cfg.vel_weight, cfg.turn_mix, cfg.turn_mix_noise, cfg.turn_rows,
                              cfg.input_noise,
                              cfg.init_learnet, cfg.base_from]
        limits = rotation_step_limits([prep.clips[c].motion for c in sorted({c for p in prep.bank.values() for c in p})])
        smooth = Smoothness(cfg, prep, limits)
        meta["turn_limits_deg"] = [round(float(v), 3) for v in limits]
    torch.manual_seed(cfg.seed)
    learnet = LearnetPFNN(lcfg, ecfg)
    if cfg.init_learnet:  # every weight from a trained learnet of the same architecture
        from motioncore.families.style.train import load_learnet

        start, smeta = load_learnet(resolve(cfg.init_learnet))
        learnet.load_state_dict({k: v.float() for k, v in start.state_dict().items()})
        meta["init_learnet"] = cfg.init_learnet
    elif cfg.init_base:  # the shared weights start as the trained base; the adapters start at zero
        missing, unexpected = learnet.pfnn.load_state_dict(base.state_dict(), strict=False)
        assert not unexpected and all(".adapters" in k or "adapter" in k for k in missing), (missing, unexpected)
    if cfg.adapter_layers:
        keep = {int(p) for p in cfg.adapter_layers.split(",")}
        lkey["adapter_layers"] = sorted(keep)
        drop_adapters(learnet, keep)
    if cfg.init_learnet and smooth is not None and cfg.roll_weight:  # the walks of the network training starts from
        smooth.states = walk_states(cfg, prep, learnet, smeta)
        lkey["continuity"].append([cfg.roll_weight, cfg.roll_clips, cfg.roll_mix, cfg.roll_paths, cfg.roll_frames])
    trained, info_l = train_stage("learnet", learnet, make_loss(cfg, ExemplarSampler(prep, cfg), smooth),  # type: ignore[arg-type]
                                  prep, cfg, "learnet-pfnn", {"pfnn": asdict(lcfg), "encoder": asdict(ecfg)},  # type: ignore[arg-type]
                                  {**meta, "stage_key": lkey})
    add_fit_metadata(out / "learnet", trained, prep, cfg.window_max_s)  # type: ignore[arg-type]
    return {"rows": len(prep.x), "train_rows": len(prep.train_idx), "wall_s": {"base": info_b["wall_s"],
                                                                               "learnet": info_l["wall_s"]}}
