"""Is the scene playing the action at the rate it was captured at? A check on the animator's own keys.

The in-fill runs at the model's rate (30 fps): the network reads each gap's window resampled to it and its answer
is put back on the clip's own frames (``infill.fill``, ``families.body.fill_rate``), so the model sees
the motion as the scene plays it. Blender's BVH importer,
at its defaults, keys one BVH frame per scene frame and leaves the scene at 24 fps: a 30 fps capture then plays
1.25 times too slow, and the model fills a slow-motion walk. Nothing in the action records the capture's rate,
so the check asks the keys: pseudo-gaps cut from fully keyed stretches (``families.body.gate.pseudo_windows``, the real
gaps' median length, in scene frames) are filled as if the scene ran at each common rate, and scored as the
animator gets them (the model's change over its base, applied to the curve of the keys on the clip's own frames,
as the add-on applies it to Blender's curve) against the keys cut out. When another rate fills them clearly closer
than the scene's (``MIN_GAIN``), the rate changes the fill and the add-on says so.

What the check cannot tell is the capture's rate itself: a true 24 fps action played at 24 is filled closer
at 30 too (on a Bandai walk resampled to 24 fps, 12-frame gaps: 16% closer, against 21% for the 30 fps original
played at 24, 15-frame gaps; tests/infill/test_body_rate.py), since the model fills fewer frames of its own per
gap and the round trip through its rate blurs the keys. So the warning names the rate that fills closer and
asks whether the action was captured at it; it runs only on dense keys (a capture: at least ``MIN_RATE_PSEUDO``
fully keyed windows), never on blocking, and only
at the scene rate Blender starts with (``SCENE_RATES``: 24 fps), the rate a BVH import at the importer's defaults
plays at; a scene set to another rate was set on purpose, and the check (2-5 s on one thread) is not run.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ...core.gaps import MODEL_FPS, context_frames
from ...core.quat_np import quat_conj, quat_mul
from ...core.skeleton import Skeleton
from ...infill.fill import fill_clip_at
from ...infill.plan import gap_lengths
from .gate import pseudo_windows

__all__ = ["RATES", "MIN_GAIN", "RateCheck", "rate_check"]

RATES = (24.0, 25.0, 30.0, 50.0, 60.0)   # the rates actions are commonly captured or animated at
SCENE_RATES = (24.0,)   # scene rates checked: Blender's default, which its BVH importer leaves as it is
MIN_GAIN = 0.10   # another rate must fill the pseudo-gaps this much closer (cm) to be named
MIN_RATE_PSEUDO = 3   # pseudo-gaps needed to judge the scene's rate; fewer: no check (a clip of blocking)
LIMIT = 6   # pseudo-gaps scored per rate


@dataclass
class RateCheck:
    """The pseudo-gaps' mean joint position error (the model's units) per rate; ``best``: a rate that fills them
    at least ``MIN_GAIN`` closer than the scene's ``fps``, else None."""

    fps: float
    best: float | None
    gain: float   # 1 - error(best) / error(fps); 0 when best is None
    pseudo: int
    length: int
    error: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict:
        return asdict(self)


def rate_check(model, meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
               fps: float | None, rates: tuple[float, ...] = RATES, limit: int = LIMIT) -> RateCheck | None:
    """The check (module docstring) for a clip on the checkpoint's skeleton at the scene's ``fps``
    (``rotations`` (T, J, 4), ``root`` (T, 3), ``keys`` / ``todo`` (T, J + 1)); None when the rate is unknown or
    not one of ``SCENE_RATES``, or fewer than ``MIN_RATE_PSEUDO`` pseudo-gaps fit in the keyed stretches."""
    if not fps or fps <= 0 or float(fps) not in SCENE_RATES:
        return None
    todo = np.asarray(todo, bool)
    lengths = [n for ns in gap_lengths(todo).values() for n in ns]
    if not lengths:
        return None
    L = int(np.median(lengths))
    full = np.asarray(keys, bool).all(axis=1)
    cands = sorted({float(fps), *(float(r) for r in rates)})
    while True:   # every rate gets the model's context (more scene frames at a higher rate): drop the highest
        wins = pseudo_windows(full, L, context_frames(max(cands)), limit)[:limit]   # rates the keys cannot serve
        if len(wins) >= MIN_RATE_PSEUDO or max(cands) <= float(fps):
            break
        cands = [c for c in cands if c < max(cands)]
    if len(wins) < MIN_RATE_PSEUDO or len(cands) < 2:
        return None
    sk = Skeleton.from_dict(meta["skeleton"])
    J, rj = sk.num_joints, int(meta["root_joint"])
    q, r = np.asarray(rotations, np.float64), np.asarray(root, np.float64)

    def world(rot: np.ndarray, rt: np.ndarray) -> np.ndarray:
        pos = np.broadcast_to(sk.offsets, rot.shape[:-1] + (3,)).copy()
        pos[..., rj, :] = rt
        return sk.forward_kinematics(rot, pos)[1]

    mfps = float(meta.get("fps") or MODEL_FPS)
    curves = []   # the curve of the keys on the clip's own frames (Blender's, per channel): the model's base there
    for a, s, t, b in wins:
        kn = np.ones((b - a, J + 1), bool)
        kn[s - a:t - a] = False
        c = fill_clip_at(model, meta, q[a:b], r[a:b], kn, mfps, gate=False, residual=0.0)
        curves.append((kn, c.rotations[0][s - a:t - a], c.root[0][s - a:t - a]))
    err: dict[str, float] = {}
    for rate in cands:
        e = []
        for (a, s, t, b), (kn, cq, cr) in zip(wins, curves, strict=True):
            f = fill_clip_at(model, meta, q[a:b], r[a:b], kn, rate, gate=False)
            fq, bq = f.rotations[0][s - a:t - a], f.base_rotations[0][s - a:t - a]
            # what the animator gets: the model's change over its base, on the curve of the keys
            got = quat_mul(quat_mul(fq, quat_conj(bq)), cq)
            got = world(got / np.linalg.norm(got, axis=-1, keepdims=True),
                        cr + f.root[0][s - a:t - a] - f.base_root[0][s - a:t - a])
            e.append(np.linalg.norm(got - world(q[s:t], r[s:t]), axis=-1).mean())
        err[f"{rate:g}"] = float(np.mean(e))
    here = err[f"{float(fps):g}"]
    best = min(cands, key=lambda x: err[f"{x:g}"])
    gain = 1.0 - err[f"{best:g}"] / max(here, 1e-12)
    ok = best != float(fps) and gain >= MIN_GAIN
    return RateCheck(float(fps), best if ok else None, round(gain, 4) if ok else 0.0, len(wins), L, err)
