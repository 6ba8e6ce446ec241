"""The request-time gate of the body in-fill (``infill-body``): how much of the network's correction this clip
should get, fitted on the clip's own keys.

An animator's clip is not the training data. Its keyed frames are data the model never saw, with the truth
known, so before filling the real gaps we cut *pseudo-gaps* from them and ask how well the correction does
there:

- **dense keys** (a capture being cleaned, a re-timed shot): windows of ``CONTEXT`` keyed frames, a pseudo-gap
  of the real gap's length, ``CONTEXT`` keyed frames, all inside fully keyed stretches (never touching a real
  gap), up to ``MAX_PSEUDO`` of them spread over the clip;
- **sparse keys** (blocking): leave one key out, fill it from its neighbours with the clip's other keys, and
  score the frame of the key left out.

Per gap-length bucket (``bucket``) the weights of the rotations' and the root's correction are picked from
``GRID`` (0: Blender's Bezier of the keys exactly; 1: the network as trained): the rotations' weight minimises
position error over Bezier's plus rotation error over Bezier's on the pseudo-gaps (the root at Bezier's), then
the root's weight minimises the position error. A correction that does not help on this clip goes toward
Bezier; ties go to the smaller weight. The network runs once per pseudo-window; the weights only re-assemble.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from motioncore.core.gaps import CONTEXT
from motioncore.families.body.fill import ONE_PASS
from motioncore.families.body.fill_plant import judge_plant
from motioncore.families.body.gate_curve import GRID, fit_blend  # GRID: the candidate weights, of both
from motioncore.infill.plan import bucket, gap_lengths

Pair = tuple[float, float]

__all__ = ["Gate", "GateFit", "fit_gate", "bucket", "pseudo_windows", "GRID", "MAX_PSEUDO"]

MAX_PSEUDO = 24  # pseudo-gaps per length bucket
MIN_DENSE_FOR_WEIGHTS = 4  # dense pseudo-gaps needed to fit the weights on them alone; fewer: leave-one-key-out
JUDGE_CONTEXT = 4  # keyed frames either side of a pseudo-gap that only judges planting (a short clip)


@dataclass
class GateFit:
    """The weights for one gap-length bucket and what they were fitted on."""

    length: int  # the pseudo-gaps' length (the bucket's median real gap)
    rot: float  # weight of the rotations' correction
    root: float  # weight of the root's correction
    pseudo: int  # pseudo-gaps scored
    method: str  # "pseudo-gaps" | "leave-one-key-out" | "none" (nothing keyed to learn from: weight 1) | "too-long"
    # (a gap longer than the network's one pass, ``families.body.fill.ONE_PASS``: Blender's curve, weight 0)
    error: dict[str, list[float]] = field(default_factory=dict)  # {bezier, model, gated: [cm, deg]}
    plant: bool = True  # plant the feet in gaps of this length (``families.body.fill_plant``)
    plant_error: dict = field(default_factory=dict)  # its judgement: {unplanted, planted: [cm, deg, skate]}
    curve: str = "bezier"  # the curve the user has (their keys' interpolation; ``families.body.gate_curve``)
    blend: float = 1.0  # how far from the user's curve toward the gated fill (0: the user's curve exactly)
    curve_error: dict = field(default_factory=dict)  # {curve, fill, blended: [cm, deg]} on the pseudo-gaps
    donor: dict = field(default_factory=dict)  # the clip's own motion judged here (``families.body.fill_donor``)


@dataclass
class Gate:
    """Per bucket (``bucket(length)``) the fitted weights."""

    fits: dict[int, GateFit]
    filled_by: list[dict] = field(default_factory=list)  # per gap what filled it, with the donor on

    def donor(self, length: int) -> dict:
        """The donor's fit for gaps of ``length`` frames ({} when not judged: the donor is not used)."""
        f = self.fits.get(bucket(length))
        return {} if f is None else f.donor

    def weights(self, length: int) -> tuple[float, float]:
        f = self.fits.get(bucket(length))
        return (1.0, 1.0) if f is None else (f.rot, f.root)

    def plant(self, length: int) -> bool:
        """Whether the feet are planted in gaps of ``length`` frames (the pseudo-gaps said it does not cost error)."""
        f = self.fits.get(bucket(length))
        return True if f is None else f.plant

    def blend(self, length: int) -> float:
        """How far from the user's curve toward the gated fill in gaps of ``length`` frames (1 without a fit)."""
        f = self.fits.get(bucket(length))
        return 1.0 if f is None else f.blend

    def summary(self) -> list[dict]:
        return [asdict(f) for _, f in sorted(self.fits.items())]

    def mean_weight(self) -> float:
        return float(np.mean([f.rot for f in self.fits.values()])) if self.fits else 1.0


