"""The hand's object on the wire and in the add-on (issue 14): the ``infill`` object buffers, validated and
passed to ``fill_clip(..., object_track=...)`` for a checkpoint trained with the object, refused for one
trained without; the add-on's object frame (``rigclip.object_in_parent``, ``requests.object_to_model``).

The served checkpoints are untrained tiny models on the bundled hands skeleton (no data needed)."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import torch
from conftest import needs_data, server_process
from helpers.addon import addon_module

from motioncore.core.rotations import quat_normalize
from motioncore.wire import protocol as P
from motioncore.wire.client import Client

rc = addon_module("core.rigclip")
rm = addon_module("core.rigmap")
qn = addon_module("vendor.quat_np")
requests = addon_module("core.requests")
T = 16
A = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])   # model Y-up -> Blender Z-up


def _tiny(cond: bool):
    from motioncore.data.hand_object import COND_DIM
    from motioncore.families.anyorder.model import AnyOrderTransformer
    from motioncore.families.anyorder.model_elements import motion_config
    from motioncore.models.registry import load_model

    _, meta = load_model("anyorder-hands")
    J = len(meta["skeleton"]["names"])
    torch.manual_seed(0)
    cfg = motion_config(J, cond_dim=COND_DIM if cond else 0, d_model=32, n_layers=1, n_heads=2, d_ff=64,
                        dropout=0.0, num_mixtures=2, prior=True, offset_scale=1.0)
    model = AnyOrderTransformer(cfg).eval()
    torch.nn.init.normal_(model.head.weight, std=0.05)   # untrained, but the object reaches the fingers
    d = asdict(cfg)
    d["channel_kinds"] = list(d["channel_kinds"])
    extra = {"cond": {"norm": {"mean": [0.0] * 7, "std": [1.0] * 7}}} if cond else {}
    info = {k: meta[k] for k in ("kind", "skeleton", "fps", "root_joint", "root_norm")}   # a checkpoint names its kind
    return model, d, {**info, **extra, "training_data": "none (untrained test model)", "licence": "CC BY-NC"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from motioncore.models.checkpoint import save_model

    folder = tmp_path_factory.mktemp("hands-obj-srv")
    for name, cond in (("tiny-hands-obj", True), ("tiny-hands", False)):
        model, cfg, meta = _tiny(cond)
        save_model(folder / name, model, "anyorder", cfg, meta)
    rng = np.random.default_rng(1)
    J = 17
    q = quat_normalize(rng.normal(size=(T, J, 4)) * 0.1 + np.array([1.0, 0, 0, 0]))
    root = rng.normal(size=(T, 3)) * 0.5
    known = np.zeros((T, J + 1), bool)
    known[:5] = True
    known[-1] = True
    known[:, 0] = known[:, J] = True   # the wrist every frame
    obj = (quat_normalize(rng.normal(size=(T, 4))), root + rng.normal(size=(T, 3)) * 0.5)
    args = ("--no-bundled", "--model", str(folder / "tiny-hands-obj"), "--model", str(folder / "tiny-hands"))
    with server_process(folder, *args) as (p, conn, _), Client(conn, timeout=60) as c:
        yield p, c, folder, (q.astype(np.float32), root.astype(np.float32), known), \
            tuple(a.astype(np.float32) for a in obj)


def test_the_listing_says_which_model_takes_the_object(served):
    _, c, _, _, _ = served
    ms = {m["name"]: m for m in c.models()}
    assert ms["tiny-hands-obj"]["object_cond"] is True and ms["tiny-hands"]["object_cond"] is False
    assert all("convention" in m for m in ms.values())   # the rest alignment's twist reference, beside it


def test_the_listing_carries_the_convention():
    from motioncore_server.registry import listed_convention

    ref = [[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]]
    assert listed_convention({"convention": {"mean_local_rotations": ref}}) == ref   # a checkpoint's JSON
    assert listed_convention({"convention": ref}) == ref   # a served model's info
    assert listed_convention({}) is None
    assert listed_convention({"convention": "bandai"}) is None and listed_convention({"convention": [1, 2]}) is None


def test_the_object_reaches_fill_clip_and_changes_the_fingers(served):
    from motioncore.infill import fill_clip_at
    from motioncore.models.registry import load_model

    _, c, folder, (q, root, known), obj = served
    r = c.infill_rotations(q, root, known, model="tiny-hands-obj", object_track=obj)
    assert r.content["object"] is True
    plain = c.infill_rotations(q, root, known, model="tiny-hands-obj")
    assert plain.content["object"] is False
    model, meta = load_model(str(folder / "tiny-hands-obj.json"))
    f64 = [np.asarray(a, np.float64) for a in (q, root, *obj)]
    ref = fill_clip_at(model, meta, f64[0], f64[1], known, None, object_track=(f64[2], f64[3]))
    np.testing.assert_allclose(r.arrays["rotations"][0], ref.rotations[0], atol=2e-5)
    unknown = ~known[:, :17]
    assert np.abs(r.arrays["rotations"][0][unknown] - plain.arrays["rotations"][0][unknown]).max() > 1e-3
    np.testing.assert_array_equal(r.arrays["rotations"][0][known[:, :17]], q[known[:, :17]])


def test_a_model_trained_without_the_object_refuses_it_in_one_line(served):
    p, c, _, (q, root, known), obj = served
    with pytest.raises(P.InvalidRequest, match="model 'tiny-hands' was trained without an object and cannot use "
                                               "one") as e:
        c.infill_rotations(q, root, known, model="tiny-hands", object_track=obj)
    assert "\n" not in str(e.value)
    assert c.infill_rotations(q, root, known, model="tiny-hands").content["object"] is False   # fine without
    assert p.poll() is None


@pytest.mark.parametrize("arrays, match", [
    (lambda o: {"object_rotations": o[0]}, "'object_rotations' needs 'object_positions'"),
    (lambda o: {"object_positions": o[1]}, "'object_positions' needs 'object_rotations'"),
    (lambda o: {"object_rotations": o[0][:-1], "object_positions": o[1]}, r"'object_rotations' must have shape \(16, 4"),
    (lambda o: {"object_rotations": o[0], "object_positions": o[1][:, :2]}, r"'object_positions' must have shape \(16, 3"),
    (lambda o: {"object_rotations": o[0] * 2, "object_positions": o[1]}, "unit quaternions"),
    (lambda o: {"object_rotations": o[0], "object_positions": np.where(np.arange(T)[:, None] == 3, np.nan, o[1])},
     "NaN"),
    (lambda o: {"object_rotations": o[0], "object_positions": o[1] * 1e9}, "beyond"),
    (lambda o: {"object_rotations": o[0].astype(np.int32), "object_positions": o[1]}, "dtype"),
])
def test_bad_object_buffers_are_refused_in_one_line(served, arrays, match):
    p, c, _, (q, root, known), obj = served
    with pytest.raises(P.InvalidRequest, match=match) as e:
        c.call("infill", {"model": "tiny-hands-obj"}, {"rotations": q, "root": root, "known": known,
                                                      **{k: np.asarray(v) for k, v in arrays(obj).items()}})
    assert "\n" not in str(e.value)
    assert p.poll() is None and c.health()["status"] == "ok"


def test_the_server_mirrors_a_left_hand_onto_the_model(served):
    from motioncore.infill import fill_clip_at
    from motioncore.models.registry import load_model

    p, c, folder, (q, root, known), obj = served
    arrays = {"rotations": q, "root": root, "known": known, "object_rotations": obj[0], "object_positions": obj[1]}
    r = c.call("infill", {"model": "tiny-hands-obj", "mirror": True}, arrays)
    assert r.content["mirror"] is True and r.content["object"] is True
    model, meta = load_model(str(folder / "tiny-hands-obj.json"))
    f64 = [np.asarray(a, np.float64) for a in (q, root, *obj)]
    ref = fill_clip_at(model, meta, f64[0], f64[1], known, None, object_track=(f64[2], f64[3]), mirror=True)
    np.testing.assert_allclose(r.arrays["rotations"][0], ref.rotations[0], atol=2e-5)
    with pytest.raises(P.InvalidRequest, match="field 'mirror' must be bool"):
        c.call("infill", {"model": "tiny-hands-obj", "mirror": "left"}, arrays)
    assert p.poll() is None


# ------------------------------------------------------------------------------------- the add-on's side

def _rand_quats(n: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return q * np.sign(q[:, :1])


def test_matrix_to_quat_inverts_quat_to_matrix_through_scale():
    q = _rand_quats(500)
    q[:4] = np.eye(4)   # the pivots: w, x, y, z dominant
    m = rc.quat_to_matrix(q) * np.random.default_rng(1).uniform(0.01, 100, size=(500, 1, 1))
    np.testing.assert_allclose(qn.matrix_to_quat(m), q, atol=1e-9)


def test_an_empty_keyed_like_the_importer_converts_comes_back_as_the_data():
    """The test rig's convention: the data's object pose (R, p) (Y-up, model units) becomes an empty with world
    matrix [A R A^-1 | A p / s] on a rig in 1/s model units; the add-on sends back (R, p)."""
    q = _rand_quats(20, 2)
    p = np.random.default_rng(3).normal(size=(20, 3))
    R = rc.quat_to_matrix(q)
    for s in (1.0, 100.0):
        m = np.tile(np.eye(4), (20, 1, 1))
        m[:, :3, :3] = A @ R @ A.T * 3.0   # the empty's scale is removed
        m[:, :3, 3] = p @ A.T / s
        rest = np.eye(4)
        rot, pos = rc.object_in_parent([rest], [np.zeros((20, 3))], [np.tile([1.0, 0, 0, 0], (20, 1))], m)
        oq, op = requests.object_to_model(qn.matrix_to_quat(rot), pos, s)
        np.testing.assert_allclose(np.abs(np.sum(oq * q, -1)), 1.0, atol=1e-12)
        np.testing.assert_allclose(op, p, atol=1e-9)


def test_the_object_is_in_the_frame_the_root_is_sent_in():
    """Under a posed parent (and an armature moved by its object), an object placed exactly at the root
    bone's head with the bone's posed rotation comes out at the root's translation (root_in_parent) with the
    bone's rotation in that frame: whatever the chain, the wrist and the object share one frame."""
    rng = np.random.default_rng(4)
    Tn = 7
    rests = []
    for k in range(2):
        r = np.eye(4)
        r[:3, :3] = rc.quat_to_matrix(_rand_quats(1, 10 + k)[0])
        r[:3, 3] = rng.normal(size=3)
        rests.append(r)
    locs = [rng.normal(size=(Tn, 3)) for _ in rests]
    quats = [_rand_quats(Tn, 20 + k) for k in range(2)]
    off = rng.normal(size=(Tn, 3))
    ms = rc.chain_pose(rests, locs, quats)
    rot, pos = rc.object_in_parent(rests, locs, quats, ms[-1], off)
    np.testing.assert_allclose(pos, rc.root_in_parent(rests, locs, quats, off), atol=1e-9)
    rp = ms[0][:, :3, :3] @ rests[0][:3, :3].T
    np.testing.assert_allclose(rot, np.swapaxes(rp, 1, 2) @ ms[1][:, :3, :3], atol=1e-9)


