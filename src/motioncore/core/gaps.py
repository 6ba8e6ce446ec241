"""Gaps and the windows sent around them: the one home of the rules, for the library and the add-on.

A *gap* is a run of frames with something to fill; a *window* is a gap with the keyed frames around it
that the model sees as context. The library's ``infill.fill`` and the add-on (which reads only
these frames off the rig, `addon/blender/rigio.py`) both window with this module; the add-on holds a
vendored copy (scripts/build_addon.py), so it imports numpy only.

T frames, E channels (joints and the root).
"""
from __future__ import annotations

import numpy as np

CONTEXT = 10       # frames of keys on each side of a gap: the in-fill models' training context
MODEL_FPS = 30.0   # the rate the in-fill models were trained at: the context is CONTEXT frames at this rate


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) runs of True in a (T,) bool mask."""
    d = np.diff(np.r_[0, np.asarray(mask, bool).astype(np.int8), 0])
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def unkeyed_runs(known: np.ndarray) -> list[list[tuple[int, int]]]:
    """Per element (column) of a (T, E) key mask, the [start, end) runs of its unkeyed frames; none for an element
    with no key at all (nothing to fill between)."""
    k = np.asarray(known, bool)
    return [runs(~k[:, e]) if k[:, e].any() else [] for e in range(k.shape[1])]


def longest_run(mask: np.ndarray) -> int:
    """The length of the longest run of True in a (T,) bool mask (0 when none)."""
    return max((e - s for s, e in runs(mask)), default=0)


def gap_windows(missing: np.ndarray, context: int = CONTEXT) -> list[tuple[int, int, int, int]]:
    """Per gap of a (T,) mask: (s, e, a, b), the gap [s, e) and its window [a, b), up to ``context`` frames
    on either side, clipped to the clip. Windows of close gaps may overlap (each gap is filled on its own)."""
    T = np.asarray(missing).shape[0]
    return [(s, e, max(0, s - context), min(T, e + context)) for s, e in runs(missing)]


def gap_runs(missing: np.ndarray, context: int = CONTEXT, max_len: int = 128
             ) -> list[tuple[list[tuple[int, int]], int, int]]:
    """Gaps separated by single keys (an animator's blocking), filled together: per run, its gaps [(s, e)] and
    its window [a, b), up to ``context`` frames either side, clipped to the clip. A run grows while the next gap
    starts right after one keyed frame and the window stays within ``max_len`` frames; any other gap is a run
    of its own with the window of ``gap_windows``."""
    out: list[tuple[list[tuple[int, int]], int, int]] = []
    T = np.asarray(missing).shape[0]
    for s, e, a, b in gap_windows(missing, context):
        if out:
            gaps, a0, _ = out[-1]
            if s - gaps[-1][1] == 1 and b - a0 <= max_len:
                out[-1] = (gaps + [(s, e)], a0, b)
                continue
        out.append(([(s, e)], a, b))
    assert all(0 <= a and b <= T for _, a, b in out)
    return out


def windows(missing: np.ndarray, context: int = CONTEXT) -> list[tuple[int, int]]:
    """The spans to read for a (T,) mask: inclusive [a, b] per gap with up to ``context`` frames on either
    side, overlapping or touching spans merged (what the add-on evaluates and sends)."""
    out: list[tuple[int, int]] = []
    for _, _, a, b in gap_windows(missing, context):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], b - 1)
        else:
            out.append((a, b - 1))
    return out


def context_frames(scene_fps: float | None) -> int:
    """Scene frames on each side of a gap that cover the model's context (10 frames at 30 fps = 1/3 s):
    40 at 120 fps, 8 at 24 fps (at least CONTEXT // 2); CONTEXT when the rate is unknown."""
    if not scene_fps or scene_fps <= 0:
        return CONTEXT
    return max(CONTEXT // 2, int(np.ceil(CONTEXT * scene_fps / MODEL_FPS - 1e-9)))


def whole_frames(known: np.ndarray) -> np.ndarray:
    """(T, E) known -> whole frames, for a model that fills whole frames (``group_frames``): a frame with
    any key is known (its unkeyed channels are what their curves give, e.g. an FBX export's simplified
    curves), a frame with none is filled."""
    k = np.asarray(known, bool)
    return np.repeat(k.any(axis=1, keepdims=True), k.shape[1], axis=1)


def is_whole_frames(keys: np.ndarray, todo: np.ndarray) -> bool:
    """Whether (T, E) ``keys`` and ``todo`` masks split the clip into whole frames: each frame keyed on
    every channel or none, and filled on every channel or none (what a ``group_frames`` model accepts)."""
    k, t = np.asarray(keys, bool), np.asarray(todo, bool)
    return bool((k.all(1) | ~k.any(1)).all() and (t.all(1) | ~t.any(1)).all())
