"""The learnet style experiment (scripts/learnet_experiment.py runs it): one-shot style adaptation of a PFNN with a learnet (Bertinetto et al., NeurIPS 2016), on Bandai
dataset 2: does a PFNN adapt to an unseen style from ONE exemplar clip, without fine-tuning?

One style (``holdout``, default elderly) is held out entirely; the train split of the other six trains
- **base**: a PFNN with no style input;
- **learnet**: the same PFNN with a factorised adapter ``M1 diag(f(z)) M2`` on every layer, trained
  jointly with a ``StyleEncoder``. Each training row reads z from an *exemplar*: a random 2-4 s window
  of the z-scored X rows (all 216 input columns) of another training clip of the row's style. Per
  batch, two exemplar clips per style present are drawn and encoded; a row uses the first unless that
  is its own clip, then the second (so a row never sees its own clip). Exemplar clips are training
  clips with at least ``window_min_s`` of rows;
- **fine-tuned**: the base model trained further on the exemplar clip's rows alone, a fixed budget
  (``finetune_epochs`` at ``finetune_lr``, batch ``finetune_batch``, dropout and L1 as in training, no
  early stopping).

Evaluation, for each of ``n_exemplars`` exemplars (the first ``exemplar_content`` clips of the held-out
style in the train split, in file order): next-frame prediction error on every other held-out-style
clip of both splits (z-scored output MSE, and joint position error in cm after de-normalising, mean
over rows and the 21 body joints; Bandai's static ground joint is left out). z is encoded from the
exemplar's central <= ``window_max_s`` rows. Control: the learnet with z from a clip of
``control_style``. Reference: the three models on the six training styles' test split (learnet z from a
fixed walk clip of each row's own style, the fine-tuned model is the one adapted to the exemplar).
Training rows: the train split of the six styles, minus every 10th clip (validation, for the loss
curves only), as in ``train.controllers``; normalisers are fitted on the training rows.

Writes to ``cfg.out``: results.json, results.md, learnet_style.png, checkpoints ``base``, ``learnet``
(kind ``learnet-pfnn``: ``pfnn.*`` and ``encoder.*`` tensors, see `load_learnet`), ``finetuned_<i>``, and
the resumable training state of each stage in ``stages/<name>/``. A finished stage whose settings match
is loaded instead of retrained; an interrupted one resumes from its last epoch (the exemplar windows'
random stream restarts, so a resumed learnet is not bit-identical to an uninterrupted one).

The settings and the data live in `learnet_setup`, the models and their training in `learnet_train`; this
module evaluates, reports and runs the whole (`main`).

Legend: N rows, B batch, W exemplar windows, L window rows, D features, Z style code, J joints.
"""
from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from motioncore.data import Clip, get_spec, load
from motioncore.families.pfnn.model import PFNN
from motioncore.families.style.evaluate import body_joints, prediction_errors
from motioncore.families.style.model import LearnetPFNN
from motioncore.families.style.train import (
    ExemplarSampler,
    _write,
    central_span,
    encode_spans,
    finetune,
    make_loss,
    model_configs,
    train_stage,
)
from motioncore.families.style.train_data import LearnetStyleConfig, Prepared, eval_rows, prepare
from motioncore.models.checkpoint import load_state_into, load_tensors, read_meta, save_model

CONDITIONS = ("base", "learnet", "learnet_wrong_style", "finetuned")


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def exemplar_code(model: LearnetPFNN, prep: Prepared, c: int, max_rows: int) -> Tensor:
    """z (1, Z) from clip ``c``'s central <= max_rows rows."""
    model.eval()
    return encode_spans(model, prep.x, [central_span(prep, c, max_rows)])


