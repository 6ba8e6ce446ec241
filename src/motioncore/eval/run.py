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

from motioncore.families.anyorder.evaluate import is_anyorder_checkpoint, load_fill
from motioncore.families.anyorder.model_elements import body_joints
from motioncore.families.body.evaluate import is_body_checkpoint, load_body_keyfill

from ..core.kinematics import resample
from ..core.skeleton import Skeleton
from ..data import load
from ..data.datasets import Clip
from ..data.registry import REGISTRY
from ..data.windows import TEST, TRAIN, lafan1_windows
from ..errors import DataError, MotioncoreError
from ..io.bvh import read_bvh
from ..io.files import check_suffix, files_with_suffix
from ..models.checkpoint import read_meta
from ..models.registry import resolve
from ..retarget import RetargetError, auto_map, check_map, clip_poses, load_overrides
from .baselines import BASELINES, Fill
from .infill import Results, evaluate_infill
from .keyed import KEY_BASELINES, KeyFill, evaluate_keys, key_fill, lafan_fill, on_skeleton
from .metrics import position_stats

FPS = 30.0


def resolve_models(names: list[str], maps: dict | None = None, plant_feet: bool = False) -> dict[str, Fill]:
    """Model names or checkpoint paths to LaFAN1 fill callables. Checkpoints take windows on any body skeleton
    (``eval.keyed.on_skeleton``): the data is never moved for them, so the baselines' rows never depend on
    which models are asked for."""
    out = {}
    for name, k in resolve_key_models(names, lafan=True, maps=maps, plant_feet=plant_feet).items():
        out[name] = lafan_fill(k)
        if hasattr(k, "weights"):  # the body model's correction weights (eval.infill's "Weight" column)
            out[name].weights = k.weights  # type: ignore[attr-defined]
    return out


def resolve_key_models(names: list[str], lafan: bool = False, maps: dict | None = None, plant_feet: bool = False
                       ) -> dict[str, KeyFill]:
    """Model names or checkpoint paths to key-mask fills (``eval.keyed``). Any-order checkpoints take LaFAN1
    masks only (``lafan``); for sparse keys they are refused. ``plant_feet``: the body in-fill plants its feet."""
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve

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
            fill = load_body_keyfill(name, joint_map=(maps or {}).get(name), plant_feet=plant_feet)[0]
            out[name] = fill
        elif is_anyorder_checkpoint(name):
            if not lafan:
                raise MotioncoreError(f"model {name!r}: the any-order model is benchmarked on LaFAN1 gaps only; "
                                      "with --keys-every use infill-body")
            meta = read_meta(resolve(name))
            conv = (meta.get("convention") or {}).get("mean_local_rotations")
            out[name] = on_skeleton(key_fill(load_fill(name)), Skeleton.from_dict(meta["skeleton"]),
                                    None if conv is None else np.asarray(conv, np.float64), (maps or {}).get(name))
        else:
            raise MotioncoreError(f"unknown model {name!r}: expected one of {sorted(BASELINES)}, a bundled model "
                                  f"(see `motioncore models`) or a checkpoint path")
    return out


def _clips_from_files(pattern: str, progress: bool) -> list[Clip]:
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
    return [Clip(resample(m, FPS), "test") for m in motions]


OUTSIDE_OFFSET = 5  # frames between the test windows of outside clips (a registered set's: 40)


def one_hierarchy(clips: list[Clip], what: str) -> list[Clip]:
    """The clips that share the most common joint hierarchy; one stderr line per clip left out, naming why (a
    glob may mix rigs: evaluate the others with their own --data)."""
    groups: dict[tuple, list[Clip]] = {}
    for c in clips:
        sk = c.motion.skeleton
        groups.setdefault((tuple(sk.names), tuple(int(x) for x in sk.parents)), []).append(c)
    keep = max(groups.values(), key=len)
    for c in clips:
        if c not in keep:
            print(f"{what}: left out {c.name!r}: its joint hierarchy differs from {keep[0].name!r}'s (the "
                  f"{len(keep)} clip(s) evaluated); give it its own --data", file=sys.stderr)
    return keep


def _say_resampled(what: str, rates: list[float]) -> None:
    """One stderr line when clips at other rates than 30 fps are resampled (slerp) before the benchmark."""
    other = sorted({f"{r:g}" for r in rates if abs(r - FPS) > 1e-3})
    if other:
        n = sum(abs(r - FPS) > 1e-3 for r in rates)
        print(f"{what}: resampled {n} of {len(rates)} clips from {', '.join(other)} fps to {FPS:g} fps first",
              file=sys.stderr)


