"""Load a registered dataset as clips, through a preprocessed cache.

The first load unpacks the archives and parses every BVH (with progress bars); the parsed arrays are
stored as ``.npz`` (no pickle) plus a JSON index under
``$MOTIONCORE_CACHE/processed/<name>-<key>/``, where ``key`` hashes the archives' sha256 and
``FORMAT``. Later loads read the cache in well under a second.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..core.kinematics import resample
from ..core.motion import Motion
from ..core.skeleton import Skeleton
from ..errors import DataError
from ..io.bvh import read_bvh
from .cache import cache_root, data_root, file_sha256, require, unpack
from .registry import REGISTRY, DatasetSpec

FORMAT = 1  # bump when the preprocessing changes


@dataclass(eq=False)
class Clip:
    """One take: its motion, labels, split, and optional extra per-frame arrays (object pose...)."""

    motion: Motion
    split: str  # "train" | "test"
    labels: dict = field(default_factory=dict)
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # e.g. object_rotations (T, 4)

    @property
    def name(self) -> str:
        return self.motion.name


def get_spec(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; registered: {sorted(REGISTRY)}") from None


def load(name: str, split: str | None = None, fps: float | None = None, progress: bool = True) -> list[Clip]:
    """Clips of a registered dataset, optionally only one split and resampled to ``fps``."""
    if split not in (None, "train", "test"):
        raise DataError(f"split: expected 'train', 'test' or None, got {split!r}")
    spec = get_spec(name)
    if spec.union:
        return [c for part in spec.union for c in load(part, split, fps, progress)]
    clips = _load_cached(spec, progress)
    clips = [c for c in clips if split is None or c.split == split]
    if fps is not None and fps != spec.fps:
        clips = [Clip(resample(c.motion, fps), c.split, c.labels, _resample_extras(c, fps)) for c in clips]
    return clips


def _resample_extras(clip: Clip, fps: float) -> dict[str, np.ndarray]:
    if not clip.extras:
        return {}
    step = clip.motion.fps / fps
    idx = np.round(np.arange(0, clip.motion.num_frames - 1 + 1e-9, step)).astype(int)
    return {k: v[idx] for k, v in clip.extras.items()}


def _archives(spec: DatasetSpec) -> list[Path]:
    root = data_root()
    return [require(root / rel) for rel, _ in spec.parts]


def _cache_dir(spec: DatasetSpec) -> Path:
    h = hashlib.sha256(f"{spec.name}:{FORMAT}".encode())
    for a in _archives(spec):
        h.update(file_sha256(a).encode())
    return cache_root() / "processed" / f"{spec.name}-{h.hexdigest()[:16]}"


def _load_cached(spec: DatasetSpec, progress: bool) -> list[Clip]:
    d = _cache_dir(spec)
    if not (d / "index.json").is_file():
        _build_cache(spec, d, progress)
    index = json.loads((d / "index.json").read_text())
    with np.load(d / "arrays.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    skeletons = [Skeleton.from_dict(s) for s in index["skeletons"]]
    clips = []
    for i, c in enumerate(index["clips"]):
        a, b = c["start"], c["stop"]
        motion = Motion(skeletons[c["skeleton"]], arrays["rotations"][a:b], arrays["positions"][a:b],
                        c["fps"], c["name"])
        extras = {k[len(f"{i}/"):]: v for k, v in arrays.items() if k.startswith(f"{i}/")}
        clips.append(Clip(motion, c["split"], c["labels"], extras))
    return clips


def _build_cache(spec: DatasetSpec, dest: Path, progress: bool) -> None:
    root = data_root()
    files: list[Path] = []
    for (rel, pattern) in spec.parts:
        files += sorted(unpack(root / rel, progress).glob(pattern))
    if not files:
        raise DataError(f"{spec.name}: no BVH files matched {[p for _, p in spec.parts]}")
    convert = None
    if spec.convert is not None:  # "module:function", named by the registry (a higher layer's code)
        import importlib

        mod, fn = spec.convert.split(":")
        convert = getattr(importlib.import_module(mod), fn)
    skeletons: list[Skeleton] = []
    rots, poss, entries, extras = [], [], [], {}
    start = 0
    for i, path in enumerate(tqdm(files, desc=f"parse {spec.name}", unit="clip", disable=not progress)):
        m = read_bvh(path)
        if spec.convert is not None:
            m = convert(m, root)
        k = next((j for j, s in enumerate(skeletons) if _same(s, m.skeleton)), None)
        if k is None:
            skeletons.append(m.skeleton)
            k = len(skeletons) - 1
        labels = spec.labels(path, root)
        if labels.get("object_file"):
            obj = read_bvh(path.parent / labels["object_file"])
            n = min(obj.num_frames, m.num_frames)
            extras[f"{i}/object_rotations"] = obj.rotations[:n, 0]
            extras[f"{i}/object_positions"] = obj.positions[:n, 0]
        rots.append(m.rotations)
        poss.append(m.positions)
        entries.append({"name": path.stem if spec.name.startswith(("bandai", "cmu")) or spec.name == "dog"
                        else f"{path.parent.name}/{path.stem}", "split": spec.split(path), "labels": labels,
                        "start": start, "stop": start + m.num_frames, "fps": m.fps, "skeleton": k})
        start += m.num_frames
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=dest.parent))
    np.savez(tmp / "arrays.npz", rotations=np.concatenate(rots), positions=np.concatenate(poss), **extras)
    index = {"format": FORMAT, "dataset": spec.name, "skeletons": [s.to_dict() for s in skeletons],
             "clips": entries}
    (tmp / "index.json").write_text(json.dumps(index))
    if dest.exists():  # another process won the race; keep theirs
        import shutil
        shutil.rmtree(tmp)
        return
    os.replace(tmp, dest)


def _same(a: Skeleton, b: Skeleton) -> bool:
    return (a.same_topology(b) and a.channels == b.channels and np.allclose(a.offsets, b.offsets)
            and a.end_sites == b.end_sites)


def summary(name: str) -> dict:
    """Counts for ``motioncore data list``: clips per split, frames, fps, joints, licence."""
    spec = get_spec(name)
    clips = load(name, progress=True)
    return {"name": name, "clips": len(clips), "train": sum(c.split == "train" for c in clips),
            "test": sum(c.split == "test" for c in clips), "frames": sum(c.motion.num_frames for c in clips),
            "fps": spec.fps, "joints": clips[0].motion.skeleton.num_joints if clips else 0,
            "licence": spec.licence, "description": spec.description}
