"""Keys = Reduced, written: our GENERATED keys on a filled span replaced by the planned ones (`core.keyreduce`), the
animator's keys and their handles as they were. Keys are appended and set in bulk, then sorted by ``update()``:
``keyframe_points.insert``, even FAST, shortens the handles of the keys beside each new one."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .fcurves import GENERATED, KeyCache, ensure_action, ensure_fcurves, read_keys


def remove_generated(fcurve: Any, old: tuple[np.ndarray, np.ndarray, np.ndarray], frames: np.ndarray) -> int:
    """Remove our GENERATED keys of ``fcurve`` (its keys as `read_keys` gave them, ``old``) on ``frames`` (a filled
    span being written anew); the animator's keys are not touched. Returns the keys removed."""
    f, _, gen = old
    if not gen.any() or not len(frames):
        return 0
    hit = gen & np.isin(np.round(f), np.round(np.asarray(frames, np.float64)))
    kp = fcurve.keyframe_points
    for i in np.flatnonzero(hit)[::-1].tolist():
        kp.remove(kp[i], fast=True)
    return int(hit.sum())


def write_reduced(obj: Any, path: str, frames: np.ndarray, keys: Sequence[dict[str, np.ndarray]], group: str,
                  cache: KeyCache | None = None) -> int:
    """Keys = Reduced: on each channel i of ``path``, our GENERATED keys on the filled ``frames`` are replaced by
    ``keys[i]`` (frames, values, and ALIGNED handles lx, ly, rx, ry: `core.keyreduce`), typed GENERATED; a frame with
    the animator's key keeps it. Returns the keys written."""
    if not len(frames):
        return 0
    action, slot = ensure_action(obj)
    fcs = ensure_fcurves(action, slot, [(path, i) for i in range(len(keys))], group=group)
    n = 0
    for i, fc in enumerate(fcs):
        old = None if cache is None else cache.pop((path, i), None)
        if old is None or old[0].size != len(fc.keyframe_points):
            old = read_keys(fc)
        remove_generated(fc, old, frames)
        k = keys[i]
        user = old[0][~old[2]]
        skip = np.isin(np.round(k["frames"]), np.round(user))
        new = {c: k[c][~skip] for c in ("frames", "values", "lx", "ly", "rx", "ry")}
        if new["frames"].size:   # appended, set in bulk, sorted by update(): keyframe_points.insert (even FAST)
            _append(fc.keyframe_points, new)   # shortens its neighbours' handles, the animator's shaped ones too
            n += int(new["frames"].size)
        fc.update()
    return n


def _append(kp: Any, new: dict[str, np.ndarray]) -> None:
    """Append keys at ``new["frames"]`` with ``new["values"]``: GENERATED, Bezier, ALIGNED handles at (lx, ly) and
    (rx, ry), all in bulk (``foreach_set`` recomputes no handle, and a handle set key by key is realigned against its
    neighbours' stale ones); the keys before them are written back as they were read."""
    n_old, m = len(kp), int(new["frames"].size)
    kp.add(m)
    tail = slice(n_old, n_old + m)
    for attr, (x, y) in (("co", ("frames", "values")), ("handle_left", ("lx", "ly")), ("handle_right", ("rx", "ry"))):
        a = np.empty(2 * (n_old + m), np.float32)
        kp.foreach_get(attr, a)
        a = a.reshape(-1, 2)
        a[tail, 0], a[tail, 1] = new[x], new[y]
        kp.foreach_set(attr, a.ravel())
    rna = kp[0].bl_rna.properties
    for prop, item in (("type", GENERATED), ("handle_left_type", "ALIGNED"), ("handle_right_type", "ALIGNED"),
                       ("interpolation", "BEZIER")):
        t = np.empty(n_old + m, np.int32)
        kp.foreach_get(prop, t)
        t[tail] = int(rna[prop].enum_items[item].value)
        kp.foreach_set(prop, t)
