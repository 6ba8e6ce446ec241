"""The in-fill demo's feet (cli/demo_feet.py): its skate figures on a real walk re-filled by Interp, and the PNG's
contact and skate rows."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core import feet as F
from motioncore.retarget.contacts import feet_of


@needs_data
def test_demo_skate_and_plot_on_a_real_walk_filled_by_interp(bandai_walk, tmp_path):
    from motioncore.cli.controllers import plot_infill
    from motioncore.cli.demo_feet import demo_skate, per_frame_skate
    from motioncore.infill import interp_channels
    from motioncore.io.bvh import read_bvh

    walk = read_bvh(bandai_walk)
    sk, T = walk.skeleton, walk.num_frames
    known = np.zeros(T, bool)
    known[:10] = known[9::20] = known[-1] = True
    keys = np.repeat(known[:, None], sk.num_joints + 1, 1)
    iq, iroot = interp_channels(walk.rotations[None], walk.positions[None, :, 0], keys)
    pos = walk.positions.copy()
    pos[:, 0] = iroot[0]
    _, gi = sk.forward_kinematics(iq[0], pos)
    _, gt = walk.global_transforms()
    legs = feet_of(sk, gt[::10])
    feet = [j for leg in legs for j in leg]
    s = demo_skate(gt, {"model": gt, "interp": gi}, known, walk.fps, legs)
    assert s["model_over_walk"] == pytest.approx(1.0)
    assert s["interp_over_walk"] > 2.0   # slerped legs under a lerped root: the feet drag
    assert s["interp_cm_s"] == pytest.approx(F.skate(gi, walk.fps, feet, F.ground(gt, feet), F.fill_span(known)))
    per = per_frame_skate(gi, walk.fps, feet, F.ground(gt, feet))
    assert per.shape == (T - 1,) and np.nanmax(per) > 100.0
    plain = plot_infill(walk, iq[0], iq[0], known, "interp", tmp_path / "plain.png")
    feet_png = plot_infill(walk, iq[0], iq[0], known, "interp", tmp_path / "feet.png",
                           positions={"walk": gt, "model": gi, "Interp": gi}, legs=legs)
    from matplotlib.image import imread

    assert imread(feet_png).shape[0] > imread(plain).shape[0] * 1.3   # two more rows: contacts and skate
