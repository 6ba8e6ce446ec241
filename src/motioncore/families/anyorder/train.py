"""Training recipe for the any-order transformer (``families.anyorder.model``) on real mocap windows.

Data: a registered set's *train* split at 30 fps, cut into LaFAN1 training windows (50 frames every 20,
re-framed to face +Z at frame 9 and centred on the mean root XZ; ``data.windows.lafan1_windows``).
Every 10th training clip (index % 10 == 9) is held out for validation, as the controller recipes do;
a set with fewer than 10 training clips (ManipNet has 6) instead holds out the last tenth of every
clip's windows, so the test split stays untouched until evaluation.

Elements (``motion_to_elements``): channel j < J is joint j's local rotation as 6D, channel J the root
translation: the local translation of the body root ``BodyJoints.root`` (``meta["root_joint"]``), z-scored
per axis with the training windows' mean and std (``meta["root_norm"]``). For Bandai that is ``Hips``
(joint 1): ``joint_Root`` (joint 0) is constant within a re-framed window (it only carries the
re-framing) and its rotation is an ordinary rotation channel. The other joints' local translations are
constant rest offsets and are not modelled (the fill copies them from the last context frame).

Hands have no hips for ``lafan1_windows``' facing: ``body_joints`` uses the wrist as root and the
index/pinky knuckles as the across vector (a yaw-only re-framing, as for bodies). The benchmark
loader (``eval.run.load_eval_sets``) must pass the same ``body=`` for hands.

``data``: ``bandai`` (22 joints) or ``manipnet`` = the ManipNet *right* hand (``manipnet-right``, 17
joints). The two hands are separate skeletons with different joint names, so one model covers one
hand; the right hand was picked because it carries the manipulation in most takes. Train a left-hand
model with ``data="manipnet-left"``.

Loss: ``sampling.make_loss_fn("motion")``: per sequence a random permutation with animator-like
conditions first (the first 1-10 frames, keyframes separated by gaps of 5-45 frames, a few partial
frames), mean NLL (nats, a log-density: can go negative) over the rest.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from motioncore.errors import MotioncoreError
from motioncore.families.anyorder.model_elements import body_joints, root_stats, to_elements

if TYPE_CHECKING:  # torch, the data loaders and the loop load lazily: `motioncore --help` stays instant
    import torch

    from motioncore.train.loop import TrainConfig

__all__ = ["DATASETS", "AnyOrderRecipe", "build_windows", "train_anyorder",
           "add_anyorder_arguments", "train_anyorder_from_args", "CHECKPOINT_NAME"]

DATASETS = {"bandai": "bandai", "manipnet": "manipnet-right", "manipnet-right": "manipnet-right",
            "manipnet-left": "manipnet-left"}
FPS = 30.0  # LaFAN1 convention; the benchmark resamples everything to 30 fps
CHECKPOINT_NAME = "anyorder"


@dataclass(frozen=True)
class AnyOrderRecipe:
    data: str = "bandai"  # bandai | manipnet (= manipnet-right) | manipnet-left
    d_model: int = 128  # token width
    n_layers: int = 4  # transformer blocks
    n_heads: int = 4  # attention heads (d_model / n_heads must be even)
    d_ff: int = 512  # feed-forward width
    num_mixtures: int = 8  # Gaussian components per element
    dropout: float = 0.1
    group_frames: bool = False  # one element per frame (E = 6J + 3): 1/(J+1) the tokens, whole-frame keys only
    prior: bool = False  # tokens carry the keys' interpolation at their target; means are offsets from it
    offset_scale: float = 0.1  # prior: mean = prior + offset_scale * raw output
    key_envelope: bool = False  # prior: the offset vanishes at the keys (sin(pi * position in gap))
    relative: bool = False  # the model sees motion from the last context key (families.anyorder.model_elements.to_key_frame)
    mirror: bool = False  # also train on every training clip mirrored left/right (kinematics.mirror)
    track_wrist: bool = False  # loss: half the rows also key the body root joint and the root every 1-10 frames
    object_cond: bool = False  # hands: the object in the wrist frame at every frame as per-frame conditions
    #                            (data.hand_object; model cond_dim), dropped in ``cond_drop`` of the rows
    cond_drop: float = 0.3  # object_cond: fraction of training rows without the object (a rig with no object)
    window: int = 50  # training window length (frames at 30 fps; LaFAN1's data.windows.TRAIN: 50)
    offset: int = 20  # window stride (LaFAN1: 20)
    max_windows: int = 0  # keep at most N training windows, evenly spread (0: all); quick runs
    max_val_windows: int = 512  # cap on validation windows (evenly spread), evaluated every epoch
    max_clips: int = 0  # use only the first N training clips (0: all); tests
    eval_batch: int = 64  # windows per validation forward pass (fit's own evaluate uses one huge batch)
    seed: int = 0  # conditioning sets / orders of the loss

    def __post_init__(self) -> None:
        if self.data not in DATASETS:
            raise ValueError(f"data: expected one of {sorted(DATASETS)}, got {self.data!r}")
        if self.window < 11 or self.offset < 1:  # re-framing faces +Z at frame 9
            raise ValueError(f"window must be >= 11 and offset >= 1, got {self.window} and {self.offset}")
        for name in ("max_windows", "max_val_windows", "max_clips"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.eval_batch < 1:
            raise ValueError(f"eval_batch: must be >= 1, got {self.eval_batch}")
        if not 0.0 <= self.cond_drop <= 1.0:
            raise ValueError(f"cond_drop: must be in [0, 1], got {self.cond_drop}")
        if self.object_cond and (self.mirror or self.group_frames or not self.data.startswith("manipnet")):
            raise ValueError("object_cond: needs ManipNet data, per-element tokens and no mirroring")

    @property
    def dataset(self) -> str:
        """The registered dataset name."""
        return DATASETS[self.data]

    def model_config(self, num_joints: int) -> dict[str, Any]:
        """``AnyOrderConfig`` fields (JSON-ready) for a skeleton of ``num_joints`` joints."""
        from motioncore.data.hand_object import COND_DIM
        from motioncore.families.anyorder.model_elements import motion_config

        cfg = motion_config(num_joints, d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                            d_ff=self.d_ff, num_mixtures=self.num_mixtures, dropout=self.dropout,
                            max_frames=max(256, self.window), group_frames=self.group_frames, prior=self.prior,
                            offset_scale=self.offset_scale, key_envelope=self.key_envelope,
                            relative=self.relative, cond_dim=COND_DIM if self.object_cond else 0)
        d = asdict(cfg)
        d["channel_kinds"] = list(d["channel_kinds"])
        return d


def _spread(idx: np.ndarray, n: int) -> np.ndarray:
    """At most ``n`` entries of ``idx``, evenly spread (all when n == 0 or len(idx) <= n)."""
    if n <= 0 or len(idx) <= n:
        return idx
    return idx[np.linspace(0, len(idx) - 1, n).round().astype(np.int64)]


def build_windows(recipe: AnyOrderRecipe, progress: bool = True):
    """(windows, train indices, validation indices, clips) of the recipe's training split."""
    from motioncore.data import lafan1_windows, load

    clips = load(recipe.dataset, "train", fps=FPS, progress=progress)
    if recipe.max_clips:
        clips = clips[: recipe.max_clips]
    if not clips:
        raise MotioncoreError(f"no training clips in {recipe.dataset}")
    w = lafan1_windows(clips, recipe.window, recipe.offset, body=body_joints(clips[0].motion.skeleton))
    ci = w.clip_index
    val = (ci % 10) == 9
    if not val.any() or val.all():  # < 10 clips: hold out the last tenth of each clip's windows
        val = np.zeros(len(w), dtype=bool)
        for c in np.unique(ci):
            rows = np.flatnonzero(ci == c)
            n = len(rows) // 10
            if n:
                val[rows[-n:]] = True
    tr, va = np.flatnonzero(~val), np.flatnonzero(val)
    if len(tr) == 0:
        raise MotioncoreError(f"{recipe.dataset}: no training windows of {recipe.window} frames")
    tr = _spread(tr, recipe.max_windows)
    if recipe.mirror:  # the training windows' mirror images; validation stays as captured
        w, tr = _add_mirrored(w, tr, clips, recipe)
    return w, tr, _spread(va, recipe.max_val_windows), clips


