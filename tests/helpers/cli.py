"""The `motioncore` command in-process, and small clips on the bundled body model's skeleton, for the CLI,
batch, retarget and BVH tests."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BODY = ROOT / "src" / "motioncore" / "checkpoints" / "anyorder-body.json"
DOG = "mann_dog/mann_dog_bvh_46clips.tar.xz"


def main(argv: list[str]) -> int:
    """The command's exit code, whether argparse exits or the command returns."""
    from motioncore.cli import main as cli_main

    try:
        return cli_main.main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def src_env() -> dict[str, str]:
    """The environment with this checkout's src/ and server/ on PYTHONPATH, for subprocesses."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "server")])}


def tiny_motion(frames: int = 4, fps: float = 30.0):
    """A two-joint clip of random unit quaternions."""
    from motioncore.core.motion import Motion
    from motioncore.core.skeleton import Skeleton

    sk = Skeleton(("root", "a"), np.array([-1, 0]), np.array([[0, 0, 0], [0, 10, 0]], float))
    rng = np.random.default_rng(0)
    q = rng.normal(size=(frames, 2, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return Motion(sk, q, np.broadcast_to(sk.offsets, (frames, 2, 3)).copy(), fps)


def body_clip(names: list[str] | None = None, frames: int = 20):
    """A small walk on the bundled body model's 22-joint skeleton, its joints renamed to ``names``."""
    import json

    from motioncore.core.motion import Motion
    from motioncore.core.rotations import axis_angle_to_quat
    from motioncore.core.skeleton import Skeleton

    d = json.loads(BODY.read_text())["skeleton"]
    if names is not None:
        d = {**d, "names": names}
    sk = Skeleton.from_dict(d)
    rng = np.random.default_rng(0)
    pos = np.repeat(sk.offsets[None], frames, 0)
    pos[:, 1, 2] += np.linspace(0, 50, frames)
    return Motion(sk, axis_angle_to_quat(np.cumsum(rng.normal(0, 0.01, (frames, sk.num_joints, 3)), 0)), pos, 30.0)


def quat_angle_deg(a, b):
    """Angle between WXYZ quaternions in degrees (q == -q)."""
    return np.degrees(2 * np.arccos(np.clip(np.abs((a * b).sum(-1)), 0, 1)))
