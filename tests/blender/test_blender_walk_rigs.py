"""Walk Along Path and Walk in Example's Style in real Blender on three rigs of one motion (a held-out Bandai walk):
the model's own (Bandai names and rest), the same renamed to Mixamo's names (``mixamorig:``, Spine1 for the chest,
LeftToeBase...), and the LAFAN1-like rewrite (scripts/lafan_like_rig.py: another rest frame on every joint, the
hips the ROOT far from the origin, a third spine bone the model lacks). Each rig walks the same Bezier and, with
its own import as the Style Example, walks it in that style (walk_rigs.py). Bones map by topology and poses go
through the rest alignment (addon/core/align.py), so the renamed and the re-rested rigs walk as the model's own:
every joint's world position relative to the hips, frame by frame, as the Bandai rig's: the walks to 0.01 cm,
the renamed rig's style walk too; the re-rested rig's style walk within a quarter of what the style itself moves
the joints (the twist of a single-child bone about itself is open to the rest alignment, and the style model lists
no twist convention to fix it: the example's local rotations, and so the fitted code, differ a little)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.blender import bpy_python

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(900), pytest.mark.blender]
MIXAMO = {"Hips": "Hips", "Spine": "Spine", "Chest": "Spine1", "Neck": "Neck", "Head": "Head",
          "Shoulder_L": "LeftShoulder", "UpperArm_L": "LeftArm", "LowerArm_L": "LeftForeArm", "Hand_L": "LeftHand",
          "Shoulder_R": "RightShoulder", "UpperArm_R": "RightArm", "LowerArm_R": "RightForeArm", "Hand_R": "RightHand",
          "UpperLeg_L": "LeftUpLeg", "LowerLeg_L": "LeftLeg", "Foot_L": "LeftFoot", "Toes_L": "LeftToeBase",
          "UpperLeg_R": "RightUpLeg", "LowerLeg_R": "RightLeg", "Foot_R": "RightFoot", "Toes_R": "RightToeBase"}
MIXAMO = {k: f"mixamorig:{v}" for k, v in MIXAMO.items()} | {"joint_Root": "Armature_Root"}


def renamed(motion, names: dict[str, str]):
    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton
    sk = motion.skeleton
    return Motion(Skeleton(tuple(names[n] for n in sk.names), sk.parents, sk.offsets, sk.channels, sk.end_sites),
                  motion.rotations, motion.positions, motion.fps, motion.name)


@pytest.mark.parametrize("version", ["5.0.1"])
def test_walk_and_style_on_renamed_and_re_rested_rigs_walk_as_the_models_own(version, tmp_path, raw_file):
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import build_addon
        import lafan_like_rig as lafan
        from conftest import server_process
    finally:
        sys.path[:2] = []
    from motioncore.io.bvh import read_bvh, write_bvh
    py = bpy_python(version)
    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    rigs = {"bandai": mo, "mixamo": renamed(mo, MIXAMO), "lafan": lafan.rewrite(lafan.with_mid_spine(mo))}
    paths = {}
    for k, m in rigs.items():
        paths[k] = tmp_path / f"{k}.bvh"
        write_bvh(paths[k], m, precision=8)
    z = build_addon.build(dist_dir=tmp_path / "dist", skip_wheels=True)
    out = tmp_path / "out.npz"
    with server_process(tmp_path) as (_, conn, _):
        env = {**os.environ, "BLENDER_USER_RESOURCES": str(tmp_path / "user")}
        r = subprocess.run([str(py), str(ROOT / "tests" / "blender" / "walk_rigs.py"), str(z), str(conn), str(out),
                            *[f"{k}={p}" for k, p in paths.items()]], capture_output=True, text=True, env=env,
                           timeout=800)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    d, res = dict(np.load(out)), json.loads(Path(str(out) + ".json").read_text())
    name_of = {"bandai": {n: n for n in MIXAMO}, "mixamo": MIXAMO, "lafan": lafan.LAFAN_NAMES}
    for k in rigs:
        assert "error" not in res[k], res[k]["error"]
        assert res[k]["walk"].startswith("Walk along path: walked"), (k, res[k]["walk"])
        assert res[k]["style"].startswith("Style from example: walked"), (k, res[k]["style"])
    worst = {}
    for label in ("walk", "style"):
        ref = d[f"bandai/{label}"]
        ref = ref - ref[:, [res["bandai"]["bones"].index("Hips")]]
        for k in ("mixamo", "lafan"):
            bones = res[k]["bones"]
            got = d[f"{k}/{label}"]
            assert got.shape[0] == ref.shape[0], (k, label, got.shape, ref.shape)
            got = got - got[:, [bones.index(name_of[k]["Hips"])]]
            pairs = [(res["bandai"]["bones"].index(n), bones.index(name_of[k][n])) for n in MIXAMO
                     if n != "joint_Root" and name_of[k].get(n) in bones]
            a, b = (list(x) for x in zip(*pairs, strict=True))
            worst[k, label] = float(np.linalg.norm(got[:, b] - ref[:, a], axis=-1).mean(axis=1).max())
    # what the style does: the Bandai rig's style walk against its plain walk, the same measure
    hips = res["bandai"]["bones"].index("Hips")
    w, st = (d[f"bandai/{x}"] - d[f"bandai/{x}"][:, [hips]] for x in ("walk", "style"))
    n = min(len(w), len(st))
    shift = float(np.linalg.norm(st[:n] - w[:n], axis=-1).mean(axis=1).max())
    print(f"Blender {version}: worst frame's mean joint distance to the Bandai rig's (cm): {worst}; the style's own "
          f"shift {shift:.2f}")
    assert max(worst["mixamo", "walk"], worst["lafan", "walk"], worst["mixamo", "style"]) <= 0.01, worst
    # the re-rested example reads as the same style up to the twist of single-child bones about themselves, which
    # rest directions leave open and learnet-biped lists no convention to fix (2026-11-27: 2.0 cm of 15.9)
    assert shift > 5.0 and worst["lafan", "style"] <= 0.25 * shift, (worst, shift)
