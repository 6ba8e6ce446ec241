"""The deterministic body in-fill (infill-body): the residual's base is Blender's Bezier of the keys, keys come back
exactly, the key-mask baselines equal the LaFAN1 ones, a model on another skeleton adds no error of its own,
mirroring respects the rest frames, training resumes exactly, and the safety blend falls back to the Bezier."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.core.rotations import axis_angle_to_quat, quat_angle, quat_mul
from motioncore.eval import baselines, keyed
from motioncore.families.body.fill import BodyLayout, confidence, prepare, run_model, safety_limits
from motioncore.families.body.model import InfillBody, InfillBodyConfig


@pytest.fixture(scope="module")
def bandai_windows():
    from motioncore.eval.run import load_eval_sets

    w, mean, std = load_eval_sets("bandai", progress=False)
    return w.skeleton, w.rotations[::40][:12], w.positions[::40][:12], mean, std


def _masks(T: int, J: int) -> dict[str, np.ndarray]:
    dense = np.zeros((T, J + 1), bool)
    dense[:10] = dense[35:] = True
    sparse = np.zeros((T, J + 1), bool)
    sparse[::8] = True
    sparse[-1] = True
    joints = dense.copy()
    joints[20, [3, 7, 16, J]] = True     # a few joints and the root keyed inside the gap
    noroot = dense.copy()
    noroot[35:, J] = False               # poses keyed, the root only in the context
    return {"dense": dense, "sparse": sparse, "joints": joints, "noroot": noroot}


@needs_data
def test_untrained_model_is_blenders_bezier_and_keys_come_back_exactly(bandai_windows):
    sk, q, p, _, _ = bandai_windows
    lay = BodyLayout.of(sk)
    torch.manual_seed(0)
    model = InfillBody(InfillBodyConfig(lay.num_model_joints, d_model=32, n_layers=1, n_heads=2, d_ff=64)).eval()
    T, J = q.shape[1], sk.num_joints
    for name, m in _masks(T, J).items():
        known = np.broadcast_to(m, (len(q),) + m.shape).copy()
        out_q, out_p = run_model(model, lay, q, p, known)
        kr = known[..., :J]
        assert np.array_equal(np.where(kr[..., None], out_q, 0), np.where(kr[..., None], q, 0)), name
        base = prepare(lay, q, p, known)   # the Bezier through each channel's own keys
        assert np.degrees(quat_angle(out_q, base.rotations)).max() < 1e-3, name
        assert np.abs(out_p - base.positions).max() < 1e-3, name   # float32 network, cm
        if name == "dense":   # the same as the benchmark's Bezier (quaternion channels) of the same keys
            out_q, out_p = run_model(model, lay, q[:, :36], p[:, :36], known[:, :36])
            qq, pp = q[:, :36].copy(), p[:, :36].copy()
            qq[:, 10:35] = pp[:, 10:35] = np.nan
            ref_q, ref_p = baselines.bezier_quat(sk, qq, pp, 10, 25)
            assert np.degrees(quat_angle(out_q[:, 10:35], ref_q[:, 10:35])).max() < 1e-3
            assert np.abs(out_p - ref_p).max() < 1e-3


@needs_data
def test_key_mask_baselines_equal_the_lafan1_ones(bandai_windows):
    """The fast key-mask fills (eval.keyed) against the reference LaFAN1 baselines on the LaFAN1 mask."""
    sk, q, p, _, _ = bandai_windows
    from motioncore.core.rotations import quat_continuity

    q = quat_continuity(q, axis=1)
    n_past, n = 10, 15
    T = n_past + n + 1
    known = np.zeros((len(q), T), bool)
    known[:, :n_past] = known[:, n_past + n:] = True
    for name, fast in keyed.KEY_BASELINES.items():
        a = fast(sk, q[:, :T], p[:, :T], known)
        qq, pp = q[:, :T].copy(), p[:, :T].copy()
        qq[:, n_past:n_past + n] = pp[:, n_past:n_past + n] = np.nan
        b = baselines.BASELINES[name](sk, qq, pp, n_past, n)
        assert np.abs(a[0] - b[0]).max() < 1e-12 and np.abs(a[1] - b[1]).max() < 1e-12, name


@needs_data
def test_a_model_on_another_skeleton_adds_no_error_of_its_own():
    """CMU windows through the Bandai skeleton and back: a 'model' that returns its Bezier returns the
    window's own Bezier exactly, so what a model changes is all that differs."""
    from motioncore.data import load
    from motioncore.data.windows import TEST, lafan1_windows
    from motioncore.eval.run import load_eval_sets

    cw = lafan1_windows(load("cmu", "test", fps=30.0, progress=False)[:3], *TEST)
    bsk = load_eval_sets("bandai", progress=False)[0].skeleton
    q, p = cw.rotations[:6, :36], cw.positions[:6, :36]
    known = np.zeros(q.shape[:2], bool)
    known[:, :10] = known[:, 35:] = True
    through = keyed.on_skeleton(keyed.bezier_quat_keys, bsk)(cw.skeleton, q, p, known)
    own = keyed.bezier_quat_keys(cw.skeleton, q, p, known)
    assert np.abs(through[0] - own[0]).max() < 1e-9 and np.abs(through[1] - own[1]).max() < 1e-9

    def rotate_hips(skeleton, qm, pm, km):   # a model that turns the hips by 10 degrees in every gap frame
        out_q, out_p = keyed.bezier_quat_keys(skeleton, qm, pm, km)
        turn = axis_angle_to_quat(np.array([0.0, np.radians(10.0), 0.0]))
        out_q[:, ~km[0], 1] = quat_mul(turn, out_q[:, ~km[0], 1])
        return out_q, out_p

    moved = keyed.on_skeleton(rotate_hips, bsk)(cw.skeleton, q, p, known)
    gq_m, _ = cw.skeleton.forward_kinematics(moved[0], moved[1])
    gq_o, _ = cw.skeleton.forward_kinematics(own[0], own[1])
    ang = np.degrees(quat_angle(gq_m[:, 10:35, 0], gq_o[:, 10:35, 0]))
    np.testing.assert_allclose(ang, 10.0, atol=1e-6)   # the change arrives whole on the CMU hips


