"""Skeleton: joint names, parents, rest offsets, BVH channel layout and end sites; forward kinematics.

Legend: T frames, J joints. Quaternions are WXYZ (as Blender). Works on numpy arrays or torch
tensors (same type out as in), batched over any leading dimensions.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ShapeError
from .rotations import quat_apply, quat_mul

POSITION_CHANNELS = ("Xposition", "Yposition", "Zposition")
ROTATION_CHANNELS = ("Xrotation", "Yrotation", "Zrotation")


@dataclass(frozen=True, eq=False)
class Skeleton:
    """A joint hierarchy. Joints are topologically sorted: ``parents[j] < j``, root has -1."""

    names: tuple[str, ...]  # joint names, unique
    parents: np.ndarray  # (J,) int64, -1 for the root(s)
    offsets: np.ndarray  # (J, 3) float64 rest translation relative to the parent
    channels: tuple[tuple[str, ...], ...] = ()  # BVH channel names per joint (empty: 3 rotations ZXY)
    end_sites: tuple[tuple[int, tuple[float, float, float]], ...] = ()  # (parent joint, offset)
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        names, J = tuple(self.names), len(self.names)
        parents = np.asarray(self.parents, dtype=np.int64).reshape(-1)
        offsets = np.asarray(self.offsets, dtype=np.float64)
        if parents.shape != (J,):
            raise ShapeError(f"parents: expected ({J},), got {parents.shape}")
        if offsets.shape != (J, 3):
            raise ShapeError(f"offsets: expected ({J}, 3), got {offsets.shape}")
        if len(set(names)) != J:
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ShapeError(f"names: duplicate joint names {dup}")
        if np.any(parents >= np.arange(J)) or np.any(parents < -1):
            raise ShapeError("parents: joints must be topologically sorted (parents[j] < j, root -1)")
        channels = tuple(tuple(c) for c in self.channels) or tuple(
            (POSITION_CHANNELS if p < 0 else ()) + ("Zrotation", "Xrotation", "Yrotation") for p in parents
        )
        if len(channels) != J:
            raise ShapeError(f"channels: expected {J} entries, got {len(channels)}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "end_sites", tuple((int(j), tuple(map(float, o))) for j, o in self.end_sites))
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    # --- queries -------------------------------------------------------------------------------
    @property
    def num_joints(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Joint index by name; raises KeyError naming the missing joint."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"joint {name!r} not in skeleton ({len(self.names)} joints)") from None

    def children(self, j: int) -> list[int]:
        return [int(c) for c in np.nonzero(self.parents == j)[0]]

    def rotation_order(self, j: int) -> str:
        """Intrinsic Euler order of joint j from its channels, e.g. 'ZXY' (defaults to 'ZXY')."""
        order = "".join(c[0] for c in self.channels[j] if c in ROTATION_CHANNELS)
        return order if len(order) == 3 else "ZXY"

    def has_position(self, j: int) -> bool:
        return any(c in POSITION_CHANNELS for c in self.channels[j])

    def subset(self, keep: Sequence[str]) -> tuple[Skeleton, np.ndarray]:
        """Skeleton of the named joints (in this skeleton's order), re-parented to the nearest kept
        ancestor, with offsets summed along the removed chain (rest pose only). Returns the new skeleton
        and the index array of kept joints."""
        keep_set = set(keep)
        idx = np.array([j for j, n in enumerate(self.names) if n in keep_set], dtype=np.int64)
        missing = keep_set - set(self.names)
        if missing:
            raise KeyError(f"joints not in skeleton: {sorted(missing)}")
        new_of = {int(j): i for i, j in enumerate(idx)}
        parents, offsets = [], []
        for j in idx:
            off, p = self.offsets[j].copy(), int(self.parents[j])
            while p >= 0 and p not in new_of:
                off += self.offsets[p]
                p = int(self.parents[p])
            parents.append(new_of.get(p, -1))
            offsets.append(off)
        sub = Skeleton(tuple(self.names[j] for j in idx), np.array(parents), np.array(offsets),
                       tuple(self.channels[j] for j in idx),
                       tuple((new_of[j], o) for j, o in self.end_sites if j in new_of))
        return sub, idx

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (checkpoint metadata, caches, the wire protocol)."""
        return {"names": list(self.names), "parents": self.parents.tolist(), "offsets": self.offsets.tolist(),
                "channels": [list(c) for c in self.channels],
                "end_sites": [[j, list(o)] for j, o in self.end_sites]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Skeleton:
        try:
            return cls(tuple(d["names"]), np.asarray(d["parents"]), np.asarray(d["offsets"], dtype=np.float64),
                       tuple(tuple(c) for c in d.get("channels", ())),
                       tuple((int(j), tuple(o)) for j, o in d.get("end_sites", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise ShapeError(f"skeleton description: {e}") from e

    def same_topology(self, other: Skeleton) -> bool:
        return self.names == other.names and np.array_equal(self.parents, other.parents)

    # --- kinematics ----------------------------------------------------------------------------
    def forward_kinematics(self, rotations: Any, positions: Any) -> tuple[Any, Any]:
        """Local rotations (..., J, 4) WXYZ and local translations (..., J, 3) to global
        rotations (..., J, 4) and global positions (..., J, 3). ``positions[..., j, :]`` is the
        translation of joint j in its parent's frame (its offset, or its position channels)."""
        J = self.num_joints
        if rotations.shape[-2:] != (J, 4):
            raise ShapeError(f"rotations: expected (..., {J}, 4), got {tuple(rotations.shape)}")
        if positions.shape[-2:] != (J, 3):
            raise ShapeError(f"positions: expected (..., {J}, 3), got {tuple(positions.shape)}")
        gq, gp = [], []
        for j, p in enumerate(self.parents):
            if p < 0:
                gq.append(rotations[..., j, :])
                gp.append(positions[..., j, :])
            else:
                gq.append(quat_mul(gq[p], rotations[..., j, :]))
                gp.append(gp[p] + quat_apply(gq[p], positions[..., j, :]))
        stack = np.stack if isinstance(rotations, np.ndarray) else _torch_stack
        return stack(gq, -2), stack(gp, -2)

    def end_site_positions(self, global_rotations: Any, global_positions: Any) -> Any:
        """World positions (..., E, 3) of the end sites, in ``end_sites`` order."""
        out = []
        for j, off in self.end_sites:
            o = np.asarray(off, dtype=np.float64)
            if not isinstance(global_positions, np.ndarray):
                o = global_positions.new_tensor(o)
            out.append(global_positions[..., j, :] + quat_apply(global_rotations[..., j, :], o + 0 * global_positions[..., j, :]))
        stack = np.stack if isinstance(global_positions, np.ndarray) else _torch_stack
        return stack(out, -2)

    def rest_positions(self) -> np.ndarray:
        """Global joint positions (J, 3) in the rest pose (identity rotations, offsets)."""
        J = self.num_joints
        q = np.zeros((J, 4))
        q[:, 0] = 1.0
        return self.forward_kinematics(q, self.offsets)[1]


def _torch_stack(xs: list[Any], dim: int) -> Any:
    import torch

    return torch.stack(xs, dim)
