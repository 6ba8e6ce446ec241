"""Retargeting: presets, auto-matching and override files; the rest-offset formula against a slow
per-frame reference; exactness on identical and re-rigged skeletons; CMU -> Bandai on real mocap."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data

from motioncore.core.motion import Motion
from motioncore.core.rotations import quat_apply, quat_inv, quat_normalize, quat_to_matrix
from motioncore.core.skeleton import Skeleton
from motioncore.retarget import (
    PRESETS,
    JointMap,
    RetargetError,
    auto_map,
    detect_preset,
    leg_length,
    leg_scale,
    rest_rotations,
    retarget,
)

# A 21-joint humanoid with Bandai joint names (so presets and mirror pairs apply); offsets in cm, Y up.
_HUMANOID = [  # name, parent, offset
    ("Hips", None, (0, 95, 0)), ("Spine", "Hips", (0, 12, -1)), ("Chest", "Spine", (0, 15, 1)),
    ("Neck", "Chest", (0, 18, 0)), ("Head", "Neck", (0, 9, 2)),
    ("Shoulder_L", "Chest", (4, 14, 0)), ("UpperArm_L", "Shoulder_L", (13, 1, -1)),
    ("LowerArm_L", "UpperArm_L", (27, 0, 0)), ("Hand_L", "LowerArm_L", (24, 0, 1)),
    ("Shoulder_R", "Chest", (-4, 14, 0)), ("UpperArm_R", "Shoulder_R", (-13, 1, -1)),
    ("LowerArm_R", "UpperArm_R", (-27, 0, 0)), ("Hand_R", "LowerArm_R", (-24, 0, 1)),
    ("UpperLeg_L", "Hips", (9, -6, 0)), ("LowerLeg_L", "UpperLeg_L", (1, -42, 1)),
    ("Foot_L", "LowerLeg_L", (0, -41, -2)), ("Toes_L", "Foot_L", (0, -5, 12)),
    ("UpperLeg_R", "Hips", (-9, -6, 0)), ("LowerLeg_R", "UpperLeg_R", (-1, -42, 1)),
    ("Foot_R", "LowerLeg_R", (0, -41, -2)), ("Toes_R", "Foot_R", (0, -5, 12)),
]


def humanoid(offsets: np.ndarray | None = None, names: list[str] | None = None) -> Skeleton:
    nm = [n for n, _, _ in _HUMANOID]
    parents = [-1 if p is None else nm.index(p) for _, p, _ in _HUMANOID]
    off = np.array([o for _, _, o in _HUMANOID], dtype=np.float64) if offsets is None else offsets
    return Skeleton(tuple(names or nm), np.array(parents), off)


def random_motion(skel: Skeleton, T: int = 12, seed: int = 0) -> Motion:
    rng = np.random.default_rng(seed)
    q = quat_normalize(np.concatenate([np.ones((T, skel.num_joints, 1)) * 2.0,
                                       rng.normal(size=(T, skel.num_joints, 3))], -1))
    pos = np.broadcast_to(skel.offsets, (T, skel.num_joints, 3)).copy()
    pos[:, 0] += rng.normal(scale=20.0, size=(T, 3))
    return Motion(skel, q, pos, 30.0, "random")


def rerig(skel: Skeleton, seed: int = 1) -> tuple[Skeleton, np.ndarray]:
    """Same bones, different joint frames: offsets_t[j] = F[parent]^-1 offsets[j] for random F."""
    rng = np.random.default_rng(seed)
    F = quat_normalize(rng.normal(size=(skel.num_joints, 4)))
    off = skel.offsets.copy()
    for j, p in enumerate(skel.parents):
        if p >= 0:
            off[j] = quat_apply(quat_inv(F[p]), skel.offsets[j])
    return Skeleton(skel.names, skel.parents, off), F


def flat(names: list[str]) -> Skeleton:
    """Names only (detection and matching look at nothing else)."""
    return Skeleton(tuple(names), np.array([-1] + [0] * (len(names) - 1)), np.zeros((len(names), 3)))


def bone_angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), (a * b).sum(-1)))


# --------------------------------------------------------------------------------------- mapping
def test_presets_detected_by_name():
    for preset in ("cmu", "bandai", "lafan1", "mixamo"):
        assert detect_preset(flat(list(PRESETS[preset].values()))) == preset
    assert detect_preset(flat(["a", "b", "c", "d"])) is None
    no_ns = [n.split(":")[1] for n in PRESETS["mixamo"].values()]  # namespace stripped in matching
    assert detect_preset(flat(no_ns)) == "mixamo"


def test_auto_map_mixamo_lafan_and_manipnet_hand():
    mix, laf = flat(list(PRESETS["mixamo"].values())), flat(list(PRESETS["lafan1"].values()))
    jm = auto_map(mix, laf)
    assert (jm.source_preset, jm.target_preset) == ("mixamo", "lafan1")
    assert jm.pairs["LeftUpLeg"] == "mixamorig:LeftUpLeg" and jm.pairs["RightToe"] == "mixamorig:RightToeBase"
    assert jm.pairs["Spine2"] == "mixamorig:Spine2" and jm.unmapped == ()
    hand = flat(list(PRESETS["manipnet-right"].values()))
    jm = auto_map(hand, mix, source_preset="manipnet-right")
    assert jm.pairs["mixamorig:RightHandIndex2"] == "INDEX_PIP_FE"
    assert jm.pairs["mixamorig:RightHand"] == "WRIST" and "mixamorig:LeftHand" in jm.unmapped
    with pytest.raises(RetargetError, match="nope"):
        auto_map(hand, mix, source_preset="nope")


def test_auto_map_reports_ambiguous_and_unmapped():
    src, tgt = flat(["root", "Spine", "spine", "Arm"]), flat(["root", "SPINE", "arm", "tail"])
    jm = auto_map(src, tgt)
    assert jm.pairs == {"root": "root", "arm": "Arm"}
    assert jm.ambiguous == {"SPINE": ("Spine", "spine")}
    assert jm.unmapped == ("SPINE", "tail")


@needs_data
def test_auto_map_cmu_bandai_both_ways():
    from motioncore.data import load

    cmu, ban = load("cmu", progress=False)[0].motion.skeleton, load("bandai2", progress=False)[0].motion.skeleton
    jm = auto_map(cmu, ban)
    expect = {"Hips": "root", "UpperLeg_L": "lfemur", "LowerLeg_R": "rtibia", "Foot_L": "lfoot", "Toes_R": "rtoes",
              "Spine": "lowerback", "Chest": "thorax", "Head": "head", "Shoulder_L": "lclavicle",
              "UpperArm_L": "lhumerus", "LowerArm_R": "rradius", "Hand_R": "rwrist"}
    assert {k: jm.pairs[k] for k in expect} == expect
    assert jm.unmapped == ("joint_Root",) and jm.ambiguous == {}
    back = auto_map(ban, cmu)
    assert back.pairs["root"] == "Hips" and back.pairs["lfemur"] == "UpperLeg_L"
    assert {"lhipjoint", "upperback", "lfingers"} <= set(back.unmapped)


def test_override_files_toml_and_json(tmp_path):
    src, tgt = humanoid(), humanoid()
    (tmp_path / "o.toml").write_text('[map]\nHand_L = "LowerArm_L"\n[unmap]\njoints = ["Head"]\n')
    jm = auto_map(src, tgt, overrides=tmp_path / "o.toml")
    assert jm.pairs["Hand_L"] == "LowerArm_L" and "Head" not in jm.pairs and jm.unmapped == ("Head",)
    (tmp_path / "o.json").write_text(json.dumps({"map": {"Toes_R": "Foot_R"}}))
    assert auto_map(src, tgt, overrides=tmp_path / "o.json").pairs["Toes_R"] == "Foot_R"


@pytest.mark.parametrize("text, match", [
    ('[map]\nTail = "Hips"\n', "target joint 'Tail'"),
    ('[map]\nHips = "Pelvis"\n', "source joint 'Pelvis'"),
    ('[map]\nHips = 3\n', "overrides.map.Hips"),
    ('[unmap]\njoints = ["Wing"]\n', "'Wing'"),
    ('[mapping]\nHips = "Hips"\n', "unknown section"),
    ('[map\n', "cannot read"),
])
def test_bad_overrides_name_the_joint(tmp_path, text, match):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(RetargetError, match=match):
        auto_map(humanoid(), humanoid(), overrides=tmp_path / "bad.toml")


# --------------------------------------------------------------------------------------- core
def test_identity_retarget_is_exact():
    skel = humanoid()
    src = random_motion(skel)
    out = retarget(src, skel, auto_map(skel, skel))
    np.testing.assert_allclose(out.global_transforms()[1], src.global_transforms()[1], atol=1e-9)


def test_rerigged_target_reproduces_positions():
    """Target bones equal the source's but every joint frame is rotated (rest poses differ):
    bone-direction alignment must recover the pose exactly."""
    src_skel = humanoid()
    tgt_skel, F = rerig(src_skel)
    src = random_motion(src_skel, seed=3)
    out = retarget(src, tgt_skel, {n: n for n in src_skel.names}, scale=None)
    np.testing.assert_allclose(out.global_transforms()[1], src.global_transforms()[1], atol=1e-9)
    assert np.abs(out.rotations - src.rotations).max() > 0.1  # the local rotations did change


def slow_reference(src: Motion, target: Skeleton, jmap: dict[str, str], k: float) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, per joint, with 3x3 matrices: Gt = Gs Rs^T Rt (mapped) or Gt[parent] (unmapped);
    local = Gt[parent]^T Gt; target hips placed at k * source world position. Returns world
    rotation matrices (T, J, 3, 3) and positions (T, J, 3)."""
    Rs, Rt = (quat_to_matrix(r) for r in rest_rotations(src.skeleton, target, jmap))
    S = src.skeleton
    out_m, out_p = [], []
    for t in range(src.num_frames):
        gs, ps = [None] * S.num_joints, [None] * S.num_joints
        for j in range(S.num_joints):
            m, p = quat_to_matrix(src.rotations[t, j]), S.parents[j]
            gs[j] = m if p < 0 else gs[p] @ m
            ps[j] = src.positions[t, j] if p < 0 else ps[p] + gs[p] @ src.positions[t, j]
        gt, pt = [None] * target.num_joints, [None] * target.num_joints
        for j, name in enumerate(target.names):
            p = target.parents[j]
            if name in jmap:
                gt[j] = gs[S.index(jmap[name])] @ Rs[j].T @ Rt[j]
            else:
                gt[j] = np.eye(3) if p < 0 else gt[p]
            if name == "Hips":
                pt[j] = k * ps[S.index(jmap[name])]
            else:
                pt[j] = pt[p] + gt[p] @ target.offsets[j]
        out_m.append(gt)
        out_p.append(pt)
    return np.array(out_m), np.array(out_p)


