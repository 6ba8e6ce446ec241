"""Any rest pose (issue 12 item 3) in REAL Blender: rigs made by Blender's own BVH importer at its defaults
whose rest differs from the in-fill model's -- a CMU trial (its own skeleton and rest) and a Bandai clip
re-rested into an A-pose -- carried onto the model's skeleton by world-space rest alignment
(addon/rigrest.py, the retargeter's math). Every mapped model bone with one mapped child (limbs, spine, feet,
and CMU's neck and forearms, whose child hangs from unmapped rig bones) points along the rig's bone in every
frame to <= 1 degree; the carry there and back is exact. Then the in-fill itself on the CMU import through a
live server, against the deleted truth (the full figures: bench/blender_infill.py --only cmu)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers.blender import bpy_python, build_addon_module

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(600), pytest.mark.blender]


def _model(tmp_path: Path) -> Path:
    from motioncore.models.registry import load_model
    _, meta = load_model("anyorder-body")
    sk = meta["skeleton"]
    p = tmp_path / "model.json"
    p.write_text(json.dumps({"names": sk["names"], "parents": sk["parents"], "offsets": np.asarray(sk["offsets"]).tolist(),
                             "root_joint": int(meta["root_joint"]),
                             "convention": np.asarray(meta["convention"]["mean_local_rotations"]).tolist()}))
    return p


@pytest.mark.parametrize("clip,rerest,version", [("cmu", "", "5.0.1"), ("cmu", "", "4.2"), ("bandai", "A", "5.0.1")])
def test_rest_alignment_points_every_bone_like_the_rig(clip, rerest, version, tmp_path, raw_file, bandai_walk):
    paths = [str(raw_file("cmu", "cmu_bvh/01_05.bvh") if clip == "cmu" else bandai_walk)]
    out = tmp_path / "out.json"
    build_addon_module().vendor(ROOT / "addon")   # the library copies the add-on runs (git-ignored)
    r = subprocess.run([str(bpy_python(version)), str(ROOT / "tests" / "blender" / "rest_align.py"), str(ROOT / "addon"),
                        paths[0], str(_model(tmp_path)), str(out), rerest], capture_output=True, text=True, timeout=500)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert not d["rest_same"] and d["rest_deg"] > 10, d["rest_deg"]   # the rest really differs
    one = {k: v for k, v in d["bones"].items() if d["kinds"][k] != "several"}
    assert len(one) >= 14, d["kinds"]
    if clip == "cmu":   # Spine->Chest through upperback, Neck->Head through upperneck (the hands map to the wrists,
        # as the library maps CMU: one mapper, issue 33)
        assert sum(k == "through unmapped rig bones" for k in d["kinds"].values()) >= 2, d["kinds"]
    assert max(one.values()) <= 1.0, one
    assert d["round_trip_deg"] <= 1e-6


def test_infill_on_a_cmu_import_against_the_truth(tmp_path, raw_file):
    """A CMU trial (120 fps, a rest pose and skeleton unlike the model's) imported at the BVH importer's
    defaults, keys deleted in two 30-frame gaps, each filled by the operator through a live server. Before
    the rest alignment the add-on's in-fill was 10.3 cm / 5.0 deg here (bench --quick, main 9fe56f4); Blender's
    Bezier is 1.2 cm / 1.3 deg (the model itself is only level with interpolation on CMU; see the README)."""
    CMU = [str(raw_file("cmu", "cmu_bvh/01_05.bvh"))]
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import blender_infill as bench
    finally:
        sys.path.pop(0)
    gaps = [[42, 71], [153, 182]]
    spec = {"clips": [{"name": "cmu", "path": CMU[0], "rotate_mode": None, "fps": 120.0, "gaps": gaps,
                       "context": 40}]}
    d, res = bench.run_driver(spec, "5.0.1", tmp_path)
    info = res["cmu"]
    assert "error" not in info, info.get("error")
    assert info["user_keys_kept"] and all(r.startswith("In-fill: filled") for r in info["reports"]), info["reports"]
    add = bench.errors(d, info, "cmu", "addon")
    assert add[0] < 6.0 and add[1] < 3.5, add   # was 10.3 cm / 5.0 deg
