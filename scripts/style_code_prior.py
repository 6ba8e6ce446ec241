"""Write a trained style model's request-time fitting data into its checkpoint JSON (`families.style.train_heldout.fit_metadata`:
``stance_floor_cm`` and ``code_prior`` from the training styles' clips, never the held-out ones). Training
(`scripts/style_train.py`) writes them itself; this is for a checkpoint trained before they existed.

    .venv/bin/python scripts/style_code_prior.py src/motioncore/checkpoints/learnet-biped
"""
from __future__ import annotations

import argparse
import time

import torch

from motioncore.data import load
from motioncore.families.pfnn.features import rotation_encoding
from motioncore.families.style.train_heldout import StyleConfig, add_fit_metadata, prepare
from motioncore.models.registry import load_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a learnet-pfnn checkpoint (NAME, beside NAME.json and NAME.safetensors)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model, meta = load_model(args.checkpoint)
    exp = meta["experiment"]
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in StyleConfig.__dataclass_fields__ and k != "rotations"},
                      rotations=rotation_encoding(meta["layout"]))
    prep = prepare(cfg, load(cfg.data, None, progress=False))
    extra = add_fit_metadata(args.checkpoint, model, prep, cfg.window_max_s)  # type: ignore[arg-type]
    print(f"{args.checkpoint}: floor {extra['stance_floor_cm']:.2f} cm, prior {extra['code_prior']['from']} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