def test_vectorised_formula_matches_slow_reference():
    src_skel = humanoid()
    off = rerig(src_skel, seed=5)[0].offsets * np.linspace(0.7, 1.4, src_skel.num_joints)[:, None]
    target = humanoid(off)
    jmap = {n: n for n in src_skel.names if n not in ("Spine", "Hand_L", "Toes_R")}  # some held at rest
    src = random_motion(src_skel, T=6, seed=7)
    out = retarget(src, target, jmap, scale=1.7)
    ref_m, ref_p = slow_reference(src, target, jmap, 1.7)
    gq, gp = out.global_transforms()
    np.testing.assert_allclose(quat_to_matrix(gq), ref_m, atol=1e-10)
    np.testing.assert_allclose(gp, ref_p, atol=1e-9)
    for name in ("Spine", "Hand_L", "Toes_R"):  # unmapped: rest local rotation
        np.testing.assert_allclose(np.abs(out.rotations[:, target.index(name), 0]), 1.0, atol=1e-12)


def test_leg_scale_ratio_on_synthetic_pair():
    src_skel = humanoid()
    off = src_skel.offsets.copy()
    for n in ("LowerLeg_L", "LowerLeg_R"):
        off[src_skel.index(n)] *= 1.5
    tgt_skel = humanoid(off)
    n = np.linalg.norm
    o = src_skel.offsets
    i = src_skel.index
    s_leg = n(o[i("UpperLeg_L")]) + n(o[i("LowerLeg_L")]) + n(o[i("Foot_L")])
    t_leg = s_leg + 0.5 * n(o[i("LowerLeg_L")])
    assert leg_length(src_skel, "Hips", "Foot_L") == pytest.approx(s_leg, rel=1e-12)
    ratio = leg_scale(src_skel, tgt_skel, {m: m for m in src_skel.names})
    assert ratio == pytest.approx(t_leg / s_leg, rel=1e-12)
    src = random_motion(src_skel)
    out = retarget(src, tgt_skel, auto_map(src_skel, tgt_skel))
    np.testing.assert_allclose(out.global_transforms()[1][:, 0], ratio * src.global_transforms()[1][:, 0], atol=1e-9)