def pseudo_windows(full: np.ndarray, length: int, context: int = CONTEXT, limit: int = MAX_PSEUDO
                   ) -> list[tuple[int, int, int, int]]:
    """(a, s, e, b) per pseudo-gap [s, e) of ``length`` frames with its window [a, b) wholly inside the fully
    keyed frames ``full`` (T,): ``context`` keys on each side, so every window has the same length. Spread
    evenly over the clip, windows not overlapping where there is room."""
    T = len(full)
    cs = np.r_[0, np.cumsum(np.asarray(full, np.int64))]
    starts = []
    for s in range(context, T - length - context + 1):
        a, b = s - context, s + length + context
        if cs[b] - cs[a] == b - a:
            starts.append(s)
    if not starts:
        return []
    out: list[int] = []
    width = length + 2 * context
    for s in np.linspace(starts[0], starts[-1], num=min(len(starts), 4 * limit)).round().astype(int):
        s = starts[int(np.searchsorted(starts, s).clip(0, len(starts) - 1))]
        if not out or s - out[-1] >= width:
            out.append(s)
    if len(out) > limit:
        out = [out[i] for i in np.linspace(0, len(out) - 1, limit).round().astype(int)]
    return [(s - context, s, s + length, s + length + context) for s in out]


def _loo_tasks(keys: np.ndarray, length: int, context: int, limit: int) -> list[tuple[int, int, np.ndarray, int]]:
    """Leave one key out: (a, b, known (b - a, E) without the key, frame of the key) per interior key frame whose
    neighbours make a gap of ``length`` / 2 to 2 x ``length`` frames (none: nothing to learn from)."""
    full = keys.all(axis=1)
    kf = np.flatnonzero(full)
    cand = [(i, kf[i + 1] - kf[i - 1] - 1) for i in range(1, len(kf) - 1) if kf[i + 1] - kf[i - 1] > 2]
    near = [c for c in cand if length / 2 <= c[1] <= 2 * length + 1]
    if not near:
        return []
    pick = [near[i] for i in np.linspace(0, len(near) - 1, min(limit, len(near))).round().astype(int)]
    out = []
    for i, _ in dict.fromkeys(pick):
        a, b = max(0, kf[i - 1] - context), min(len(full), kf[i + 1] + context + 1)
        known = keys[a:b].copy()
        known[kf[i] - a] = False
        out.append((a, b, known, int(kf[i] - a)))
    return out


