"""The clip's own motion as a donor for a gap (``infill-body``): imported mocap with holes has dense stretches of
the same performer on the same rig, and a gap in a walk is often best filled by another step of the same walk.

For a gap [s, e) the donor search (``search``) looks through the clip's fully keyed stretches for the segment
whose two sides match the gap's two sides: ``CONTEXT`` keyed frames before and after, each frame described by its
local rotations (6D) and their velocities, the root's tilt and height and its ground velocity and turn rate in the
character's own facing frame; plus what the gap spans (the turn and the ground travel from the key before to the
key after, in the facing frame of the key before). Every dimension is standardised on the clip's own keyed frames
and grouped (``GROUPS``: each group weighs the same whatever its size); frames nearer the gap weigh more. A donor
segment may be up to ``WARPS`` times the gap's length: it is time-warped onto the gap.

The ``K`` best segments (none overlapping another by more than half the gap) are each warped onto the keys
(``warp``): resampled to the gap's length, every joint's rotation turned by an offset that is exact at both keys
and blended between them by smoothstep, the root's ground path turned by the facing difference at the key
before and its end error spread by the same smoothstep, so the fill is exact at the keys and smooth; then
blended by match cost. The best match's cost is the gap's confidence: the gate
(``families.body.gate``, ``fit_donor``) picks, on pseudo-gaps cut from the clip's own keys, the cost below which
a gap takes the donor and how much of it (a share blended with the gated network), or none.

Fast search (``search``: one vectorised distance over every candidate) and the slow obvious reference
(``search_slow`` in tests/infill/test_body_donor.py: a loop over candidates, each cost from its definition) agree (tests/infill/test_body_donor.py).

Legend: T frames, J joints, L gap frames, C context frames, D descriptor dimensions, N candidate segments.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.interpolate import CubicSpline

from motioncore.core.kinematics import yaw_quat
from motioncore.core.rotations import (
    axis_angle_to_quat,
    quat_apply,
    quat_conj,
    quat_continuity,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_axis_angle,
    quat_to_rot6d,
)
from motioncore.core.skeleton import Skeleton

__all__ = ["CONTEXT", "K", "WARPS", "GROUPS", "Clip", "Match", "DonorFit", "describe", "search",
           "warp", "donor_fill", "fit_donor", "SHARES"]

CONTEXT = 5   # keyed frames matched on each side of a gap
K = 3   # donor segments blended per gap
WARPS = (0.8, 0.9, 1.0, 1.12, 1.25)   # donor segment lengths, as a multiple of the gap's (time-warped onto it)
GROUPS = {"pose": 1.0, "pose_vel": 1.0, "root": 1.0, "root_vel": 1.0, "span": 1.0}   # weight of each group
SHARES = (0.25, 0.5, 0.75, 1.0)   # the donor's share against the gated network, where it fills a gap
MIN_GAIN = 0.02   # the donor must lower the pseudo-gaps' error (cm and degrees over Bezier's) this much to be used
STEPS = {"joints": True, "root_rotation": True, "reach": 8}   # which rotations take the keys' own steps at the keys (the root's path always)
MIN_PSEUDO = 4   # pseudo-gaps needed to judge the donor at all


@dataclass
class Clip:
    """A clip described for the search: per frame (T, D) the standardised, group-weighted pose (``pose``: local
    rotations, root tilt and height) and its backward velocity (``vel``); the facing angle (T,), the folded root's
    global rotation (T, 4) and position (T, 3); the fully keyed frames (T,)."""

    pose: np.ndarray
    vel: np.ndarray
    theta: np.ndarray
    g: np.ndarray
    x: np.ndarray
    full: np.ndarray
    span_scale: np.ndarray   # (3,) the span features' scale (turn, ground travel x, z)


@dataclass
class Match:
    """One donor segment: it starts at ``d`` and runs ``length`` frames (then warped onto the gap); ``cost`` its
    match cost."""

    cost: float
    d: int
    length: int


@dataclass
class DonorFit:
    """The gate's judgement of the donor for one gap-length bucket: gaps whose best match costs at most
    ``threshold`` take ``share`` of the donor (the rest the gated network); ``threshold`` None: the donor is not
    used. ``error``: {network, donor, chosen: [cm, deg]} on the pseudo-gaps; ``used``: pseudo-gaps it filled."""

    threshold: float | None
    share: float
    pseudo: int
    used: int = 0
    error: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return asdict(self)


def _facing(sk: Skeleton, body, q: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """(T,) the facing angle about +Y (radians; 0 faces +Z), from the hips and shoulders as ``fill._facing``."""
    gp = sk.forward_kinematics(q, pos)[1]
    across = gp[:, body.hips[0]] - gp[:, body.hips[1]]
    if body.shoulders is not None:
        across = across + gp[:, body.shoulders[0]] - gp[:, body.shoulders[1]]
    return np.arctan2(-across[:, 2], across[:, 0])   # fwd = across x up = (-a_z, 0, a_x)


def _wrap(a: np.ndarray) -> np.ndarray:
    return (np.asarray(a) + np.pi) % (2.0 * np.pi) - np.pi


def _ground(theta: np.ndarray, v: np.ndarray) -> np.ndarray:
    """World vectors ``v`` (..., 3) in the facing frame of ``theta`` (...): their (x, z) ground components."""
    return quat_apply(yaw_quat(-np.asarray(theta, np.float64)), v)[..., [0, 2]]


def _raw(layout, q: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                           list[tuple[str, slice]]]:
    """Unscaled per-frame pose features (T, D), and the facing angle, root rotation and position, and the groups'
    column slices."""
    from motioncore.families.body.fill import _fold

    sk = layout.skeleton
    g, x = _fold(layout, q, pos)
    theta = _facing(sk, layout.body, q, pos)
    loc = quat_to_rot6d(q[:, list(layout.joints[1:])]).reshape(len(q), -1)
    tilt = quat_to_rot6d(quat_mul(yaw_quat(-theta), g))
    n = loc.shape[1]
    feats = np.concatenate([loc, tilt, x[:, 1:2]], axis=1)
    return feats, theta, g, x, [("pose", slice(0, n)), ("root", slice(n, n + 7))]


def describe(layout, q: np.ndarray, pos: np.ndarray, full: np.ndarray, groups: dict | None = None) -> Clip:
    """The clip (``q`` (T, J, 4) local WXYZ, ``pos`` (T, J, 3) local, on the model's skeleton) for the search, its
    scales from the fully keyed frames ``full`` (T,)."""
    groups = GROUPS if groups is None else groups
    q, pos, full = np.asarray(q, np.float64), np.asarray(pos, np.float64), np.asarray(full, bool)
    feats, theta, g, x, cols = _raw(layout, q, pos)
    vel = np.zeros_like(feats)
    vel[1:] = feats[1:] - feats[:-1]
    rv = np.zeros((len(q), 4))   # the root's ground velocity in its facing frame, vertical velocity, turn rate
    rv[1:, :2] = _ground(theta[1:], x[1:] - x[:-1])
    rv[1:, 2] = x[1:, 1] - x[:-1, 1]
    rv[1:, 3] = _wrap(theta[1:] - theta[:-1])
    pair = full & np.r_[False, full[:-1]]   # frames whose backward velocity is keyed
    v = np.concatenate([vel, rv], 1)
    n_pose = cols[0][1].stop
    wp = np.where(np.arange(feats.shape[1]) < n_pose, np.sqrt(groups["pose"] / n_pose),
                  np.sqrt(groups["root"] / (feats.shape[1] - n_pose)))
    wv = np.where(np.arange(v.shape[1]) < n_pose, np.sqrt(groups["pose_vel"] / n_pose),
                  np.sqrt(groups["root_vel"] / (v.shape[1] - n_pose)))
    pose = feats / _scale(feats, full) * wp
    out_v = v / _scale(v, pair) * wv
    # the span: turn and ground travel over a gap; scaled by the clip's turn and travel over 30 frames
    kf = np.flatnonzero(full)
    lag = min(30, max(1, len(kf) // 4))
    a = kf[:-lag] if len(kf) > lag else kf
    ok = a[full[np.minimum(a + lag, len(q) - 1)]] if len(a) else a
    b = np.minimum(ok + lag, len(q) - 1)
    span = np.concatenate([_wrap(theta[b] - theta[ok])[:, None], _ground(theta[ok], x[b] - x[ok])], 1) \
        if len(ok) > 1 else np.ones((2, 3))
    sc = np.maximum(np.sqrt((span ** 2).mean(0)), [0.05, 1.0, 1.0])
    return Clip(pose, out_v, theta, g, x, full, sc / np.sqrt(groups["span"] / 3.0 + 1e-12))


def _scale(f: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per column the spread over ``rows`` (a floor: a tenth of the median spread, so a still joint's noise does
    not count)."""
    s = f[rows].std(0) if rows.sum() > 1 else np.ones(f.shape[1])
    return np.maximum(s, 0.1 * max(float(np.median(s)), 1e-6))


def _frame_weights(C: int) -> np.ndarray:
    """(C,) weights of the context frames, nearest the gap first: linear, summing to 1 (their square roots scale
    the descriptors, so the squared distance is the weighted mean)."""
    w = np.arange(C, 0, -1, dtype=np.float64)
    return w / w.sum()


def _vector(clip: Clip, before: int, after: int, C: int) -> np.ndarray:
    """The match descriptor of a segment whose key before is ``before`` and key after is ``after``: the C frames up
    to ``before`` (nearest first) with their backward velocities, the C frames from ``after`` with their forward
    velocities, and the span (turn, ground travel) between the two keys."""
    sw = np.sqrt(_frame_weights(C))[:, None]
    fb = np.arange(before, before - C, -1)
    fa = np.arange(after, after + C)
    side_b = np.concatenate([clip.pose[fb], clip.vel[fb]], 1) * sw
    side_a = np.concatenate([clip.pose[fa], clip.vel[fa + 1]], 1) * sw
    return np.concatenate([side_b.ravel(), side_a.ravel(), _span(clip, before, after)])


def _span(clip: Clip, before, after) -> np.ndarray:
    th = clip.theta
    v = np.concatenate([np.atleast_1d(_wrap(th[after] - th[before]))[..., None],
                        _ground(np.atleast_1d(th[before]), np.atleast_2d(clip.x[after] - clip.x[before]))], -1)
    return (v / clip.span_scale).squeeze(0) if np.ndim(before) == 0 else v / clip.span_scale


def _context(full: np.ndarray, s: int, e: int, C: int) -> int:
    """The context the gap [s, e) has: up to C keyed frames each side with their velocities (0: too few)."""
    T = len(full)
    for c in range(C, 0, -1):
        if s - c - 1 >= 0 and e + c < T and full[s - c - 1:s].all() and full[e:e + c + 1].all():
            return c
    return 0


def _lengths(L: int) -> list[int]:
    return sorted({max(1, int(round(L * w))) for w in WARPS})


def _valid(full: np.ndarray, n: int, C: int) -> np.ndarray:
    """(T,) whether a donor segment of ``n`` frames can start at each frame: its C context frames either side
    and their velocities' neighbours all keyed."""
    T = len(full)
    cs = np.r_[0, np.cumsum(full.astype(np.int64))]
    d = np.arange(T)
    lo, hi = d - C - 1, d + n + C + 1
    ok = (lo >= 0) & (hi <= T)
    lo, hi = lo.clip(0, T), hi.clip(0, T)
    return ok & (cs[hi] - cs[lo] == hi - lo)


def search(clip: Clip, s: int, e: int, k: int = K, full: np.ndarray | None = None, C: int = CONTEXT) -> list[Match]:
    """The ``k`` best donor segments for the gap [s, e) (best first; none overlapping another's donor frames by
    more than half the gap), from the frames keyed in ``full`` (default the clip's): every candidate's cost in
    one vectorised distance. Empty when the gap has no keyed context or nothing matches."""
    full = clip.full if full is None else np.asarray(full, bool)
    c = _context(full, s, e, C)
    if c == 0:
        return []
    query = _vector(clip, s - 1, e, c)
    sw = np.sqrt(_frame_weights(c))[:, None]
    found: list[tuple[float, int, int]] = []
    for n in _lengths(e - s):
        d = np.flatnonzero(_valid(full, n, c))
        if d.size == 0:
            continue
        fb = (d - 1)[:, None] - np.arange(c)[None]   # (N, C) nearest first
        fa = (d + n)[:, None] + np.arange(c)[None]
        side_b = np.concatenate([clip.pose[fb], clip.vel[fb]], -1) * sw   # (N, C, D)
        side_a = np.concatenate([clip.pose[fa], clip.vel[fa + 1]], -1) * sw
        X = np.concatenate([side_b.reshape(len(d), -1), side_a.reshape(len(d), -1), _span(clip, d - 1, d + n)], 1)
        cost = ((X - query[None]) ** 2).sum(1)
        found += list(zip(cost.tolist(), d.tolist(), [n] * len(d), strict=True))
    return _pick(found, e - s, k)


def _pick(found: list[tuple[float, int, int]], L: int, k: int) -> list[Match]:
    """The ``k`` cheapest, each overlapping no cheaper pick's donor frames by more than half the gap."""
    out: list[Match] = []
    for cost, d, n in sorted(found):
        if all(min(d + n, m.d + m.length) - max(d, m.d) <= L // 2 for m in out):
            out.append(Match(float(cost), int(d), int(n)))
            if len(out) == k:
                break
    return out


def _smooth(L: int) -> np.ndarray:
    """(L + 2,) smoothstep from the key before (0) to the key after (1)."""
    t = np.arange(L + 2) / (L + 1.0)
    return t * t * (3.0 - 2.0 * t)


def warp(layout, clip: Clip, q: np.ndarray, m: Match, s: int, e: int) -> tuple[np.ndarray, np.ndarray,
                                                                               np.ndarray]:
    """The donor segment ``m`` on the gap [s, e) of the clip ``q`` (T, J, 4): its frames from the key before to
    the key after resampled to the gap's, every model joint's local rotation and the root's global rotation turned
    by an offset exact at both keys (smoothstep between), the root's ground path turned by the facing difference at
    the key before and its end error spread likewise. Returns the gap's local rotations (L, J, 4) (the model
    joints'; others as ``q``), the root's global rotation (L, 4) and position (L, 3)."""
    L, n = e - s, m.length
    u = np.arange(-1, L + 3) * (n + 1.0) / (L + 1.0) + (m.d - 1)   # donor time: a frame beyond each key
    src = np.arange(m.d - 2, m.d + n + 2)   # the donor's frames and one keyed frame beyond each end
    jn = list(layout.joints[1:])
    wl = _resample(q[src][:, jn], src, u)   # (L + 4, R - 1, 4)
    wg = _resample(clip.g[src], src, u)
    wx = CubicSpline(src, clip.x[src], axis=0)(u) if n != L else clip.x[m.d - 2:m.d + n + 2]
    sm = _smooth(L)
    out = np.array(q[s - 1:e + 1], np.float64)
    out[:, jn], bd, ad = _offset(q[s - 1, jn], q[e, jn], wl, sm)
    if STEPS["joints"]:
        out[:, jn] = _hermite(out[:, jn], q[s - 2, jn], q[e + 1, jn], bd, ad, STEPS["reach"])
    g, bd, ad = _offset(clip.g[s - 1], clip.g[e], wg, sm)
    if STEPS["root_rotation"]:
        g = _hermite(g, clip.g[s - 2], clip.g[e + 1], bd, ad)
    turn = yaw_quat(np.array(_wrap(clip.theta[s - 1] - clip.theta[m.d - 1])))
    xe = clip.x[s - 1] + quat_apply(turn, wx - wx[1])
    x = xe[1:-1] + sm[:, None] * (clip.x[e] - xe[-2])[None]
    h0, h1 = _basis(L)   # the root's steps at both keys: the keys' own, where the donor's were
    x = x + h0[:, None] * ((clip.x[s - 1] - clip.x[s - 2]) - (xe[1] - xe[0])) \
        + h1[:, None] * ((clip.x[e + 1] - clip.x[e]) - (xe[-1] - xe[-2]))
    return out[1:-1], g[1:-1], x[1:-1]


def _basis(L: int, reach: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(L + 2,) each: cubic Hermite curves zero at both keys, with a step of one a frame at the key before
    (``h0``) or the key after (``h1``) and none at the other; within ``reach`` frames of their key (default the
    whole gap), zero beyond."""
    R = float(L + 1 if reach is None else min(reach, L + 1))
    i = np.arange(L + 2)
    t0, t1 = np.clip(i / R, 0.0, 1.0), np.clip((L + 1 - i) / R, 0.0, 1.0)
    return R * (t0 ** 3 - 2 * t0 ** 2 + t0), -R * (t1 ** 3 - 2 * t1 ** 2 + t1)


def _hermite(f: np.ndarray, before: np.ndarray, after: np.ndarray, d_before: np.ndarray, d_after: np.ndarray,
             reach: int | None = None) -> np.ndarray:
    """``f`` (L + 2, ..., 4), exact at both keys (its ends), turned (on the left) by a rotation that is none at the
    keys and changes its first and last steps by the difference between the keys' own steps there (``before``:
    the frame before the key before, ``after``: the frame after the key after) and the donor's (``d_before``,
    ``d_after``, on the keys): the donor's flow through each key, without the kink of a different speed."""
    h0, h1 = _basis(len(f) - 2, reach)
    w0 = quat_to_axis_angle(quat_mul(quat_mul(f[0], quat_conj(before)), quat_mul(d_before, quat_conj(f[0]))))
    w1 = -quat_to_axis_angle(quat_mul(d_after, quat_conj(after)))
    sh = (-1,) + (1,) * (f.ndim - 1)
    turn = axis_angle_to_quat(h0.reshape(sh) * w0[None] + h1.reshape(sh) * w1[None])
    return quat_normalize(quat_mul(turn, f))


def _resample(qs: np.ndarray, src: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Rotations ``qs`` (N, ..., 4) at frames ``src`` resampled at times ``u`` by a cubic spline through their
    components (sign-continuous), normalised: smooth where a linear blend between frames would kink. At whole
    frames (no warp) the frames themselves."""
    if np.allclose(u, np.round(u)):
        return qs[np.round(u).astype(int) - src[0]]
    qs = quat_continuity(qs, axis=0)
    return quat_normalize(CubicSpline(src, qs, axis=0)(u))


def _offset(k0: np.ndarray, k1: np.ndarray, w: np.ndarray, sm: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``w`` (L + 4, ..., 4: a frame beyond each key) turned (on the left) by the offsets that put its frame at the
    key before on ``k0`` and at the key after on ``k1``, blended between by ``sm`` (L + 2,): the frames from key to
    key (L + 2, ..., 4), and the frames beyond each key on their key's offset."""
    o0 = quat_mul(k0, quat_conj(w[1]))
    o1 = quat_mul(k1, quat_conj(w[-2]))
    o = quat_slerp(o0, o1, sm.reshape((-1,) + (1,) * (w.ndim - 2)))
    return quat_normalize(quat_mul(o, w[1:-1])), quat_mul(o0, w[0]), quat_mul(o1, w[-1])


def _blend(quats: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """Weighted mean of rotations (normalised sum, each on the first's hemisphere)."""
    ref = quats[0]
    acc = np.zeros_like(ref)
    for qq, w in zip(quats, weights, strict=True):
        acc = acc + w * np.where(np.sum(qq * ref, -1, keepdims=True) < 0, -qq, qq)
    return quat_normalize(acc)


def donor_fill(layout, clip: Clip, q: np.ndarray, pos: np.ndarray, s: int, e: int, k: int = K,
               full: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The gap [s, e) of the clip (``q`` (T, J, 4), ``pos`` (T, J, 3) local on the model's skeleton; the gap's own
    values are read only for the root's ancestors, which keep them) filled from its ``k`` best donor segments,
    blended by inverse match cost: (rotations (L, J, 4), positions (L, J, 3), the best match's cost), or None
    when nothing matches."""
    from motioncore.families.body.fill import _unfold

    ms = search(clip, s, e, k, full)
    if not ms:
        return None
    parts = [warp(layout, clip, q, m, s, e) for m in ms]
    w = 1.0 / np.maximum([m.cost for m in ms], 1e-9)
    w = w / w.sum()
    oq = _blend([p[0] for p in parts], w)
    g = _blend([p[1] for p in parts], w)
    x = np.einsum("k,kld->ld", w, np.stack([p[2] for p in parts]))
    oq, op = oq.copy(), np.array(pos[s:e], np.float64)
    _unfold(layout, oq, op, g, x)
    return oq, op, ms[0].cost


def _window_errors(sk: Skeleton, q, pos, tq, tpos, frames) -> tuple[np.ndarray, np.ndarray]:
    """Per window (B,): mean global joint position error and mean local rotation error (degrees) over
    ``frames`` (B, T)."""
    p = sk.forward_kinematics(q, pos)[1]
    tp = sk.forward_kinematics(tq, tpos)[1]
    cm = np.linalg.norm(p - tp, axis=-1).mean(-1)
    deg = np.degrees(2.0 * np.arccos(np.abs(np.sum(q * tq, -1)).clip(0.0, 1.0))).mean(-1)
    m = np.asarray(frames, bool)
    n = np.maximum(m.sum(1), 1)
    return (cm * m).sum(1) / n, (deg * m).sum(1) / n


def fit_donor(layout, clip: Clip, q: np.ndarray, pos: np.ndarray, wins: list[tuple[int, int, int, int]],
              net: tuple[np.ndarray, np.ndarray], bez: tuple[np.ndarray, np.ndarray]) -> DonorFit:
    """Judge the donor on the gate's pseudo-gaps ``wins`` ((a, s, e, b): gaps [s, e) cut from the clip's keys,
    windows [a, b)) against the gated network's fill of the same windows ``net`` ((B, W, J, 4), (B, W, J, 3)) and
    Blender's Bezier ``bez``: each pseudo-gap filled from the clip's other keyed frames (the pseudo-gap itself
    not), then the match-cost threshold and the donor's share (``SHARES``) that lower position error over
    Bezier's plus rotation error over Bezier's most, kept when that beats the network alone by ``MIN_GAIN``."""
    from motioncore.families.body.gate_curve import blend_pose

    sk = layout.skeleton
    idx = np.stack([np.arange(a, b) for a, _, _, b in wins])
    tq, tp = q[idx], pos[idx]
    frames = np.zeros(idx.shape, bool)
    dq, dp, cost = np.array(net[0]), np.array(net[1]), np.full(len(wins), np.inf)
    for i, (a, s, e, _) in enumerate(wins):
        frames[i, s - a:e - a] = True
        keyed = clip.full.copy()
        keyed[s:e] = False
        qq, pp = q.copy(), pos.copy()   # the gap's own frames: Bezier's, as a real gap's (the root's ancestors)
        qq[s:e], pp[s:e] = bez[0][i, s - a:e - a], bez[1][i, s - a:e - a]
        got = donor_fill(layout, clip, qq, pp, s, e, full=keyed)
        if got is not None:
            dq[i, s - a:e - a], dp[i, s - a:e - a], cost[i] = got
    bcm, bdeg = _window_errors(sk, bez[0], bez[1], tq, tp, frames)
    ncm, ndeg = _window_errors(sk, net[0], net[1], tq, tp, frames)
    B_cm, B_deg = max(bcm.sum(), 1e-9), max(bdeg.sum(), 1e-9)

    def total(cm, deg):
        return cm.sum() / B_cm + deg.sum() / B_deg

    base = total(ncm, ndeg)
    best = (base, None, 1.0, 0)
    errs = {}
    for share in SHARES:
        bq, bp = blend_pose(net[0], net[1], dq, dp, share)
        errs[share] = _window_errors(sk, bq, bp, tq, tp, frames)
        for th in np.unique(cost[np.isfinite(cost)]):
            use = cost <= th
            sc = total(np.where(use, errs[share][0], ncm), np.where(use, errs[share][1], ndeg))
            if sc < best[0] - 1e-12:
                best = (sc, float(th), float(share), int(use.sum()))
    sc, th, share, used = best
    if th is not None and sc > base * (1.0 - MIN_GAIN):
        th, used = None, 0
    full = errs[1.0]
    chosen = (ncm, ndeg) if th is None else (np.where(cost <= th, errs[share][0], ncm),
                                             np.where(cost <= th, errs[share][1], ndeg))
    error = {"bezier": [float(bcm.mean()), float(bdeg.mean())], "network": [float(ncm.mean()), float(ndeg.mean())],
             "donor": [float(full[0].mean()), float(full[1].mean())],
             "chosen": [float(chosen[0].mean()), float(chosen[1].mean())]}
    return DonorFit(th, share if th is not None else 0.0, len(wins), used, error)


def judge(layout, q: np.ndarray, pos: np.ndarray, full: np.ndarray, wins: list[tuple[int, int, int, int]],
          fill, fit) -> dict:
    """The gate's hook (``families.body.gate.fit_gate``): the donor judged on one bucket's pseudo-gaps ``wins``
    of the clip (``q`` (T, J, 4), ``pos`` (T, J, 3) on the model's skeleton, ``full`` its fully keyed frames)
    against the gated network's fill of the same windows (``fill((rot, root))``, at ``fit``'s weights; at (0, 0):
    Blender's Bezier). Returns ``DonorFit.summary()``."""
    clip = describe(layout, q, pos, full)
    return fit_donor(layout, clip, q, pos, wins, fill((fit.rot, fit.root)), fill((0.0, 0.0))).summary()


def fill_gaps(layout, gate, q: np.ndarray, r: np.ndarray, base_q: np.ndarray, base_r: np.ndarray,
              rj: int, keys: np.ndarray, todo: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """The clip's gaps (whole frames of ``todo`` (T, J + 1)) filled as the gate chose per gap: where its bucket's
    ``DonorFit`` has a threshold and the gap's best match costs no more, ``share`` of the donor blended with the
    network's fill (``q`` (T, J, 4), root translation ``r`` (T, 3)); Blender's curve (``base_q``, ``base_r``)
    gives the donor's context. Returns the rotations, the root, and per gap what filled it: {gap [s, e), by:
    "donor" | "network" | "bezier", share, cost}."""
    from motioncore.core.gaps import runs
    from motioncore.families.body.gate_curve import blend_pose

    sk = layout.skeleton
    full = np.asarray(keys, bool).all(1)
    pos = np.broadcast_to(sk.offsets, q.shape[:2] + (3,)).copy()
    pos[:, rj] = base_r
    clip = None
    out_q, out_r, report = q.copy(), r.copy(), []
    for s, e in runs(np.asarray(todo, bool).any(1)):
        w = gate.weights(e - s)
        by = {"gap": [int(s), int(e)], "by": "network" if max(w) > 0 else "bezier", "share": 0.0}
        fit = gate.donor(e - s)
        if fit and fit.get("threshold") is not None and np.asarray(todo[s:e]).all():
            clip = describe(layout, base_q, pos, full) if clip is None else clip
            got = donor_fill(layout, clip, base_q, pos, s, e)
            if got is not None:
                by["cost"] = round(got[2], 4)
                if got[2] <= fit["threshold"]:
                    npos = pos[s:e].copy()
                    npos[:, rj] = r[s:e]
                    bq, bp = blend_pose(q[s:e], npos, got[0], got[1], fit["share"])
                    out_q[s:e], out_r[s:e] = bq, bp[:, rj]
                    by.update(by="donor", share=fit["share"])
        report.append(by)
    return out_q, out_r, report
