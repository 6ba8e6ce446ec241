"""Frame-to-frame turns (issue 27): no joint of a bundled controller's output turns between frames by more than that joint does
in the controller's training data (a robust maximum: the 99.9th percentile over every frame of the training
split, computed here from the real mocap) plus MARGIN_DEG. Measured on the written BVH (the writer's Euler
conversion included), on the demo's path and on a sharp 90 degree turn.

Before the fix the demo biped's right limbs turned by up to 180 degrees in one frame (Foot_R 179.8,
LowerLeg_R 177.9), against 25-27 degrees in the data: the PFNN's rotation targets were log maps, which jump
by 2 pi where Bandai's right limbs cross 180 degrees from the root frame (families/pfnn/features.py). ``pfnn-biped``
and ``learnet-biped`` (the style adapter, with its base ``pfnn-style-base``) are retrained on ``joint_axes``.
``pfnn-biped`` passes. The log-map ``learnet-biped`` flipped its legs by 180 degrees (Foot_R 179.8, LowerLeg_R
178.4); retrained on joint axes its arms still flailed with a held-out style's fitted code (LowerArm_L 39.7 / 61.8
degrees per frame against 26.4, issue 35), because it fed its own styled poses back into the rollout. Since
issue 56 the style acts outside the rollout (`families.style.generate_outside`): the base walks on its own poses and the
styled pose is only written: that model, ``learnet-biped-outside`` (opt-in), passes here as the plain controllers
do. The default ``learnet-biped`` is still the feedback model (it names held-out styles more often), so its strict
xfail stays: it fails the day the default passes, and the mark must go then.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_data

from motioncore.cli.controllers import demo_path
from motioncore.core.kinematics import rotation_step_limits, rotation_steps
from motioncore.io.bvh import read_bvh, write_bvh
from motioncore.tasks.paths import Path

MARGIN_DEG = 10.0  # on top of the data's 99.9th percentile (3-29 degrees on the biped, 7-70 on the dog)
HELD_OUT_CODE = pytest.mark.xfail(strict=True, reason="learnet-biped on a held-out style's fitted code (issue 35): "
                                  "LowerArm_L turns 39.7 deg per frame on the demo path, 61.8 on the sharp turn, against "
                                  "26.4 in the data (+10 margin); the encoder's code alone: Hand_R 106.8, LowerArm_R 55.7 "
                                  "(2026-11-26)")
CASES = ["pfnn-biped", pytest.param("learnet-biped", marks=HELD_OUT_CODE), "learnet-biped-outside", "mann-dog"]


@pytest.fixture(scope="module")
def limits() -> dict[str, np.ndarray]:
    """(J,) degrees per frame for each training set, at its own fps (the models run at it)."""
    from motioncore.data import load
    from motioncore.families.pfnn.features import locomotion_clips

    torch.set_num_threads(1)
    biped = locomotion_clips(load("bandai", "train", progress=False))  # the clips pfnn_dataset keeps
    dog = load("dog", "train", progress=False)
    return {"biped": rotation_step_limits([c.motion for c in biped]),
            "dog": rotation_step_limits([c.motion for c in dog])}


def sharp_turn() -> Path:
    """3 m straight along +Z, then a right angle onto +X for 3 m, at a walk."""
    return Path(np.array([[0.0, 0.0], [0.0, 3.0], [3.0, 3.0]]), None, None, ("walk",) * 3)


def controller(name: str):
    """The model as the user runs it: the plain controllers, and the style model walking in the style
    of a real held-out exemplar clip (Bandai test split, ``proud``), its code fitted to the clip as the
    server's style request does (`StyleAdapter.fit`)."""
    from motioncore.tasks.locomotion import Controller

    if not name.startswith("learnet-biped"):
        return Controller.load(name)
    from motioncore.data import load
    from motioncore.families.style.generate import StyleAdapter

    ad = StyleAdapter.load(name)
    clip = next(c for c in load("bandai", "test", progress=False)
                if c.labels.get("style") == "proud" and c.labels.get("content") == "walk")
    return ad.controller(ad.fit(clip.motion))


def written_steps(ctl, path: Path, tmp_path, name: str) -> np.ndarray:
    """(T - 1, J) degrees per frame of the BVH the demo would write for ``path`` (its frame count rule:
    1.5 x the planned time, cut on arrival)."""
    track = ctl.track(path)
    ro = ctl.rollout([path], int(1.5 * track.duration * ctl.fps))
    arrived = np.flatnonzero(ro.progress[0] >= track.length - 5.0)
    motion = ro.motion(0, name).slice(0, int(arrived[0]) + 1 if len(arrived) else ro.frames)
    bvh = tmp_path / f"{name}.bvh"
    write_bvh(bvh, motion)
    return rotation_steps(read_bvh(bvh).rotations)


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("model", CASES)
def test_no_joint_turns_faster_than_in_the_training_data(model, limits, tmp_path):
    torch.set_num_threads(1)
    ctl = controller(model)
    character = "dog" if model == "mann-dog" else "biped"
    bad = []
    for label, path in (("demo", demo_path(character)), ("sharp turn", sharp_turn())):
        steps = written_steps(ctl, path, tmp_path, label.replace(" ", "_"))
        worst = steps.max(0)  # (J,)
        over = worst > limits[character] + MARGIN_DEG
        bad += [f"{label}: {n} {w:.1f} deg (data {lim:.1f})" for n, w, lim, o in
                zip(ctl.skeleton.names, worst, limits[character], over) if o]
    assert not bad, "; ".join(bad)