class _FakeClient(Client):
    """The real Client's typed methods (what the add-on calls) over a fake wire: ``call`` records the
    request's content and buffers and answers with the rotations sent."""

    def __init__(self, models):
        self._models = models
        self.sent = []

    def models(self):
        return self._models

    def call(self, type, content=None, arrays=None, **kw):
        self.sent.append((dict(content or {}), dict(arrays or {})))
        import types
        return types.SimpleNamespace(content={"object": "object_rotations" in arrays},
                                     arrays={"rotations": arrays["rotations"][None], "root": arrays["root"][None]})


def _hands_listing(cond: dict[str, bool]):
    from motioncore.models.registry import load_model

    sk = load_model("anyorder-hands")[1]["skeleton"]
    return [{"name": n, "tasks": ["infill"], "skeleton": sk, "object_cond": c} for n, c in cond.items()]


def _segment(names):
    B = len(names)
    return {"rotations": np.tile([1.0, 0, 0, 0], (T, B, 1)), "known": np.c_[np.zeros((T, B), bool), np.ones(T, bool)],
            "root": np.zeros((T, 3)), "object_rotations": np.tile([1.0, 0, 0, 0], (T, 1)),
            "object_positions": np.ones((T, 3))}


def test_the_add_on_picks_an_object_model_and_refuses_one_without():
    from motioncore.models.registry import load_model

    names = load_model("anyorder-hands")[1]["skeleton"]["names"]
    heads = np.cumsum(np.ones((len(names), 3)), 0)
    parents = [-1] + [0] * (len(names) - 1)
    seg = _segment(names)
    c = _FakeClient(_hands_listing({"anyorder-hands": False, "hands-obj": True}))
    job = requests.infill_segments_job([seg], names, heads, parents, None, object_name="Mug", root_bone="WRIST")
    content, _ = job(c)
    assert content["model"] == "hands-obj" and "object_positions" in c.sent[-1][1]
    s = content["scale"]   # model units per rig unit, as the root
    np.testing.assert_allclose(c.sent[-1][1]["object_positions"], np.tile([s, s, -s], (T, 1)), rtol=1e-6)
    with pytest.raises(ValueError, match="model 'anyorder-hands' was trained without an object and cannot use 'Mug'"):
        requests.infill_segments_job([seg], names, heads, parents, "anyorder-hands", object_name="Mug",
                                     root_bone="WRIST")(c)
    with pytest.raises(ValueError, match="serves no hands model trained with an object"):
        requests.infill_segments_job([seg], names, heads, parents, None, object_name="Mug",
                                     root_bone="WRIST")(_FakeClient(_hands_listing({"anyorder-hands": False})))
    with pytest.raises(ValueError, match="plays 'THUMB_CMC_FE', not the model's 'WRIST'"):
        requests.infill_segments_job([seg], names, heads, parents, None, object_name="Mug",
                                     root_bone="THUMB_CMC_FE")(c)
    content, _ = requests.infill_segments_job([{k: seg[k] for k in ("rotations", "known", "root")}], names, heads,
                                              parents, "anyorder-hands")(c)   # no object: as before
    assert content["model"] == "anyorder-hands" and "object_positions" not in c.sent[-1][1]
    assert "mirror" not in c.sent[-1][0]
    # a left hand on a right-hand model is mirrored; on a left-hand model (manipnet-left) it is not
    plain = [{k: seg[k] for k in ("rotations", "known", "root")}]
    requests.infill_segments_job(plain, names, heads, parents, "anyorder-hands", side="l")(c)
    assert c.sent[-1][0]["mirror"] is True
    requests.infill_segments_job(plain, names, heads, parents, "anyorder-hands", side="r")(c)
    assert "mirror" not in c.sent[-1][0]
    lefty = _FakeClient([{**m, "training_data": "manipnet-left train split"} for m in c.models()])
    requests.infill_segments_job(plain, names, heads, parents, "anyorder-hands", side="l")(lefty)
    assert "mirror" not in lefty.sent[-1][0]


