"""The rotation form of ``infill``, served by an any-order checkpoint (``motioncore.infill.fill``).

The checkpoint here is an untrained grouped-frame model with the keys' interpolation prior on the real
Bandai skeleton: at temperature 0 it returns the interpolation itself, which makes its output checkable.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data, server_process

from motioncore.core.rotations import quat_angle
from motioncore.wire import protocol as P
from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(120), needs_data]
T = 25


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from motioncore.data import lafan1_windows, load
    from motioncore.families.anyorder.model import AnyOrderTransformer
    from motioncore.families.anyorder.model_elements import body_joints, motion_config, root_stats
    from motioncore.models.checkpoint import save_model

    clips = load("bandai", "test", fps=30, progress=False)[:2]
    sk = clips[0].motion.skeleton
    w = lafan1_windows(clips, T, 20, body=body_joints(sk))
    rj = 1
    torch.manual_seed(0)
    cfg = motion_config(sk.num_joints, d_model=32, n_layers=1, n_heads=2, d_ff=64, num_mixtures=2, dropout=0.0,
                        group_frames=True, prior=True)
    folder = tmp_path_factory.mktemp("infill-srv")
    from dataclasses import asdict

    d = asdict(cfg)
    d["channel_kinds"] = list(d["channel_kinds"])
    save_model(folder / "tiny-body", AnyOrderTransformer(cfg), "anyorder", d,
               {"skeleton": sk.to_dict(), "fps": 30.0, "root_joint": rj, "root_norm": root_stats(w.positions, rj),
                "training_data": "none (untrained test model)", "licence": "CC BY-NC 4.0 (skeleton only)"})
    clip = clips[1].motion
    with server_process(folder, "--no-bundled", "--model", str(folder / "tiny-body")) as (p, conn, _), \
            Client(conn, timeout=60) as c:
        yield p, c, clip.rotations[:T].astype(np.float32), clip.positions[:T, rj].astype(np.float32)


def test_fills_between_keys_keeps_the_keys_and_is_seeded(served):
    from motioncore.infill import interp_channels

    p, c, q, root = served
    known = np.zeros(T, bool)
    known[:5] = True
    known[-1] = True
    r = c.infill_rotations(q, root, known, model="tiny-body")
    out, rt = r.arrays["rotations"], r.arrays["root"]
    assert out.shape == (1, T, q.shape[1], 4) and rt.shape == (1, T, 3) and r.content["samples"] == 1
    np.testing.assert_array_equal(out[0, known], q[known])
    np.testing.assert_array_equal(rt[0, known], root[known])
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-5)
    iq, ir = interp_channels(q[None].astype(np.float64), root[None].astype(np.float64),
                             np.repeat(known[:, None], q.shape[1] + 1, 1))
    assert np.degrees(quat_angle(out[0, ~known], iq[0, ~known])).mean() < 3.0  # untrained: the interpolation
    np.testing.assert_allclose(rt[0, ~known], ir[0, ~known], atol=0.5)
    a = c.infill_rotations(q, root, known, model="tiny-body", temperature=1.0, samples=3, seed=7).arrays["rotations"]
    b = c.infill_rotations(q, root, known, model="tiny-body", temperature=1.0, samples=1, seed=9).arrays["rotations"]
    assert a.shape[0] == 3 and not np.array_equal(a[0], a[1])
    np.testing.assert_allclose(a[2], b[0], atol=1e-5)  # sample i is seeded seed + i


@pytest.mark.parametrize("change, match", [
    (lambda q, r, k: (q * 2, r, k), "unit quaternions"),
    (lambda q, r, k: (q, r, k[:-1]), "known"),
    (lambda q, r, k: (q, r[:, :2], k), "root"),
    (lambda q, r, k: (q, r, np.zeros_like(k)), "nothing"),
    (lambda q, r, k: (q[:, :-1], r, k), "joints"),
    (lambda q, r, k: (q, r, np.c_[np.repeat(k[:, None], q.shape[1], 1), ~k]), "whole frames"),
])
def test_bad_requests_are_invalid_and_the_server_stays_up(served, change, match):
    p, c, q, root = served
    known = np.zeros(T, bool)
    known[[0, T - 1]] = True
    with pytest.raises(P.InvalidRequest, match=match):
        c.infill_rotations(*change(q, root, known), model="tiny-body")
    assert p.poll() is None and c.health()["status"] == "ok"


def test_joints_are_mapped_by_name_and_fill_limits_the_frames(served):
    p, c, q, root = served
    known = np.zeros(T, bool)
    known[:5] = True
    known[-1] = True
    ref = c.infill_rotations(q, root, known, model="tiny-body").arrays["rotations"][0]
    names = c.models()[0]["skeleton"]["names"]
    perm = np.random.default_rng(0).permutation(len(names))
    extra = np.tile(np.float32([0.0, 1.0, 0.0, 0.0]), (T, 1, 1))  # a joint the model does not know
    qs = np.concatenate([q[:, perm], extra], 1)
    r = c.call("infill", {"model": "tiny-body", "joints": [names[i] for i in perm] + ["prop_sword"]},
               {"rotations": qs, "root": root, "known": known})
    out = r.arrays["rotations"][0]
    assert r.content["unmapped"] == ["prop_sword"] and r.content["filled_joints"] == []
    np.testing.assert_allclose(out[:, :-1], ref[:, perm], atol=1e-6)
    np.testing.assert_array_equal(out[:, -1], extra[:, 0])  # returned as sent
    fill = np.zeros(T, bool)
    fill[8:12] = True
    r = c.call("infill", {"model": "tiny-body"}, {"rotations": q, "root": root, "known": known, "fill": fill})
    out = r.arrays["rotations"][0]
    np.testing.assert_array_equal(out[~fill], q[~fill])  # neither known nor to fill: as sent
    assert not np.array_equal(out[fill], q[fill])
    # a joint the rig lacks: a grouped (whole-frame) model holds it at rest on the keyed frames
    r = c.call("infill", {"model": "tiny-body", "joints": names[1:]}, {"rotations": q[:, 1:], "root": root, "known": known})
    assert r.content["rest_joints"] == [names[0]] and r.content["filled_joints"] == []
    assert r.arrays["rotations"].shape == (1, T, len(names) - 1, 4)
    np.testing.assert_array_equal(r.arrays["rotations"][0][known], q[:, 1:][known])
    partial = np.repeat(known[:, None], len(names) + 1, 1)
    partial[0, 2] = False
    with pytest.raises(P.InvalidRequest, match="whole frames"):  # ...but cannot take a partly keyed frame
        c.call("infill", {"model": "tiny-body"}, {"rotations": q, "root": root, "known": partial})
    with pytest.raises(P.InvalidRequest, match="fill"):
        c.call("infill", {"model": "tiny-body"}, {"rotations": q, "root": root, "known": known, "fill": known})


def test_partial_keys_for_a_whole_frames_model_get_the_whole_frames_code(served):
    """Keys covering part of a frame, for a model that fills whole frames: the typed code ``whole_frames`` (a
    subtype of invalid_request) the add-on branches on to resend whole frames, never the message text."""
    p, c, q, root = served
    known = np.zeros((T, q.shape[1] + 1), bool)
    known[[0, T - 1]] = True
    known[5, 0] = True   # one joint keyed on frame 5: part of a frame
    with pytest.raises(P.WholeFramesRequired) as e:
        c.infill_rotations(q, root, known, model="tiny-body")
    assert e.value.code == "whole_frames" and isinstance(e.value, P.InvalidRequest)
    assert p.poll() is None and c.health()["status"] == "ok"


class _Unlisted:
    """The served client with ``group_frames`` left out of the model listing (an older server's), counting
    requests; ``rename`` turns a ``whole_frames`` error into a plain invalid_request with the same text."""

    def __init__(self, client: Client, rename: bool = False):
        self.c, self.rename, self.sent = client, rename, []

    def models(self):
        return [{**m, "group_frames": False} for m in self.c.models()]

    def infill_rotations(self, rotations, root, known, **kw):
        self.sent.append(np.asarray(known).copy())
        try:
            return self.c.infill_rotations(rotations, root, known, **kw)
        except P.WholeFramesRequired as e:
            if self.rename:
                raise P.InvalidRequest(e.message) from None
            raise


def test_the_addon_resends_whole_frames_on_the_code_not_the_text(served):
    from helpers.addon import addon_module

    from motioncore.core.axes import y_up_to_z_up

    req = addon_module("core.requests")
    p, c, q, root = served
    sk = c.models()[0]["skeleton"]
    J = len(sk["names"])
    heads = np.zeros((J, 3))
    for j, par in enumerate(sk["parents"]):   # the model's rest heads (Y-up) in Blender's axes
        heads[j] = (heads[par] if par >= 0 else 0.0) + np.asarray(sk["offsets"][j])
    known = np.zeros((T, J + 1), bool)
    known[:5] = known[-1] = True
    known[10, 3] = True   # part of a frame
    seg = {"rotations": q.astype(np.float64), "known": known, "root": y_up_to_z_up(root)}
    job = req.infill_segments_job([seg], sk["names"], y_up_to_z_up(heads), sk["parents"], "tiny-body")
    unlisted = _Unlisted(c)
    content, arrays = job(unlisted)
    first, second = unlisted.sent   # partial frames first, refused by code; then whole frames
    assert not (first.all(1) | ~first.any(1)).all() and (second.all(1) | ~second.any(1)).all()
    whole = arrays["known.0"]
    assert (whole.all(1) | ~whole.any(1)).all() and whole[10].all()   # resent in whole frames (`whole_frames`)
    np.testing.assert_allclose(arrays["rotations.0"][0][whole[:, :-1]], q[whole[:, :-1]], atol=1e-5)
    renamed = _Unlisted(c, rename=True)   # the same words under another code: no retry
    with pytest.raises(P.InvalidRequest, match="whole frames"):
        job(renamed)
    assert len(renamed.sent) == 1 and p.poll() is None
