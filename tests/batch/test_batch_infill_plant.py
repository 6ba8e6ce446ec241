"""`motioncore batch infill` plants the body in-fill's feet by default and says so per file in report.json (the
gate's judgement per gap length); `--no-plant-feet` leaves them as the network fills them."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data
from helpers.cli import main

pytestmark = [pytest.mark.timeout(300), needs_data, pytest.mark.usefixtures("one_thread")]


def test_batch_infill_plants_the_feet_unless_told_not_to(tmp_path):
    from motioncore.core import feet as F
    from motioncore.data import load
    from motioncore.families.body.fill_plant import legs_of
    from motioncore.io.bvh import read_bvh, write_bvh

    clip = max(load("bandai", "test", fps=30, progress=False)[:40], key=lambda c: len(c.motion.rotations)).motion
    src = tmp_path / "src"
    src.mkdir()
    write_bvh(src / "walk.bvh", clip)
    (tmp_path / "gaps.json").write_text(json.dumps({"walk": [[120, 135], [250, 265]]}))
    args = ["batch", "infill", str(src), "--gaps", str(tmp_path / "gaps.json"), "--quiet"]
    assert main([*args, "--out", str(tmp_path / "on")]) == 0
    assert main([*args, "--out", str(tmp_path / "off"), "--no-plant-feet"]) == 0
    on, off = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("on", "off"))
    assert on["plant_feet"] is True and off["plant_feet"] is False
    [r_on], [r_off] = on["files"], off["files"]
    (g,) = r_on["gate"]
    assert g["method"] == "pseudo-gaps" and set(g["plant_error"]) == {"unplanted", "planted", "truth_skate", "bezier",
                                                                      "strength", "tried"}
    assert (r_on["plant"] is not None) == g["plant"] and r_off["plant"] is None
    a, b, truth = (read_bvh(p) for p in (tmp_path / "on" / "walk.bvh", tmp_path / "off" / "walk.bvh", src / "walk.bvh"))
    keep = np.ones(clip.num_frames, bool)
    keep[120:135] = keep[250:265] = False
    np.testing.assert_array_equal(a.rotations[keep], truth.rotations[keep])
    if g["plant"]:   # planted: the feet skate less on the filled frames than the network left them
        sk = truth.skeleton
        feet = [j for lg in legs_of(sk) for j in (lg.ankle, lg.toe)]
        _, tg = truth.global_transforms()
        span = F.fill_span(keep)
        s_on, s_off = (F.skate(m.global_transforms()[1], clip.fps, feet, F.ground(tg, feet), span) for m in (a, b))
        assert s_on < s_off