def test_bad_arguments_raise():
    skel = humanoid()
    src = random_motion(skel, T=2)
    with pytest.raises(RetargetError, match="'Tail'"):
        retarget(src, skel, {"Tail": "Hips"})
    with pytest.raises(RetargetError, match="source joint 'Pelvis'"):
        retarget(src, skel, {"Hips": "Pelvis"})
    with pytest.raises(RetargetError, match="scale"):
        retarget(src, skel, {"Hips": "Hips"}, scale=-1.0)
    with pytest.raises(RetargetError, match="Spine"):
        retarget(src, skel, {"Hips": "Hips"}, missing="error", scale=None)
    assert isinstance(auto_map(skel, skel), JointMap)


@needs_data
def test_cmu_walk_onto_bandai():
    from motioncore.data import load

    walk = next(c for c in load("cmu", progress=False) if c.name == "02_01").motion.slice(0, 240)
    ban = load("bandai2", progress=False)[0].motion.skeleton
    jm = auto_map(walk.skeleton, ban)
    k = leg_scale(walk.skeleton, ban, jm)
    out = retarget(walk, ban, jm)
    assert np.isfinite(out.rotations).all() and np.isfinite(out.positions).all()
    gp, sp = out.global_transforms()[1], walk.global_transforms()[1]
    T, S = ban, walk.skeleton

    def err(a: str, b: str) -> float:
        return float(bone_angle_deg(gp[:, T.index(b)] - gp[:, T.index(a)],
                                    sp[:, S.index(jm.pairs[b])] - sp[:, S.index(jm.pairs[a])]).max())

    bones = [("UpperArm_L", "LowerArm_L"), ("LowerArm_R", "Hand_R"), ("UpperLeg_L", "LowerLeg_L"),
             ("LowerLeg_R", "Foot_R"), ("Chest", "Neck")]
    assert max(err(a, b) for a, b in bones) < 1.0  # measured ~1e-13 deg for limbs, 0.6 deg chest->neck
    assert err("UpperLeg_R", "UpperLeg_L") < 2.0 and err("UpperArm_R", "UpperArm_L") < 2.0  # facing / across
    feet_t = gp[:, [T.index("Foot_L"), T.index("Foot_R")], 1].min(1)  # lowest ankle per frame
    feet_s = k * sp[:, [S.index("lfoot"), S.index("rfoot")], 1].min(1)
    assert np.abs(feet_t - feet_s).max() < 5.0  # cm; measured ~3.4
    assert feet_t.min() > -2.0 and feet_t.max() < 15.0


