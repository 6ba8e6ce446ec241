"""The add-on's In-fill on the shared LAFAN1 clip (../shared/mocap/lafan1_sample: evaluation and tests only; its first
1,500 of 7,184 frames, to keep the test fast) in real Blender 5.0.1 and 4.2, imported with Blender's BVH importer at
its defaults (the scene left at 24 fps) and with Update Scene FPS (30.0003 fps), 12 gaps of 15 frames cut at once,
In-fill once over the whole action, with the keys as the user has them when In-fill runs: as the importer leaves them
(LINEAR), set to Bezier as an animator keys (Auto Clamped, or Vector handles), or CONSTANT; Plant Feet off and on.

Asserted per case: the written pose is the library's ``fill_clip_at`` of the same keys (its change on Blender's Bezier
of the keys), blended from the user's own curve by the gate's weight as the library's gate fits it, to 0.01 degrees per
bone and 0.01 cm (Plant Feet on: every bone but the legs, which the rig's own planting moves after it); a 30.0003 fps scene is filled as 30 fps exactly; the report names the curve the user has; the fill
is closer to the truth than the user's own linear or constant curve."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.blender import bpy_python

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(1800), pytest.mark.blender]
FRAMES = 1500
CASES = [   # (keys when In-fill runs, the importer's Update Scene FPS, Plant Feet)
    ("imported", False, False), ("imported", True, False), ("imported", False, True), ("BEZIER", True, False),
    ("VECTOR", False, False), ("CONSTANT", True, False)]
CURVE = {"imported": "linear", "CONSTANT": "constant"}
NAMED = {"linear": "your linear curve", "constant": "your constant (stepped) keys"}


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import blender_infill
        import blender_lafan
        import lafan_reference
    finally:
        sys.path.pop(0)
    return blender_infill, blender_lafan, lafan_reference


@pytest.fixture(scope="module")
def lafan_sub(raw_file, tmp_path_factory) -> Path:
    """The clip's first FRAMES frames, its own text (header, Frame Time 0.033333, frame lines) in a temporary file."""
    lines = raw_file("lafan1", "lafan1_walk_7184f.bvh").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Frames:"))
    assert lines[at + 1].startswith("Frame Time:")
    out = tmp_path_factory.mktemp("lafan") / "lafan1_first_1500.bvh"   # a temporary cut, never kept
    out.write_text("\n".join([*lines[:at], f"Frames: {FRAMES}", *lines[at + 1:at + 2 + FRAMES]]) + "\n")
    return out


@pytest.mark.parametrize("version", ["5.0.1", "4.2"])
def test_infill_on_imported_keys_is_the_library_fill_blended_from_the_users_curve(version, bench, lafan_sub, tmp_path):
    bi, bl, lr = bench
    bpy_python(version)
    gaps = bl.gaps_spread(FRAMES, 15)
    assert len(gaps) == 12
    names = [f"{k}-{'30' if u else '24'}-{'planted' if p else 'unplanted'}" for k, u, p in CASES]
    spec = {"clips": [{"name": n, "path": str(lafan_sub), "rotate_mode": None, "fps": None, "gaps": gaps,
                       "full_range": True, "once": True, "keys": k, "update_fps": u, "plant_feet": p}
                      for n, (k, u, p) in zip(names, CASES, strict=True)]}
    d, res = bi.run_driver(spec, version, tmp_path)
    rows = []
    for n, (keys, upd, plant) in zip(names, CASES, strict=True):
        info = res[n]
        assert "error" not in info, info.get("error")
        rep = info["reports"][0]
        assert rep.startswith("In-fill: filled"), rep
        if upd:   # the importer sets 30 fps with a base of 0.99999: the add-on reads 30 and fills at 30 exactly
            assert info["scene_fps"] != 30.0 and abs(info["scene_fps"] - 30.0) < 0.01
        fps = bi.filled_fps(info, info["scene_fps"])
        curve = CURVE.get(keys)
        if curve:
            assert NAMED[curve] in rep, rep
        par = lr.parity(d, info, n, str(lafan_sub), gaps, fps, curve=curve)
        add, bez, user = (bi.errors(d, info, n, m) for m in ("addon", "bezier", "user"))
        rows.append(f"{n}: {add[0] / bez[0]:.3f}x / {add[1] / bez[1]:.3f}x Blender's Bezier, {add[0] / user[0]:.3f}x / "
                    f"{add[1] / user[1]:.3f}x the user's curve (cm / deg), parity {par['deg']:.2g} deg {par['cm']:.2g} cm, "
                    f"blend {sorted(set(np.round(par['blend'], 2)))}")
        # Plant Feet on: the rig's own planting (addon/core/rigplant.py) moves the legs after the correction
        legs = [b for b in par["per_bone"] if plant and any(x in b for x in ("Leg", "Foot", "Toe"))]
        assert max(v for b, v in par["per_bone"].items() if b not in legs) <= 0.01 and par["cm"] <= 0.01, (n, par)
        if curve:   # the fill beats the curve the user has
            assert add[0] < user[0] and add[1] < user[1], (n, add, user)
        assert info["user_keys_kept"], n
    print(f"\nBlender {version}, LAFAN1 frames 1-{FRAMES}, 12 gaps of 15:\n" + "\n".join(rows))
