"""Learning the animator's own take for the hand in-fill (``infill-hands``): the request-time gate and adapt.

Both use *pseudo-gaps*: gaps cut from stretches of the take where every finger joint is keyed (finger capture,
or hand-keyed poses on consecutive frames), shaped like the real gaps (length, a key after them or not, the
wrist keyed every N frames inside), whose truth is therefore known.

- ``fit_gate``: per gap length, the weight ``w`` in [0, 1] (step 0.05) of the correction that gives the least
  mean finger error on the pseudo-gaps; ``fill_hands(..., residual=gate)`` then fills each real gap with
  ``Bezier * exp(w * correction)``. A length without pseudo-gaps gets the nearest length's weight.
- ``adapt``: a copy of the map fine-tuned for a wall-time budget (AdamW, the Bezier-basis loss, a pull back to
  the bundled weights) on half the pseudo-gaps; the gate is then fitted on the other half, so a fine-tune that
  over-fits is caught and weighed down (to 0 if need be: Bezier).

Self-contained like ``families.hands.fill`` (the body's request-time gate lives in its own module; the two can
be unified later). Legend as in ``families.hands.fill``.
"""
from __future__ import annotations

import copy
import time

import numpy as np

from motioncore.core.gaps import CONTEXT  # keyed frames on each side of a pseudo-gap that its Bezier sees
from motioncore.core.rotations import quat_angle
from motioncore.families.hands import fill as hf

__all__ = ["CONTEXT", "GATE_STEPS", "pseudo_gaps", "gap_examples", "split_examples", "fit_gate", "adapt",
           "gap_shapes", "gated_error", "learn_take", "learn_and_fill", "learn_gate"]

GATE_STEPS = np.round(np.arange(0.0, 1.0001, 0.05), 2)


def gap_shapes(keys: np.ndarray, max_gap: int = 0) -> list[tuple[int, bool, int]]:
    """The real gaps' shapes (length, closed, wrist key spacing inside), distinct, from keys (T, J + 1)."""
    J = keys.shape[1] - 1
    out = []
    for a, b, closed in hf.finger_gaps(keys[:, 1:J].all(1)):
        if max_gap and b - a > max_gap:
            continue
        w = np.flatnonzero(keys[a - 1:b + 1, 0] & keys[a - 1:b + 1, J])
        every = int(np.median(np.diff(w))) if w.size > 1 else b - a + 1
        out.append((b - a, closed, max(1, every)))
    return sorted(set(out))