@needs_data
def test_identity_retarget_is_exact_on_real_clips():
    from motioncore.data import load

    for clip in (load("cmu", progress=False)[14].motion.slice(0, 60), load("bandai2", progress=False)[0].motion.slice(0, 60)):
        out = retarget(clip, clip.skeleton, auto_map(clip.skeleton, clip.skeleton))
        # retarget keeps rest offsets below the root; Bandai's position channels jitter ~1e-5 cm about them
        pos = np.broadcast_to(clip.skeleton.offsets, clip.positions.shape).copy()
        hips = clip.skeleton.index("Hips" if "Hips" in clip.skeleton.names else "root")
        pos[:, hips] = clip.positions[:, hips]
        ref = clip.skeleton.forward_kinematics(clip.rotations, pos)[1]
        np.testing.assert_allclose(out.global_transforms()[1], ref, atol=1e-9)
        np.testing.assert_allclose(out.global_transforms()[1], clip.global_transforms()[1], atol=1e-4)


@needs_data
def test_bandai_onto_cmu_keeps_limb_directions():
    from motioncore.data import load

    run = load("bandai2", progress=False)[0].motion.slice(0, 60)
    cmu = load("cmu", progress=False)[0].motion.skeleton
    jm = auto_map(run.skeleton, cmu)
    out = retarget(run, cmu, jm)
    gp, sp = out.global_transforms()[1], run.global_transforms()[1]
    for a, b in (("lhumerus", "lradius"), ("rfemur", "rtibia"), ("ltibia", "lfoot")):
        d = bone_angle_deg(gp[:, cmu.index(b)] - gp[:, cmu.index(a)],
                           sp[:, run.skeleton.index(jm.pairs[b])] - sp[:, run.skeleton.index(jm.pairs[a])])
        assert d.max() < 1e-3  # not ~1e-13 as CMU -> Bandai: Bandai's per-frame bone offsets jitter ~1e-5 cm


