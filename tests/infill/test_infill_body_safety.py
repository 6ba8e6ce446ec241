"""Safety (issue 23 item 6): off the training data the bundled infill-body is never much worse than Blender's Bezier of
the same keys. Three kinds of input unlike anything trained on, each on held-out Bandai windows (LaFAN1 gaps
of 15 and 30 frames): a rig with joints missing (both arms held at the rest pose, as the add-on holds unmapped
joints), extreme poses (the spine bent 100 degrees forward throughout), and motion four times faster than
captured. The mechanism: the network's correction is scaled by its confidence (families.body.fill.confidence,
measured limits in the checkpoint), so the answer slides to the Bezier off the training range. The figures are
printed; the bound is 1.1x the Bezier's error."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.rotations import axis_angle_to_quat, quat_mul
from motioncore.eval.baselines import bezier_quat
from motioncore.eval.infill import evaluate_infill
from motioncore.models.registry import bundled_names

pytestmark = pytest.mark.skipif("infill-body" not in bundled_names(), reason="infill-body is not bundled")


@pytest.fixture(scope="module")
def windows():
    from motioncore.data import load
    from motioncore.data.windows import lafan1_windows
    from motioncore.eval.run import load_eval_sets

    w, mean, std = load_eval_sets("bandai", progress=False)
    long = lafan1_windows(load("bandai", "test", fps=30.0, progress=False)[::3], 4 * 65, 160)
    return w, mean, std, long


def _cases(w, long):
    q, p = w.rotations[::6], w.positions[::6]
    sk = w.skeleton
    arms = [sk.index(n) for n in sk.names if any(a in n for a in ("Shoulder", "UpperArm", "LowerArm", "Hand"))]
    missing = q.copy()
    missing[:, :, arms] = np.array([1.0, 0, 0, 0])
    bent = q.copy()
    spine = sk.index("Spine")
    bent[:, :, spine] = quat_mul(axis_angle_to_quat(np.array([np.radians(100.0), 0, 0])), bent[:, :, spine])
    fast_q, fast_p = long.rotations[:, ::4], long.positions[:, ::4]
    return {"joints missing": (missing, p), "extreme pose": (bent, p), "4x speed": (fast_q, fast_p),
            "as captured": (q, p)}


@needs_data
def test_off_the_training_data_never_much_worse_than_bezier(windows):
    from motioncore.eval.keyed import lafan_fill
    from motioncore.families.body.evaluate import load_body_keyfill

    w, mean, std, long = windows
    fill = lafan_fill(load_body_keyfill("infill-body")[0])
    for name, (q, p) in _cases(w, long).items():
        res = evaluate_infill({"model": fill, "bezier": bezier_quat}, w.skeleton, q, p, mean, std, lengths=(15, 30),
                              progress=False)
        for n in ("15", "30"):
            m, b = res["model"]["L2Q"][n], res["bezier"]["L2Q"][n]
            mp, bp = res["model"]["L2P"][n], res["bezier"]["L2P"][n]
            print(f"{name} @{n}: L2Q {m:.3f} (Bezier {b:.3f}, x{m / b:.2f}); L2P {mp:.3f} (Bezier {bp:.3f}, x{mp / bp:.2f})")
            assert m <= 1.1 * b and mp <= 1.1 * bp, (name, n, m, b, mp, bp)