def test_the_object_turns_with_the_root_when_the_wrist_has_a_keyed_parent():
    """After the rest alignment the root goes in turned by the posed rotation of its keyed parent (a forearm
    above the wrist, `root_parent`): the object, read in the same frame, goes in turned the same way."""
    from motioncore.models.registry import load_model

    names = ["FOREARM", *load_model("anyorder-hands")[1]["skeleton"]["names"]]
    heads = np.r_[np.zeros((1, 3)), np.cumsum(np.ones((len(names) - 1, 3)), 0)]
    parents = [-1, 0] + [1] * (len(names) - 2)
    rng = np.random.default_rng(0)
    seg = _segment(names)
    seg["root"] = rng.normal(size=(T, 3))
    seg["object_positions"] = rng.normal(size=(T, 3))
    seg["object_rotations"] = quat_normalize(rng.normal(size=(T, 4)))
    seg["known"][:, 0] = True   # the forearm is keyed
    c = _FakeClient(_hands_listing({"hands-obj": True}))
    sent = []
    for turn in ([1.0, 0, 0, 0], quat_normalize(np.array([0.8, 0.3, -0.4, 0.2]))):
        seg["rotations"][:, 0] = turn
        requests.infill_segments_job([seg], names, heads, parents, None, object_name="Mug", root_bone="WRIST",
                                     root_parent=0)(c)
        sent.append(c.sent[-1][1])
    d = np.asarray(turn, np.float64)   # the forearm's rotation in model axes (its rest is identity)
    from motioncore.core.rotations import quat_apply, quat_mul
    np.testing.assert_allclose(sent[1]["root"], quat_apply(d, sent[0]["root"].astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(sent[1]["object_positions"],
                               quat_apply(d, sent[0]["object_positions"].astype(np.float64)), atol=1e-5)
    a, b = sent[1]["object_rotations"], quat_mul(d, sent[0]["object_rotations"].astype(np.float64))
    np.testing.assert_allclose(np.abs((a * b).sum(-1)), 1.0, atol=1e-6)


def test_the_hand_side_from_names():
    rmap = addon_module("core.rigmap")
    assert rmap.hand_side(["leftHand", "WRIST"]) == "l" and rmap.hand_side(["rightHand"]) == "r"
    assert rmap.hand_side(["Armature", "hand.L", "forearm.L"]) == "l" and rmap.hand_side(["hand_r"]) == "r"
    assert rmap.hand_side(["Armature", "WRIST", "THUMB_CMC_FE"]) is None
    assert rmap.hand_side(["mixamorig:LeftHand", "mixamorig:RightHand"]) is None   # both: undecided


# ---------------------------------------------------------------------------------------------- left hand

def test_a_left_hand_is_mirrored_onto_the_model_and_back_keys_exact():
    from motioncore.infill import fill_clip_at, mirror_x

    model, _, meta = _tiny(True)
    rng = np.random.default_rng(5)
    J = 17
    q = quat_normalize(rng.normal(size=(T, J, 4)) * 0.1 + np.array([1.0, 0, 0, 0]))
    root = rng.normal(size=(T, 3)) * 0.5
    known = np.zeros((T, J + 1), bool)
    known[:4] = known[-1] = True
    known[:, 0] = known[:, J] = True
    obj = (quat_normalize(rng.normal(size=(T, 4))), rng.normal(size=(T, 3)))
    got = fill_clip_at(model, meta, q, root, known, None, object_track=obj, mirror=True)
    mq, mr = mirror_x(q, root)
    ref = fill_clip_at(model, meta, mq, mr, known, None, object_track=mirror_x(*obj))
    want_q, want_r = mirror_x(ref.rotations, ref.root)
    np.testing.assert_array_equal(got.rotations, want_q)
    np.testing.assert_array_equal(got.root, want_r)
    assert np.array_equal(got.rotations[0][known[:, :J]], q[known[:, :J]])   # bit-identical keys
    plain = fill_clip_at(model, meta, q, root, known, None, object_track=obj)
    assert np.abs(plain.rotations - got.rotations).max() > 1e-3


@needs_data
def test_the_manipnet_left_hand_mirrored_is_a_right_hand():
    """ManipNet's left hand mirrored (mirror_x) on the right hand's skeleton puts every joint at the mirror
    image of where the left skeleton puts it: the model's right hand sees a real hand."""
    from motioncore.data import load
    from motioncore.infill import mirror_x

    left = next(c for c in load("manipnet-left", "test", progress=False) if c.name == "mug3/leftHand").motion
    right = next(c for c in load("manipnet-right", "test", progress=False) if c.name == "mug3/rightHand").motion
    q, r = mirror_x(left.rotations[:200], left.positions[:200, 0])
    pos = np.broadcast_to(right.skeleton.offsets, (200, 17, 3)).copy()
    pos[:, 0] = r
    _, g_right = right.skeleton.forward_kinematics(q, pos)
    _, g_left = left.skeleton.forward_kinematics(left.rotations[:200], left.positions[:200])
    np.testing.assert_allclose(g_right, g_left * np.array([-1.0, 1.0, 1.0]), atol=1e-9)
