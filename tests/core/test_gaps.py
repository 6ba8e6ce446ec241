"""core/gaps.py, the one windowing rule of the library and the add-on, against slow frame-by-frame references."""
from __future__ import annotations

import numpy as np
import pytest

from motioncore.core import gaps


def _slow_runs(m):
    out, start = [], None
    for t, v in enumerate(list(m) + [False]):
        if v and start is None:
            start = t
        elif not v and start is not None:
            out.append((start, t))
            start = None
    return out


def _slow_windows(m, context):
    """Every frame within ``context`` of a missing frame is read; then its inclusive runs."""
    near = [any(m[max(0, t - context):t + context + 1]) for t in range(len(m))]
    return [(s, e - 1) for s, e in _slow_runs(near)]


@pytest.mark.parametrize("seed", range(20))
def test_runs_and_windows_match_frame_by_frame_references(seed):
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 120))
    m = rng.random(T) < rng.uniform(0.05, 0.6)
    ctx = int(rng.integers(0, 15))
    assert gaps.runs(m) == _slow_runs(m)
    assert gaps.windows(m, ctx) == _slow_windows(m, ctx)
    for (s, e, a, b), (s2, e2) in zip(gaps.gap_windows(m, ctx), _slow_runs(m), strict=True):
        assert (s, e) == (s2, e2) and (a, b) == (max(0, s - ctx), min(T, e + ctx))


def test_context_frames_and_whole_frames():
    assert [gaps.context_frames(f) for f in (None, 0, 24, 25, 30, 60, 120)] == [10, 10, 8, 9, 10, 20, 40]
    assert gaps.context_frames(1) == gaps.CONTEXT // 2
    k = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 1]], bool)
    w = gaps.whole_frames(k)
    assert w.tolist() == [[True] * 3, [False] * 3, [True] * 3]
    assert gaps.is_whole_frames(w, ~w) and not gaps.is_whole_frames(k, ~k)


def test_gap_runs_fill_blocked_gaps_together_and_dense_gaps_apart():
    from motioncore.core.gaps import gap_runs

    missing = np.ones(200, bool)
    missing[::10] = False          # blocking: a pose every 10 frames up to frame 100 ...
    missing[100:] = False
    missing[130:140] = True        # ... then one gap between fully keyed stretches
    runs_ = gap_runs(missing, context=10, max_len=64)
    assert [len(g) for g, _, _ in runs_] == [5, 4, 1, 1]   # windows of at most 64 frames: 5 gaps, 4, the last
    for run, a, b in runs_:
        assert b - a <= 64 and a == max(0, run[0][0] - 10) and b == min(200, run[-1][1] + 10)
        assert all(s2 - e1 == 1 for (_, e1), (s2, _) in zip(run, run[1:]))   # one key between them
    assert runs_[-1][0] == [(130, 140)]
    assert sum(len(g) for g, _, _ in runs_) == len(gaps.gap_windows(missing))