@needs_data
def test_mirroring_keeps_the_bandai_skeletons_motion_in_its_own_range():
    """Bandai's joint frames are not world-aligned at rest: the plain M R M mirror put arms and legs 180 degrees
    off their training range. The rest-aware mirror is exact in world space and keeps every joint's range."""
    from motioncore.core.kinematics import mirror, mirror_frames, mirror_map
    from motioncore.data import load
    from motioncore.retarget.twist import mean_rotations

    clips = load("bandai2", "train", progress=False)[:40]
    allq = np.concatenate([c.motion.rotations[::10] for c in clips])
    sk = clips[0].motion.skeleton
    X = mirror_frames(sk, rotations=allq)
    mean = mean_rotations(allq)
    m = [mirror(c.motion, frames=X) for c in clips]
    pm = mirror_map(sk)
    for c, mc in zip(clips[:3], m[:3], strict=True):
        g0, g1 = c.motion.global_transforms()[1], mc.global_transforms()[1]
        assert np.abs(g1 - g0[:, pm] * np.array([-1.0, 1.0, 1.0])).max() < 1e-6
    a = np.degrees(quat_angle(allq, mean[None]))
    b = np.degrees(quat_angle(np.concatenate([x.rotations[::10] for x in m]), mean[None]))
    assert np.abs(np.median(a, 0) - np.median(b, 0)).max() < 10.0   # was up to 142 degrees (UpperArm)


