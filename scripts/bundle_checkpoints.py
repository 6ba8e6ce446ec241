"""Copy trained run checkpoints into the package as bundled models (fp16 weights, JSON metadata).

    python scripts/bundle_checkpoints.py runs/pfnn/pfnn pfnn-biped [--metrics out/eval_controllers.json]

The metadata keeps the training data and licence of the run and may add evaluation metrics.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from motioncore.models.checkpoint import load_tensors, save_tensors
from motioncore.models.registry import BUNDLED


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="run checkpoint base path, e.g. runs/pfnn/pfnn")
    p.add_argument("name", help="bundled model name, e.g. pfnn-biped")
    p.add_argument("--metrics", help="JSON object of metrics to record in the metadata")
    p.add_argument("--fp32", action="store_true", help="keep fp32 weights (default fp16)")
    a = p.parse_args()
    tensors, meta = load_tensors(a.checkpoint)
    meta.pop("format", None)
    meta.pop("history", None)  # the curve stays in the run folder; keep the package small
    meta.pop("stage_key", None)  # (learnet runs) the resume key lists every clip: the run folder keeps it
    meta["bundled_name"] = a.name
    if a.metrics:
        meta["metrics"] = json.loads(Path(a.metrics).read_text())
    out = save_tensors(BUNDLED / a.name, tensors, meta, half=not a.fp32)
    size = sum(f.stat().st_size for f in BUNDLED.glob(f"{a.name}.*"))
    print(f"{out} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
