"""Benchmark: per-frame latency (batch 1) and throughput (batch 256) of PFNN and MANN on this CPU, each
against a plain ``torch.nn.Sequential`` MLP of the same layer sizes measured in the same run.

Legend: B batch, K control points / experts, D features.

Cases (random weights, float32, eval, ``torch.inference_mode()``):
  PFNN 342 -> 512 -> 512 -> 311 (Holden's sizes; --in/--out change the ends), K = 4:
    exact "weights" form (W(p) built per sample, then bmm), exact "outputs" form (every control point
    run, outputs blended), and PFNNRuntime constant (50 sets) / linear (10 sets) / cubic (4 sets).
    Batch 1 passes the runtime a float phase (its fast path) that changes every call (cycling through
    97 phases, as a walking character at 60 fps moves ~1/60 of a cycle per frame), so the constant and
    linear modes read a different stored set most calls; batch 256 gives every row its own random
    phase (a crowd), so the runtime has to touch most of its stored sets.
  "MLP, 50 weight copies cycled" is the same MLP with 50 weight copies used in turn: the cold-cache
    baseline. The plain MLP reuses one 2.4 MB weight set that stays in cache, which PFNN's phase-varying
    weights cannot (the constant runtime at a fixed phase runs at the plain MLP's speed).
  MANN 480 -> 512 -> 512 -> 363, 8 experts, gating 19 -> 32 -> 32 -> 8: "weights" and "outputs" forms.
Latency: median and p90 of single calls after a warm-up. Throughput: B / median time of a batch call.
Each case runs for at most --calls calls or --seconds seconds, whichever comes first.

Threads: ``torch.set_num_threads(--threads)`` is set explicitly (default 1). With torch's default
thread count on a busy 2-core machine a batch-1 MLP was ~500x slower (14 ms instead of 29-54 us, see
REFERENCES.md): the worker threads spin and fight for cores. Batch-1 inference is latency bound and
gains nothing from threads; try --threads 2 for the batch-256 figures.

Usage: .venv/bin/python bench/pfnn_latency.py [--threads 1] [--in 342] [--out 311] [--calls 2000] [--seconds 2]
    [--json FILE]
Prints a Markdown table, then the batch-256 throughput of the three runtime forms over the MLP's from the
same run (with --json FILE also written as {"batch256": {"constant": r, "linear": r, "cubic": r}});
never asserts timings. Finishes in about a minute at the defaults.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)
from torch import nn

from motioncore.families.mann.model import MANN, MANNConfig
from motioncore.families.pfnn.model import PFNN, PFNNConfig
from motioncore.families.pfnn.model_runtime import PFNNRuntime, runtime_error

BATCH = 256


def mlp(dims: list[int]) -> nn.Sequential:
    """The baseline: Linear + ELU layers of the given sizes, no activation after the last."""
    mods: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        mods += [nn.Linear(d_in, d_out)] + ([nn.ELU()] if i < len(dims) - 2 else [])
    return nn.Sequential(*mods).eval()


def time_calls(fn: Callable[[int], object], calls: int, seconds: float, warmup: int) -> list[float]:
    """Seconds per call of fn(i) for i = 0, 1, ...; stops after ``calls`` calls or ``seconds``."""
    for i in range(warmup):
        fn(i)
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < calls and (len(times) < 5 or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        fn(len(times))
        times.append(time.perf_counter() - t0)
    return times


def p90(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(0.9 * len(xs)))]


def pfnn_cases(d_in: int, d_out: int, hidden: int) -> tuple[dict, dict, PFNN]:
    """(batch-1 callables, batch-B callables, model) for the PFNN rows."""
    model = PFNN(PFNNConfig(d_in, d_out, hidden_dim=hidden)).eval()
    base = mlp([d_in, hidden, hidden, d_out])
    copies = [mlp([d_in, hidden, hidden, d_out]) for _ in range(50)]  # 50 x 2.4 MB: beyond the CPU caches
    runtimes = {m: PFNNRuntime.from_model(model, m) for m in ("constant", "linear", "cubic")}
    x1, xb = torch.randn(1, d_in), torch.randn(BATCH, d_in)
    floats = [i / 97.0 for i in range(97)]  # phases cycled over calls
    p1 = [torch.tensor([p]) for p in floats]
    pb = torch.rand(BATCH)
    one = {
        "MLP (baseline)": lambda i: base(x1),
        "MLP, 50 weight copies cycled": lambda i: copies[i % 50](x1),
        "exact weights": lambda i: model(x1, p1[i % 97], mode="weights"),
        "exact outputs": lambda i: model(x1, p1[i % 97], mode="outputs"),
    } | {f"runtime {m}": lambda i, r=r: r(x1, floats[i % 97]) for m, r in runtimes.items()}
    many = {
        "MLP (baseline)": lambda i: base(xb),
        "MLP, 50 weight copies cycled": lambda i: copies[i % 50](xb),
        "exact weights": lambda i: model(xb, pb, mode="weights"),
        "exact outputs": lambda i: model(xb, pb, mode="outputs"),
    } | {f"runtime {m}": lambda i, r=r: r(xb, pb) for m, r in runtimes.items()}
    return one, many, model


def mann_cases(hidden: int) -> tuple[dict, dict]:
    model = MANN(MANNConfig(480, 363, 19, hidden_dim=hidden, gating_hidden=32, num_experts=8)).eval()
    base = mlp([480, hidden, hidden, 363])
    x1, g1, xb, gb = torch.randn(1, 480), torch.randn(1, 19), torch.randn(BATCH, 480), torch.randn(BATCH, 19)
    one = {
        "MLP (baseline)": lambda i: base(x1),
        "exact weights": lambda i: model(x1, g1, mode="weights"),
        "exact outputs": lambda i: model(x1, g1, mode="outputs"),
    }
    many = {
        "MLP (baseline)": lambda i: base(xb),
        "exact weights": lambda i: model(xb, gb, mode="weights"),
        "exact outputs": lambda i: model(xb, gb, mode="outputs"),
    }
    return one, many


def measure(name: str, one: dict, many: dict, args: argparse.Namespace) -> dict[str, float]:
    """Print Markdown rows for one model (ratios against that model's MLP baseline, the first case);
    return each case's batch-256 throughput over the MLP's."""
    rows, base_lat, base_fps, ratios = [], None, None, {}
    for case in one:
        t1 = time_calls(one[case], args.calls, args.seconds, warmup=50)
        tb = time_calls(many[case], args.calls, args.seconds, warmup=2)
        med, fps = statistics.median(t1) * 1e6, BATCH / statistics.median(tb)
        base_lat, base_fps = base_lat or med, base_fps or fps
        rows.append(
            f"| {name} | {case} | {med:.1f} | {p90(t1) * 1e6:.1f} | {med / base_lat:.2f}x | {len(t1)} "
            f"| {fps:,.0f} | {fps / base_fps:.3f}x | {len(tb)} |"
        )
        ratios[case] = fps / base_fps
        print(rows[-1], flush=True)
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1, see the module doc)")
    ap.add_argument("--in", dest="d_in", type=int, default=342, help="PFNN input features (Holden: 342)")
    ap.add_argument("--out", dest="d_out", type=int, default=311, help="PFNN output features (Holden: 311)")
    ap.add_argument("--hidden", type=int, default=512, help="hidden width of PFNN and MANN")
    ap.add_argument("--calls", type=int, default=2000, help="most timed calls per case")
    ap.add_argument("--seconds", type=float, default=2.0, help="most seconds per case and batch size")
    ap.add_argument("--json", metavar="FILE", help='also write {"batch256": {"constant": r, "linear": r, "cubic": r}}, '
                    "r = batch-256 throughput over the same run's MLP")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"# PFNN / MANN latency, {datetime.datetime.now().isoformat(timespec='seconds')}\n")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU {cpu_name()} "
          f"({platform.processor() or 'platform.processor() empty'}), os.cpu_count() {os.cpu_count()}, "
          f"python {platform.python_version()}\n")
    print(f"| model | form | batch-1 median us | p90 us | latency / MLP | calls | batch-{BATCH} frames/s "
          f"| throughput / MLP | calls |")
    print("|---|---|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        one, many, pfnn = pfnn_cases(args.d_in, args.d_out, args.hidden)
        ratios = measure(f"PFNN {args.d_in}-{args.hidden}-{args.hidden}-{args.d_out}", one, many, args)
        del one, many
        one, many = mann_cases(args.hidden)
        measure(f"MANN 480-{args.hidden}-{args.hidden}-363 K=8", one, many, args)
        print_sets_touched(pfnn, args)
    forms = {m: ratios[f"runtime {m}"] for m in ("constant", "linear", "cubic")}
    print(f"\nbatch-{BATCH} throughput / MLP (this run): " + ", ".join(f"{m} {r:.3f}x" for m, r in forms.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"batch{BATCH}": forms}, f, indent=1)
        print(f"wrote {args.json}")
    print_errors(pfnn, args.d_in)


def print_sets_touched(model: PFNN, args: argparse.Namespace) -> None:
    """Batch-256 throughput of the constant runtime over the MLP's when the batch's phases fall on only n of
    its 50 stored sets: the cost of a batch is the sets it reads (2.4 MB each), which bounds any form that
    evaluates stored sets; the control-point path (n > 24) costs K = 4 MLPs whatever n is."""
    base = mlp([model.cfg.input_dim, model.cfg.hidden_dim, model.cfg.hidden_dim, model.cfg.output_dim])
    runtime, xb = PFNNRuntime.from_model(model, "constant"), torch.randn(BATCH, model.cfg.input_dim)
    t_base = statistics.median(time_calls(lambda i: base(xb), args.calls, args.seconds, warmup=2))
    print(f"\nConstant runtime, batch {BATCH}, phases on n of the 50 stored sets (throughput / MLP):\n")
    print("| n sets | path | throughput / MLP |\n|---|---|---|")
    for n in (1, 4, 8, 16, 50):
        phase = (torch.randint(0, n, (BATCH,)) * (50 // n)).double() / 50  # (B,) on n distinct sets
        t = statistics.median(time_calls(lambda i, p=phase: runtime(xb, p), args.calls, args.seconds, warmup=2))
        path = "control points" if n > runtime.POINTS_AFTER_SETS else "stored sets"
        print(f"| {n} | {path} | {t_base / t:.3f}x |", flush=True)


def print_errors(model: PFNN, d_in: int) -> None:
    """Each runtime mode's max abs error against the exact model on random inputs and phases."""
    x, phase = torch.randn(BATCH, d_in), torch.rand(BATCH)
    with torch.no_grad():
        scale = float(model(x, phase).abs().max())
    print(f"\nRuntime error vs exact PFNN (random init weights, {BATCH} random inputs and phases, float32; "
          f"max |y| = {scale:.3g}):\n")
    print("| mode | stored sets | stored MB | max abs error | relative to max abs y |")
    print("|---|---|---|---|---|")
    for mode in ("constant", "linear", "cubic"):
        runtime = PFNNRuntime.from_model(model, mode)
        err = runtime_error(model, mode, x, phase)
        print(f"| {mode} | {runtime.num_sets} | {runtime.nbytes / 2**20:.1f} | {err:.3g} | {err / scale:.3g} |")


if __name__ == "__main__":
    main()