@needs_data
def test_safety_falls_back_to_the_bezier_off_the_training_range(bandai_windows):
    sk, q, p, _, _ = bandai_windows
    lay = BodyLayout.of(sk)
    from motioncore.eval.run import load_eval_sets
    from motioncore.retarget.twist import mean_rotations

    w = load_eval_sets("bandai", progress=False)[0]   # the limits from 636 windows, checked on 12 of them
    J = sk.num_joints
    mean = mean_rotations(w.rotations.reshape(-1, J, 4))
    bounds = np.array([[i * w.rotations.shape[1], (i + 1) * w.rotations.shape[1]] for i in range(len(w))])
    safety = safety_limits(lay, w.rotations.reshape(-1, J, 4), w.positions.reshape(-1, J, 3), bounds, mean)
    T, J = q.shape[1], sk.num_joints
    known = np.broadcast_to(_masks(T, J)["dense"], (len(q), T, J + 1)).copy()
    c = confidence(lay, safety, q, p, known)
    assert (c > 0.9).mean() > 0.9   # its own frames are in range
    flip = axis_angle_to_quat(np.array([np.pi * 0.95, 0.0, 0.0]))
    arm = q.copy()
    arm[:, :, 7] = quat_mul(flip, arm[:, :, 7])   # one arm turned over: less trust
    assert confidence(lay, safety, arm, p, known).max() < 0.75
    wild = q.copy()
    wild[:, :, 2:] = quat_mul(flip, wild[:, :, 2:])  # every joint below the hips turned over: none
    assert confidence(lay, safety, wild, p, known).max() == 0.0
    fast = p.copy()
    fast[:, :, 1, [0, 2]] *= 12.0   # the root twelve times as far: far faster than anything trained on
    assert confidence(lay, safety, q, fast, known).max() < 0.5
    torch.manual_seed(0)
    model = InfillBody(InfillBodyConfig(lay.num_model_joints, d_model=32, n_layers=1, n_heads=2, d_ff=64)).eval()
    with torch.no_grad():
        model.out.bias.fill_(0.3)   # a network that moves everything
    out_q, _ = run_model(model, lay, wild, p, known, confidence=np.zeros(len(q)))
    assert np.degrees(quat_angle(out_q, prepare(lay, wild, p, known).rotations)).max() < 1e-3


