"""The deterministic body in-fill behind the server: a request naming no model at temperature 0 gets
infill-body, the keys come back bit-exact, the reply carries the model's base (Blender's Bezier of the keys in
the model's space) for the add-on's correction, and variations (temperature > 0) go to the any-order model."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data, server_process

from motioncore.core.rotations import quat_angle
from motioncore.wire.client import Client

pytestmark = [pytest.mark.timeout(180), needs_data]
T = 40


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from motioncore.data import load
    from motioncore.models.checkpoint import save_model
    from motioncore.models.infill_body import InfillBody, InfillBodyConfig
    from motioncore.tasks.body_fill import BodyLayout

    clip = load("bandai", "test", fps=30, progress=False)[1].motion
    sk = clip.skeleton
    lay = BodyLayout.of(sk)
    torch.manual_seed(0)
    cfg = InfillBodyConfig(lay.num_model_joints, d_model=32, n_layers=1, n_heads=2, d_ff=64)
    model = InfillBody(cfg)
    with torch.no_grad():
        model.out.bias.normal_(0.0, 0.05)   # a network that moves every joint, so answer and base differ
    folder = tmp_path_factory.mktemp("body-srv")
    save_model(folder / "infill-body", model, "infill-body", cfg.to_dict(),
               {"skeleton": sk.to_dict(), "fps": 30.0, "root_joint": 1, "training_data": "none (test model)",
                "licence": "CC BY-NC 4.0 (skeleton only)"})
    with server_process(folder, "--no-bundled", "--model", str(folder / "infill-body")) as (p, conn, _), \
            Client(conn, timeout=60) as c:
        yield c, clip.rotations[:T].astype(np.float32), clip.positions[:T, 1].astype(np.float32), model, sk


def test_temperature_zero_gets_the_deterministic_model_with_its_base(served):
    from motioncore.tasks.body_fill import BodyLayout, prepare, run_model

    c, q, root, model, sk = served
    known = np.zeros(T, bool)
    known[:10] = known[-1] = True
    r = c.infill_rotations(q, root, known)   # no model named
    assert r.content["model"] == "infill-body"
    out, rt = r.arrays["rotations"], r.arrays["root"]
    np.testing.assert_array_equal(out[0, known], q[known])
    np.testing.assert_array_equal(rt[0, known], root[known])
    pos = np.broadcast_to(sk.offsets, (T, sk.num_joints, 3)).copy()
    pos[:, 1] = root
    kn = np.repeat(known[:, None], sk.num_joints + 1, 1)[None]
    ref_q, ref_p = run_model(model, BodyLayout.of(sk), q[None].astype(np.float64), pos[None], kn)
    assert np.degrees(quat_angle(out[0], ref_q[0])).max() < 1e-2   # the library's answer (float32 on the wire)
    base = prepare(BodyLayout.of(sk), q[None].astype(np.float64), pos[None], kn)
    assert np.degrees(quat_angle(r.arrays["base_rotations"][0], base.rotations[0])).max() < 1e-2
    assert np.abs(r.arrays["base_root"][0] - base.positions[0, :, 1]).max() < 1e-2
    assert np.degrees(quat_angle(out[0], r.arrays["base_rotations"][0])).max() > 1.0   # the network did move


def test_samples_of_the_deterministic_model_repeat_its_one_answer(served):
    c, q, root, _, _ = served
    known = np.zeros(T, bool)
    known[:10] = known[-1] = True
    r = c.infill_rotations(q, root, known, model="infill-body", temperature=1.0, samples=2)
    assert r.arrays["rotations"].shape[0] == 2   # deterministic: the one answer, repeated
    np.testing.assert_array_equal(r.arrays["rotations"][0], r.arrays["rotations"][1])