def _add_mirrored(w, tr: np.ndarray, clips, recipe: AnyOrderRecipe):
    """Append the mirror image of every training window to ``w``; returns (windows, train indices)."""
    from dataclasses import replace

    from motioncore.core.kinematics import mirror
    from motioncore.data import lafan1_windows

    flipped = [replace(c, motion=mirror(c.motion)) for c in clips]
    m = lafan1_windows(flipped, recipe.window, recipe.offset, body=w.body)
    if len(m) != len(w):
        raise MotioncoreError(f"mirroring changed the window count ({len(w)} -> {len(m)})")
    n = len(w)
    out = type(w)(w.skeleton, np.concatenate([w.rotations, m.rotations[tr]]),
                  np.concatenate([w.positions, m.positions[tr]]), np.concatenate([w.clip_index, m.clip_index[tr]]),
                  w.body)
    return out, np.concatenate([tr, n + np.arange(len(tr))])


def _chunked_eval(loss_fn, eval_batch: int):
    """``fit`` validates the whole validation set in one pass; attention over ~1000 tokens per window
    makes that gigabytes. In eval mode split the batch (each chunk reuses the loss's fixed evaluation
    generator, so validation stays deterministic across epochs)."""
    import torch


    def wrapped(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        n = batch["values"].shape[0]
        if model.training or n <= eval_batch:
            return loss_fn(model, batch)
        total = sum(float(loss_fn(model, {k: v[i:i + eval_batch] for k, v in batch.items()}))
                    * min(eval_batch, n - i) for i in range(0, n, eval_batch))
        return torch.tensor(total / n)

    return wrapped


def train_anyorder(recipe: AnyOrderRecipe, cfg: TrainConfig, out_dir: str | Path, progress: bool = True,
                   resume: bool = True) -> tuple[torch.nn.Module, dict]:
    """Train, then save ``out_dir/anyorder.{safetensors,json}``; returns (model in eval mode, meta).
    ``out_dir`` also holds the resumable ``train.state.*``, ``loss.png`` and ``anyorder.history.json``."""
    import torch

    from motioncore.data import get_spec
    from motioncore.families.anyorder.model_sampling import make_loss_fn
    from motioncore.models.checkpoint import save_model
    from motioncore.models.registry import build
    from motioncore.train.loop import fit

    out = Path(out_dir)
    t0 = time.time()
    w, tr, va, clips = build_windows(recipe, progress)
    J = w.skeleton.num_joints
    rj = int(w.body.root)
    norm = root_stats(w.positions[tr], rj)
    train = {"values": to_elements(w.rotations[tr], w.positions[tr], norm, rj)}
    val = {"values": to_elements(w.rotations[va], w.positions[va], norm, rj)}
    cond_meta = None
    if recipe.object_cond:
        from motioncore.data.hand_object import cond_stats, normalise_cond, window_cond

        raw = window_cond(clips, recipe.window, recipe.offset, rj)
        if len(raw) != len(w):
            raise MotioncoreError(f"object conditions: {len(raw)} windows, the hand has {len(w)}")
        cnorm = cond_stats(raw[tr])
        train["cond"] = torch.as_tensor(normalise_cond(raw[tr], cnorm))
        val["cond"] = torch.as_tensor(normalise_cond(raw[va], cnorm))
        cond_meta = {"features": "data.hand_object.object_features: the object in the wrist frame (6D rotation, "
                     "position, velocity, distance, present flag)", "norm": cnorm, "drop": recipe.cond_drop}
    torch.manual_seed(cfg.seed)  # weight initialisation
    mcfg = recipe.model_config(J)
    model = build("anyorder", mcfg)
    if recipe.group_frames:
        from motioncore.families.anyorder.model_elements import group_channels

        train = {"values": group_channels(model.cfg, train["values"])}
        val = {"values": group_channels(model.cfg, val["values"])}
    track = (rj, J) if recipe.track_wrist and not recipe.group_frames else ()
    loss_fn = _chunked_eval(make_loss_fn("motion", seed=recipe.seed, track=track, cond_drop=recipe.cond_drop),
                            recipe.eval_batch)
    history = fit(model, loss_fn, train, val, cfg, out, resume=resume, progress=progress)
    wall = time.time() - t0
    trained = sum(len(tr) for _ in history)
    spec = get_spec(recipe.dataset)
    meta = {"task": "infill", "recipe": asdict(recipe), "train_config": asdict(cfg),
            "skeleton": w.skeleton.to_dict(), "fps": FPS, "root_joint": rj,
            "root_norm": norm, "elements": "6D local rotation per joint (channels 0..J-1), z-scored root "
            "translation (channel J); windows re-framed to face +Z at frame 9 and centred (LaFAN1)",
            "training_data": f"{recipe.dataset} train split ({spec.description}); {len(tr)} windows of "
            f"{recipe.window} frames (stride {recipe.offset}) at {FPS:g} fps from "
            f"{len(set(w.clip_index[tr].tolist()))} of {len(clips)} clips; {len(va)} validation windows",
            "licence": spec.licence, "citation": spec.citation, "history": history, "train_wall_s": wall,
            "device": _device_note(cfg),
            "windows_per_s": trained / max(history[-1]["wall_s"], 1e-9) if history else 0.0}
    if cond_meta is not None:
        meta["cond"] = cond_meta
    save_model(out / CHECKPOINT_NAME, model, "anyorder", mcfg, meta)
    (out / f"{CHECKPOINT_NAME}.history.json").write_text(json.dumps(history, indent=1))
    return model.eval(), meta


def _device_note(cfg: TrainConfig) -> str:
    """Where the run trained, for the checkpoint's metadata: the device and its name or CPU threads."""
    import platform

    import torch

    from motioncore.train.loop import pick_device

    dev = pick_device(cfg.device)
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return f"cpu ({platform.processor() or platform.machine()}, {cfg.threads} thread(s))"


# ----------------------------------------------------------------------------- CLI
def add_anyorder_arguments(p: argparse.ArgumentParser) -> None:
    """Flags for ``motioncore train anyorder`` (added to the existing ``train`` parser; ``--data``,
    ``--epochs``, ``--batch-size``, ``--lr``, ``--device``, ``--threads``, ``--max-minutes``, ``--out``,
    ``--restart``, ``--quiet``, ``--config`` and ``--max-clips`` are shared with pfnn/mann)."""
    g = p.add_argument_group("anyorder", "any-order transformer (model anyorder; --data bandai|manipnet)")
    g.add_argument("--d-model", type=int, help="anyorder: token width (default 128)")
    g.add_argument("--n-layers", type=int, help="anyorder: transformer blocks (default 4)")
    g.add_argument("--n-heads", type=int, help="anyorder: attention heads (default 4)")
    g.add_argument("--d-ff", type=int, help="anyorder: feed-forward width (default 512)")
    g.add_argument("--num-mixtures", type=int, help="anyorder: Gaussian components (default 8)")
    g.add_argument("--window", type=int, help="anyorder: training window length in frames (default 50)")
    g.add_argument("--offset", type=int, help="anyorder: window stride in frames (default 20)")
    g.add_argument("--max-windows", type=int, help="anyorder: at most N training windows (quick runs)")
    g.add_argument("--group-frames", action="store_true", default=None,
                   help="anyorder: one element per frame (fast; keys must cover whole frames)")
    g.add_argument("--prior", action="store_true", default=None,
                   help="anyorder: predict offsets from the keys' interpolation (see docs/anyorder.md)")
    g.add_argument("--track-wrist", action="store_true", default=None,
                   help="anyorder: also train on rows whose root joint and root are keyed every 1-10 frames")
    g.add_argument("--key-envelope", action="store_true", default=None,
                   help="anyorder: with --prior, the offset vanishes at the keys (short gaps stay near Interp)")
    g.add_argument("--relative", action="store_true", default=None,
                   help="anyorder: the model sees motion from the last context key (generalises across captures)")
    g.add_argument("--mirror", action="store_true", default=None,
                   help="anyorder: also train on every training clip mirrored left/right")
    g.add_argument("--object-cond", action="store_true", default=None,
                   help="anyorder (manipnet): condition on the object in the wrist frame at every frame")
    g.add_argument("--cond-drop", type=float, help="anyorder: with --object-cond, rows trained without the object "
                   "(default 0.3)")
    g.add_argument("--dropout", type=float, help="anyorder: dropout (default 0.1); infill-body: the transformer's dropout (default 0)")
    g.add_argument("--offset-scale", type=float, help="anyorder: prior models' mean offset scale (default 0.1)")


def train_anyorder_from_args(args: argparse.Namespace) -> int:
    """Handler for ``motioncore train anyorder ...``; missing attributes count as not given.
    Defaults differing from TrainConfig's: batch size 16, lr 3e-4."""
    from motioncore.train.loop import TrainConfig, config_from

    def a(name: str) -> Any:
        return getattr(args, name, None)

    recipe = config_from(AnyOrderRecipe, None, {
        "data": a("data") or "bandai", "d_model": a("d_model"), "n_layers": a("n_layers"), "n_heads": a("n_heads"),
        "d_ff": a("d_ff"), "num_mixtures": a("num_mixtures"), "window": a("window"), "offset": a("offset"),
        "max_windows": a("max_windows"), "max_clips": a("max_clips"), "group_frames": a("group_frames"),
        "prior": a("prior"), "track_wrist": a("track_wrist"), "dropout": a("dropout"), "offset_scale": a("offset_scale"),
        "key_envelope": a("key_envelope"), "mirror": a("mirror"), "object_cond": a("object_cond"),
        "cond_drop": a("cond_drop"),
        "relative": a("relative")})
    base = {"batch_size": 16, "lr": 3e-4}
    flags = {"epochs": a("epochs"), "batch_size": a("batch_size"), "lr": a("lr"), "device": a("device"),
             "threads": a("threads"), "max_minutes": a("max_minutes")}
    if a("config"):
        base = {}  # the JSON file decides; flags still win
    cfg = config_from(TrainConfig, a("config"), {**base, **{k: v for k, v in flags.items() if v is not None}})
    out = Path(a("out") or f"runs/anyorder-{recipe.data}")
    _, meta = train_anyorder(recipe, cfg, out, progress=not a("quiet"), resume=not a("restart"))
    last = meta["history"][-1]
    print(f"anyorder ({recipe.dataset}): {last['epoch']} epochs, val NLL {last['val_loss']:.4f} nats/element, "
          f"{meta['train_wall_s']:.0f} s ({meta['windows_per_s']:.1f} windows/s); checkpoint "
          f"{out / CHECKPOINT_NAME}.json, curves {out / 'loss.png'}")
    return 0
