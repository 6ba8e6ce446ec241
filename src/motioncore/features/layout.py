"""Column layouts of X and Y (named blocks of columns, the groups that share one std) and the helpers
that fill their rows: strided column indices, one-hot labels, stacking per-clip rows, shape checks.

Legend: N samples (rows of X / Y), J joints, D features.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError, ShapeError


@dataclass(frozen=True)
class Block:
    """A contiguous run of columns of X or Y."""

    name: str
    start: int
    stop: int
    meaning: str
    units: str
    frame: str  # coordinate frame the values are expressed in

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def slice(self) -> slice:
        return slice(self.start, self.stop)


def blocks_from(specs: Sequence[tuple[str, int, str, str, str]]) -> tuple[Block, ...]:
    """Consecutive blocks from (name, size, meaning, units, frame) tuples."""
    out, at = [], 0
    for name, size, meaning, units, frame in specs:
        out.append(Block(name, at, at + size, meaning, units, frame))
        at += size
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Layout:
    """Column layout of one model's X and Y. ``in_groups`` / ``out_groups`` name column sets that share
    one std in the normaliser (and are what encode/decode fill); ``gating`` indexes X (MANN)."""

    model: str
    joints: tuple[str, ...]  # names of the J feature points, in order
    labels: tuple[str, ...]  # gait (PFNN) or action (MANN) names
    fps: float
    inputs: tuple[Block, ...]
    outputs: tuple[Block, ...]
    in_groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    out_groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    gating: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def d_in(self) -> int:
        return self.inputs[-1].stop

    @property
    def d_out(self) -> int:
        return self.outputs[-1].stop

    def input_block(self, name: str) -> Block:
        return self._find(self.inputs, name, "X")

    def output_block(self, name: str) -> Block:
        return self._find(self.outputs, name, "Y")

    def _find(self, blocks: tuple[Block, ...], name: str, side: str) -> Block:
        for b in blocks:
            if b.name == name:
                return b
        raise KeyError(f"no block {name!r} in {side} of the {self.model} layout: {[b.name for b in blocks]}")

    def joint_weights(self, weights: Mapping[str, float] | np.ndarray, groups: Sequence[str]) -> np.ndarray:
        """(D_in,) column weights for `Normaliser.fit`: 1 everywhere, ``weights`` per joint (by name or
        as a (J,) array) on the named input groups, whose columns are joint-major."""
        J = len(self.joints)
        w = np.array([weights.get(n, 1.0) for n in self.joints] if isinstance(weights, Mapping) else weights,
                     np.float64)
        if w.shape != (J,):
            raise ShapeError(f"joint weights: expected ({J},), got {w.shape}")
        out = np.ones(self.d_in)
        for g in groups:
            cols = self.in_groups[g]
            out[cols] = np.repeat(w, len(cols) // J)
        return out

    def to_dict(self) -> dict[str, Any]:
        blocks = lambda bs: [[b.name, b.start, b.stop, b.meaning, b.units, b.frame] for b in bs]  # noqa: E731
        return {"model": self.model, "joints": list(self.joints), "labels": list(self.labels), "fps": self.fps,
                "d_in": self.d_in, "d_out": self.d_out, "inputs": blocks(self.inputs),
                "outputs": blocks(self.outputs), "gating": self.gating.tolist()}

    def markdown(self) -> str:
        """Markdown tables of the blocks (docs/features.md is generated from these)."""
        rows = []
        for title, bs in (("X (input)", self.inputs), ("Y (output)", self.outputs)):
            rows += [f"| {title} | name | size | meaning | units | frame |", "|---|---|---|---|---|---|"]
            rows += [f"| {b.start if b.size == 1 else f'{b.start}-{b.stop - 1}'} | `{b.name}` | {b.size} | {b.meaning} | {b.units} | {b.frame} |"
                     for b in bs]
            rows.append("")
        return "\n".join(rows)


def strided(start: int, count: int, stride: int, width: int = 1, offset: int = 0) -> np.ndarray:
    """Column indices of field ``offset..offset+width`` in each of ``count`` records of ``stride`` columns."""
    base = start + offset + np.arange(count)[:, None] * stride
    return (base + np.arange(width)[None]).reshape(-1)


def stack_rows(parts: Sequence[dict[str, np.ndarray]], skipped: Sequence[str], what: str) -> dict[str, np.ndarray]:
    """Concatenate per-clip row dicts; X and Y as float32; ``skipped`` clip names kept as an array."""
    if not parts:
        raise DataError(f"{what}: no clip has a full +-1 s window")
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["X"], out["Y"] = out["X"].astype(np.float32), out["Y"].astype(np.float32)
    out["skipped"] = np.array(skipped, dtype=str)
    return out


def one_hot(ids: np.ndarray, n: int) -> np.ndarray:
    """(..., n) float one-hot of integer ids (...)."""
    return (np.asarray(ids)[..., None] == np.arange(n)).astype(np.float64)


def check_last(name: str, x: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as float64, checked to end in ``shape``; raises ShapeError naming ``name`` (also if None)."""
    if x is None:
        raise ShapeError(f"{name}: missing, expected (..., {', '.join(map(str, shape))})")
    a = np.asarray(x, np.float64)
    if a.shape[a.ndim - len(shape):] != shape or a.ndim < len(shape):
        raise ShapeError(f"{name}: expected (..., {', '.join(map(str, shape))}), got {a.shape}")
    return a