@needs_data
def test_training_resumes_exactly_after_a_kill(tmp_path, bandai_windows):
    """Two runs of 6 steps, one stopped after 3 and resumed: the same weights, bit for bit (the batches are drawn
    from the step number; the schedule is step-based here: a budget so long the cosine stays at its peak)."""
    from motioncore.data import load
    from motioncore.families.body.train import BodyRecipe
    from motioncore.families.body.train_export import export
    from motioncore.families.body.train_loop import train_infill_body
    from motioncore.retarget.twist import mean_rotations

    clips = load("bandai2", "train", fps=30.0, progress=False)[:6]
    sk = clips[0].motion.skeleton
    rots = np.concatenate([c.motion.rotations for c in clips]).astype(np.float32)
    poss = np.concatenate([c.motion.positions for c in clips]).astype(np.float32)
    ends = np.cumsum([c.motion.num_frames for c in clips])
    data = {"rotations": rots, "positions": poss, "bounds": np.stack([ends - [c.motion.num_frames for c in clips],
                                                                      ends], 1),
            "source": np.zeros(len(clips), np.int64), "skeleton": sk, "describe": "6 clips",
            "convention": mean_rotations(rots[::10].astype(np.float64))}
    _, q, p, mean, std = bandai_windows
    val = {"sets": {"bandai": (q[:2], p[:2])}, "mean": mean, "std": std}
    recipe = BodyRecipe(d_model=32, n_layers=1, n_heads=2, d_ff=64, tokens=256, minutes=1e9, warmup=2,
                        save_every=1e9, val_every=1e9)
    train_infill_body(recipe, tmp_path / "a", progress=False, val_sets=val, data=data, max_steps=6)
    train_infill_body(recipe, tmp_path / "b", progress=False, val_sets=val, data=data, max_steps=3)
    state = train_infill_body(recipe, tmp_path / "b", progress=False, val_sets=val, data=data, max_steps=6)
    assert state["step"] == 6
    from safetensors.torch import load_file

    a, b = load_file(str(tmp_path / "a" / "state.safetensors")), load_file(str(tmp_path / "b" / "state.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # Ctrl-C in the middle of step 4 (the signal arrives while its batch is drawn): the step ends, the state is
    # saved, KeyboardInterrupt follows; the same call resumes to the same weights
    import signal

    import motioncore.families.body.train_loop as tr

    calls, draw = [], tr.sample_batch

    def interrupted(rng, d, r):
        calls.append(1)
        if len(calls) == 4:
            signal.raise_signal(signal.SIGINT)
        return draw(rng, d, r)

    tr.sample_batch = interrupted
    before = signal.getsignal(signal.SIGINT)   # Python's default_int_handler, or SIG_IGN under `nohup ... &`
    try:
        with pytest.raises(KeyboardInterrupt):
            train_infill_body(recipe, tmp_path / "d", progress=False, val_sets=val, data=data, max_steps=6)
    finally:
        tr.sample_batch = draw
    assert json.loads((tmp_path / "d" / "state.json").read_text())["step"] == 4
    assert signal.getsignal(signal.SIGINT) is before   # the handlers are put back, whatever they were
    train_infill_body(recipe, tmp_path / "d", progress=False, val_sets=val, data=data, max_steps=6)
    d = load_file(str(tmp_path / "d" / "state.safetensors"))
    assert all(torch.equal(a[k], d[k]) for k in a)
    assert any(not torch.equal(a[k], torch.zeros_like(a[k])) for k in a if k.startswith("model/out"))
    assert (tmp_path / "b" / "curve.png").stat().st_size > 5_000
    # a new machine: no state, warm-started from a checkpoint of the same config (here run a's export)
    export(tmp_path / "a", tmp_path / "a-export", data=data)
    ws = train_infill_body(recipe, tmp_path / "c", progress=False, val_sets=val, data=data, max_steps=0,
                           warm_start=str(tmp_path / "a-export"))
    c = load_file(str(tmp_path / "c" / "state.safetensors"))
    assert ws["warm_start"]["steps"] == 6
    # the export without the contact output: the same in-fill, no contact head
    from motioncore.models.registry import load_model

    export(tmp_path / "a", tmp_path / "a-nc", data=data, contacts=False)
    with_c, m1 = load_model(str(tmp_path / "a-export"))
    without, m2 = load_model(str(tmp_path / "a-nc"))
    assert m1["config"]["contacts"] > 0 and m2["config"]["contacts"] == 0 and without.contact is None
    x = torch.randn(2, 20, with_c.inp.in_features)
    assert torch.equal(with_c.eval()(x), without.eval()(x))
    assert all(torch.allclose(c[k], a[k].half().float()) for k in a if k.startswith("ema/"))


def test_sample_task_covers_what_animators_key():
    from motioncore.families.body.train_batch import sample_task

    rng = np.random.default_rng(0)
    seen = {"dense": 0, "sparse": 0, "joints": 0, "path": 0, "noroot": 0}
    for _ in range(400):
        k, gap = sample_task(rng, 22, 60)
        frames = k[:, :22].all(1)
        assert 1 <= gap <= 60 and k.shape[1] == 23 and frames[0] and k.shape[0] <= 121
        runs = np.diff(np.flatnonzero(frames))
        seen["sparse" if (runs == runs[0]).all() and runs[0] > 1 and frames.sum() > 2 else "dense"] += 1
        seen["joints"] += bool((k[:, :22].any(1) & ~frames).any())
        seen["path"] += bool(k[:, 22].all())
        seen["noroot"] += bool(k[:, 22].sum() == 1)
    assert all(v > 20 for v in seen.values()), seen


@pytest.mark.parametrize("share", [0.5, 0.8])
def test_the_cmu_share_of_a_batch_follows_the_recipe(share):
    """``cmu_share``: the fraction of each batch's windows drawn from the CMU clips, whatever the sources' sizes."""
    from types import SimpleNamespace

    from motioncore.families.body.train import BodyRecipe
    from motioncore.families.body.train_batch import sample_batch

    J, n = 3, 4000
    bounds = np.array([[0, 3000], [3000, 3500], [3500, n]])     # Bandai is 5x the CMU frames
    source = np.array([0, 1, 1])
    data = {"skeleton": SimpleNamespace(num_joints=J), "bounds": bounds, "source": source,
            "rotations": np.zeros((n, J, 4), np.float32), "positions": np.repeat(np.arange(n, dtype=np.float32)[:, None,
                                                                                   None], J, 1).repeat(3, 2)}
    rng, cmu, total = np.random.default_rng(0), 0, 0
    for _ in range(200):
        _, p, _, _, _ = sample_batch(rng, data, BodyRecipe(cmu_share=share))
        cmu += int((p[:, 0, 0, 0] >= 3000).sum())
        total += p.shape[0]
    assert abs(cmu / total - share) < 0.03, cmu / total
    with pytest.raises(ValueError, match="cmu_share"):
        BodyRecipe(cmu_share=1.0)


def test_three_sources_take_their_shares_of_a_batch():
    """``--data all``: Bandai locomotion, CMU and Bandai's gestures each take their recipe share of the windows."""
    from types import SimpleNamespace

    from motioncore.families.body.train import BodyRecipe
    from motioncore.families.body.train_batch import sample_batch

    J, n = 3, 6000
    bounds = np.array([[0, 3000], [3000, 3500], [3500, 6000]])
    source = np.array([0, 1, 2])
    data = {"skeleton": SimpleNamespace(num_joints=J), "bounds": bounds, "source": source,
            "rotations": np.zeros((n, J, 4), np.float32), "positions": np.repeat(np.arange(n, dtype=np.float32)[:, None,
                                                                                   None], J, 1).repeat(3, 2)}
    rng, counts = np.random.default_rng(1), np.zeros(3)
    recipe = BodyRecipe(data="all", cmu_share=0.4, gesture_share=0.25)
    for _ in range(200):
        _, p, _, _, _ = sample_batch(rng, data, recipe)
        counts += np.bincount(np.searchsorted(bounds[:, 1], p[:, 0, 0, 0], side="right"), minlength=3)
    assert np.allclose(counts / counts.sum(), [0.35, 0.4, 0.25], atol=0.03), counts / counts.sum()
    with pytest.raises(ValueError, match="gesture_share"):
        BodyRecipe(data="all", cmu_share=0.5, gesture_share=0.5)


def test_another_performer_turns_each_joint_by_one_fixed_rotation_per_window():
    """The posture augmentation: below the body root every joint's local rotation is turned by one fixed rotation
    over the whole window (so the motion's timing is the capture's), about ``posture_deg`` on average; the root and
    its ancestors are untouched, the root's height moves by one offset within the bound; half the windows stay as
    captured."""
    from motioncore.core.kinematics import find_body_joints
    from motioncore.core.rotations import quat_angle, quat_conj, quat_mul
    from motioncore.core.skeleton import Skeleton
    from motioncore.families.body.train_batch import another_performer

    names = ["Root", "Hips", "Spine", "Chest", "Neck", "Head", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
             "RightShoulder", "RightArm", "RightForeArm", "RightHand", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe",
             "RightUpLeg", "RightLeg", "RightFoot", "RightToe"]
    parents = [-1, 0, 1, 2, 3, 4, 3, 6, 7, 8, 3, 10, 11, 12, 1, 14, 15, 16, 1, 18, 19, 20]
    off = np.array([[0, 0, 0], [0, 95, 0], [0, 10, 0], [0, 15, 0], [0, 20, 0], [0, 10, 0], [5, 15, 0], [12, 0, 0],
                    [28, 0, 0], [25, 0, 0], [-5, 15, 0], [-12, 0, 0], [-28, 0, 0], [-25, 0, 0], [9, -5, 0], [0, -42, 0],
                    [0, -40, 0], [0, -5, 12], [-9, -5, 0], [0, -42, 0], [0, -40, 0], [0, -5, 12]], float)
    sk = Skeleton(names, parents, off)
    root = find_body_joints(sk).root
    rng = np.random.default_rng(3)
    B, T, J = 64, 20, len(names)
    q = rng.normal(size=(B, T, J, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    p = np.broadcast_to(off, (B, T, J, 3)).copy()
    r2, p2 = another_performer(np.random.default_rng(4), q, p, sk, 6.0, 4.0)
    d = quat_mul(quat_conj(q), r2)   # each joint's turn, frame by frame
    assert np.degrees(quat_angle(d, d[:, :1])).max() < 1e-6   # one fixed turn over the window
    ang = np.degrees(quat_angle(d[:, 0], np.array([1.0, 0, 0, 0])))   # (B, J)
    moved = ang.max(axis=1) > 1e-9
    assert 0.3 < moved.mean() < 0.7   # about half the windows
    assert np.all(ang[:, [0, root]] < 1e-9)   # the body root and its ancestors untouched
    assert 3.0 < np.sqrt(np.mean(ang[moved][:, root + 1:] ** 2)) < 12.0   # about posture_deg
    dh = p2[:, :, root, 1] - p[:, :, root, 1]
    assert np.all(np.abs(dh) <= 4.0) and np.all(dh == dh[:, :1]) and np.all(dh[~moved] == 0)
    assert np.array_equal(np.delete(p2, root, axis=2), np.delete(p, root, axis=2))
