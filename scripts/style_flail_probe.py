"""Where the style model's flails come from (issue 40): (1) ``teacher``: every joint's fastest turn between
consecutive frames of the network's predictions on a real clip's own input rows (no rollout), against the
data's p99.9; (2) ``ablate``: the walks' fastest turns with one layer's adapter switched off (M1 zeroed, no
retraining), on the demo path, a sharp turn and the judged walks. Codes are fitted to the named clips as a
request does.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/style_flail_probe.py teacher --model learnet-biped dataset-1_walk_musical_001
    OMP_NUM_THREADS=1 .venv/bin/python scripts/style_flail_probe.py ablate --layers 2,0 dataset-1_walk_musical_001
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from motioncore.cli.controllers import demo_path
from motioncore.core.kinematics import rotation_step_limits
from motioncore.data import load
from motioncore.families.pfnn.features import locomotion_clips
from motioncore.families.style.evaluate_turns import code_turns, sharp_turn
from motioncore.families.style.generate import StyleAdapter
from motioncore.families.style.train_smooth import TurnMeter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("teacher", "ablate"))
    ap.add_argument("clips", nargs="+", help="Bandai clip names whose fitted codes walk")
    ap.add_argument("--model", default="learnet-biped")
    ap.add_argument("--layers", default="2", help="ablate: comma-separated layers whose adapter is switched off")
    a = ap.parse_args()
    torch.set_num_threads(1)
    clips = {c.name: c for c in load("bandai", None, progress=False)}
    lim = rotation_step_limits([c.motion for c in locomotion_clips([c for c in clips.values() if c.split == "train"])])
    if a.mode == "teacher":
        ad = StyleAdapter.load(a.model)
        meter = TurnMeter(ad.layout, ad._base.y_norm, ad.skeleton.parents)
        names, L = np.array(ad.skeleton.names)[meter.child.numpy()], lim[meter.child.numpy()]
        for name in a.clips:
            z = torch.as_tensor(ad.fit(clips[name].motion))[None]
            d = ad.exemplar_data(clips[name].motion)
            x = torch.as_tensor(ad._base.x_norm.transform(d["X"]), dtype=torch.float32)
            with torch.no_grad():
                p = ad.model.pfnn(x, torch.as_tensor(d["phase"], dtype=torch.float32), z.expand(len(x), -1))
            t = np.degrees(meter.turns(p[:-1], p[1:]).numpy()).max(0)
            j = int((t / np.maximum(L, 1e-6)).argmax())
            print(f"{name}, its own rows, teacher-forced: worst {names[j]} {t[j]:.1f} deg/frame, p99.9 {L[j]:.1f}")
        return
    paths = {"demo": demo_path("biped"), "sharp turn": sharp_turn()}
    for off in [int(v) for v in a.layers.split(",")]:
        ad = StyleAdapter.load(a.model)
        ad.model.pfnn.net.adapter_list()[off].m1.data.zero_()
        for name in a.clips:
            for path, v in code_turns(ad.controller(ad.fit(clips[name].motion)), paths).items():
                r = v / np.maximum(lim, 1e-6)
                j = int(r.argmax())
                print(f"layer {off} adapter off, {name}, {path}: worst {ad.skeleton.names[j]} {v[j]:.1f} / {lim[j]:.1f} "
                      f"(x{r[j]:.2f})")


if __name__ == "__main__":
    main()
