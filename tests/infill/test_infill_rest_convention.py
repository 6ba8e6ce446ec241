"""A rig with the model's own joint names but other rest frames (a re-export with other bone rolls) goes through the
same rest alignment as any mapped rig: Bandai test walks re-expressed with every joint's frame turned (10 and 30
degrees on random axes, a 30-degree roll about each bone; the world motion unchanged, tests/helpers/rest_turn.py)
keep the in-fill's gain over Blender's Bezier, and the model's own rig is still read directly, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from helpers.rest_turn import random_turns, roll_turns, turn_rest

from motioncore.core.motion import Motion

WALKS = tuple(f"dataset-2_walk_{s}_{n:03d}.bvh" for s in ("active", "exhausted", "normal") for n in (5, 10, 15, 20))
WINDOWS = 48   # windows of 65 frames spread over the twelve walks (an eval of the whole test set takes minutes)


@pytest.fixture(scope="module")
def walks(raw_file):
    """Bandai test walks (dataset-2, performers the model trained on) and the infill-body fill."""
    from motioncore.families.body.evaluate import load_body_keyfill
    from motioncore.io.bvh import read_bvh

    clips = [read_bvh(raw_file("bandai2", w)) for w in WALKS]
    fill = load_body_keyfill("infill-body")[0]
    return clips, fill


def _windows(clips: list[Motion]):
    from motioncore.data.datasets import Clip
    from motioncore.data.windows import TEST, lafan1_windows

    w = lafan1_windows([Clip(m, "test") for m in clips], *TEST)
    pick = np.linspace(0, len(w) - 1, WINDOWS).round().astype(int)
    return w.skeleton, w.rotations[pick], w.positions[pick]


def _l2q_ratio(fill, clips: list[Motion], n: int = 15) -> tuple[float, float]:
    """(infill-body's L2Q over bezier-quat's at an ``n``-frame gap, its mean safety weight) on the clips' windows."""
    from motioncore.eval import keyed
    from motioncore.eval.infill import evaluate_infill
    from motioncore.eval.metrics import position_stats

    sk, q, p = _windows(clips)
    mean, std = position_stats(sk.forward_kinematics(q, p)[1])
    fill.weights.clear()
    res = evaluate_infill({"bezier-quat": keyed.lafan_fill(keyed.bezier_quat_keys), "infill-body": keyed.lafan_fill(fill)},
                          sk, q, p, mean, std, lengths=(n,), progress=False)
    w = float(np.concatenate(fill.weights).mean())
    return res["infill-body"]["L2Q"][str(n)] / res["bezier-quat"]["L2Q"][str(n)], w


def test_the_models_own_rig_is_read_directly_bit_for_bit(walks):
    """Bandai walks (another performer's proportions, the model's convention): the alignment is the identity, so
    the fill is the model's on the windows as they are."""
    from motioncore.core.skeleton import Skeleton
    from motioncore.eval import keyed
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve
    from motioncore.retarget import own_convention

    clips, fill = walks
    meta = read_meta(resolve("infill-body"))
    msk = Skeleton.from_dict(meta["skeleton"])
    conv = np.asarray(meta["convention"]["mean_local_rotations"])
    sk, q, p = _windows(clips)
    assert own_convention(sk, msk, conv, q.reshape(-1, sk.num_joints, 4))
    known = np.zeros(q.shape[:2], bool)
    known[:, :10] = known[:, 25:] = True
    seen: list = []

    def direct(skeleton, qq, pp, kk):
        seen.append(skeleton)
        return keyed.bezier_quat_keys(skeleton, qq, pp, kk)

    a = keyed.on_skeleton(direct, msk, conv)(sk, q, p, known)
    b = keyed.bezier_quat_keys(sk, q, p, known)
    assert seen == [sk] and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("turn", ["random 10", "random 30", "roll 30"])
def test_other_rest_frames_with_the_models_names_keep_the_gain(walks, turn):
    """The same walks, each joint's frame turned (world motion the same to 1e-6 cm): the ratio to Bezier within
    0.03 of the unturned one (before the fix, read as the model's skeleton: 0.52 -> 0.72 at 10 degrees, the
    model switched off by its safety blend at 30)."""
    clips, fill = walks
    base, w0 = _l2q_ratio(fill, clips)
    kind, deg = turn.split()
    sk = clips[0].skeleton   # one rig: the same turns for every walk (their windows share one skeleton)
    R = random_turns(sk.num_joints, float(deg), seed=7) if kind == "random" else roll_turns(sk, float(deg))
    turned = [turn_rest(m, R) for m in clips]
    for m, t in zip(clips, turned, strict=True):
        a = m.skeleton.forward_kinematics(m.rotations, m.positions)[1]
        b = t.skeleton.forward_kinematics(t.rotations, t.positions)[1]
        assert np.abs(a - b).max() < 1e-6
        assert t.skeleton.names == m.skeleton.names
    ratio, w = _l2q_ratio(fill, turned)
    assert base < 0.8 and w0 > 0.9   # the model gains on its own rig (0.52 on the whole Bandai test at 15 frames)
    assert abs(ratio - base) < 0.03, (turn, ratio, base, w)


def test_a_clip_retargeted_onto_the_models_rig_without_its_twists_is_aligned(walks, raw_file):
    """The shared LAFAN1 clip retargeted onto a Bandai walk's rig as `motioncore retarget` writes it (bones
    aligned by shortest arcs, the twists about the spine and shoulders left in LAFAN1's convention, 74-112 deg):
    read directly, every window is out of the safety blend's range (the model was switched off: Weight 0.000);
    it is not in the model's convention, so it goes through the twist matching, and with its twists matched
    (``--match-model``) it is."""
    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton
    from motioncore.families.body.fill import BodyLayout, confidence
    from motioncore.io.bvh import read_bvh
    from motioncore.models.checkpoint import read_meta
    from motioncore.models.registry import resolve
    from motioncore.retarget import auto_map, clip_poses, own_convention, retarget

    clips, _ = walks
    meta = read_meta(resolve("infill-body"))
    msk = Skeleton.from_dict(meta["skeleton"])
    conv = np.asarray(meta["convention"]["mean_local_rotations"])
    la = read_bvh(raw_file("lafan1", "*.bvh"))
    la = Motion(la.skeleton, la.rotations[:900], la.positions[:900], la.fps, la.name)
    target = clips[0].skeleton
    jm = auto_map(la.skeleton, target, source_poses=clip_poses(la))
    plain, matched = retarget(la, target, jm), retarget(la, target, jm, convention=conv)
    assert not own_convention(plain.skeleton, msk, conv, plain.rotations)
    assert own_convention(matched.skeleton, msk, conv, matched.rotations)
    q = plain.rotations[:65 * 13].reshape(13, 65, -1, 4)
    p = plain.positions[:65 * 13].reshape(13, 65, -1, 3)
    known = np.ones(q.shape[:2] + (q.shape[2] + 1,), bool)
    assert confidence(BodyLayout.of(msk), meta["safety"], q, p, known).max() == 0.0
