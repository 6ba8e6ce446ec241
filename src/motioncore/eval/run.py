"""`motioncore eval infill`: load the data, build LaFAN1 windows and training statistics, run models.

``data`` is a registered dataset (its test split is evaluated, statistics come from its train split)
or a folder / glob of BVH files (all of them are evaluated and also give the statistics, since such
a folder has no training split). Everything is resampled to 30 fps, as LaFAN1. Clips on another
skeleton than an evaluated checkpoint's (BVH files, or a registered set such as `cmu` for a Bandai model)
are first retargeted onto the checkpoint's skeleton
(`motioncore.retarget`, joints matched by name and presets), so the model and the baselines are scored
on the same retargeted clips.
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
from ..io.files import check_suffix, files_with_suffix
from .anyorder_fill import is_anyorder_checkpoint, load_fill
from .baselines import BASELINES, Fill
from .infill import Results, evaluate_infill
from .metrics import position_stats

FPS = 30.0


def resolve_models(names: list[str]) -> dict[str, Fill]:
    """Model names or checkpoint paths to fill callables."""
    out: dict[str, Fill] = {}
    for name in names:
        if name in BASELINES:
            out[name] = BASELINES[name]
        elif is_anyorder_checkpoint(name):
            out[name] = load_fill(name)
        else:
            raise MotioncoreError(f"unknown model {name!r}: expected one of {sorted(BASELINES)}, a bundled model "
                                  f"(see `motioncore models`) or a checkpoint path")
    return out


def model_skeleton(names: list[str]) -> tuple[Skeleton, np.ndarray | None] | None:
    """(skeleton, rotation convention or None) of the first any-order checkpoint among ``names`` (None:
    baselines only). The convention is the training data's mean local rotation per joint, stored in the
    checkpoint's metadata (``convention``), used to match retargeted clips' twists to it."""
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve

    for name in names:
        if name not in BASELINES and is_anyorder_checkpoint(name):
            meta = read_meta(resolve(name))
            if "skeleton" in meta:
                conv = (meta.get("convention") or {}).get("mean_local_rotations")
                return Skeleton.from_dict(meta["skeleton"]), None if conv is None else np.asarray(conv, np.float64)
    return None


def _clips_from_files(pattern: str, progress: bool, onto: tuple[Skeleton, np.ndarray | None] | None = None,
                      overrides: str | None = None) -> list[Clip]:
    p = Path(pattern)
    if p.is_file():
        files = [check_suffix(p, (".bvh",), "--data")]
    else:
        files = files_with_suffix(p, ".bvh") if p.is_dir() else sorted(
            Path(f) for f in glob.glob(pattern) if Path(f).suffix.lower() == ".bvh")
    if not files:
        raise DataError(f"--data {pattern!r}: not a registered dataset ({sorted(REGISTRY)}) and no BVH files "
                        f"matched")
    motions = [read_bvh(f) for f in files]
    _say_resampled(pattern, [m.fps for m in motions])
    return _onto([Clip(resample(m, FPS), "test") for m in motions], pattern, onto, overrides)


def _say_resampled(what: str, rates: list[float]) -> None:
    """One stderr line when clips at other rates than 30 fps are resampled (slerp) before the benchmark."""
    other = sorted({f"{r:g}" for r in rates if abs(r - FPS) > 1e-3})
    if other:
        n = sum(abs(r - FPS) > 1e-3 for r in rates)
        print(f"{what}: resampled {n} of {len(rates)} clips from {', '.join(other)} fps to {FPS:g} fps first",
              file=sys.stderr)


def _onto(clips: list[Clip], what: str, onto: tuple[Skeleton, np.ndarray | None] | None,
          overrides: str | None = None) -> list[Clip]:
    """``clips`` retargeted onto the evaluated checkpoint's skeleton where theirs differs (in place). Every
    joint map is checked first (`retarget.check_map`): a clip that cannot be mapped (a dog for a biped
    model) stops the run with one line naming the unmapped joints; ``overrides`` is a ``--map`` file."""
    if onto is None:
        return clips
    from ..retarget import auto_map, check_map, load_overrides, retarget

    sk, conv = onto
    ov = load_overrides(overrides) if overrides is not None else None
    other = [c for c in clips if not (c.motion.skeleton.same_topology(sk) and list(c.motion.skeleton.names) == list(sk.names))]
    maps = [check_map(auto_map(c.motion.skeleton, sk, overrides=ov), c.motion.skeleton, sk,
                      f"{what}: {c.motion.name or 'clip'}") for c in other]
    moved = 0
    for c, jm in zip(other, maps, strict=True):
        c.motion = retarget(c.motion, sk, jm, convention=conv)
        moved += 1
    if moved:
        how = ", twists matched to its training data's convention" if conv is not None else ""
        print(f"{what}: retargeted {moved} of {len(clips)} clips onto the model's {sk.num_joints}-joint "
              f"skeleton first{how}", file=sys.stderr)
    return clips


def load_eval_sets(data: str, progress: bool = True, onto: tuple[Skeleton, np.ndarray | None] | None = None,
                   overrides: str | None = None):
    """(test windows 65/40, training position mean, std) for ``data``; clips on another skeleton than
    ``onto`` (a registered set's or BVH files') are retargeted onto it first (``overrides``: a bone map)."""
    if data in REGISTRY:  # a set on another skeleton (CMU for a Bandai model) is retargeted, both splits
        _say_resampled(data, [REGISTRY[data].fps])
        test = _onto(load(data, "test", fps=FPS, progress=progress), f"{data} test", onto, overrides)
        train = _onto(load(data, "train", fps=FPS, progress=progress), f"{data} train", onto, overrides)
    else:
        test = train = _clips_from_files(data, progress, onto, overrides)
    from ..train.anyorder import body_joints

    test_w = lafan1_windows(test, *TEST, body=body_joints(test[0].motion.skeleton))
    train_w = lafan1_windows(train, *TRAIN, body=test_w.body)
    _, gp = train_w.skeleton.forward_kinematics(train_w.rotations, train_w.positions)
    mean, std = position_stats(gp)
    return test_w, mean, std


def run_infill_eval(data: str, model_names: list[str], lengths: tuple[int, ...] = (5, 15, 30, 45),
                    progress: bool = True, overrides: str | None = None) -> tuple[Results, int]:
    """Results dict and the number of test windows; ``overrides``: a bone map for clips on another skeleton."""
    models = resolve_models(model_names)
    test_w, mean, std = load_eval_sets(data, progress, model_skeleton(model_names), overrides)
    print(f"{data}: {len(test_w)} test windows of 65 frames at {FPS:g} fps", file=sys.stderr)
    res = evaluate_infill(models, test_w.skeleton, test_w.rotations, test_w.positions, mean, std,
                          lengths=lengths, progress=progress)
    return res, len(test_w)
