"""The infill-body run's EMA weights as a bundled-style checkpoint (``export``): fp16 safetensors and JSON metadata
(data, licence, citation, last validation, safety limits).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from motioncore.families.body.train import BodyRecipe
from motioncore.families.body.train_batch import Net
from motioncore.families.body.train_data import FPS, build_data

__all__ = ["export"]


def export(run: Path, out: Path, name: str = "infill-body", metrics: dict | None = None, data: dict | None = None,
           contacts: bool = True) -> Path:
    """The run's EMA weights as a bundled-style checkpoint (fp16 safetensors + JSON metadata); ``contacts`` False:
    without the contact output (the in-fill itself unchanged: the contact head reads the same last layer)."""
    import platform

    import torch
    from safetensors.torch import load_file

    from motioncore.data.registry import BANDAI_LICENCE, CMU_CITE, CMU_LICENCE
    from motioncore.models.checkpoint import save_tensors

    state = json.loads((run / "state.json").read_text())
    state["recipe"] = {"loss": "length", **state["recipe"]}  # runs from before the field trained with "length"
    recipe = BodyRecipe(**state["recipe"])
    data = data or build_data(recipe.data, run.parent / "cache", progress=False)
    best = state.get("best") if recipe.select == "unseen" and (run / "best.safetensors").is_file() else None
    if best is not None:  # the EMA weights that scored best on the performers never trained on
        tensors = load_file(str(run / "best.safetensors"))
    else:
        t = load_file(str(run / "state.safetensors"))
        tensors = {k[4:]: v for k, v in t.items() if k.startswith("ema/")}
    config = dict(state["config"])
    if not contacts and config.get("contacts"):
        tensors = {k: v for k, v in tensors.items() if not k.startswith("contact.")}
        config["contacts"] = 0
    licence = CMU_LICENCE if recipe.data == "cmu" else f"{BANDAI_LICENCE} (Bandai Namco data); CMU data: {CMU_LICENCE}"
    last = next(({"step": h["step"], "wall_s": round(h["wall_s"], 1), "l2q_over_interp": h["val"]}
                 for h in reversed(state["history"]) if "val" in h), None)
    meta = {
        "kind": "infill-body", "task": "infill", "config": config, "recipe": state["recipe"],
        "skeleton": data["skeleton"].to_dict(), "fps": FPS, "root_joint": Net(data["skeleton"]).layout.body.root,
        "convention": {"mean_local_rotations": np.asarray(data["convention"]).tolist()},
        "training_data": data["describe"], "licence": licence,
        "citation": ("" if recipe.data == "cmu" else "Kobayashi et al. 2023, arXiv:2306.08861 (Bandai Namco); ")
        + CMU_CITE,
        "device": state.get("device", f"cpu ({platform.machine()}, {recipe.threads} thread(s))"),
        "steps": best["step"] if best else state["step"],
        "train_wall_s": round(best["wall_s"] if best else state["wall_s"], 1), "warm_start": state.get("warm_start"),
        "validation": ({"step": best["step"], "wall_s": round(best["wall_s"], 1), "l2q_over_interp": best["val"]}
                       if best else last),
        "selected": ("the EMA weights that scored best on CMU subjects 05 and 07 (never trained on), L2Q over Interp "
                     f"at 15 and 30 frames, of a run of {state['step']} steps" if best else "the last EMA weights"),
        "validation_note": "L2Q over Interp on fixed validation windows (Bandai test; CMU subjects never trained on, "
                           "on the Bandai skeleton), the EMA weights",
        "bundled_name": name, "torch": torch.__version__,
    }
    from motioncore.families.body.fill import safety_limits

    meta["safety"] = safety_limits(Net(data["skeleton"]).layout, data["rotations"], data["positions"], data["bounds"],
                                   data["convention"])
    if metrics:
        meta["metrics"] = metrics
    return save_tensors(out, tensors, meta, half=True)
