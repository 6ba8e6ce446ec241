"""Benchmark: any-order in-filling of a body gap, latency at batch 1 and quality, per order and per
parallel-decoding setting; and cached against uncached decoding.

Model: a checkpoint (default the bundled ``anyorder-body``). Data: the Bandai test split's LaFAN1
windows (65 frames, 10 context frames), the gap of ``--gap`` frames (default 30) after the context, the
target frame after it.

Rows (temperature 0 unless --temperature):
  order x k: ``k`` elements committed per step from one context (parallel decoding). For a
    grouped-frame model an element is one frame, so k = 1 is one frame per step and k = gap fills the
    whole gap in one step. ``entropy`` is the dynamic lowest-entropy-first order.
  latency: median and p90 of ``--calls`` single-window fills (batch 1, one torch thread unless
    --threads), each including the prefill of the context and target and the Python decoding loop.
  quality: L2Q, L2P and NPSS at the gap on ``--windows`` test windows (evenly spread), beside Interp.
Ratios: latency / the cached bisection k=1 row (the default setting), measured in the same run.
Cached vs uncached: the same decoding (bisection, k=1) where every step re-runs the whole token
sequence without the key/value cache (what a plain transformer implementation does); the filled values
are checked equal, and the ratio uncached / cached is printed.

Usage: .venv/bin/python bench/infill_speed.py [--model anyorder-body] [--gap 30] [--calls 7] [--windows 128]
Prints a Markdown table; never asserts timings. Takes a few minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time

import numpy as np
import torch
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

from motioncore.eval.baselines import BASELINES
from motioncore.eval.infill import evaluate_infill
from motioncore.eval.run import load_eval_sets
from motioncore.families.anyorder.evaluate import AnyOrderFill
from motioncore.families.anyorder.model_sampling import _tokens, grid_prior, sample_values, static_order
from motioncore.models.registry import load_model


def uncached_fill(fill: AnyOrderFill, rot: np.ndarray, pos: np.ndarray, n_past: int, n_trans: int) -> np.ndarray:
    """Reference: bisection decoding at temperature 0, one element per step, re-running the whole token
    sequence every step (no cache). Returns the filled flat element values (1, N, E)."""
    model, cfg = fill.model, fill.model.cfg
    C = cfg.grid_channels
    flat, known_mask, prior = _grid(fill, rot, pos, n_past, n_trans)
    cond = known_mask.flatten().nonzero().squeeze(1)
    order = torch.cat([cond, static_order("bisection", ~known_mask)])
    n_cond = len(cond)
    with torch.no_grad():
        for i in range(n_cond, len(order)):
            dst = order[None, : i + 1]
            src = torch.cat([dst.new_full((1, 1), -1), dst[:, :-1]], 1)
            v, o, t = _tokens(flat, src, dst, C)
            p = None if prior is None else prior.gather(1, dst[..., None].expand(-1, -1, prior.shape[-1]))
            params = model(v, o, t, prior=p)[:, -1:]  # the last token predicts element order[i]
            e = dst[:, -1:]
            u = torch.zeros(1, 1)
            vals = sample_values(cfg, params, e % C, 0.0, u, torch.zeros(1, 1, cfg.element_dim))
            flat.scatter_(1, e[..., None].expand(-1, -1, flat.shape[-1]), vals)
    return flat


def cached_flat(fill: AnyOrderFill, rot: np.ndarray, pos: np.ndarray, n_past: int, n_trans: int) -> torch.Tensor:
    """The same decoding through the cached loop (``sampling._decode``)."""
    from motioncore.families.anyorder.model_sampling import _decode

    model, cfg = fill.model, fill.model.cfg
    C = cfg.grid_channels
    flat, known_mask, prior = _grid(fill, rot, pos, n_past, n_trans)
    cond = known_mask.flatten().nonzero().squeeze(1)
    order = static_order("bisection", ~known_mask)[None]

    def commit(params, elems):
        vals = sample_values(cfg, params, elems % C, 0.0, torch.zeros(elems.shape),
                             torch.zeros(*elems.shape, cfg.element_dim))
        flat.scatter_(1, elems[..., None].expand(-1, -1, flat.shape[-1]), vals)

    with torch.no_grad():
        _decode(model, flat, cond, order, False, 1, commit, prior)
    return flat


def _grid(fill: AnyOrderFill, rot, pos, n_past, n_trans):
    from motioncore.families.anyorder.model_elements import group_channels, motion_to_elements

    cfg = fill.model.cfg
    T = n_past + n_trans + 1
    root = (pos[:T, fill.root_joint] - fill.root_mean) / fill.root_std
    grid = motion_to_elements(torch.as_tensor(rot[:T]), torch.as_tensor(root))[None]
    if cfg.group_frames:
        grid = group_channels(cfg, grid)
    known = torch.ones(T, dtype=torch.bool)
    known[n_past:n_past + n_trans] = False
    known_mask = known[:, None].expand(T, cfg.grid_channels)
    grid[:, ~known_mask] = 0.0
    flat = grid.to(torch.float32).flatten(1, 2).contiguous()
    return flat, known_mask, grid_prior(fill.model, flat.view(1, T, cfg.grid_channels, -1), known_mask[None])


def _time(fn, calls: int) -> tuple[float, float]:
    fn()  # warm-up
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return statistics.median(ts), ts[min(len(ts) - 1, int(0.9 * len(ts)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="anyorder-body")
    ap.add_argument("--gap", type=int, default=30)
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--windows", type=int, default=128, help="test windows for the quality columns")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 5, 10, 30])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, meta = load_model(args.model)
    test_w, mean, std = load_eval_sets("bandai", progress=False)
    sel = np.linspace(0, len(test_w) - 1, min(args.windows, len(test_w))).round().astype(int)
    rot, pos, sk = test_w.rotations[sel], test_w.positions[sel], test_w.skeleton
    n_past, gap = 10, args.gap
    T = n_past + gap + 1
    print(f"# bench/infill_speed.py, {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, Python {platform.python_version()}, {args.threads} thread(s)")
    cfg = model.cfg
    print(f"model {args.model}: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{'one element per frame' if cfg.group_frames else 'one element per joint and frame'}, prior "
          f"{cfg.prior}; gap {gap} frames; quality on {len(sel)} test windows; temperature {args.temperature:g}")
    base = evaluate_infill({"interp": BASELINES["interp"]}, sk, rot, pos, mean, std, lengths=(gap,), progress=False)
    rows = []
    elems = gap * cfg.grid_channels
    for order in ("bisection", "sequential", "random", "entropy"):
        for k in args.ks:
            if k > elems:
                continue
            if order == "entropy" and not cfg.group_frames and k < cfg.grid_channels:
                continue  # per-element entropy order scores every remaining element every step: too slow
            fill = AnyOrderFill(model, meta, order=order, temperature=args.temperature, k=k, batch_size=64,
                                name=args.model)
            one = lambda f=fill: f(sk, rot[:1, :T], pos[:1, :T], n_past, gap)  # noqa: E731
            med, p90 = _time(one, args.calls)
            q = evaluate_infill({"m": fill}, sk, rot, pos, mean, std, lengths=(gap,), progress=False)["m"]
            rows.append((order, k, med, p90, q))
            print(f"  {order:10s} k={k:3d}: {med * 1e3:7.1f} ms  L2Q {q['L2Q'][str(gap)]:.3f}", flush=True)
    ref = next(r[2] for r in rows if r[0] == "bisection" and r[1] == 1)
    print()
    print(f"| order | k (elements/step) | steps | latency median (ms) | p90 (ms) | / bisection k=1 | L2Q@{gap} | "
          f"L2P@{gap} | NPSS@{gap} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    b = base["interp"]
    print(f"| Interp (baseline) | | | | | | {b['L2Q'][str(gap)]:.3f} | {b['L2P'][str(gap)]:.3f} | "
          f"{b['NPSS'][str(gap)]:.4f} |")
    for order, k, med, p90, q in rows:
        print(f"| {order} | {k} | {-(-elems // k)} | {med * 1e3:.1f} | {p90 * 1e3:.1f} | {med / ref:.2f} | "
              f"{q['L2Q'][str(gap)]:.3f} | {q['L2P'][str(gap)]:.3f} | {q['NPSS'][str(gap)]:.4f} |")
    fill = AnyOrderFill(model, meta, order="bisection", temperature=0.0, k=1, name=args.model)
    a = cached_flat(fill, rot[0], pos[0], n_past, gap)
    u = uncached_fill(fill, rot[0], pos[0], n_past, gap)
    diff = float((a - u).abs().max())
    tc, _ = _time(lambda: cached_flat(fill, rot[0], pos[0], n_past, gap), args.calls)
    tu, _ = _time(lambda: uncached_fill(fill, rot[0], pos[0], n_past, gap), max(3, args.calls // 2))
    print()
    print(f"cached vs uncached (bisection, k=1, batch 1): cached {tc * 1e3:.1f} ms, uncached {tu * 1e3:.1f} ms, "
          f"uncached / cached = {tu / tc:.2f}x; max |difference| of the filled values {diff:.1e}")


if __name__ == "__main__":
    main()