def _score_windows(model, layout, safety, q, p, known, frames) -> Callable[[list[Pair]], list[Pair]]:
    """A scorer for windows of one length: given (rotation weight, root weight) pairs, the mean global joint
    position error (cm) and local joint rotation error (deg) over the scored ``frames`` (B, T) for each. The network runs once; the
    pairs are scored together, the windows repeated per pair, in the canonical frame (a rigid move of answer and
    truth alike: the errors are those on the skeleton)."""
    import torch

    from motioncore.core.rotations import quat_to_matrix
    from motioncore.families.body.fill import POS_SCALE, confidence, prepare
    from motioncore.families.body.loss import Net
    from motioncore.families.body.model import assemble, basis_of, smooth_residual

    net = Net(layout.skeleton)
    prep = prepare(layout, q, p, known)
    t_rot, t_root = net.truth(prep, q, p)
    dev = next(model.parameters()).device
    feats = torch.from_numpy(prep.features).to(dev)
    kn = torch.from_numpy(prep.known).to(dev)
    off = torch.from_numpy(p[:, :, list(layout.joints)] * POS_SCALE).float().to(dev)
    with torch.no_grad():
        res = smooth_residual(model(feats).float(), kn, basis_of(model))
        tL = torch.from_numpy(quat_to_matrix(t_rot)).float().to(dev)  # local rotations (the root's: global)
        _, tP = net.fk(tL, torch.from_numpy(t_root * POS_SCALE).float().to(dev), off)
    conf = torch.as_tensor(np.ones(len(q)) if not safety else confidence(layout, safety, q, p, known),
                           dtype=torch.float32, device=dev)
    whole = (feats, res, kn)  # every frame, for the windows' fills themselves (``score.fill``)
    cols = torch.from_numpy(np.flatnonzero(np.asarray(frames, bool).any(0))).to(dev)  # only scored frames matter:
    feats, res, kn, off, tL, tP = (x[:, cols] for x in (feats, res, kn, off, tL, tP))  # FK is per frame
    fr = torch.from_numpy(np.asarray(frames, bool)).to(dev)[:, cols]
    B = len(q)
    cache: dict[Pair, Pair] = {}

    def score(pairs: list[Pair]) -> list[Pair]:
        todo = [pp for pp in dict.fromkeys(pairs) if pp not in cache]
        if todo:
            G = len(todo)
            w = torch.as_tensor(todo, dtype=torch.float32, device=dev)  # (G, 2)
            w = (w[:, None, :] * conf[None, :, None]).reshape(G * B, 2)
            rep = (lambda x: x.repeat((G,) + (1,) * (x.dim() - 1)))  # noqa: E731  (G * B, ...)
            with torch.no_grad():
                mats, _, root = assemble(rep(feats), rep(res), rep(kn), smooth=False, weights=w, quats=False)
                _, Pm = net.fk(mats, root, rep(off))
                cm = (Pm - rep(tP)).norm(dim=-1).mean(-1) / POS_SCALE  # (G * B, T)
                cos = ((mats * rep(tL)).sum((-1, -2)) - 1.0) / 2.0  # local joint rotations, as an animator reads them
                deg = torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0))).mean(-1)
            m = rep(fr)
            for g, pp in enumerate(todo):
                sl = slice(g * B, (g + 1) * B)
                cache[pp] = (float(cm[sl][m[sl]].mean()), float(deg[sl][m[sl]].mean()))
        return [cache[pp] for pp in pairs]

    def fill(pair: Pair) -> tuple[np.ndarray, np.ndarray]:
        """The windows filled at ``pair``'s weights, on the skeleton: (B, T, J, 4), (B, T, J, 3), keys exact."""
        from motioncore.families.body.fill import finish

        w = conf[:, None] * torch.as_tensor(pair, dtype=torch.float32, device=dev)[None]
        with torch.no_grad():
            _, quats, root = assemble(*whole, smooth=False, weights=w)
        return finish(layout, prep, quats.double().cpu().numpy(), root.double().cpu().numpy() / POS_SCALE, q, p,
                      known)

    score.fill = fill  # type: ignore[attr-defined]
    return score


def _fit_one(score: Callable[[list[Pair]], list[Pair]], n: int, length: int, method: str) -> GateFit:
    bez, full = score([(0.0, 0.0), (1.0, 1.0)])
    rot = score([(float(w), 0.0) for w in GRID])
    wr = float(min((cm / max(bez[0], 1e-9) + deg / max(bez[1], 1e-9), w) for (cm, deg), w in zip(rot, GRID))[1])
    root = score([(wr, float(w)) for w in GRID])
    wp = float(min((cm, w) for (cm, _), w in zip(root, GRID))[1])
    (gated,) = score([(wr, wp)])
    return GateFit(length, wr, wp, n, method, {"bezier": list(bez), "model": list(full), "gated": list(gated)})


