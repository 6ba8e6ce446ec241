"""``motioncore eval style``: one-shot style on the held-out styles, judged by a classifier that is not
the model (`motioncore.eval.style`), against the unadapted base and a wrong style's code.

For each held-out style and each of ``n_exemplars`` exemplar clips of it: the same paths (at one speed,
``WALK_SPEED_MPS``, for every style: the style must come from the code, not from the path) walked by the
base, the learnet with the exemplar's code and the learnet with a wrong style's code (from
``WRONG_STYLES``), each walk named by the judge; and the three models' next-frame error on every other
clip of that style. On the training styles: base vs learnet next-frame error on the test split.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from ..data import Clip
from ..errors import MotioncoreError
from ..eval.style import CONDITIONS, SETTLE_S, WALK_SPEED_MPS, Judge, walks

WRONG_STYLES = ("active", "happy", "youthful")  # the wrong code of exemplar r comes from WRONG_STYLES[r % 3]


def pick_exemplars(prep: Any, style: str, n: int, min_rows: int) -> list[int]:
    """``n`` clips of a held-out style to read codes from: walks first, then other contents, by name."""
    cand = [c for c in prep.heldout_by_style[style] if prep.counts[c] >= min_rows]
    cand.sort(key=lambda c: (prep.clips[c].labels.get("content") != "walk", prep.clips[c].name))
    if len(cand) < n:
        raise MotioncoreError(f"style {style!r}: {len(cand)} clips with >= {min_rows} rows, {n} exemplars asked")
    return cand[:n]


def evaluate_style(model: str = "learnet-biped", base: str = "pfnn-style-base", judge: str = "style-judge",
                   n_exemplars: int = 3, clips: list[Clip] | None = None, progress: bool = True,
                   threads: int = 1) -> dict:
    """Everything `motioncore eval style --json` writes (see the module docstring)."""
    from ..data import load
    from ..features.pfnn import rotation_encoding
    from ..models.registry import load_model
    from ..tasks.locomotion import Controller
    from ..tasks.style import StyleAdapter
    from .learnet_style import prediction_errors
    from .learnet_train import ExemplarSampler
    from .style_oneshot import StyleConfig, prepare

    t0 = time.perf_counter()
    torch.set_num_threads(threads)
    ad = StyleAdapter.load(model)
    exp = ad.meta.get("experiment") or {}
    if "holdouts" not in exp:
        raise MotioncoreError(f"--model {model}: not trained with held-out styles (no experiment.holdouts in its metadata)")
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in StyleConfig.__dataclass_fields__ and k != "rotations"},
                      rotations=rotation_encoding(ad.meta.get("layout") or {}))  # the rows the model was trained on
    base_net, base_meta = load_model(base)
    if base_meta.get("held_out_styles") != list(cfg.holdouts):
        raise MotioncoreError(f"--base {base}: held out {base_meta.get('held_out_styles')}, the style model "
                              f"{list(cfg.holdouts)}: not the same experiment")
    jd = Judge.load(judge)
    prep = prepare(cfg, load(cfg.data, None, progress=progress) if clips is None else clips)
    if not np.allclose(prep.x_norm.to_dict()["mean"], ad.meta["x_norm"]["mean"], rtol=1e-4, atol=1e-4):
        raise MotioncoreError(f"--model {model}: its normaliser differs from the data's rows (different data?)")
    base_ctl = Controller.from_model(base_net, base_meta)
    learnet = ad.model
    min_rows = ad.min_rows * 2
    held: dict[str, Any] = {}
    for h in cfg.holdouts:
        reps = []
        for r, ex in enumerate(pick_exemplars(prep, h, n_exemplars, min_rows)):
            wrong_style = WRONG_STYLES[r % len(WRONG_STYLES)]
            wid = prep.styles.index(wrong_style) if wrong_style in prep.styles else sorted(prep.bank)[r % len(prep.bank)]
            wrong_clip = prep.style_exemplar[wid]
            z_ex, z_wrong = ad.code(prep.clips[ex].motion), ad.code(prep.clips[wrong_clip].motion)
            others = [c for c in prep.heldout_by_style[h] if c != ex]
            rows = np.concatenate([np.arange(prep.starts[c], prep.starts[c] + prep.counts[c]) for c in others])
            zt = lambda z: torch.as_tensor(z, dtype=torch.float32)[None]  # noqa: E731
            nf = {"base": prediction_errors(base_net, prep, rows)["joint_cm"],
                  "learnet": prediction_errors(learnet, prep, rows, zt(z_ex))["joint_cm"],
                  "wrong_code": prediction_errors(learnet, prep, rows, zt(z_wrong))["joint_cm"]}
            speed = WALK_SPEED_MPS
            named = {}
            for cond, ctl in (("base", base_ctl), ("learnet", ad.controller(z_ex)), ("wrong_code", ad.controller(z_wrong))):
                named[cond] = [jd.name(m, SETTLE_S) for m in walks(ctl, speed)]
            reps.append({"exemplar": prep.clips[ex].name, "content": prep.clips[ex].labels.get("content"),
                         "wrong_code_from": f"{prep.clips[wrong_clip].name} ({prep.styles[wid]})",
                         "speed_mps": speed, "eval_clips": len(others), "eval_rows": int(len(rows)),
                         "next_frame_cm": nf, "judge_named": named,
                         "hits": {c: float(np.mean([n == h for n in named[c]])) for c in CONDITIONS},
                         "judge_on_exemplar": jd.name(prep.clips[ex].motion)})
            if progress:
                print(f"[style] {h} exemplar {r + 1}/{n_exemplars} {prep.clips[ex].name}: next-frame "
                      + ", ".join(f"{c} {nf[c]:.2f}" for c in CONDITIONS) + " cm; judge hits "
                      + ", ".join(f"{c} {reps[-1]['hits'][c]:.2f}" for c in CONDITIONS), flush=True)
        held[h] = reps
    allr = [r for v in held.values() for r in v]
    mean = lambda key: {c: float(np.mean([r[key][c] for r in allr])) for c in CONDITIONS}  # noqa: E731
    with torch.no_grad():
        z_ref = ExemplarSampler(prep, cfg).fixed_codes(learnet.eval(), prep.style[torch.from_numpy(prep.test_idx)])  # type: ignore[arg-type]
    # can the pipeline show a style at all? each training style's fixed exemplar code, the same paths
    base_named = [jd.name(m, SETTLE_S) for m in walks(base_ctl, WALK_SPEED_MPS)]
    train_named = {"base": base_named}
    for s_id in sorted(prep.bank):
        z = ad.code(prep.clips[prep.style_exemplar[s_id]].motion)
        train_named[prep.styles[s_id]] = [jd.name(m, SETTLE_S) for m in walks(ad.controller(z), WALK_SPEED_MPS)]
    train_hits = {"base": float(np.mean([[n == prep.styles[s] for n in base_named] for s in sorted(prep.bank)])),
                  "learnet": float(np.mean([[n == prep.styles[s] for n in train_named[prep.styles[s]]]
                                            for s in sorted(prep.bank)]))}
    train_nf = {"base": prediction_errors(base_net, prep, prep.test_idx)["joint_cm"],
                "learnet": prediction_errors(learnet, prep, prep.test_idx, z_ref)["joint_cm"]}
    res = {"held_out": {"styles": list(cfg.holdouts), "next_frame_cm": mean("next_frame_cm"), "classifier_hits": mean("hits"),
                        "per_style": {h: {"next_frame_cm": {c: float(np.mean([r["next_frame_cm"][c] for r in v]))
                                                            for c in CONDITIONS},
                                          "classifier_hits": {c: float(np.mean([r["hits"][c] for r in v])) for c in CONDITIONS},
                                          "exemplars": v} for h, v in held.items()}},
           "training_styles": {"styles": [prep.styles[s] for s in sorted(prep.bank)], "next_frame_cm": train_nf,
                               "classifier_hits": train_hits, "judge_named": train_named,
                               "test_rows": int(len(prep.test_idx))},
           "classifier_test_accuracy": jd.meta["test_accuracy"], "classifier_test_clips": jd.meta["test_clips"],
           "models": {"style": model, "base": base, "judge": judge}, "walks_per_condition": len(allr) * 3,
           "settle_s": SETTLE_S, "walk_speed_mps": WALK_SPEED_MPS, "wall_s": time.perf_counter() - t0}
    hn, tr = res["held_out"], res["training_styles"]["next_frame_cm"]
    res["targets"] = {"held_out_next_frame_10pct_below_base": hn["next_frame_cm"]["learnet"] <= 0.9 * hn["next_frame_cm"]["base"],
                      "held_out_hits_2x_base": hn["classifier_hits"]["learnet"] >= 2 * hn["classifier_hits"]["base"]
                      and hn["classifier_hits"]["learnet"] > 0,
                      "training_styles_within_5pct": tr["learnet"] <= 1.05 * tr["base"]}
    return res
