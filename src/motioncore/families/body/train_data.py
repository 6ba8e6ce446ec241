"""The infill-body recipe's data: the training arrays (``build_data``, cached under the run folder) and the fixed
validation windows (``validation_sets``), all on the Bandai skeleton at 30 fps.

Bandai's train split and the CMU training subjects (01-03, 06, 08, 09), the CMU clips retargeted onto the Bandai
skeleton (``onto_bandai``, twists matched to Bandai's mean local rotations, ``body_convention``); each clip with its
left-right mirror image and played at 0.8x and 1.25x speed as well. The recipe itself: ``families.body.train``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from motioncore.errors import MotioncoreError

__all__ = ["build_data", "contact_labels"]

FPS = 30.0
SPEEDS = (1.0, 0.8, 1.25)
SOURCES = ("bandai", "cmu", "gestures")  # the training arrays' ``source`` codes
UNSEEN = ("05", "07")  # the CMU test subjects, validated on (never trained on)


def body_convention(clips) -> np.ndarray:
    """Mean local rotation per joint of the Bandai training frames (every 10th): the twists retargeted clips match."""
    from motioncore.retarget.twist import mean_rotations

    return mean_rotations(np.concatenate([c.motion.rotations[::10] for c in clips]))


def onto_bandai(motion, skeleton, convention):
    """A clip on another body skeleton (CMU) retargeted onto the Bandai skeleton, as the add-on's rest alignment
    does for an imported rig."""
    from motioncore.retarget import auto_map, retarget

    return retarget(motion, skeleton, auto_map(motion.skeleton, skeleton), convention=convention)


def _augment(motion, frames) -> list:
    from motioncore.core.kinematics import mirror, resample
    from motioncore.core.motion import Motion

    out = []
    for m in (motion, mirror(motion, frames=frames)):
        for s in SPEEDS:
            out.append(m if s == 1.0 else resample(Motion(m.skeleton, m.rotations, m.positions, FPS * s, m.name), FPS))
    return out


def build_data(data: str, cache: Path, progress: bool = True) -> dict[str, Any]:
    """Training arrays (cached in ``cache``): frames of every augmented clip concatenated, with clip bounds and
    the source of each clip (an index into ``SOURCES``). Also the skeleton and the convention (always Bandai's
    locomotion train split's, so every data choice retargets CMU the same way)."""
    from motioncore.core.skeleton import Skeleton
    from motioncore.data import load

    if data not in ("bandai+cmu", "cmu", "all"):
        raise MotioncoreError(f"--data: expected 'bandai+cmu', 'cmu' or 'all', got {data!r}")
    f = cache / f"data-{data.replace('+', '_')}.npz"
    meta_f = f.with_suffix(".json")
    if f.is_file() and meta_f.is_file():
        meta = json.loads(meta_f.read_text())
        with np.load(f) as z:
            arrays = {k: z[k] for k in z.files}
        return {**arrays, "skeleton": Skeleton.from_dict(meta["skeleton"]),
                "convention": np.asarray(meta["convention"]), "describe": meta["describe"]}
    bandai = load("bandai", "train", fps=FPS, progress=progress)
    sk = bandai[0].motion.skeleton
    conv = body_convention(bandai)
    cmu = [onto_bandai(c.motion, sk, conv) for c in load("cmu", "train", fps=FPS, progress=progress)]
    groups = ([("bandai", [c.motion for c in bandai])] if data != "cmu" else []) + [("cmu", cmu)]
    gestures = load("bandai-gestures", "train", fps=FPS, progress=progress) if data == "all" else []
    if gestures:
        groups.append(("gestures", [c.motion for c in gestures]))
    from motioncore.core.kinematics import mirror_frames

    rots, poss, bounds, source = [], [], [], []
    start = 0
    frames = mirror_frames(sk, rotations=np.concatenate([m.rotations[::10] for _, ms in groups for m in ms]))
    for name, motions in groups:
        for m in motions:
            for a in _augment(m, frames):
                if a.num_frames < 16:
                    continue
                rots.append(a.rotations.astype(np.float32))
                poss.append(a.positions.astype(np.float32))
                bounds.append((start, start + a.num_frames))
                source.append(SOURCES.index(name))
                start += a.num_frames
    describe = (f"{'Bandai train split (' + str(len(bandai)) + ' clips) + ' if data != 'cmu' else ''}"
                f"CMU train subjects 01-03, 06, 08, 09 ({len(cmu)} clips, retargeted onto the Bandai skeleton), "
                f"{'Bandai dataset 2 gestures train split (' + str(len(gestures)) + ' clips), ' if gestures else ''}"
                f"30 fps, mirrored, at speeds {list(SPEEDS)}: {start:,} frames")
    arrays = {"rotations": np.concatenate(rots), "positions": np.concatenate(poss),
              "bounds": np.asarray(bounds, np.int64), "source": np.asarray(source, np.int64)}
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / ".data-tmp.npz"
    np.savez(tmp, **arrays)
    tmp.replace(f)
    meta_f.write_text(json.dumps({"skeleton": sk.to_dict(), "convention": conv.tolist(), "describe": describe}))
    return {**arrays, "skeleton": sk, "convention": conv, "describe": describe}


def contact_labels(data: dict[str, Any], cache: Path) -> np.ndarray:
    """(N, F) bool: the capture's contact labels of the skeleton's feet (``find_body_joints(...).feet``) for every
    training frame, each clip on its own ground (``core.feet.contacts``), cached beside the data."""
    from motioncore.core.feet import contacts
    from motioncore.core.kinematics import find_body_joints

    sk = data["skeleton"]
    feet = list(find_body_joints(sk).feet)
    f = cache / f"contacts-{len(data['rotations'])}-{'-'.join(map(str, feet))}.npy"
    if f.is_file():
        return np.load(f)
    out = np.zeros((len(data["rotations"]), len(feet)), bool)
    for a, b in np.asarray(data["bounds"]):
        _, gp = sk.forward_kinematics(np.asarray(data["rotations"][a:b], np.float64),
                                      np.asarray(data["positions"][a:b], np.float64))
        out[a:b] = contacts(gp, FPS, feet)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / ".contacts-tmp.npy"
    np.save(tmp, out)
    tmp.replace(f)
    return out


def validation_sets(skeleton, convention, n: int, progress: bool = True) -> dict[str, tuple]:
    """Fixed LaFAN1 test windows (65 frames every 40) on the Bandai skeleton: Bandai test and the CMU subjects
    never trained on (``UNSEEN``: 05 and 07), each its own set."""
    from motioncore.data import load
    from motioncore.data.windows import TEST, TRAIN, lafan1_windows
    from motioncore.eval.metrics import position_stats

    train = load("bandai", "train", fps=FPS, progress=progress)
    tw = lafan1_windows(train[::4], *TRAIN)
    _, gp = tw.skeleton.forward_kinematics(tw.rotations, tw.positions)
    mean, std = position_stats(gp)
    out = {}
    bw = lafan1_windows(load("bandai", "test", fps=FPS, progress=progress), *TEST)
    idx = np.linspace(0, len(bw) - 1, min(n, len(bw))).astype(int)
    out["bandai"] = (bw.rotations[idx], bw.positions[idx])
    from motioncore.data.datasets import Clip

    cmu_test = load("cmu", "test", fps=FPS, progress=progress)
    for subject in UNSEEN:
        clips = [Clip(onto_bandai(c.motion, skeleton, convention), "test") for c in cmu_test
                 if c.labels.get("subject") == subject]
        cw = lafan1_windows(clips, *TEST)
        idx = np.linspace(0, len(cw) - 1, min(n, len(cw))).astype(int)
        out[f"cmu{subject}"] = (cw.rotations[idx], cw.positions[idx])
    return {"sets": out, "mean": mean, "std": std}