def pseudo_gaps(allowed: np.ndarray, shape: tuple[int, bool, int], stride: int = 0) -> list[tuple[int, int, bool]]:
    """Gaps [a, b) of ``shape`` (length, closed, wrist every) cut where ``allowed`` (T,) frames (every finger
    keyed) cover the gap, the key before it and, when closed, the key after it, with up to CONTEXT more keyed
    frames around; starts every ``stride`` frames (default half the length)."""
    n, closed, _ = shape
    ok = np.asarray(allowed, bool)
    T = ok.size
    stride = stride or max(1, n // 2)
    need = n + 1 + int(closed)
    cum = np.r_[0, np.cumsum(ok)]
    out = []
    for a in range(1, T - n - int(closed) + 1, stride):
        if cum[a + n + int(closed)] - cum[a - 1] == need:
            out.append((a, a + n, closed))
    return out


def gap_examples(q: np.ndarray, root: np.ndarray, keys: np.ndarray, gaps: list[tuple[int, int, bool]],
                 every: int, obj: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict]:
    """Per pseudo-gap: the request it stands for (the fingers unkeyed inside, the wrist keyed every ``every``
    frames from the key before it, nothing after it when open) in a window of CONTEXT keyed frames either
    side, and {"x" (D,), "basis" (n, K), "bez", "truth" (n, F, 4), "c" (K, F * 3) the best coefficients}."""
    q = np.asarray(q, np.float64)
    T, J = q.shape[:2]
    out = []
    for a, b, closed in gaps:
        lo, hi = max(0, a - 1 - CONTEXT), min(T, b + CONTEXT + 1) if closed else b
        k = keys[lo:hi].copy()
        k[a - lo:b - lo, 1:J] = False
        if not closed:
            k[b - lo:, 1:J] = False
        wk = np.zeros(b - a, bool)
        wk[every - 1::every] = True
        k[a - lo:b - lo, 0] &= wk
        k[a - lo:b - lo, J] &= wk
        ob = None if obj is None else (obj[0][lo:hi], obj[1][lo:hi])
        p = hf.plan(q[lo:hi], np.asarray(root)[lo:hi], k, ob)
        g = [i for i, (ga, gb, _) in enumerate(p["gaps"]) if ga == a - lo and gb == b - lo]
        if not g:
            continue
        i = g[0]
        bez, truth = p["bezier"][a - lo:b - lo, 1:], q[a:b, 1:]
        basis = p["basis"][i]
        out.append({"x": p["inputs"][i], "basis": basis, "bez": bez, "truth": truth,
                    "c": hf.project(hf.gap_residual(bez, truth), basis), "n": b - a, "span": (lo, hi)})
    return out


def split_examples(examples: list[dict]) -> tuple[list[dict], list[dict]]:
    """(to fine-tune on, to fit the gate on): the later half of the pseudo-gaps (by start) for the gate, the
    earlier ones whose window (keys read included) does not touch any of those for the fine-tune, so the gate
    judges the fine-tune on frames it never saw."""
    ex = sorted(examples, key=lambda e: e["span"][0])
    held = ex[len(ex) // 2:]
    if not held:
        return [], []
    first = min(e["span"][0] for e in held)
    return [e for e in ex[:len(ex) // 2] if e["span"][1] <= first], held


def _gap_error(ex: dict, coef: np.ndarray) -> float:
    return float(np.degrees(quat_angle(hf.apply_correction(ex["bez"], ex["basis"], coef), ex["truth"])).mean())


def fit_gate(model, examples: list[dict]) -> dict[int, float]:
    """{gap length: weight} minimising the pseudo-gaps' mean finger error; {} without pseudo-gaps."""
    if not examples:
        return {}
    coef = hf.coefficients(model, np.stack([e["x"] for e in examples]))
    gate: dict[int, float] = {}
    for n in sorted({e["n"] for e in examples}):
        idx = [i for i, e in enumerate(examples) if e["n"] == n]
        errs = [np.mean([_gap_error(examples[i], w * coef[i]) for i in idx]) for w in GATE_STEPS]
        gate[n] = float(GATE_STEPS[int(np.argmin(errs))])
    return gate


def gated_error(model, examples: list[dict], gate: dict[int, float]) -> float:
    """Mean finger error (degrees) of ``model`` under ``gate`` over pseudo-gap examples."""
    if not examples:
        return float("nan")
    coef = hf.coefficients(model, np.stack([e["x"] for e in examples]))
    return float(np.mean([_gap_error(e, hf.weight_for(gate, e["n"]) * c) for e, c in zip(examples, coef, strict=True)]))


def learn_take(model, examples: list[dict], seconds: float, seed: int = 0) -> tuple[object, dict[int, float], dict]:
    """Learn This Action for the fingers: fine-tune a copy on the earlier pseudo-gaps (``split_examples``), fit
    the gate of it and of the bundled ``model`` on the later ones, and keep whichever fills those better.
    Returns (model, gate, report)."""
    fit, held = split_examples(examples)
    if not held:
        return model, {}, {"pseudo_gaps": 0, "steps": 0, "used": "bundled"}
    net, steps = adapt(model, fit, seconds, seed=seed)
    g_net, g_base = fit_gate(net, held), fit_gate(model, held)
    e_net, e_base = gated_error(net, held, g_net), gated_error(model, held, g_base)
    use = steps > 0 and e_net < e_base
    pick, gate = (net, g_net) if use else (model, g_base)
    return pick, gate, {
        "pseudo_gaps": len(examples), "fit": len(fit), "held": len(held), "steps": steps,
        "held_error_adapted": e_net, "held_error_bundled": e_base, "used": "adapted" if use else "bundled",
        "gate": {int(k): v for k, v in (g_net if use else g_base).items()}}


def adapt(model, examples: list[dict], seconds: float, lr: float = 1e-3, pull: float = 1e-3, seed: int = 0,
          max_steps: int = 0):
    """A copy of ``model`` fine-tuned on ``examples`` for ``seconds`` of wall time (or ``max_steps``): AdamW on
    the Gram-weighted coefficient error (the squared error of the correction over the gap's frames), plus
    ``pull`` times the squared distance to the bundled weights. Returns (copy in eval mode, steps)."""
    import torch

    net = copy.deepcopy(model).float().train()
    if not examples or (seconds <= 0 and not max_steps):
        return net.eval(), 0
    x = torch.as_tensor(np.stack([e["x"] for e in examples]), dtype=torch.float32)
    c = torch.as_tensor(np.stack([e["c"] for e in examples]), dtype=torch.float32)
    g = torch.as_tensor(np.stack([e["basis"].T @ e["basis"] / len(e["basis"]) for e in examples]), dtype=torch.float32)
    ref = [p.detach().clone() for p in net.parameters()]
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    t0, steps = time.perf_counter(), 0
    while (max_steps and steps < max_steps) or (not max_steps and time.perf_counter() - t0 < seconds):
        b = torch.randint(0, len(x), (min(64, len(x)),), generator=gen)
        d = net(x[b]) - c[b]
        loss = torch.einsum("bkf,bkl,blf->b", d, g[b], d).mean()
        loss = loss + pull * sum(((p - r) ** 2).sum() for p, r in zip(net.parameters(), ref, strict=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    return net.eval(), steps


def learn_and_fill(model, meta: dict, q: np.ndarray, root: np.ndarray, keys: np.ndarray, todo: np.ndarray,
                   obj: tuple[np.ndarray, np.ndarray] | None = None, seconds: float = 0.0, seed: int = 0
                   ) -> tuple[np.ndarray, np.ndarray, dict]:
    """The request-time path: pseudo-gaps shaped like the clip's real finger gaps, cut from its frames where
    every channel is keyed (never a frame of a real gap), then Learn This Action for ``seconds`` (0: the gate
    alone, fitted on every pseudo-gap) and the fill (``families.hands.fill.fill_hands``). Without keyed stretches
    long enough for one pseudo-gap the bundled map fills at its own weight, and the report says so.
    Returns (T, J, 4), (T, 3), report."""
    q = np.asarray(q, np.float64)
    net, gate, report = learn_gate(model, meta, q, root, keys, obj, seconds, seed)
    fq, fr = hf.fill_hands(net, meta, q, root, keys, todo, obj, gate)
    return fq, fr, report


def learn_gate(model, meta: dict, q: np.ndarray, root: np.ndarray, keys: np.ndarray,
               obj: tuple[np.ndarray, np.ndarray] | None = None, seconds: float = 0.0, seed: int = 0
               ) -> tuple[object, float | dict, dict]:
    """``learn_and_fill``'s learning: (the network, its gate {gap length: weight} or 1.0, report)."""
    q = np.asarray(q, np.float64)
    shapes = gap_shapes(keys, int(meta.get("max_gap") or 0))
    free = keys.all(1)
    ex: list[dict] = []
    for shape in shapes:
        ex += gap_examples(q, root, keys, pseudo_gaps(free, shape), shape[2], obj)
    if not ex:
        net, gate, report = model, 1.0, {"pseudo_gaps": 0, "used": "bundled",
                                         "note": "no keyed finger stretch long enough for a pseudo-gap: not gated"}
    elif seconds > 0:
        net, gate, report = learn_take(model, ex, seconds, seed=seed)
    else:
        net, gate = model, fit_gate(model, ex)
        report = {"pseudo_gaps": len(ex), "used": "bundled", "gate": {int(k): v for k, v in gate.items()}}
    return net, gate, report
