"""The any-order transformer as an in-betweening ``Fill`` (``eval.baselines``) for ``evaluate_infill``.

Conditions: every joint's rotation and the root translation at the context frames ``[0, n_past)`` and
at the target frame ``n_past + n_trans`` (frames after the target, if any, are ignored). The transition
elements are sampled in a static order (default ``bisection``: the middle frame of the gap first, then
the halves' middles...) committing ``k`` elements per step (default: one whole frame, i.e. J + 1
elements sampled in parallel from one context) at temperature ``temperature`` (default 0: the mean of
each element's most likely mixture component; see the module's measured comparison in
docs/anyorder.md / the smoke report). All windows of a call are decoded together in one batch; window
i draws its noise from a generator seeded ``seed + i``, so a call is deterministic.

Outputs: local quaternions (WXYZ, unit, signs made continuous from the last context frame, as the
benchmark's ground truth) and local translations: the root de-normalised with the checkpoint's
``root_norm`` into joint ``meta["root_joint"]`` (Hips for Bandai); the other joints keep the last context
frame's translations (rest offsets; Bandai's ``joint_Root`` is constant within a re-framed window).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from motioncore.core.rotations import quat_continuity
from motioncore.core.skeleton import Skeleton
from motioncore.errors import MotioncoreError, ShapeError
from motioncore.eval.baselines import Fill
from motioncore.families.anyorder.model import AnyOrderTransformer
from motioncore.families.anyorder.model_elements import (
    elements_to_motion,
    group_channels,
    motion_to_elements,
    ungroup_channels,
)
from motioncore.families.anyorder.model_heads import sample_values
from motioncore.families.anyorder.model_sampling import ORDERS, _decode, grid_prior, key_frame_in, static_order

__all__ = ["AnyOrderFill", "load_fill", "is_anyorder_checkpoint"]


def is_anyorder_checkpoint(name_or_path: str | Path) -> bool:
    """True when ``name_or_path`` resolves to a checkpoint (bundled or a path) of kind ``anyorder``."""
    from motioncore.models.checkpoint import CheckpointError, read_meta
    from motioncore.models.registry import resolve

    try:
        return read_meta(resolve(name_or_path)).get("kind") == "anyorder"
    except CheckpointError:
        return False


class AnyOrderFill:
    """A ``Fill`` callable around a loaded any-order model and its checkpoint metadata."""

    def __init__(self, model: AnyOrderTransformer, meta: dict, order: str = "bisection", temperature: float = 0.0,
                 k: int | None = None, seed: int = 0, batch_size: int = 64, name: str = "anyorder"):
        if meta.get("kind") != "anyorder":
            raise MotioncoreError(f"{name}: checkpoint kind is {meta.get('kind')!r}, expected 'anyorder'")
        if order not in ORDERS:
            raise ValueError(f"order: expected one of {ORDERS}, got {order!r}")
        if not temperature >= 0:
            raise ValueError(f"temperature: must be >= 0, got {temperature}")
        cfg = model.cfg
        if cfg.head != "mog" or cfg.kinds[-1] != "vec3":
            raise MotioncoreError(f"{name}: not a motion model (expected joint rot6d channels plus a root vec3)")
        if "root_norm" not in meta:
            raise MotioncoreError(f"{name}: checkpoint metadata lacks 'root_norm'")
        self.model, self.meta, self.name = model, meta, name
        self.order, self.temperature, self.seed = order, float(temperature), int(seed)
        self.k = int(k) if k else cfg.grid_channels  # one frame per step
        if self.k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        self.batch_size = max(1, int(batch_size))
        self.num_joints = cfg.num_channels - 1
        self.names = tuple(meta.get("skeleton", {}).get("names", ()))
        self.root_joint = int(meta.get("root_joint", 0))
        self.root_mean = np.asarray(meta["root_norm"]["mean"], dtype=np.float64)
        self.root_std = np.asarray(meta["root_norm"]["std"], dtype=np.float64)

    def check_skeleton(self, skeleton: Skeleton) -> None:
        """Raise a ``MotioncoreError`` unless ``skeleton`` is the one the model was trained on."""
        J = skeleton.num_joints
        if J != self.num_joints:
            raise MotioncoreError(
                f"{self.name}: the checkpoint was trained on a {self.num_joints}-joint skeleton "
                f"({self.meta.get('training_data', '?')}) but the evaluation data has {J} joints; "
                f"evaluate it on the dataset it was trained on")
        if self.names and tuple(skeleton.names) != self.names:
            diff = [(a, b) for a, b in zip(self.names, skeleton.names, strict=True) if a != b][:3]
            raise MotioncoreError(f"{self.name}: joint names differ from the checkpoint's skeleton "
                                  f"(checkpoint vs data: {diff}...)")

    def __call__(self, skeleton: Skeleton, rotations: np.ndarray, positions: np.ndarray, n_past: int,
                 n_trans: int) -> tuple[np.ndarray, np.ndarray]:
        rotations, positions = np.asarray(rotations, np.float64), np.asarray(positions, np.float64)
        if rotations.ndim != 4 or rotations.shape[-1] != 4 or positions.shape != rotations.shape[:-1] + (3,):
            raise ShapeError(f"rotations (N, T, J, 4) and positions (N, T, J, 3) expected, got "
                             f"{rotations.shape} and {positions.shape}")
        if n_past < 1 or n_trans < 1 or n_past + n_trans >= rotations.shape[1]:
            raise ShapeError(f"need n_past >= 1, n_trans >= 1 and a target frame: n_past={n_past}, "
                             f"n_trans={n_trans}, T={rotations.shape[1]}")
        self.check_skeleton(skeleton)
        rot, pos = rotations.copy(), positions.copy()
        end = n_past + n_trans
        for s in range(0, rot.shape[0], self.batch_size):
            b = slice(s, s + self.batch_size)
            q, r = self._fill_batch(rotations[b, :end + 1], positions[b, :end + 1, self.root_joint], n_past, n_trans,
                                    self.seed + s)
            rot[b, n_past:end] = q
            pos[b, n_past:end] = positions[b, n_past - 1:n_past]
            pos[b, n_past:end, self.root_joint] = r
        return rot, pos

    def _fill_batch(self, q: np.ndarray, root: np.ndarray, n_past: int, n_trans: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
        """q (B, T, J, 4), root (B, T, 3) with T = n_past + n_trans + 1 -> transition quaternions
        (B, n_trans, J, 4) and root translations (B, n_trans, 3)."""
        model, cfg = self.model, self.model.cfg
        param = next(model.parameters())
        B, T = q.shape[:2]
        C = cfg.grid_channels
        known = np.ones(T, dtype=bool)
        known[n_past:n_past + n_trans] = False
        q = np.where(known[None, :, None, None], q, np.array([1.0, 0.0, 0.0, 0.0]))  # never read the gap
        rn = np.where(known[None, :, None], (root - self.root_mean) / self.root_std, 0.0)
        grid = motion_to_elements(torch.as_tensor(q), torch.as_tensor(rn))  # (B, T, J + 1, 6) float64
        if cfg.group_frames:
            grid = group_channels(cfg, grid)  # (B, T, 1, E)
        known_mask = torch.as_tensor(known)[:, None].expand(T, C)
        grid, back = key_frame_in(model, grid.to(param.device, param.dtype), known_mask[None].to(param.device))
        flat = grid.flatten(1, 2).contiguous()  # (B, N, E)
        cond = known_mask.flatten().nonzero().squeeze(1).to(param.device)
        prior = grid_prior(model, flat.view(B, T, C, -1), known_mask[None].to(param.device))
        gens = [torch.Generator().manual_seed(seed + i) for i in range(B)]
        dynamic = self.order == "entropy"  # scores every remaining element each step: use with grouped frames
        name = "sequential" if dynamic else self.order
        fill = torch.stack([static_order(name, ~known_mask, g) for g in gens]).to(param.device)
        E = cfg.element_dim

        def commit(params: torch.Tensor, elems: torch.Tensor) -> None:
            m = elems.shape[1]
            u = torch.stack([torch.rand(m, generator=g, dtype=torch.float64) for g in gens])
            z = torch.stack([torch.randn(m, E, generator=g, dtype=torch.float64) for g in gens])
            vals = sample_values(cfg, params, elems % C, self.temperature, u.to(param), z.to(param))
            flat.scatter_(1, elems.unsqueeze(-1).expand(-1, -1, E), vals)

        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                _decode(model, flat, cond, fill, dynamic, self.k, commit, prior)
        finally:
            model.train(was)
        out = back(flat.view(B, T, C, E))[:, n_past:n_past + n_trans].to(torch.float64).cpu()
        if cfg.group_frames:
            out = ungroup_channels(cfg, out)  # (B, n_trans, J + 1, 6)
        quats_t, r = elements_to_motion(out)
        quats = quats_t.numpy()
        # signs continuous from the last context frame (the benchmark compares quaternions directly)
        chain = quat_continuity(np.concatenate([q[:, n_past - 1:n_past], quats], 1), axis=1)[:, 1:]
        chain = chain / np.linalg.norm(chain, axis=-1, keepdims=True)
        return chain, r.numpy() * self.root_std + self.root_mean


def load_fill(name_or_path: str | Path, order: str = "bisection", temperature: float = 0.0, k: int | None = None,
              seed: int = 0, device: str | torch.device = "cpu", batch_size: int = 64) -> Fill:
    """A ``Fill`` from an any-order checkpoint (bundled name or path). ``k`` elements per decoding step
    (default: one frame, J + 1); ``temperature`` 0 takes the mean of the most likely mixture component."""
    from motioncore.models.registry import load_model

    model, meta = load_model(name_or_path, device=device)
    if meta.get("kind") != "anyorder" or not isinstance(model, AnyOrderTransformer):
        raise MotioncoreError(f"{name_or_path}: checkpoint kind is {meta.get('kind')!r}, expected 'anyorder'")
    return AnyOrderFill(model, meta, order=order, temperature=temperature, k=k, seed=seed, batch_size=batch_size,
                        name=str(name_or_path))
