"""families/body/gate_rate.py: the check that the scene plays the action at its capture rate, on the animator's keys.
A 30 fps Bandai walk played at 24 fps is named (30 fills the pseudo-gaps clearly closer); a scene at 30, no
rate or sparse keys: no check."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def walk(raw_file):
    from motioncore.io.bvh import read_bvh
    from motioncore.models.registry import load_model

    model, meta = load_model("infill-body")
    mo = read_bvh(raw_file("bandai2", "dataset-2_walk_elderly_005.bvh"))
    return model, meta, mo.rotations, mo.positions[:, int(meta["root_joint"])]


def gaps(T: int, J: int, length: int = 15, every: int = 60) -> np.ndarray:
    keys = np.ones((T, J + 1), bool)
    for s in range(30, T - 30, every):
        keys[s:s + length] = False
    return keys


def test_a_30_fps_walk_played_at_24_is_named_and_at_30_is_not(walk):
    from motioncore.families.body.gate_rate import MIN_GAIN, rate_check

    model, meta, q, root = walk
    keys = gaps(*q.shape[:2])
    slow = rate_check(model, meta, q, root, keys, ~keys, 24.0)
    assert slow is not None and slow.best == 30.0 and slow.gain >= MIN_GAIN and slow.pseudo >= 3, slow
    assert slow.error["30"] < slow.error["24"]
    assert rate_check(model, meta, q, root, keys, ~keys, 30.0) is None   # a rate set on purpose: not checked
    assert rate_check(model, meta, q, root, keys, ~keys, None) is None
    # what the check cannot tell (its module docstring, why the warning asks): the walk resampled to a true 24 fps
    # action, played at 24, is filled closer at 30 as well
    from motioncore.infill import at_model_rate
    T, J = q.shape[:2]
    q24, r24, _ = at_model_rate({**meta, "fps": 24.0}, q, root, np.ones((T, J + 1), bool), 30.0)
    k24 = gaps(*q24.shape[:2], length=12, every=48)
    fast = rate_check(model, meta, q24, r24, k24, ~k24, 24.0)
    assert fast is not None and fast.best == 30.0, fast


def test_sparse_keys_are_not_checked(walk):
    """Blocking (a key every 4 frames) leaves no fully keyed window: no check, no warning."""
    from motioncore.families.body.gate_rate import rate_check

    model, meta, q, root = walk
    keys = np.zeros((q.shape[0], q.shape[1] + 1), bool)
    keys[::4] = True
    assert rate_check(model, meta, q, root, keys, ~keys, 24.0) is None