def fit_gate(model, meta: dict, rotations: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
             context: int = CONTEXT, limit: int = MAX_PSEUDO, plant: bool = False, curve: str | None = None,
             donor: bool = False) -> Gate:
    """The gate for a clip on the checkpoint's skeleton (``rotations`` (T, J, 4), ``root`` (T, 3), ``keys`` and
    ``todo`` (T, J + 1) bool), one fit per bucket of the lengths of the gaps in ``todo``, on up to ``limit``
    pseudo-gaps each (after Learn This Action: its held-out ones, ``families.body.adapt.HELD``). ``plant``: also
    judge planting the feet on the same pseudo-gaps at the fitted weights (``families.body.fill_plant.judge_plant``: off
    for a length where it costs error). ``curve`` ("linear", "constant": the user's keys' interpolation): also fit
    how far to blend from that curve toward the gated fill (``families.body.gate_curve``; "bezier" or None: the
    gate's base is the user's curve already, the blend stays 1). ``donor``: also judge the clip's own motion as
    a donor on the same pseudo-gaps (``families.body.fill_donor.judge``)."""
    from motioncore.core.skeleton import Skeleton
    from motioncore.families.body.fill import BodyLayout

    sk = Skeleton.from_dict(meta["skeleton"])
    layout = BodyLayout.of(sk)
    J, rj = sk.num_joints, int(meta.get("root_joint", layout.body.root))
    pos = np.broadcast_to(sk.offsets, rotations.shape[:1] + (J, 3)).copy()
    pos[:, rj] = root
    q = np.asarray(rotations, np.float64)
    lengths = gap_lengths(todo)
    full = keys.all(axis=1)
    fits = {}
    for bk, ls in lengths.items():
        L = int(np.median(ls))
        if L > ONE_PASS:   # longer than the network takes in one pass: such gaps keep Blender's curve (``fill_body``)
            fits[bk] = GateFit(L, 0.0, 0.0, 0, "too-long", plant=False)
            continue
        wins = pseudo_windows(full, L, context, limit)
        if not wins and plant:  # too short a keyed stretch for full context: planting is judged on shorter context,
            wins = pseudo_windows(full, L, JUDGE_CONTEXT, limit)  # or on pseudo-gaps down to half the gap's length
            for short in range(L - 1, max(1, (L + 1) // 2) - 1, -1):
                if wins:
                    break
                wins = pseudo_windows(full, short, JUDGE_CONTEXT, limit)
        if wins:
            idx = np.stack([np.arange(a, b) for a, _, _, b in wins])
            kn = np.ones(idx.shape + (J + 1,), bool)
            frames = np.zeros(idx.shape, bool)
            for i, (a, s, e, _) in enumerate(wins):
                kn[i, s - a:e - a] = False
                frames[i, s - a:e - a] = True
            score = _score_windows(model, layout, meta.get("safety"), q[idx], pos[idx], kn, frames)
        if len(wins) >= MIN_DENSE_FOR_WEIGHTS and wins[0][1] - wins[0][0] == context:
            fits[bk] = _fit_one(score, len(wins), L, "pseudo-gaps")
        else:
            tasks = _loo_tasks(keys, L, context, MAX_PSEUDO)
            fits[bk] = _fit_loo(model, layout, meta.get("safety"), q, pos, tasks, L) if tasks else \
                GateFit(L, 1.0, 1.0, 0, "none")
        if plant and not wins:  # nothing to judge planting on (sparse keys): the feet are left as filled
            fits[bk].plant, fits[bk].plant_error = False, {"unjudged": "no fully keyed stretch to cut a test gap "
                                                                       f"of {L} frames from"}
        if curve in ("linear", "constant") and len(wins) >= MIN_DENSE_FOR_WEIGHTS and fits[bk].method == "pseudo-gaps":
            fq, fp = score.fill((fits[bk].rot, fits[bk].root))  # the gated fill, blended from the user's curve
            fits[bk].curve = curve
            fits[bk].blend, fits[bk].curve_error = fit_blend(sk, q[idx], pos[idx], frames, fq, fp, curve)
        if donor and fits[bk].method == "pseudo-gaps":
            from motioncore.families.body.fill_donor import judge

            fits[bk].donor = judge(layout, q, pos, full, wins, score.fill, fits[bk])
        if plant and wins:  # the feet planted at these weights, judged on every dense pseudo-gap there is (even
            # fewer than the weights need): kept only where it costs no error there
            fq, fp = score.fill((fits[bk].rot, fits[bk].root))  # the gate's own network pass, at its weights
            fits[bk].plant, fits[bk].plant_error = judge_plant(meta, q[idx], pos[idx], frames, fq, fp,
                                                               score.fill((0.0, 0.0)))   # and Blender's curve
    return Gate(fits)


def _fit_loo(model, layout, safety, q, pos, tasks, L: int) -> GateFit:
    """Leave-one-key-out windows differ in length: each is scored on its own and the errors averaged."""
    scorers = []
    for a, b, kn, f in tasks:
        frames = np.zeros((1, b - a), bool)
        frames[0, f] = True
        scorers.append(_score_windows(model, layout, safety, q[None, a:b], pos[None, a:b], kn[None], frames))

    def score(pairs: list[Pair]) -> list[Pair]:
        e = np.array([s(pairs) for s in scorers])  # (tasks, pairs, 2)
        return [(float(v[0]), float(v[1])) for v in e.mean(0)]

    return _fit_one(score, len(tasks), L, "leave-one-key-out")
