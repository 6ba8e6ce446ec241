"""Quality against training wall time for an any-order run: every per-epoch snapshot of the resumable
state (``RUN/snap/eN.safetensors``, copied after each epoch) is evaluated on an evenly spread subset of
the Bandai test windows (LaFAN1 protocol, temperature 0, bisection) and plotted as L2Q per gap length
against the run's wall time, with Interp (and the Bezier baselines) as flat lines.

    python scripts/infill_curve.py runs/body --windows 160 --png docs/img/anyorder_body_curve.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="training output folder (anyorder.json + snap/eN.*)")
    p.add_argument("--windows", type=int, default=160, help="test windows, evenly spread (default 160)")
    p.add_argument("--lengths", default="5,15,30,45", help="gap lengths (default 5,15,30,45)")
    p.add_argument("--baselines", default="interp,bezier", help="baselines drawn as flat lines")
    p.add_argument("--png", type=Path, required=True, help="the plot")
    p.add_argument("--meta", type=Path, help="checkpoint metadata to use while the run has no final checkpoint yet")
    p.add_argument("--json", type=Path, help="the figures (default: the PNG's name with .json)")
    a = p.parse_args(argv)
    import torch

    from motioncore.eval.baselines import BASELINES
    from motioncore.eval.infill import evaluate_infill
    from motioncore.eval.run import load_eval_sets
    from motioncore.families.anyorder.evaluate import AnyOrderFill
    from motioncore.models.checkpoint import load_state_into, load_tensors, read_meta
    from motioncore.models.registry import build

    torch.set_num_threads(1)
    lengths = tuple(int(x) for x in a.lengths.split(","))
    meta = json.loads(a.meta.read_text()) if a.meta else read_meta(a.run / "anyorder")
    test_w, mean, std = load_eval_sets("bandai", progress=False)
    idx = np.linspace(0, len(test_w) - 1, min(a.windows, len(test_w))).round().astype(int)
    q, pos = test_w.rotations[idx], test_w.positions[idx]
    base = {n: BASELINES[n] for n in a.baselines.split(",") if n in BASELINES}
    ref = evaluate_infill(base, test_w.skeleton, q, pos, mean, std, lengths=lengths, progress=False)
    points = []
    for snap in sorted((a.run / "snap").glob("e*.json"), key=lambda f: int(f.stem[1:])):
        tensors, smeta = load_tensors(snap.with_suffix(""))
        model = build("anyorder", meta["config"])
        load_state_into(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}, str(snap))
        fill = AnyOrderFill(model.eval(), meta, name=snap.stem)
        res = evaluate_infill({"model": fill}, test_w.skeleton, q, pos, mean, std, lengths=lengths, progress=False)
        h = smeta["history"][-1]
        points.append({"epoch": h["epoch"], "wall_s": h["wall_s"], "val_loss": h["val_loss"],
                       "L2Q": res["model"]["L2Q"]})
        print(f"epoch {h['epoch']:3d} {h['wall_s'] / 60:6.1f} min  L2Q " +
              " ".join(f"{n}:{res['model']['L2Q'][str(n)]:.3f}" for n in lengths), file=sys.stderr)
    out = {"windows": len(idx), "lengths": lengths, "baselines": ref, "points": points}
    (a.json or a.png.with_suffix(".json")).write_text(json.dumps(out, indent=1))
    _plot(out, a.png)
    return 0


def _plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = out["lengths"]
    fig, axes = plt.subplots(1, len(lengths), figsize=(3.2 * len(lengths), 3.2), sharex=True)
    t = [pt["wall_s"] / 60 for pt in out["points"]]
    for ax, n in zip(np.atleast_1d(axes), lengths, strict=True):
        ax.plot(t, [pt["L2Q"][str(n)] for pt in out["points"]], "o-", label="any-order model")
        for (name, res), style in zip(out["baselines"].items(), ("--", ":", "-."), strict=False):
            ax.axhline(res["L2Q"][str(n)], ls=style, color="grey", label=name)
        ax.set_title(f"{n}-frame gaps")
        ax.set_xlabel("training wall time (min, 1 CPU thread)")
    np.atleast_1d(axes)[0].set_ylabel(f"L2Q ({out['windows']} Bandai test windows)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    raise SystemExit(main())
