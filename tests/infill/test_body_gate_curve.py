"""The body in-fill on keys that are not Bezier (``families.body.gate_curve``): Blender's BVH importer leaves every key
LINEAR, and an animator may key CONSTANT. The gate rebuilds the curve the user has on its pseudo-gaps and picks how far
to blend from it toward the fill; the add-on blends the same way (addon/core/requests.correct)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.skeleton import Skeleton
from motioncore.families.body.gate_curve import blend_pose, pose_errors, user_curve


def _chain(T: int = 12) -> tuple[Skeleton, np.ndarray, np.ndarray]:
    sk = Skeleton(["a", "b", "c"], [-1, 0, 1], np.array([[0.0, 0, 0], [0, 10, 0], [0, 10, 0]]))
    rng = np.random.default_rng(0)
    q = rng.normal(size=(1, T, 3, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    pos = np.broadcast_to(sk.offsets, (1, T, 3, 3)).copy()
    pos[0, :, 0] = rng.normal(size=(T, 3))
    return sk, q, pos


def test_the_user_curve_is_linear_between_the_keys_or_held_and_the_keys_stay():
    sk, q, pos = _chain()
    frames = np.zeros((1, 12), bool)
    frames[0, 4:8] = True   # keys at 3 and 8
    lq, lp = user_curve(q, pos, frames, "linear")
    cq, cp = user_curve(q, pos, frames, "constant")
    np.testing.assert_array_equal(lq[~frames], q[~frames])
    np.testing.assert_array_equal(cq[0, 4:8], np.broadcast_to(q[0, 3], (4, 3, 4)))
    np.testing.assert_array_equal(cp[0, 4:8], np.broadcast_to(pos[0, 3], (4, 3, 3)))
    t = (np.arange(4, 8) - 3) / 5.0   # the root moves on the straight line between the keys, evenly
    np.testing.assert_allclose(lp[0, 4:8, 0], pos[0, 3, 0] + t[:, None] * (pos[0, 8, 0] - pos[0, 3, 0]))
    np.testing.assert_allclose(np.linalg.norm(lq, axis=-1), 1.0)


def test_blend_zero_is_the_user_curve_exactly_and_one_the_fill():
    sk, q, pos = _chain()
    _, f, fp = _chain()
    f = f[:, ::-1].copy()
    u0, p0 = blend_pose(q, pos, f, fp, 0.0)
    np.testing.assert_array_equal(u0, q)
    np.testing.assert_array_equal(p0, pos)
    u1, p1 = blend_pose(q, pos, f, fp, 1.0)
    np.testing.assert_allclose(np.abs(np.sum(u1 * f, -1)), 1.0, atol=1e-12)
    np.testing.assert_allclose(p1, fp)
    frames = np.ones((1, 12), bool)
    assert np.allclose(pose_errors(sk, q, pos, q, pos, frames), 0.0, atol=1e-5)
    cm, deg = pose_errors(sk, u1, p1, q, pos, frames)
    assert cm > 1.0 and deg > 10.0


@pytest.fixture(scope="module")
def lafan(raw_file):
    """The first 1,500 frames of the shared LAFAN1 clip on the shipped model's skeleton (tests only)."""
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[2] / "bench")
    sys.path.insert(0, bench)   # lafan_reference imports its siblings when called
    try:
        import lafan_reference

        yield lafan_reference, raw_file("lafan1", "lafan1_walk_7184f.bvh")
    finally:
        sys.path.remove(bench)


@needs_data
@pytest.mark.parametrize("length", [5, 15])
def test_on_linear_keys_the_gate_weighs_the_fill_against_the_linear_curve(lafan, length, tmp_path, one_thread):
    """On 12 gaps cut from the LAFAN1 walk, the keys LINEAR (as Blender's BVH importer leaves them): the gate's fit
    says what the linear curve costs on its test gaps, its blend never scores worse there than the linear curve, and
    the real gaps filled at its blend beat the linear interpolation of the same keys."""
    from motioncore.core.motion import Motion
    from motioncore.io.bvh import read_bvh, write_bvh

    lr, path = lafan
    mo = read_bvh(path)
    sub = tmp_path / "lafan_sub.bvh"
    write_bvh(sub, Motion(mo.skeleton, mo.rotations[:1500], mo.positions[:1500], mo.fps, "sub"), precision=8)
    T, step = 1500, 1500 // 12
    gaps = [[i * step + 12, i * step + 11 + length] for i in range(12)]   # Blender frames, inclusive
    known = np.ones(T, bool)
    for a, b in gaps:
        known[a - 1:b] = False
    frames = (~known)[None]
    # the user's linear curve on the file's own skeleton, for the real gaps
    pos = np.broadcast_to(mo.skeleton.offsets, (T,) + mo.skeleton.offsets.shape).copy()
    pos[:, 0] = mo.positions[:1500, 0]
    q = mo.rotations[None, :1500]
    lq, lp = user_curve(q, pos[None], frames, "linear")
    ref = lr.library_fill(str(sub), gaps, 30.0, curve="linear")
    (fit,) = [g for g in ref["gate"]]
    blend = float(fit[3])
    assert 0.0 <= blend <= 1.0
    est = ref["curve_est"][0]
    assert np.all(est <= 1.0 + 1e-9), est   # weight 0, the linear curve itself, is among the candidates
    fq, fp = blend_pose(lq[0][~known], lp[0][~known, 0], ref["answer"], ref["answer_root"], blend)
    fill = lr.scores(str(sub), ref, fq, fp)
    lin = lr.scores(str(sub), ref, lq[0][~known], lp[0][~known, 0])
    print(f"{length} frames: blend {blend}, gate's estimate {est.round(3)}, real gaps {np.divide(fill, lin).round(3)}")
    assert fill[0] < lin[0] and fill[1] < lin[1], (fill, lin)