def run_repeat(cfg: LearnetStyleConfig, prep: Prepared, base: PFNN, learnet: LearnetPFNN, r: int, meta: dict) -> dict:
    """One exemplar: the four conditions on the held-out clips, and the fine-tuned model on the reference rows."""
    ex, ctrl = prep.exemplars[r], prep.controls[r % len(prep.controls)]
    rows, max_rows = eval_rows(prep, ex), int(round(cfg.window_max_s * prep.layout.fps))
    t0 = time.perf_counter()
    name, key = f"finetuned_{r}", {**meta["stage_key"], "finetune": [cfg.finetune_epochs, cfg.finetune_lr,
                                                                     cfg.finetune_batch], "exemplar": prep.clips[ex].name}
    out = Path(cfg.out)
    if cfg.resume and (out / f"{name}.json").is_file() and read_meta(out / name).get("stage_key") == key:
        tuned, losses = copy.deepcopy(base), read_meta(out / name)["finetune_losses"]
        load_state_into(tuned, load_tensors(out / name)[0], str(out / name))
    else:
        tuned, losses = finetune(base, prep, ex, cfg)
        save_model(out / name, tuned, "pfnn", asdict(tuned.cfg), {
            **meta, "stage_key": key, "finetune_losses": losses,
            "training_data": f"{meta['training_data']}, then fine-tuned on {prep.clips[ex].name}"})
    tune_s = time.perf_counter() - t0
    held = {"base": prediction_errors(base, prep, rows),
            "learnet": prediction_errors(learnet, prep, rows, exemplar_code(learnet, prep, ex, max_rows)),
            "learnet_wrong_style": prediction_errors(learnet, prep, rows, exemplar_code(learnet, prep, ctrl, max_rows)),
            "finetuned": prediction_errors(tuned, prep, rows)}
    return {"exemplar": prep.clips[ex].name, "exemplar_rows": int(prep.counts[ex]), "control": prep.clips[ctrl].name,
            "eval_clips": len(prep.heldout) - 1, "eval_rows": len(rows), "heldout": held,
            "reference_finetuned": prediction_errors(tuned, prep, prep.test_idx), "finetune_losses": losses,
            "finetune_s": tune_s}


def stat(values: list[float]) -> dict:
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "values": v.tolist()}


def summarise(repeats: list[dict], reference: dict) -> dict:
    """Mean and sample sd over the exemplars of every condition and metric."""
    held = {c: {m: stat([r["heldout"][c][m] for r in repeats]) for m in ("z_mse", "joint_cm")} for c in CONDITIONS}
    ref = {c: {m: stat([reference[c][m]]) for m in ("z_mse", "joint_cm")} for c in ("base", "learnet")}
    ref["finetuned"] = {m: stat([r["reference_finetuned"][m] for r in repeats]) for m in ("z_mse", "joint_cm")}
    return {"heldout": held, "reference": ref}


# ----------------------------------------------------------------------------- report
LABELS = {"base": "base PFNN (no style input)", "learnet": "learnet, z from the held-out exemplar",
          "learnet_wrong_style": "learnet, z from a wrong-style clip ({control})",
          "finetuned": "base fine-tuned on the exemplar"}


