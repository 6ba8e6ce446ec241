"""One Euler convention everywhere, checked against REAL Blender for all six rotation modes: the add-on's reader
(addon/core/rigclip.py ``to_quat``), the vendored ``quat_np.blender_euler_to_quat`` and the library's intrinsic
``core.euler.euler_to_quat`` of the reversed order give Blender's own rotation (``Euler.to_quaternion``
and a posed bone's ``matrix_basis``), and the add-on's writer gives angles Blender reads as the same rotation.
Blender's mode 'XYZ' applies X first (R = Rz Ry Rx): the intrinsic order 'ZYX' with the angles reversed."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers.addon import addon_module
from helpers.blender import bpy_python

from motioncore.core import quat_np
from motioncore.core.euler import euler_to_quat
from motioncore.core.rotations import EULER_ORDERS

ROOT = Path(__file__).resolve().parents[2]
rc = addon_module("core.rigclip")
qn = addon_module("vendor.quat_np")


def _same(a: np.ndarray, b: np.ndarray) -> float:
    """Largest angle (deg) between the rotations of two quaternion arrays (q == -q), from the relative
    rotation's vector part (exact near 0, unlike the arccos of a dot product)."""
    rel = quat_np.quat_mul(quat_np.quat_conj(np.asarray(a, np.float64)), np.asarray(b, np.float64))
    return float(np.degrees(2 * np.arctan2(np.linalg.norm(rel[..., 1:], axis=-1), np.abs(rel[..., 0]))).max())


def _inputs(n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    angles = rng.uniform(-np.pi, np.pi, (n, 3))
    angles[:6, 1] = np.pi / 2 - 1e-7   # near gimbal lock in every mode's middle axis... and others
    angles[6:12] = rng.uniform(-3 * np.pi, 3 * np.pi, (6, 3))   # beyond +-180
    q = rng.normal(size=(n, 4))
    return angles, q / np.linalg.norm(q, axis=-1, keepdims=True)


@pytest.mark.parametrize("order", EULER_ORDERS)
def test_the_vendored_euler_is_the_librarys(order):
    a, _ = _inputs()
    assert _same(quat_np.euler_to_quat(a, order), euler_to_quat(a, order)) < 1e-10
    axis = {"X": 0, "Y": 1, "Z": 2}
    rev = order[::-1]
    blender = quat_np.blender_euler_to_quat(a, order)
    assert _same(blender, euler_to_quat(a[:, [axis[c] for c in rev]], rev)) < 1e-10
    np.testing.assert_array_equal(rc.to_quat(a, order), blender)   # the add-on reads with the library's function


@pytest.mark.blender
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", ["5.0.1", "4.2"])
def test_every_rotation_mode_matches_real_blender(version, tmp_path):
    angles, quats = _inputs()
    (tmp_path / "in.json").write_text(json.dumps({"angles": angles.tolist(), "quats": quats.tolist()}))
    r = subprocess.run([str(bpy_python(version)), str(ROOT / "tests" / "blender" / "euler_orders.py"),
                        str(tmp_path / "in.json"), str(tmp_path / "out.json")], capture_output=True, text=True,
                       timeout=500)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads((tmp_path / "out.json").read_text())
    axis = {"X": 0, "Y": 1, "Z": 2}
    worst = {}
    for mode in rc.EULER_ORDERS:
        ours = rc.to_quat(angles, mode)
        rev = mode[::-1]
        lib = euler_to_quat(angles[:, [axis[c] for c in rev]], rev)
        for key in ("euler", "posed"):
            b = np.asarray(got[mode][key])
            worst[mode, key] = max(_same(ours, b), _same(lib, b))
        back = np.asarray(got[mode]["to_euler"])   # Blender's angles for our quaternions, read by our reader
        worst[mode, "to_euler"] = _same(rc.to_quat(back, mode), quats)
        worst[mode, "from_quat"] = _same(rc.to_quat(qn.blender_quat_to_euler(quats, mode), mode), quats)
    print(f"Blender {got['version']}: worst {max(worst.values()):.2e} deg over 6 modes x {len(angles)} angles")
    assert max(worst.values()) < 1e-4, {k: v for k, v in worst.items() if v >= 1e-4}   # Blender: float32
