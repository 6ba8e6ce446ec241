"""The style outside the rollout (issue 56, `motioncore.families.style.generate_outside`), on the bundled opt-in style model
``learnet-biped-outside`` and real Bandai clips: the walk is the base's own (root path, phase, contacts equal to ``pfnn-style-base`` walking
alone), the written pose is the learnet's on the base's state (against a frame-by-frame reference loop), the
styled pose never goes back into the loop, and `base_states` equals the base rolled along a clip row by row
through the controller's own ``predict``."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.tasks.paths import Path

pytestmark = [needs_data, pytest.mark.data]


@pytest.fixture(scope="module")
def adapter():
    from motioncore.families.style.generate import StyleAdapter

    torch.set_num_threads(1)
    return StyleAdapter.load("learnet-biped-outside")


@pytest.fixture(scope="module")
def proud():
    """A held-out style's walk (Bandai test split), as a user would send it."""
    from motioncore.data import load

    return next(c for c in load("bandai", "test", progress=False)
                if c.labels.get("style") == "proud" and c.labels.get("content") == "walk").motion


def curve() -> Path:
    return Path(np.array([[0.0, 0.0], [0.0, 3.0], [2.0, 5.0], [4.0, 5.0]]), None, None, ("walk",) * 4)


def test_the_bundled_style_model_acts_outside_the_rollout(adapter):
    from motioncore.families.style.generate_outside import OutsideController

    assert adapter.outside and adapter.meta["style_outside"]["base"] == "pfnn-style-base"
    assert isinstance(adapter.controller(np.zeros(adapter.model.pfnn.cfg.style_dim)), OutsideController)


def test_the_styled_walk_is_the_base_walking_alone(adapter, proud):
    """Root path, facing, phase, contacts and progress of the styled walk equal the bundled base's own walk
    (``pfnn-style-base`` loaded on its own, not through the style model) on the same path; the pose differs."""
    from motioncore.tasks.locomotion import Controller

    z = adapter.fit(proud)
    styled = adapter.controller(z).rollout([curve()], 150)
    base = Controller.load("pfnn-style-base").rollout([curve()], 150)
    for name in ("root", "yaw", "progress", "phase", "contacts"):
        np.testing.assert_allclose(getattr(styled, name), getattr(base, name), atol=1e-4, err_msg=name)
    turned = np.degrees(2 * np.arccos(np.clip(np.abs((styled.rotations * base.rotations).sum(-1)), 0, 1)))
    assert turned.mean() > 2.0, f"the style barely changes the pose: {turned.mean():.2f} deg mean"


def test_the_written_pose_is_the_learnet_on_the_base_state(adapter, proud):
    """Against a reference loop written out here: the base controller's own steps, and on each frame the
    learnet (with the code) run on the same input row, its pose columns decoded and written."""
    from motioncore.families.style.generate_outside import POSE_BLOCKS
    from motioncore.features.poses import local_pose
    from motioncore.tasks.rollout import align_bones

    z = adapter.fit(proud)
    T = 40
    got = adapter.controller(z).rollout([curve()], T)
    ctl = adapter.controller(None)  # the base: the learnet's shared weights with no code
    lay, J = ctl.layout, ctl.skeleton.num_joints
    cols = np.concatenate([np.arange(lay.output_block(n).start, lay.output_block(n).stop) for n in POSE_BLOCKS])
    tracks = [ctl.track(curve())]
    st = ctl.initial_state(tracks)
    zt = torch.as_tensor(z, dtype=torch.float32)[None]
    for t in range(T):
        traj, s0 = ctl._trajectory(st, tracks)
        x = ctl._encode(st.frame, traj, st.prev)
        y = ctl.predict(x, st.phase / (2 * np.pi))
        xn = torch.as_tensor(np.clip(ctl.x_norm.transform(x), -20, 20), dtype=torch.float32)
        with torch.no_grad():
            ys = ctl.y_norm.inverse(adapter.model.pfnn(xn, torch.as_tensor(st.phase / (2 * np.pi), dtype=torch.float32),
                                                       zt).double().numpy())
        yw = y.copy()
        yw[:, cols] = ys[:, cols]
        written = ctl._decode(yw, st.frame).pose
        q = align_bones(written.rotations[:, :J], written.positions, ctl.bones)
        rot, pos = local_pose(ctl.skeleton, q, written.positions[:, :J], st.frame, ctl.body)
        np.testing.assert_allclose(np.abs((got.rotations[:, t] * rot).sum(-1)), 1.0, atol=1e-5, err_msg=f"frame {t}")
        np.testing.assert_allclose(got.positions[:, t], pos, atol=1e-3, err_msg=f"frame {t}")
        st = ctl._advance(st, traj, ctl._decode(y, st.frame), s0)  # the base's pose goes back, never the styled one


def test_base_states_equal_the_base_rolled_row_by_row(adapter, proud):
    """`base_states` on one clip against a loop through the base controller's ``predict`` (raw units, float64
    normalisers): each row's previous pose is the base's decoded pose of the previous row."""
    from motioncore.families.style.generate_outside import base_states, pose_columns

    ctl = adapter.controller(None)
    rows = adapter.exemplar_data(proud)
    X, ph = rows["X"].astype(np.float64), rows["phase"].astype(np.float64)
    lay = ctl.layout
    xp = pose_columns(lay, "x")
    yp = np.concatenate([np.arange(lay.output_block(n).start, lay.output_block(n).stop) for n in ("joint_pos", "joint_vel")])
    n = 60
    ref = X[:n].copy()
    for t in range(1, n):
        ref[t, xp] = ctl.predict(ref[t - 1:t], ph[t - 1:t])[0, yp]
    xn = torch.as_tensor(ctl.x_norm.transform(X[:n]), dtype=torch.float32)
    got = base_states(adapter.model.pfnn, lay, ctl.x_norm, ctl.y_norm, xn, torch.as_tensor(ph[:n], dtype=torch.float32),
                      np.array([0]), np.array([n]))
    np.testing.assert_allclose(ctl.x_norm.inverse(got.double().numpy()), ref, atol=2e-3)
    assert np.abs(ref[1:, xp] - X[1:n, xp]).max() > 1.0  # the base's poses, not the clip's
