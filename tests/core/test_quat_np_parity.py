"""core/quat_np.py (vendored into the add-on) against the library's full set, core/rotations.py: sign
continuity, rotation matrices and Blender's Euler modes agree on random rotations."""
from __future__ import annotations

import numpy as np
import pytest

from motioncore.core import euler as E
from motioncore.core import quat_np as qn
from motioncore.core import rotations as R

MODES = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def _quats(n: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_continuity_and_matrices_equal_the_librarys():
    q = _quats(300).reshape(50, 6, 4)
    for axis in (0, 1):
        assert np.array_equal(qn.quat_continuity(q, axis), R.quat_continuity(q, axis))
    assert np.allclose(qn.quat_to_matrix(q), R.quat_to_matrix(q), atol=1e-12)
    assert np.allclose(qn.quat_to_matrix(3.0 * q), R.quat_to_matrix(q), atol=1e-12)   # normalised first


@pytest.mark.parametrize("mode", MODES)
def test_blender_euler_pair_inverts_blender_euler_to_quat_and_matches_the_library(mode):
    q = _quats(500, seed=1)
    one, two = qn.blender_euler_pair(q, mode)
    for e in (one, two):
        back = qn.blender_euler_to_quat(e, mode)
        assert np.allclose(np.abs(np.sum(back * q, -1)), 1.0, atol=1e-12)
    assert np.all(np.abs(one[..., {"X": 0, "Y": 1, "Z": 2}[mode[1]]]) <= np.pi / 2 + 1e-12)
    # the library's intrinsic angles of the reversed order are Blender's (x, y, z) reordered
    rev = mode[::-1]
    lib = E.quat_to_euler(q, rev)
    assert np.allclose(one[:, ["XYZ".index(c) for c in rev]], lib, atol=1e-9)
    prev = one + 2 * np.pi   # the nearest equivalent to angles a turn away: those angles
    assert np.allclose(qn.blender_quat_to_euler(q, mode, prev), prev, atol=1e-9)
