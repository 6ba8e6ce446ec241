"""In REAL Blender (bpy 5.0.1 and 4.2): In-fill's Keys = Reduced.

1. Blender's Bezier with handles set by hand (ALIGNED third-handles as the add-on writes them, and FREE handles,
   uneven, one longer than its segment, on sub-frames) is `core.keyfit.bezier_evaluate`, and Blender keeps the ALIGNED handles written.
2. The LAFAN1 clip (evaluation only) imported with Blender's BVH importer at its defaults, 12 gaps of 15 frames cut
   and filled by ``bpy.ops.motioncore.infill`` with Keys = Every Frame, then Reduced (bench/reduced_keys.py,
   tests/blender/reduced_keys.py): keys written / every frame <= 0.25; world joint positions of Blender's reduced
   curve against its every-frame curve within 0.5 cm (0.1 cm on average); no jerkier (mean |third difference| of
   the joints in the gaps, and with 3 frames either side); the error against the
   deleted truth within 1% of the every-frame fill's; the report says what was written. Editing: one reduced key
   moved changes Blender's curve only between that key's neighbours; a pose keyed inside a gap, the handles of the
   keys beside the gap and of the new one shaped (FREE), and the gaps filled again: every GENERATED key of that gap
   holds the new fill's value (none stale, none doubled), the new fill meets the key, the animator's keys (the new
   one among them) as they were: frames, values, types, shaped handles byte for byte; only Auto Clamped handles
   move, as Blender computes them from their neighbours; one undo takes the reduced fill back."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data
from helpers.blender import bpy_python

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.blender]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import reduced_keys
    finally:
        sys.path.pop(0)
    return reduced_keys


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", ["5.0.1", "4.2"])
def test_blender_evaluates_hand_set_handles_as_keyfit_does(version, tmp_path):
    from motioncore.core import keyfit
    rng = np.random.default_rng(7)
    t = np.arange(31.0)
    y = np.sin(t / 5.0) + 0.2 * np.cos(t / 2.3)
    idx, m = keyfit.fit_span(y, 1e-3)
    kx, ky = idx.astype(np.float64), y[idx]
    lx, ly, rx, ry = keyfit.third_handles(kx, ky, m)
    curves = [{"keys": np.stack([kx, ky], 1), "left": np.stack([lx, ly], 1), "right": np.stack([rx, ry], 1),
               "type": "ALIGNED"}]
    for reach in ((0.1, 0.9), (0.45, 0.5), (0.0, 1.6)):   # FREE handles: uneven, and one longer than its segment
        kx = np.cumsum(rng.uniform(1.0, 6.0, 7))          # (Blender shortens it to the segment to evaluate)
        ky = rng.normal(0, 1, 7)
        gap_l = np.concatenate([[1.0], np.diff(kx)])
        gap_r = np.concatenate([np.diff(kx), [1.0]])
        curves.append({"keys": np.stack([kx, ky], 1),
                       "left": np.stack([kx - reach[0] * gap_l, ky + rng.normal(0, 0.5, 7)], 1),
                       "right": np.stack([kx + reach[1] * gap_r, ky + rng.normal(0, 0.5, 7)], 1), "type": "FREE"})
    frames = np.round(np.arange(0.0, 40.0, 0.1), 6)
    req = {"curves": [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in c.items()} for c in curves],
           "frames": frames.tolist()}
    (tmp_path / "in.json").write_text(json.dumps(req))
    r = subprocess.run([str(bpy_python(version)), str(ROOT / "tests" / "blender" / "free_handles.py"),
                        str(tmp_path / "in.json"), str(tmp_path / "out.json")], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["blender"].startswith(version.rsplit(".", 1)[0] if version.count(".") > 1 else version)
    for c, got in zip(curves, out["curves"], strict=True):
        k = np.asarray(c["keys"], np.float32).astype(np.float64)
        left, right = np.asarray(got["left"]), np.asarray(got["right"])
        if c["type"] == "ALIGNED":   # the add-on's handles: Blender keeps them
            assert np.abs(left - c["left"]).max() < 1e-5 and np.abs(right - c["right"]).max() < 1e-5
        want = keyfit.bezier_evaluate(k[:, 0], k[:, 1], left[:, 0], left[:, 1], right[:, 0], right[:, 1], frames)
        assert np.abs(np.asarray(got["values"]) - want).max() < 2e-5, c["type"]


@pytest.fixture(scope="module", params=["5.0.1", "4.2"])
def lafan_run(request, bench, tmp_path_factory):
    """The LAFAN1 clip, 12 gaps of 15 frames, filled with Every Frame then Reduced, and the editing checks, in real
    Blender ``version``: (version, clip spec, arrays, figures, info)."""
    version = request.param
    bpy_python(version)
    clip = next(c for c in bench.clip_specs((15,)) if c["name"] == "lafan-15")
    assert len(clip["gaps"]) == 12
    d, res = bench.run({"clips": [clip]}, version, tmp_path_factory.mktemp(f"reduced-{version}"))
    info = res["lafan-15"]
    assert "error" not in info, info.get("error")
    f = bench.figures(d, info, "lafan-15", 1.0)
    print(f"Blender {version}: {f}\n{info['report_reduced']}")
    return version, clip, d, f, info


@needs_data
@pytest.mark.timeout(1500)
def test_reduced_keys_are_few_hold_the_fill_and_say_so(lafan_run):
    version, clip, d, f, info = lafan_run
    # the report says what was written
    m = re.search(r"wrote ([\d,]+) keys \(every frame: ([\d,]+)\), within ([\d.]+) cm", info["report_reduced"])
    assert m, info["report_reduced"]
    assert int(m[1].replace(",", "")) == f["keys"] and int(m[2].replace(",", "")) == f["every"]
    assert f["every"] == info["keys_dense"]
    # the targets
    assert f["keys"] / f["every"] <= 0.25
    assert f["max_cm"] <= 0.5 and f["sum_cm"] / f["n"] <= 0.1
    for k in (0, 1):   # position (cm) and rotation (deg) error against the deleted truth
        assert f["err_reduced"][k] <= 1.01 * f["err_dense"][k], (f["err_reduced"], f["err_dense"])
    assert info["user_keys_kept"]


@needs_data
@pytest.mark.timeout(1500)
def test_reduced_keys_are_no_jerkier_than_the_fill(lafan_run):
    version, clip, d, f, info = lafan_run
    print(f"jerk in the gaps: reduced {f['jerk_in_reduced']:.5f}, every frame {f['jerk_in_dense']:.5f}; with 3 frames "
          f"either side {f['jerk_reduced']:.5f}, {f['jerk_dense']:.5f}")
    assert f["jerk_in_reduced"] <= f["jerk_in_dense"] and f["jerk_reduced"] <= f["jerk_dense"], f


@needs_data
@pytest.mark.timeout(1500)
def test_reduced_keys_edit_as_an_animator_expects(lafan_run):
    version, clip, d, f, info = lafan_run
    # one reduced key moved: Blender's curve changes only between its neighbours, and does change there
    mv = info["move"]
    assert "error" not in mv, mv
    before, after = np.asarray(mv["before"]), np.asarray(mv["after"])
    # float32 keys: Blender's update() realigns ALIGNED handles to a few ulps, which moves a curve of large values
    # (a hips location in cm) by 1e-5 where nothing was moved; a change is more than 1e-6 of the curve's size
    changed = np.abs(after[:, 1] - before[:, 1]) > 1e-6 * max(1.0, float(np.abs(before[:, 1]).max()))
    assert changed.any()
    assert (before[changed, 0] > mv["prev"]).all() and (before[changed, 0] < mv["next"]).all(), mv["curve"]
    # a pose keyed inside the first gap, the gaps filled again
    # the animator's keys (the new one among them): frames, values, key types, interpolation, handle types and
    # easing as they were; the handles they shaped (FREE: beside the gap and on the new key) byte for byte; only
    # Auto Clamped handles moved (Blender computes those from their neighbours, as it does for Every Frame)
    assert info["again_user_co_kept"] and info["again_user_enums_kept"], "the animator's keys changed"
    assert info["again_user_shaped"] > 0 and info["again_user_shaped_kept"] == info["again_user_shaped"], info
    assert info["again_user_handles_moved"] == info["again_user_handles_moved_auto"], info
    assert info["again_keys"] > 0 and info["again_fresh"] == info["again_keys"], info   # none stale
    assert info["again_doubled"] == 0
    assert info["undo_restores"], "one Ctrl+Z did not take the reduced fill back"
    g0, g = clip["gaps"][0][0], info["again_frame"]
    p = d["lafan-15/again"][..., :3, 3] @ d["lafan-15/object"][:3, :3].T    # the first gap's frames, refilled
    steps = np.linalg.norm(np.diff(p, axis=0), axis=-1).max(axis=1)          # (frames - 1,) the largest joint step
    at = g - g0
    assert max(steps[at - 1], steps[at]) <= 1.5 * np.delete(steps, [at - 1, at]).max(), steps  # meets the key
