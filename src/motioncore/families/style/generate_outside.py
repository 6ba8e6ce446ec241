"""The style outside the rollout (issue 56): the controller that walks the base on its own poses and writes the
learnet's styled pose (`OutsideController`), and the base's states along a clip (`base_states`), which the
style term trains on (`train_outside`) and a request fits its code on (`generate.StyleAdapter.fit_report`).

Legend: B characters, N rows, C clips, D_in / D_out PFNN inputs / outputs.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from motioncore.errors import MotioncoreError
from motioncore.families.style.model import StyledPFNN
from motioncore.features.layout import Layout
from motioncore.features.normaliser import Normaliser
from motioncore.features.root_frame import RootFrame, Trajectory
from motioncore.tasks.locomotion import INPUT_CLIP, PFNNController
from motioncore.tasks.rollout import State

POSE_BLOCKS = ("joint_pos", "joint_vel", "joint_axes")  # the output columns the style writes (the path's stay the base's)


def pose_columns(layout, side: str) -> np.ndarray:
    """Column indices of the pose blocks in the outputs (``side`` "y": `POSE_BLOCKS`) or of the previous pose
    in the inputs ("x": joint positions and velocities)."""
    if side == "y":
        return np.concatenate([np.arange(layout.output_block(n).start, layout.output_block(n).stop) for n in POSE_BLOCKS])
    return np.concatenate([np.arange(layout.input_block(n).start, layout.input_block(n).stop) for n in ("joint_pos", "joint_vel")])


@torch.no_grad()
def base_states(base: nn.Module, layout: Layout, x_norm: Normaliser, y_norm: Normaliser, x: Tensor, phase: Tensor,
                starts: np.ndarray, counts: np.ndarray) -> Tensor:
    """(N, D_in) z-scored: the rows ``x`` (N, D_in, z-scored; clip c's rows ``starts[c]`` to ``starts[c] +
    counts[c]``, consecutive frames; ``phase`` (N,) in cycles) with the previous pose replaced by the base's own
    prediction of the previous row (row 0 of a clip keeps the clip's pose), the trajectory, gait and phase the
    clip's. The base is rolled along all clips at once, one row index at a time. X's previous pose is Y's pose of the previous
    row in the same units and root frame (`families.pfnn.features`), so only the z-scoring changes."""
    lay = layout
    xp = pose_columns(lay, "x")
    yp = np.concatenate([np.arange(lay.output_block(n).start, lay.output_block(n).stop) for n in ("joint_pos", "joint_vel")])
    xm, xs = x_norm.mean[xp], x_norm.std[xp]
    ym, ys = y_norm.mean[yp], y_norm.std[yp]
    a = torch.as_tensor(ys / xs, dtype=torch.float32)
    b = torch.as_tensor((ym - xm) / xs, dtype=torch.float32)
    xb = x.clone()
    starts, counts = np.asarray(starts, np.int64), np.asarray(counts, np.int64)
    xpt, ypt = torch.as_tensor(xp), torch.as_tensor(yp)
    was = base.training
    base.eval()
    for t in range(1, int(counts.max())):
        r = torch.as_tensor(starts[counts > t] + t)
        y = base(xb[r - 1], phase[r - 1])  # (C', D_out) z-scored
        xb[r[:, None], xpt[None, :]] = (y[:, ypt] * a + b).clamp(-INPUT_CLIP, INPUT_CLIP)
    base.train(was)
    return xb


class OutsideController(PFNNController):
    """The style outside the closed loop (issue 56). The base network (the learnet's shared weights, no code)
    runs every frame on the state of its OWN previous poses, exactly as the base controller; the learnet with
    the code reads that same state and its ``columns`` (the pose blocks) replace the base's in the pose that is
    written. The next state is built from the base's pose: the styled pose is never fed back, so the walk (path,
    phase, contacts, trajectory) is the base's and the style term is a function of the base's state and a
    constant code."""

    def __init__(self, base: PFNNController, styled: StyledPFNN, columns: Sequence[str] = POSE_BLOCKS):
        super().__init__(base.model, base.meta, base.mode)
        self.styled = styled
        self.cols = np.concatenate([np.arange(self.layout.output_block(n).start, self.layout.output_block(n).stop)
                                    for n in columns])
        self._pending: torch.Tensor | None = None  # the styled z-scored outputs of the last _net call

    def _net(self, x: torch.Tensor, cycles: np.ndarray) -> torch.Tensor:
        phase = torch.as_tensor(cycles, dtype=x.dtype, device=x.device)
        self._pending = self.styled(x, phase)
        return super()._net(x, cycles)

    def _decode(self, y: np.ndarray, frame: RootFrame) -> Any:
        out = super()._decode(y, frame)
        styled, self._pending = self._pending, None
        if styled is None or styled.shape[0] != y.shape[0]:
            raise MotioncoreError("OutsideController: _decode without the styled outputs of the same frame")
        ys = y.copy()
        ys[:, self.cols] = self.y_norm.inverse(styled.cpu().to(torch.float64).numpy())[:, self.cols]
        written = replace(out, pose=super()._decode(ys, frame).pose)
        written.fed_pose = out.pose  # what _advance feeds back
        return written

    def _advance(self, st: State, traj: Trajectory, out: Any, s0: np.ndarray) -> State:
        return super()._advance(st, traj, replace(out, pose=out.fed_pose), s0)
