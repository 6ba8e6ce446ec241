"""In REAL Blender (bpy 5.0.1; issue 23 item 5): a CMU test-subject clip (subject 07, walks: a performer the model
never trained on, in the cmu_05-09 conversion: other joint names, ASF units) imported with Blender's own BVH
importer at its defaults; gaps of 5, 15 and 30 frames cut and filled by ``bpy.ops.motioncore.infill`` (the
deterministic infill-body, temperature 0) through a live server. Required: position and rotation error against
the deleted truth no worse than Blender's own Bezier of the same keys, at every length."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.blender import bpy_python

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(1200), pytest.mark.blender]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="issue 23 item 5 not met (2026-11-25, bundled infill-body, subject 07): add-on / "
                   "Bezier 0.78 cm / 1.45 deg against 0.60 / 1.33 at 5 frames, 3.42 / 4.70 against 5.67 / 4.65 at "
                   "15, 4.94 / 6.99 against 8.71 / 7.89 at 30: ahead from 15 frames except rotation at 15, behind "
                   "at 5; 2026-11-27 at the clip's own rate: 0.65 / 1.57 at 5, 3.34 / 4.22 at 15, 5.89 / 5.84 at 30: "
                   "ahead at 15 and 30, behind at 5; drop this mark when a model meets it")
def test_infill_on_an_unseen_cmu_performer_beats_blenders_bezier(tmp_path):
    from motioncore.io.bvh import read_bvh

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import blender_infill as bench
    finally:
        sys.path.pop(0)

    try:
        path = bench.cmu_test_clips()[0]   # 07_01
    except Exception as e:  # the archive is absent
        pytest.skip(f"the CMU 05-09 archive is not available: {e}")
    mo = read_bvh(path)
    ctx = bench.context_frames(mo.fps)
    lengths = {5: 20, 15: 60, 30: 120}   # gap frames at 30 fps -> scene frames at the clip's 120 fps
    clips = []
    for n, frames in lengths.items():
        gaps = bench.place_gaps(mo.num_frames, frames, 2, context=ctx)
        clips.append({"name": f"gap{n}", "path": path, "rotate_mode": None, "fps": mo.fps, "gaps": gaps,
                      "context": ctx, "unit_cm": 2.54 / 0.45})
    d, res = bench.run_driver({"clips": clips}, "5.0.1", tmp_path)
    bpy_python("5.0.1")
    figures = {}
    for c in clips:
        info = {**res[c["name"]], "unit_cm": c["unit_cm"]}
        assert "error" not in info, info.get("error")
        assert info["user_keys_kept"] and all(r.startswith("In-fill: filled") for r in info["reports"])
        figures[c["name"]] = (bench.errors(d, info, c["name"], "addon"), bench.errors(d, info, c["name"], "bezier"))
    for name, (add, bez) in figures.items():
        print(f"{name}: add-on {add[0]:.2f} cm / {add[1]:.2f} deg, Bezier {bez[0]:.2f} cm / {bez[1]:.2f} deg")
    for name, (add, bez) in figures.items():   # the in-fill is never far from Blender's curve (the correction)
        assert add[0] <= 2.0 * bez[0] + 0.5 and add[1] <= 1.5 * bez[1] + 0.5, (name, add, bez)
    assert all(add[0] <= bez[0] and add[1] <= bez[1] for add, bez in figures.values()), figures