@needs_data
def test_contacts_pin_planted_ankles_and_change_nothing_else():
    """CMU 02_01 (a walk) onto Bandai: with contacts=True each planted run of the source's ankle holds the
    target's ankle in place (x, z) where the leg can reach; the feet keep their world rotation and nothing
    above the hips changes."""
    from motioncore.core.gaps import runs as mask_runs
    from motioncore.core.kinematics import resample
    from motioncore.data import load
    from motioncore.retarget import retarget
    from motioncore.retarget.contacts import leg_chains, source_contacts

    clip = next(c for c in load("cmu") if c.name == "02_01")
    src = resample(clip.motion, 30.0)
    tgt = load("bandai2", "test")[0].motion.skeleton
    jm = auto_map(src.skeleton, tgt)
    plain, pinned = retarget(src, tgt, jm), retarget(src, tgt, jm, contacts=True)
    gq0, gp0 = plain.global_transforms()
    gq1, gp1 = pinned.global_transforms()
    c = source_contacts(src)
    legs = leg_chains(tgt)
    spread0, spread1 = [], []
    for leg, (_hip, _knee, ankle) in enumerate(legs):
        assert np.allclose(np.abs(np.sum(gq0[:, ankle] * gq1[:, ankle], -1)), 1.0, atol=1e-9)   # foot turns the same
        for s, e in mask_runs(c[:, leg]):
            if e - s >= 3:
                spread0.append(np.ptp(gp0[s:e, ankle][:, [0, 2]], axis=0).max())
                spread1.append(np.ptp(gp1[s:e, ankle][:, [0, 2]], axis=0).max())
    assert len(spread1) >= 4 and np.median(spread1) < 0.05 and np.median(spread0) > 1.0, (spread0, spread1)
    leg_joints = {j for chain in legs for j in chain}
    others = [j for j in range(tgt.num_joints) if j not in leg_joints]
    np.testing.assert_allclose(pinned.rotations[:, others], plain.rotations[:, others], atol=1e-12)
    bone = np.linalg.norm(gp1[:, legs[0][2]] - gp1[:, legs[0][1]], axis=-1)      # rotations only: lengths kept
    np.testing.assert_allclose(bone, np.linalg.norm(tgt.offsets[legs[0][2]]), rtol=1e-9)


@needs_data
def test_retarget_quality_figures_on_two_cmu_clips():
    from motioncore.core.kinematics import resample
    from motioncore.data import load
    from motioncore.eval.retarget_quality import clip_figures

    tgt = load("bandai2", "test")[0].motion.skeleton
    for clip in [c for c in load("cmu") if c.name in ("02_01", "03_01")]:
        f = clip_figures(resample(clip.motion, 30.0), tgt)
        assert f["skate_contacts"] < 0.85 * f["skate_plain"], f
        assert f["end_orient_deg_plain"] < 1e-4 and f["end_orient_deg_contacts"] < 1e-4
        assert f["roundtrip_pos_cm"] < 3.0 and f["roundtrip_root_cm"] < 1e-6 and f["unmapped"] == ["joint_Root"]


