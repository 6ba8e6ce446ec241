"""`motioncore eval infill`: load the data, build LaFAN1 windows and training statistics, run models.

``data`` is a registered dataset (its test split is evaluated, statistics come from its train split)
or a folder / glob of BVH files (all of them are evaluated and also give the statistics, since such
a folder has no training split). Everything is resampled to 30 fps, as LaFAN1. The data is scored on its
own skeleton: a checkpoint trained on another one (the Bandai-skeleton models on CMU) fills through a
retarget and back (``eval.keyed.on_skeleton``), so the baselines' rows never depend on the models asked for.
"""
from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np

from ..core.kinematics import resample
from ..core.skeleton import Skeleton
from ..data import load
from ..data.datasets import Clip
from ..data.registry import REGISTRY
from ..data.windows import TEST, TRAIN, lafan1_windows
from ..errors import DataError, MotioncoreError
from ..io.bvh import read_bvh
from .anyorder_fill import is_anyorder_checkpoint, load_fill
from .baselines import BASELINES, Fill
from .infill import Results, evaluate_infill
from .keyed import KEY_BASELINES, KeyFill, evaluate_keys, key_fill, lafan_fill, on_skeleton
from .metrics import position_stats

FPS = 30.0


def resolve_models(names: list[str]) -> dict[str, Fill]:
    """Model names or checkpoint paths to LaFAN1 fill callables. Checkpoints take windows on any body skeleton
    (``eval.keyed.on_skeleton``): the data is never moved for them, so the baselines' rows never depend on
    which models are asked for."""
    return {name: lafan_fill(k) for name, k in resolve_key_models(names, lafan=True).items()}


def resolve_key_models(names: list[str], lafan: bool = False) -> dict[str, KeyFill]:
    """Model names or checkpoint paths to key-mask fills (``eval.keyed``). Any-order checkpoints take LaFAN1
    masks only (``lafan``); for sparse keys they are refused."""
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve
    from .body_model import is_body_checkpoint, load_body_keyfill

    out: dict[str, KeyFill] = {}
    for name in names:
        if name in KEY_BASELINES:
            out[name] = KEY_BASELINES[name] if not lafan else key_fill(BASELINES[name])
        elif name in BASELINES:
            if not lafan:
                raise MotioncoreError(f"model {name!r} fills one gap after context frames; with --keys-every use "
                                      f"{sorted(KEY_BASELINES)} or infill-body")
            out[name] = key_fill(BASELINES[name])
        elif is_body_checkpoint(name):
            out[name] = load_body_keyfill(name)[0]
        elif is_anyorder_checkpoint(name):
            if not lafan:
                raise MotioncoreError(f"model {name!r}: the any-order model is benchmarked on LaFAN1 gaps only; "
                                      "with --keys-every use infill-body")
            meta = read_meta(resolve(name))
            conv = (meta.get("convention") or {}).get("mean_local_rotations")
            out[name] = on_skeleton(key_fill(load_fill(name)), Skeleton.from_dict(meta["skeleton"]),
                                    None if conv is None else np.asarray(conv, np.float64))
        else:
            raise MotioncoreError(f"unknown model {name!r}: expected one of {sorted(BASELINES)}, a bundled model "
                                  f"(see `motioncore models`) or a checkpoint path")
    return out


def _clips_from_files(pattern: str, progress: bool) -> list[Clip]:
    p = Path(pattern)
    files = sorted(p.rglob("*.bvh")) if p.is_dir() else sorted(Path(f) for f in glob.glob(pattern))
    if not files:
        raise DataError(f"--data {pattern!r}: not a registered dataset ({sorted(REGISTRY)}) and no BVH files "
                        f"matched")
    return [Clip(resample(read_bvh(f), FPS), "test") for f in files]


def load_eval_sets(data: str, progress: bool = True):
    """(test windows 65/40, training position mean, std) for ``data``, on the data's own skeleton."""
    if data in REGISTRY:
        test = load(data, "test", fps=FPS, progress=progress)
        train = load(data, "train", fps=FPS, progress=progress)
    else:
        test = train = _clips_from_files(data, progress)
    from ..train.anyorder import body_joints

    test_w = lafan1_windows(test, *TEST, body=body_joints(test[0].motion.skeleton))
    train_w = lafan1_windows(train, *TRAIN, body=test_w.body)
    _, gp = train_w.skeleton.forward_kinematics(train_w.rotations, train_w.positions)
    mean, std = position_stats(gp)
    return test_w, mean, std


def run_infill_eval(data: str, model_names: list[str], lengths: tuple[int, ...] = (5, 15, 30, 45),
                    progress: bool = True) -> tuple[Results, int]:
    """Results dict and the number of test windows. Every model sees the data as it is (see resolve_models)."""
    models = resolve_models(model_names)
    test_w, mean, std = load_eval_sets(data, progress)
    print(f"{data}: {len(test_w)} test windows of 65 frames at {FPS:g} fps", file=sys.stderr)
    res = evaluate_infill(models, test_w.skeleton, test_w.rotations, test_w.positions, mean, std,
                          lengths=lengths, progress=progress)
    return res, len(test_w)


def run_keys_eval(data: str, model_names: list[str], every: tuple[int, ...] = (8, 16),
                  progress: bool = True) -> tuple[Results, int]:
    """The sparse-keys benchmark (``eval.keyed.evaluate_keys``) on ``data``'s test windows."""
    models = resolve_key_models(model_names)
    test_w, mean, std = load_eval_sets(data, progress)
    print(f"{data}: {len(test_w)} test windows of 65 frames at {FPS:g} fps, a key every {list(every)} frames",
          file=sys.stderr)
    return evaluate_keys(models, test_w.skeleton, test_w.rotations, test_w.positions, mean, std, every,
                         progress=progress), len(test_w)