def check_skeletons(model_names: list[str], skeleton: Skeleton, what: str, overrides: str | None = None,
                    poses: np.ndarray | None = None) -> dict:
    """Before any work: the data's skeleton must map onto every checkpoint's (``retarget.check_map``: one line
    naming the unmapped joints, exit 2). ``poses`` (F, J, 3): world positions of some of the data's frames,
    from which its body is read (never the rest pose alone). Returns {model: joint map} for the models on
    another skeleton."""
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve

    ov = load_overrides(overrides) if overrides is not None else None
    maps = {}
    for name in model_names:
        if name in BASELINES:
            continue
        meta = read_meta(resolve(name))
        if "skeleton" not in meta:
            continue
        sk = Skeleton.from_dict(meta["skeleton"])
        if skeleton.same_topology(sk) and list(skeleton.names) == list(sk.names):
            continue
        maps[name] = check_map(auto_map(skeleton, sk, overrides=ov, source_poses=poses), skeleton, sk,
                               f"{what} for {name}", source_poses=poses)
    return maps


def _window_poses(windows, frames: int = 64) -> np.ndarray:
    """(F, J, 3) world positions of up to ``frames`` frames spread over the test windows."""
    q = windows.rotations.reshape(-1, *windows.rotations.shape[-2:])
    p = windows.positions.reshape(-1, *windows.positions.shape[-2:])
    idx = np.unique(np.linspace(0, len(q) - 1, min(frames, len(q))).astype(np.int64))
    return windows.skeleton.forward_kinematics(q[idx], p[idx])[1]


def load_eval_sets(data: str, progress: bool = True):
    """(test windows 65/40, training position mean, std) for ``data``, on the data's own skeleton."""
    if data in REGISTRY:
        _say_resampled(data, [REGISTRY[data].fps])
        test = load(data, "test", fps=FPS, progress=progress)
        train = load(data, "train", fps=FPS, progress=progress)
    else:   # outside clips: one rig at a time (the others named), every window they allow
        test = train = one_hierarchy(_clips_from_files(data, progress), data)

    length, offset = TEST
    test_w = lafan1_windows(test, length, offset if data in REGISTRY else OUTSIDE_OFFSET,
                            body=body_joints(test[0].motion.skeleton))
    train_w = lafan1_windows(train, *TRAIN, body=test_w.body)
    _, gp = train_w.skeleton.forward_kinematics(train_w.rotations, train_w.positions)
    mean, std = position_stats(gp)
    return test_w, mean, std


def run_infill_eval(data: str, model_names: list[str], lengths: tuple[int, ...] = (5, 15, 30, 45),
                    progress: bool = True, overrides: str | None = None, plant_feet: bool = False
                    ) -> tuple[Results, int]:
    """Results dict and the number of test windows. Every model sees the data as it is (see resolve_models);
    ``overrides``: a bone map (``--map``) for data on another skeleton than a model's."""
    test_w, mean, std = load_eval_sets(data, progress)
    maps = check_skeletons(model_names, test_w.skeleton, data, overrides, _window_poses(test_w))
    models = resolve_models(model_names, maps, plant_feet)
    print(f"{data}: {len(test_w)} test windows of 65 frames at {FPS:g} fps", file=sys.stderr)
    res = evaluate_infill(models, test_w.skeleton, test_w.rotations, test_w.positions, mean, std,
                          lengths=lengths, progress=progress)
    return res, len(test_w)


def run_keys_eval(data: str, model_names: list[str], every: tuple[int, ...] = (8, 16),
                  progress: bool = True, overrides: str | None = None, plant_feet: bool = False
                  ) -> tuple[Results, int]:
    """The sparse-keys benchmark (``eval.keyed.evaluate_keys``) on ``data``'s test windows."""
    test_w, mean, std = load_eval_sets(data, progress)
    maps = check_skeletons(model_names, test_w.skeleton, data, overrides, _window_poses(test_w))
    models = resolve_key_models(model_names, maps=maps, plant_feet=plant_feet)
    print(f"{data}: {len(test_w)} test windows of 65 frames at {FPS:g} fps, a key every {list(every)} frames",
          file=sys.stderr)
    return evaluate_keys(models, test_w.skeleton, test_w.rotations, test_w.positions, mean, std, every,
                         progress=progress), len(test_w)


def outside_clips(pattern: str, model: str, say=None) -> list:
    """BVH clips from a folder or glob at 30 fps (``_clips_from_files``), each checked against the model's body (its
    own joint map, read from its frames; ``eval clips``): a clip that cannot be mapped is left out, and ``say`` (a
    line callable) names why."""
    msk = Skeleton.from_dict(read_meta(resolve(model))["skeleton"])
    out = []
    for c in _clips_from_files(pattern, False):
        m = c.motion
        if not (m.skeleton.same_topology(msk) and list(m.skeleton.names) == list(msk.names)):
            try:
                poses = clip_poses(m)
                check_map(auto_map(m.skeleton, msk, source_poses=poses), m.skeleton, msk, m.name, source_poses=poses)
            except RetargetError as e:
                if say is not None:
                    say(f"eval clips: left out {m.name!r}: {e}")
                continue
        out.append(m)
    return out