@needs_data
def test_missing_joints_held_at_rest_or_filled_by_a_per_element_model():
    """A ManipNet hand captured without its pinky onto the full hand: 'rest' holds the pinky at rest,
    'infill' fills it with anyorder-hands from the other fingers; every other joint is the same either
    way; a whole-frame checkpoint is refused with the reason."""
    from motioncore.core.kinematics import resample
    from motioncore.data import load
    from motioncore.models.registry import load_model
    from motioncore.tasks.joints import joint_filler

    m = resample(load("manipnet-right", "test")[0].motion, 30.0).slice(0, 60)
    sk = m.skeleton
    keep = [j for j, n in enumerate(sk.names) if not n.startswith("PINKY")]
    sub = Skeleton(tuple(sk.names[j] for j in keep),
                   np.array([keep.index(sk.parents[j]) if sk.parents[j] >= 0 else -1 for j in keep]), sk.offsets[keep])
    four = Motion(sub, m.rotations[:, keep], m.positions[:, keep], m.fps, "four")
    jm = auto_map(sub, sk)
    assert jm.unmapped == ("PINKY_MCP", "PINKY_PIP_FE", "PINKY_DIP_FE")
    rest = retarget(four, sk, jm, scale=None)
    filled = retarget(four, sk, jm, scale=None, missing="infill", joint_fill=joint_filler("anyorder-hands"))
    pinky = [sk.names.index(n) for n in jm.unmapped]
    others = [j for j in range(sk.num_joints) if j not in pinky]
    np.testing.assert_array_equal(filled.rotations[:, others], rest.rotations[:, others])
    assert np.allclose(rest.rotations[:, pinky], [1, 0, 0, 0])
    assert not np.allclose(filled.rotations[:, pinky], [1, 0, 0, 0], atol=0.05)
    assert np.allclose(np.linalg.norm(filled.rotations, axis=-1), 1.0, atol=1e-6)
    with pytest.raises(RetargetError, match="per-element"):
        body, meta = load_model("anyorder-body")
        meta = {**meta, "skeleton": sk.to_dict()}
        retarget(four, sk, jm, scale=None, missing="infill", joint_fill=joint_filler((body, meta)))


@needs_data
def test_match_convention_moves_no_joint_and_matches_the_targets_rotations():
    """CMU 02_01 onto Bandai, twists matched to the Bandai train split's mean local rotations: joint
    positions unchanged to 1e-9 cm, the rotations' mean distance to the reference halves or better (to
    within a few degrees of a real Bandai clip's), leaves' mean rotation equal to the reference."""
    from motioncore.core.kinematics import resample
    from motioncore.core.quat_np import quat_mean
    from motioncore.data import load
    from motioncore.retarget.twist import match_convention, mean_rotations

    train = load("bandai", "train", fps=30, progress=False)
    ref = mean_rotations(np.concatenate([c.motion.rotations for c in train[:40]]))
    tgt = train[0].motion.skeleton
    src = resample(next(c for c in load("cmu") if c.name == "02_01").motion, 30.0)
    plain = retarget(src, tgt, auto_map(src.skeleton, tgt))
    fixed = retarget(src, tgt, auto_map(src.skeleton, tgt), convention=ref)
    np.testing.assert_allclose(fixed.global_transforms()[1], plain.global_transforms()[1], atol=1e-9)
    dist = lambda m: np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(m.rotations * ref, -1)), 0, 1))).mean()  # noqa: E731
    real = load("bandai", "test", fps=30, progress=False)[0].motion
    assert dist(fixed) < 0.5 * dist(plain) and dist(fixed) < dist(real) + 5.0, (dist(plain), dist(fixed), dist(real))
    for j in [j for j in range(tgt.num_joints) if not any(p == j for p in tgt.parents)]:   # leaves
        assert abs(abs(np.dot(quat_mean(fixed.rotations[:, j]), ref[j])) - 1) < 1e-6, tgt.names[j]
    again = match_convention(fixed, ref)          # idempotent
    np.testing.assert_allclose(np.abs(np.sum(again.rotations * fixed.rotations, -1)), 1.0, atol=1e-4)
