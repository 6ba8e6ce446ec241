"""Foot-contact phase: each side's cleaned contacts, their onsets, and a phase that is 0 at a left onset
and pi at a right one (PFNN's phase; MANN's locomotion phase).

Legend: T frames, F contact joints of one side. Phase is in radians, [0, 2 pi).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.kinematics import foot_contacts

DEFAULT_CYCLE_S = 1.1  # phase cycle length where no steps are seen (median Bandai walk cycle: 1.07-1.10 s)
MIN_STEP_S = 0.1  # onsets closer than this to the previous one are dropped (shuffles, kicks)


def side_contacts(contacts: np.ndarray, fps: float, gap_s: float = 0.07, min_s: float = 0.07) -> np.ndarray:
    """(T,) bool contact of one side (any of its contact joints, contacts (T, F)), with gaps of at most
    ``gap_s`` closed and contacts shorter than ``min_s`` dropped (flicker at 30 fps)."""
    c = np.asarray(contacts, bool).reshape(len(contacts), -1).any(axis=1)
    c = _fill_runs(c, False, int(round(gap_s * fps)), inner_only=True)
    return _fill_runs(c, True, int(round(min_s * fps)) - 1, inner_only=False)


def _fill_runs(c: Any, value: bool, max_len: int, inner_only: bool) -> np.ndarray:
    """Flip runs of ``value`` of length <= max_len (only those between two other runs if inner_only)."""
    c = np.array(c, bool)
    if max_len < 1 or len(c) == 0:
        return c
    edges = np.flatnonzero(np.diff(c.astype(np.int8))) + 1
    starts, stops = np.r_[0, edges], np.r_[edges, len(c)]
    for a, b in zip(starts, stops):
        if c[a] == value and b - a <= max_len and (not inner_only or (a > 0 and b < len(c))):
            c[a:b] = not value
    return c


def contact_onsets(side: np.ndarray) -> np.ndarray:
    """Frames where a (cleaned) side contact starts; a contact already under way at frame 0 has no onset."""
    s = np.asarray(side, bool)
    return np.flatnonzero(s[1:] & ~s[:-1]) + 1


def phase_from_onsets(num_frames: int, left: Sequence[int] | np.ndarray, right: Sequence[int] | np.ndarray, fps: float,
                      default_cycle_s: float = DEFAULT_CYCLE_S, standing_after_s: float = 1.0,
                      min_step_s: float = MIN_STEP_S) -> tuple[np.ndarray, np.ndarray]:
    """Phase (T,) in [0, 2 pi) and its change (T,) in radians per frame (phase[t+1] - phase[t], unwrapped;
    the last frame repeats the previous value).

    Phase is 0 at each left onset and pi at each right onset, linear in between and unwrapped (an L -> R
    or R -> L step adds pi, a repeated side adds 2 pi). Where a step takes longer than ``standing_after_s``
    per half cycle (the character stood), whole cycles are added so the rate comes nearest the default
    (one cycle per ``default_cycle_s``). Before the first / after the last onset the phase is extrapolated
    at the neighbouring interval's rate, or at the default rate if there is a single onset or the stretch
    is longer than ``standing_after_s``. Without onsets it advances at the default rate from 0. Onsets
    closer than ``min_step_s`` to the previous kept one are dropped."""
    T = int(num_frames)
    rate0 = 2 * np.pi / (default_cycle_s * fps)  # radians per frame
    ev: dict[int, float] = {int(f): np.pi for f in right}
    ev.update({int(f): 0.0 for f in left})  # a left and right onset on one frame: left wins
    kept: list[int] = []
    for f in sorted(f for f in ev if 0 <= f < T):
        if not kept or f - kept[-1] >= min_step_s * fps:
            kept.append(f)
    frames = np.array(kept, dtype=np.int64)
    t = np.arange(T, dtype=np.float64)
    if len(frames) == 0:
        u = rate0 * t
    else:
        vals = [ev[int(frames[0])]]
        for f0, f1 in zip(frames[:-1], frames[1:]):
            d = (ev[int(f1)] - vals[-1]) % (2 * np.pi)
            d = d if d > 1e-9 else 2 * np.pi
            n = 0
            if (f1 - f0) / fps > standing_after_s * d / np.pi:  # a stand between the steps
                n = max(0, int(np.floor((rate0 * (f1 - f0) - d) / (2 * np.pi) + 0.5)))
            vals.append(vals[-1] + d + 2 * np.pi * n)
        v = np.array(vals)
        u = np.interp(t, frames, v)
        long_s = standing_after_s * fps
        r_first = (v[1] - v[0]) / (frames[1] - frames[0]) if len(v) > 1 and frames[0] <= long_s else rate0
        r_last = (v[-1] - v[-2]) / (frames[-1] - frames[-2]) if len(v) > 1 and T - 1 - frames[-1] <= long_s else rate0
        u = np.where(t < frames[0], v[0] - r_first * (frames[0] - t), u)
        u = np.where(t > frames[-1], v[-1] + r_last * (t - frames[-1]), u)
    du = np.diff(u, append=u[-1:] + (u[-1] - u[-2] if T > 1 else rate0))
    return np.mod(u, 2 * np.pi), du


def foot_phase(global_positions: np.ndarray, left_feet: Sequence[int], right_feet: Sequence[int], fps: float,
               height: float = 8.0, speed: float = 50.0, **kwargs: float) -> tuple[np.ndarray, np.ndarray]:
    """Phase (T,) in [0, 2 pi) and radians per frame (T,) from foot contacts (`kinematics.foot_contacts`:
    within ``height`` of the joint's lowest point in the clip and slower than ``speed`` units/s; the
    defaults suit cm at 30-60 fps). A side is in contact when any of its joints is."""
    ct = foot_contacts(global_positions, tuple(left_feet) + tuple(right_feet), fps, height, speed)
    nl = len(left_feet)
    left = contact_onsets(side_contacts(ct[:, :nl], fps))
    right = contact_onsets(side_contacts(ct[:, nl:], fps))
    return phase_from_onsets(len(global_positions), left, right, fps, **kwargs)