def markdown(res: dict) -> str:
    cfg, s = res["config"], res["summary"]
    pm = lambda d, f: f"{d['mean']:{f}} ± {d['sd']:{f}}" if len(d["values"]) > 1 else f"{d['mean']:{f}}"  # noqa: E731
    lines = [f"## Learnet one-shot style adaptation: {cfg['data']}, held-out style {cfg['holdout']}", "",
             f"| model | held-out {cfg['holdout']}: z-MSE | held-out: joint error (cm) | 6 training styles, test: z-MSE "
             "| training styles: joint error (cm) |", "|---|---|---|---|---|"]
    for c in CONDITIONS:
        ref = s["reference"].get(c)
        tail = f"{pm(ref['z_mse'], '.4f')} | {pm(ref['joint_cm'], '.2f')}" if ref else "– | –"
        lines.append(f"| {LABELS[c].format(control=cfg['control_style'])} | {pm(s['heldout'][c]['z_mse'], '.4f')} | "
                     f"{pm(s['heldout'][c]['joint_cm'], '.2f')} | {tail} |")
    reps, sz, w = res["repeats"], res["sizes"], res["wall_s"]
    lines += ["", f"Mean ± sample sd over {len(reps)} exemplar clip(s): "
              + ", ".join(f"{r['exemplar']} ({r['exemplar_rows']} rows; control {r['control']})" for r in reps) + ". "
              f"Held-out rows: every other {cfg['holdout']} clip of both splits ({reps[0]['eval_clips']} clips, "
              f"{reps[0]['eval_rows']} rows). Next-frame prediction from ground-truth inputs; joint error over "
              f"the {sz['body_joints']} body joints, root-relative. Reference learnet z: a fixed "
              f"{cfg['exemplar_content']} clip of each row's own style.", "",
              f"Sizes: PFNN {sz['pfnn']['input_dim']}→{sz['pfnn']['hidden_dim']}→{sz['pfnn']['hidden_dim']}→"
              f"{sz['pfnn']['output_dim']}, 4 phase control points, {sz['params_base']:,} parameters; learnet adds "
              f"rank-{cfg['style_rank']} adapters (z {cfg['z_dim']}) and a 3×{cfg['encoder_channels']} conv encoder: "
              f"{sz['params_learnet']:,} parameters. Training: {sz['train_rows']:,} rows ({sz['train_clips']} clips), "
              f"{res['epochs_run']['base']}/{res['epochs_run']['learnet']} epochs (base/learnet), batch {cfg['batch_size']}, "
              f"AdamW lr {cfg['lr']:g} (one cosine cycle), dropout {cfg['dropout']}, L1 {cfg['l1']}; fine-tuning "
              f"{cfg['finetune_epochs']} epochs, lr {cfg['finetune_lr']:g}, batch {cfg['finetune_batch']}.", "",
              "Wall time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in w.items()) + f". {res['budget']}"]
    return "\n".join(lines)


def bar_chart(res: dict, path: Path) -> None:
    """Two panels (z-MSE, joint cm): each condition on the held-out style and the training styles."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    x = np.arange(len(CONDITIONS))
    for k, (metric, title) in enumerate((("z_mse", "z-scored output MSE"), ("joint_cm", "joint position error (cm)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for off, (part, label) in ((-0.2, ("heldout", f"held-out {res['config']['holdout']}")),
                                   (0.2, ("reference", "6 training styles, test"))):
            d = [res["summary"][part].get(c, {}).get(metric) for c in CONDITIONS]
            ax.bar(x + off, [v["mean"] if v else np.nan for v in d], 0.4, yerr=[v["sd"] if v else 0 for v in d],
                   capsize=3, label=label)
        ax.set_xticks(x, ["base", "learnet", "learnet\nwrong style", "fine-tuned"])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- main
def train_models(cfg: LearnetStyleConfig, prep: Prepared) -> tuple[PFNN, LearnetPFNN, dict, dict, dict]:
    """(base, learnet, base info, learnet info, checkpoint metadata)."""
    spec, (bcfg, lcfg, ecfg) = get_spec(cfg.data), model_configs(cfg, prep)
    fields = ("data", "holdout", "hidden_dim", "dropout", "epochs", "batch_size", "lr", "l1", "seed")
    key = {**{f: getattr(cfg, f) for f in fields}, "clips": [c.name for c in prep.clips]}
    meta = {"task": "controller", "training_data": f"{cfg.data} ({len(prep.bank)} styles, held out: {cfg.holdout})",
            "licence": spec.licence, "citation": spec.citation, "layout": prep.layout.to_dict(),
            "x_norm": prep.x_norm.to_dict(), "y_norm": prep.y_norm.to_dict(), "fps": prep.layout.fps,
            "skeleton": prep.clips[0].motion.skeleton.to_dict(), "experiment": asdict(cfg), "stage_key": key}
    torch.manual_seed(cfg.seed)
    base, info_b = train_stage("base", PFNN(bcfg), make_loss(cfg.l1), prep, cfg, "pfnn", asdict(bcfg), meta)
    lkey = {**key, "learnet": [cfg.style_rank, cfg.z_dim, cfg.encoder_channels, cfg.window_min_s, cfg.window_max_s]}
    torch.manual_seed(cfg.seed)
    learnet, info_l = train_stage("learnet", LearnetPFNN(lcfg, ecfg), make_loss(cfg.l1, ExemplarSampler(prep, cfg)),
                                  prep, cfg, "learnet-pfnn", {"pfnn": asdict(lcfg), "encoder": asdict(ecfg)},
                                  {**meta, "stage_key": lkey})
    return base, learnet, info_b, info_l, meta  # type: ignore[return-value]


def sizes(prep: Prepared, base: PFNN, learnet: LearnetPFNN) -> dict:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    return {"pfnn": asdict(base.cfg), "learnet_pfnn": asdict(learnet.pfnn.cfg), "encoder": asdict(learnet.encoder.cfg),
            "params_base": count(base), "params_learnet": count(learnet), "train_rows": len(prep.train_idx),
            "train_clips": len(set(prep.clip[prep.train_idx].tolist())), "val_rows": len(prep.val_idx),
            "test_rows": len(prep.test_idx), "body_joints": len(body_joints(prep))}


def main(cfg: LearnetStyleConfig, clips: list[Clip] | None = None) -> dict:
    """Train base and learnet, fine-tune per exemplar, evaluate, write the report; returns the results.
    ``clips`` replaces ``load(cfg.data)`` (tests pass a handful)."""
    torch.set_num_threads(cfg.threads)
    out, t_all, wall = Path(cfg.out), time.perf_counter(), {}
    out.mkdir(parents=True, exist_ok=True)
    prep = prepare(cfg, load(cfg.data, None, progress=cfg.progress) if clips is None else clips)
    wall["features"] = time.perf_counter() - t_all
    print(f"[features] {len(prep.x)} rows, {len(prep.train_idx)} training rows in {wall['features']:.1f} s", flush=True)
    base, learnet, info_b, info_l, meta = train_models(cfg, prep)
    wall["base"], wall["learnet"] = info_b["wall_s"], info_l["wall_s"]
    t0 = time.perf_counter()
    repeats = [run_repeat(cfg, prep, base, learnet, r, meta) for r in range(len(prep.exemplars))]
    with torch.no_grad():
        z_ref = ExemplarSampler(prep, cfg).fixed_codes(learnet.eval(), prep.style[torch.from_numpy(prep.test_idx)])
    reference = {"base": prediction_errors(base, prep, prep.test_idx),
                 "learnet": prediction_errors(learnet, prep, prep.test_idx, z_ref)}
    wall["finetune"] = sum(r["finetune_s"] for r in repeats)
    wall["evaluation"] = time.perf_counter() - t0 - wall["finetune"]
    wall["total"] = time.perf_counter() - t_all  # this invocation; a reloaded stage shows its original time above
    print(f"[finetune+eval] {wall['finetune']:.1f} + {wall['evaluation']:.1f} s", flush=True)
    loaded = [n for n, i in (("base", info_b), ("learnet", info_l)) if i["loaded"]]
    res = {"config": asdict(cfg), "summary": summarise(repeats, reference), "repeats": repeats, "reference": reference,
           "sizes": sizes(prep, base, learnet), "wall_s": wall,
           "epochs_run": {"base": len(info_b["history"]), "learnet": len(info_l["history"])},
           "histories": {"base": info_b["history"], "learnet": info_l["history"]},
           "stages_loaded": {"base": info_b["loaded"], "learnet": info_l["loaded"]},
           "budget": f"Budget: about 25 min wall on a shared 2-core CPU (nice 15, {cfg.threads} torch thread(s))."
                     + "".join(f" Stage {n} was reloaded from its checkpoint (its time is the original training)."
                               for n in loaded),
           "training_data": meta["training_data"], "licence": meta["licence"], "figures": ["learnet_style.png"]}
    _write(out / "results.json", json.dumps(res, indent=1))
    text = markdown(res)
    _write(out / "results.md", text + "\n")
    bar_chart(res, out / "learnet_style.png")
    print(text, flush=True)
    return res
