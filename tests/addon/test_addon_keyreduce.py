"""The add-on's Keys = Reduced plan (addon/core/keyreduce.py) on captured motion: the LAFAN1 clip's skeleton and
rotations (evaluation and tests only) as a rig's channels, quaternion and Euler, two gaps "filled" with the
capture itself. The planned curves, evaluated as Blender evaluates their keys and handles (`vendor.keyfit`,
parity-tested against real Blender), are put through forward kinematics written here, independent of the plan's
own check: world joint positions within the user's max / mean of the every-frame values, the plan's figures
equal to these, the animator's frames untouched, fewer keys than frames."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_data
from helpers.addon import addon_module

kr = addon_module("core.keyreduce")
rigclip = addon_module("core.rigclip")


@pytest.fixture(scope="module")
def clip():
    from motioncore.data.cache import data_root, unpack
    from motioncore.io.bvh import read_bvh
    path = unpack(data_root() / "lafan1_sample" / "lafan1_sample.tar.xz", progress=False) / "lafan1_walk_7184f.bvh"
    return read_bvh(path)


def fk(q: np.ndarray, offsets: np.ndarray, parents: list[int]) -> np.ndarray:
    """(T, J, 3) joint positions (cm) from local WXYZ rotations (T, J, 4)."""
    from motioncore.core.rotations import quat_to_matrix
    R = quat_to_matrix(q / np.linalg.norm(q, axis=-1, keepdims=True))
    G = np.zeros_like(R)
    P = np.zeros(q.shape[:2] + (3,))
    for j, p in enumerate(parents):
        if p < 0:
            G[:, j], P[:, j] = R[:, j], offsets[j]
        else:
            G[:, j] = G[:, p] @ R[:, j]
            P[:, j] = P[:, p] + np.einsum("tij,j->ti", G[:, p], offsets[j])
    return P


@needs_data
@pytest.mark.parametrize("mode", ["QUATERNION", "ZYX"])
def test_reduced_curves_hold_the_world_positions_within_the_users_tolerance(clip, mode):
    sk = clip.skeleton
    T = 240
    q = np.asarray(clip.rotations[1000:1000 + T], np.float64)
    par, off = list(sk.parents), np.asarray(sk.offsets, np.float64)
    heads = np.zeros((len(par), 3))
    for j, p in enumerate(par):
        heads[j] = off[j] + (heads[p] if p >= 0 else 0.0)
    raw = [rigclip.from_quat(q[:, j], mode, q[0, j] if mode == "QUATERNION" else np.zeros(3)) for j in range(len(par))]
    rig = {"bones": list(sk.names), "modes": [mode] * len(par), "heads": heads, "up": par,
           "offsets": {b: None for b in sk.names}, "root": sk.names[0]}
    frames = np.arange(T, dtype=np.float64) + 1.0
    todo = np.zeros(T, bool)
    todo[40:70] = True    # a 30-frame gap
    todo[150:165] = True  # a 15-frame gap
    chans = [kr.Channel(f"b{j}", b, raw[j].copy(), todo.copy(), j, mode) for j, b in enumerate(sk.names)]
    plan = kr.plan(rig, frames, raw, chans, 0.5, 0.1, 1.0)

    got = np.stack([np.stack([kr.evaluate(c.keys[i], c.values[:, i], c.todo, frames) for i in range(c.values.shape[1])],
                             axis=1) for c in chans], axis=1)
    qr = rigclip.to_quat(got, mode)
    dev = np.linalg.norm(fk(qr, off, par) - fk(q, off, par), axis=-1)
    assert np.abs(dev[~todo]).max() < 1e-9   # the animator's frames: as they were
    print(f"{mode}: {plan.written} keys of {plan.every_frame}; max {dev[todo].max():.3f} cm, mean "
          f"{dev[todo].mean():.4f} cm (the plan's check: {plan.max_cm:.3f}, {plan.mean_cm:.4f})")
    assert dev[todo].max() <= 0.5 and dev[todo].mean() <= 0.1
    assert plan.max_cm == pytest.approx(dev[todo].max(), rel=0.1) and plan.mean_cm == pytest.approx(dev[todo].mean(),
                                                                                                    rel=0.1)
    assert plan.every_frame == todo.sum() * sum(c.values.shape[1] for c in chans)
    assert plan.written < plan.every_frame
    for c in chans:   # keys only on filled frames, the span ends always among them
        for k in c.keys:
            assert np.isin(k["frames"], frames[todo]).all()
            assert {41.0, 70.0, 151.0, 165.0} <= set(k["frames"].tolist())


def test_each_bone_is_allowed_the_angle_that_moves_its_farthest_joint_by_the_budget():
    heads = np.array([[0.0, 0, 0], [0, 0, 10], [0, 0, 30], [5, 0, 30]])
    r = kr.reach(heads, [-1, 0, 1, 1])
    far = np.sqrt(925.0)   # bone 0's farthest joint below it: bone 3, at (5, 0, 30)
    assert r == pytest.approx([far, np.sqrt(425.0), 0.2 * far, 0.2 * far])   # leaves: MIN_REACH x the largest
    assert kr.channel_tolerance("QUATERNION", 0.01, 1.0) == pytest.approx(0.0025)
    assert kr.channel_tolerance("XYZ", 0.01, 1.0) == pytest.approx(0.01 / np.sqrt(3))
    assert kr.channel_tolerance("location", 0.01, 1.0) == pytest.approx(1 / np.sqrt(3))


@needs_data
def test_the_batched_plan_writes_the_keys_of_the_channel_by_channel_plan(clip):
    """`plan` fits the channels and gaps of one length together (`keyfit.fit_spans`); channel by channel
    (``batched=False``, `keyfit.fit_span` on each run) it plans the same keys, handles and figures. Euler bones, one
    gap too short to reduce (2 frames) and a channel whose todo differs (runs of other lengths in one gap)."""
    sk = clip.skeleton
    T = 200
    q = np.asarray(clip.rotations[3000:3000 + T], np.float64)
    par, off = list(sk.parents), np.asarray(sk.offsets, np.float64)
    heads = np.zeros((len(par), 3))
    for j, p in enumerate(par):
        heads[j] = off[j] + (heads[p] if p >= 0 else 0.0)
    raw = [rigclip.from_quat(q[:, j], "ZYX", np.zeros(3)) for j in range(len(par))]
    rig = {"bones": list(sk.names), "modes": ["ZYX"] * len(par), "heads": heads, "up": par,
           "offsets": {b: None for b in sk.names}, "root": sk.names[0]}
    frames = np.arange(T, dtype=np.float64)
    todo = np.zeros(T, bool)
    todo[20:35] = todo[60:90] = todo[120:122] = True
    plans = []
    for batched in (True, False):
        chans = [kr.Channel(f"b{j}", b, raw[j].copy(), todo.copy(), j, "ZYX") for j, b in enumerate(sk.names)]
        chans[3].todo[70:75] = False   # the animator keyed this bone inside the 30-frame gap
        plans.append(kr.plan(rig, frames, raw, chans, 0.3, 0.05, 1.0, batched=batched))
    a, b = plans
    assert a.written == b.written and a.written < a.every_frame
    assert a.max_cm == pytest.approx(b.max_cm, abs=1e-9) and a.mean_cm == pytest.approx(b.mean_cm, abs=1e-9)
    for ca, cb in zip(a.channels, b.channels):
        for ka, kb in zip(ca.keys, cb.keys):
            assert ka["frames"].tolist() == kb["frames"].tolist()
            for k in ("values", "lx", "ly", "rx", "ry"):
                assert np.allclose(ka[k], kb[k], rtol=1e-9, atol=1e-12)


@needs_data
def test_a_gap_whose_fill_is_the_users_own_curve_gets_no_keys(clip):
    """Blocking where the gate keeps Blender's curve: the fill of one gap is the user's own curve (Blender's Bezier
    of the keys either side, `eval.keyed.bezier_keys`, within a hundredth of a degree), of the other the capture
    (centimetres off that curve). The first gap gets no keys and the plan counts it kept; the second is keyed as
    before; the report says so."""
    from motioncore.eval.keyed import bezier_keys
    sk = clip.skeleton
    T = 240
    q = np.asarray(clip.rotations[2000:2000 + T], np.float64)
    p = np.asarray(clip.positions[2000:2000 + T], np.float64)
    par, off = list(sk.parents), np.asarray(sk.offsets, np.float64)
    heads = np.zeros((len(par), 3))
    for j, pj in enumerate(par):
        heads[j] = off[j] + (heads[pj] if pj >= 0 else 0.0)
    todo = np.zeros(T, bool)
    todo[40:70] = True
    todo[150:180] = True
    keyed = ~todo & (np.arange(T) % 10 == 0)   # blocking: a key every 10 frames
    bq, _ = bezier_keys(sk, q[None], p[None], keyed[None])
    rng = np.random.default_rng(0)
    fill = q.copy()
    fill[40:70] = bq[0, 40:70] * (1.0 + 1e-5 * rng.standard_normal(bq[0, 40:70].shape))   # the user's curve
    mode = "QUATERNION"
    raw = [rigclip.from_quat(fill[:, j], mode, fill[0, j]) for j in range(len(par))]
    user = [rigclip.from_quat(np.where(todo[:, None], bq[0, :, j], q[:, j]), mode, q[0, j]) for j in range(len(par))]
    rig = {"bones": list(sk.names), "modes": [mode] * len(par), "heads": heads, "up": par,
           "offsets": {b: None for b in sk.names}, "root": sk.names[0]}
    frames = np.arange(T, dtype=np.float64) + 1.0
    chans = [kr.Channel(f"b{j}", b, raw[j].copy(), todo.copy(), j, mode) for j, b in enumerate(sk.names)]
    plan = kr.plan(rig, frames, raw, chans, 0.5, 0.1, 1.0, user=user)
    assert plan.kept == 1
    for c in chans:
        for k in c.keys:
            assert not np.isin(k["frames"], frames[40:70]).any()
    assert sum(np.isin(k["frames"], frames[150:180]).sum() for c in chans for k in c.keys) > 0
    chans2 = [kr.Channel(f"b{j}", b, raw[j].copy(), todo.copy(), j, mode) for j, b in enumerate(sk.names)]
    plain = kr.plan(rig, frames, raw, chans2, 0.5, 0.1, 1.0)
    assert plain.kept == 0 and plain.written > plan.written
    dev = np.linalg.norm(fk(bq[0], off, par) - fk(fill, off, par), axis=-1)[40:70]
    assert plan.max_cm >= dev.max() - 1e-9   # what is left on the user's curve is in the plan's figures
    msg = kr.report(plan.written, {"every_frame": plan.every_frame, "max_cm": plan.max_cm, "kept": plan.kept,
                                   "kept_cm": 0.5})
    assert "1 gap(s) left on your own curve" in msg
