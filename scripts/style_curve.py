"""Quality against wall time of a style run: turn the learnet's resumable training state (or saved
snapshots of it) into a checkpoint and judge it with `motioncore eval style`; append a point to
RUN/curve.json and redraw RUN/style_curve.png (held-out next-frame error and judge hits of the learnet
against the base, by training wall time).

    .venv/bin/python scripts/style_curve.py --run /work/runs/style [--state FILE.safetensors]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from motioncore.families.style.evaluate import evaluate_style
from motioncore.io.atomic import atomic_write, atomic_write_text
from motioncore.models.checkpoint import load_tensors, read_meta, save_tensors


def snapshot(run: Path, state: Path, out: Path) -> dict:
    """A learnet-pfnn checkpoint at ``out`` from the training state ``state``; returns its history's last entry."""
    tensors, meta = load_tensors(state.with_suffix(""))
    model = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    base = read_meta(run / "base")
    exp = base["experiment"]
    from motioncore.families.style.train_heldout import StyleConfig

    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()})
    from motioncore.families.pfnn.model import PFNNConfig
    from motioncore.families.style.model_layers import StyleEncoderConfig

    p = base["config"]
    lcfg = PFNNConfig(**{**p, "style_rank": cfg.style_rank, "style_dim": cfg.z_dim})
    ecfg = StyleEncoderConfig(p["input_dim"], cfg.z_dim, cfg.encoder_channels)
    from dataclasses import asdict

    m = {k: v for k, v in base.items() if k not in ("format", "kind", "config", "history", "stage_key")}
    save_tensors(out, model, {**m, "kind": "learnet-pfnn", "config": {"pfnn": asdict(lcfg), "encoder": asdict(ecfg)}})
    return meta["history"][-1]


def plot(points: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8))
    FigureCanvasAgg(fig)
    t = [p["wall_s"] / 60 for p in points]
    for k, (key, label) in enumerate((("next_frame_cm", "held-out next-frame error (cm)"),
                                      ("classifier_hits", "judge names the held-out style (fraction)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for c, st in (("base", "--"), ("learnet", "-o"), ("wrong_code", ":x")):
            ax.plot(t, [p["held_out"][key][c] for p in points], st, label=c)
        ax.set_xlabel("learnet training wall time (min, 1 CPU thread)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--state", help="a training-state snapshot (default: RUN/stages/learnet/train.state.safetensors)")
    a = ap.parse_args()
    run = Path(a.run)
    state = Path(a.state) if a.state else run / "stages" / "learnet" / "train.state.safetensors"
    ck = run / "curve" / "snap"
    ck.parent.mkdir(exist_ok=True)
    last = snapshot(run, state, ck)
    res = evaluate_style(str(ck), str(run / "base"), "style-judge", progress=False)
    atomic_write_text(run / "curve" / f"eval_e{last['epoch']}.json", json.dumps(res, indent=1))
    pts_path = run / "curve.json"
    pts = json.loads(pts_path.read_text()) if pts_path.is_file() else []
    pts = [p for p in pts if p["epoch"] != last["epoch"]] + [{"epoch": last["epoch"], "wall_s": last["wall_s"],
                                                              "val_loss": last["val_loss"], "held_out": res["held_out"],
                                                              "training_styles": res["training_styles"]}]
    pts.sort(key=lambda p: p["wall_s"])
    for p in pts:
        p["held_out"].pop("per_style", None)
    pts_path.write_text(json.dumps(pts, indent=1))
    plot(pts, run / "style_curve.png")
    h = res["held_out"]
    print(f"epoch {last['epoch']} ({last['wall_s'] / 60:.0f} min): next-frame " +
          ", ".join(f"{k} {v:.2f}" for k, v in h["next_frame_cm"].items()) + "; hits " +
          ", ".join(f"{k} {v:.2f}" for k, v in h["classifier_hits"].items()))


if __name__ == "__main__":
    main()
