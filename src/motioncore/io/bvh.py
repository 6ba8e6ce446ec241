"""BVH files: vectorised reader and atomic writer (Motion <-> BVH text). The text grammar (hierarchy
and motion section) is in ``bvh_parse``, the read-write-read check in ``bvh_roundtrip``.

Legend: T frames, J joints, C channels (all joints' channel columns in file order), E end sites.
Quaternions are WXYZ float64. Euler orders are intrinsic in channel order ("ZXY": R = Rz Rx Ry), as
BVH defines them. Lengths stay in the file's units (cm for our data sets).

``positions[:, j]`` of the returned :class:`Motion` is joint j's translation in its parent's frame:
its position channels where the file has them (they replace the OFFSET, they are not added to it),
else its OFFSET broadcast over frames.

Reading is fast: the hierarchy (a few hundred lines) is parsed in Python, the motion block is parsed
in one C call (``np.loadtxt``) into a (T, C) array, channel columns are gathered with fancy indexing
and every Euler order present is converted in a single ``euler_to_quat`` call. A slow line-by-line
pass runs only when the fast path fails, to name the bad line in the ``BVHError``.
"""
from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.euler import euler_to_quat, quat_to_euler
from ..core.motion import Motion
from ..core.skeleton import Skeleton
from ..errors import BVHError, ShapeError
from .atomic import atomic_write_text
from .bvh_parse import _frames, _Hierarchy, _motion_header

__all__ = ["read_bvh", "read_bvh_header", "write_bvh", "format_bvh"]

PathLike = str | os.PathLike[str]

_MOTION_RE = re.compile(r"^[ \t]*MOTION[ \t]*$", re.MULTILINE)


# ----------------------------------------------------------------------------------------------
# channel layout (shared by reader and writer)
# ----------------------------------------------------------------------------------------------
@dataclass
class _Layout:
    """Where each joint's channels sit in the (T, C) matrix. Column C means "a zero column"."""

    C: int
    pos_cols: np.ndarray  # (P,) columns of position channels
    pos_joints: np.ndarray  # (P,) their joints
    pos_axes: np.ndarray  # (P,) their axes (0 X, 1 Y, 2 Z)
    rot_groups: dict[str, tuple[np.ndarray, np.ndarray]]  # Euler order -> (joints (G,), columns (G, 3))


def _euler_order(channels: Sequence[str]) -> str:
    """Rotation axes in channel order, missing axes appended (their angle is always 0)."""
    axes = "".join(c[0] for c in channels if c.endswith("rotation"))
    return axes + "".join(a for a in "XYZ" if a not in axes) if axes else ""


def _layout(channels: Sequence[Sequence[str]], joints: Sequence[int]) -> _Layout:
    """Layout of ``channels[k]`` (joint ``joints[k]``) written one joint after another."""
    C = sum(len(ch) for ch in channels)
    pos: list[tuple[int, int, int]] = []
    groups: dict[str, tuple[list[int], list[list[int]]]] = {}
    col = 0
    for j, chans in zip(joints, channels, strict=True):
        order = _euler_order(chans)
        rcols = [C, C, C]
        for c in chans:
            if c.endswith("position"):
                pos.append((col, j, "XYZ".index(c[0])))
            else:
                rcols[order.index(c[0])] = col
            col += 1
        if order:
            js, cs = groups.setdefault(order, ([], []))
            js.append(j)
            cs.append(rcols)
    p = np.array(pos, dtype=np.int64).reshape(-1, 3)
    rot = {o: (np.array(js, dtype=np.int64), np.array(cs, dtype=np.int64)) for o, (js, cs) in groups.items()}
    return _Layout(C, p[:, 0], p[:, 1], p[:, 2], rot)


# ----------------------------------------------------------------------------------------------
# read
# ----------------------------------------------------------------------------------------------
_BINARY_RE = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")  # control bytes no BVH text holds (tabs, CR, FF are fine)


def _source_text(source: PathLike, name: str | None) -> tuple[str, str | None, str]:
    """(text, path or None, clip name) of a path or of BVH text itself."""
    if isinstance(source, str) and "\n" in source:  # BVH text (a path has no newline)
        text, path, stem = source, None, ""
    else:
        p = Path(source)
        raw, path, stem = p.read_bytes(), str(p), p.stem
        bad = _BINARY_RE.search(raw)
        if bad is not None:  # name the offset, never echo the bytes
            raise BVHError(f"not a text BVH file: binary byte 0x{bad.group()[0]:02x} at byte offset {bad.start()}",
                           None, path)
        text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, path, stem if name is None else name


@dataclass(frozen=True)
class _Header:
    """A parsed hierarchy (immutable, cached by its text) and its channel layout."""

    names: tuple[str, ...]
    parents: tuple[int, ...]
    offsets: tuple[tuple[float, float, float], ...]
    channels: tuple[tuple[str, ...], ...]
    end_sites: tuple[tuple[int, tuple[float, float, float]], ...]
    layout: _Layout


@functools.lru_cache(maxsize=64)
def _parse_head(head: str, has_motion: bool) -> _Header:
    """Parse the text before MOTION (the whole text if there is none: then this raises). Cached:
    the clips of one data set share their hierarchy, so it is parsed once."""
    hier = _Hierarchy()
    for lineno, line in enumerate(head.split("\n"), start=1):
        toks = line.split()
        if toks:
            hier.feed(lineno, toks)
    if has_motion:
        hier.finish(head.count("\n") + 1, head.count("\n") + 1)
    else:  # raises: truncated hierarchy or no MOTION; name the last non-blank line
        hier.finish(None, head.rstrip().count("\n") + 1)
    layout = _layout(hier.channels, range(len(hier.names)))
    for arr in (layout.pos_cols, layout.pos_joints, layout.pos_axes,
                *(a for pair in layout.rot_groups.values() for a in pair)):
        arr.flags.writeable = False
    return _Header(tuple(hier.names), tuple(hier.parents), tuple(hier.offsets), tuple(hier.channels),
                   tuple(hier.end_sites), layout)


def _parse_hierarchy(text: str, path: str | None) -> tuple[_Header, int, int]:
    """Hierarchy plus (position just after the MOTION line, MOTION line number)."""
    m = _MOTION_RE.search(text)
    try:
        hdr = _parse_head(text[:m.start()] if m else text, m is not None)
    except BVHError as e:
        raise BVHError(e.message, e.line, path) from None
    assert m is not None  # _parse_head raised otherwise
    end = text.find("\n", m.end())
    return hdr, len(text) if end < 0 else end + 1, text.count("\n", 0, m.start()) + 1


def _fps(frame_time: float) -> float:
    """1 / frame time, snapped to a whole number when within 1e-4 relative (0.0333333 -> 30)."""
    fps = 1.0 / frame_time
    r = round(fps)
    return float(r) if r > 0 and abs(fps - r) <= 1e-4 * fps else fps


def _assemble(hdr: _Header, data: np.ndarray, fps: float, name: str) -> Motion:
    J, T, lay = len(hdr.names), data.shape[0], hdr.layout
    skel = Skeleton(hdr.names, np.array(hdr.parents, dtype=np.int64), np.array(hdr.offsets, dtype=np.float64),
                    hdr.channels, hdr.end_sites)
    positions = np.repeat(skel.offsets[None], T, axis=0)
    positions[:, lay.pos_joints, lay.pos_axes] = data[:, lay.pos_cols]
    rotations = np.zeros((T, J, 4))
    rotations[..., 0] = 1.0
    if any((cols == lay.C).any() for _, cols in lay.rot_groups.values()):
        data = np.concatenate([data, np.zeros((T, 1))], axis=1)
    for order, (joints, cols) in lay.rot_groups.items():
        rotations[:, joints] = euler_to_quat(data[:, cols], order, degrees=True)
    return Motion(skel, rotations, positions, fps, name)


def read_bvh(source: PathLike, *, name: str | None = None) -> Motion:
    """Read a BVH file (path) or BVH text (a str with a newline: "HIERARCHY\nROOT ...") into a Motion.

    Rotations become (T, J, 4) WXYZ float64 quaternions; positions are (T, J, 3) local translations
    (position channels where present, else offsets). Malformed input raises ``BVHError`` with the
    1-based line number. ``name`` defaults to the file stem ("" for text)."""
    text, path, clip = _source_text(source, name)
    hdr, pos, motion_line = _parse_hierarchy(text, path)
    T, frame_time, pos, lineno = _motion_header(text, pos, motion_line, path)
    if hdr.layout.C == 0:
        raise BVHError("the hierarchy declares no channels at all", motion_line, path)
    data = _frames(text[pos:], lineno, T, hdr.layout.C, lineno - 1, path)
    return _assemble(hdr, data, _fps(frame_time), clip)


def _is_path(source: PathLike) -> bool:
    return not (isinstance(source, str) and "\n" in source)


def _head_of(source: PathLike, chunk: int = 1 << 16) -> str:
    """The text of a BVH file up to and including its ``Frame Time`` line (the whole file when it has none)."""
    raw = b""
    with open(source, "rb") as f:
        while True:
            more = f.read(chunk)
            raw += more
            low = raw.lower()
            at = low.find(b"frame time")
            if at >= 0 and (low.find(b"\n", at) >= 0 or not more):
                end = low.find(b"\n", at)
                raw = raw[: end + 1] if end >= 0 else raw
                break
            if not more:
                break
            chunk *= 2
    bad = _BINARY_RE.search(raw)
    if bad is not None:
        raise BVHError(f"not a text BVH file: binary byte 0x{bad.group()[0]:02x} at byte offset {bad.start()}",
                       None, str(source))
    text = raw.decode("utf-8", errors="replace")
    return text if "\n" in text else text + "\n"


def read_bvh_header(source: PathLike) -> tuple[Skeleton, float, int]:
    """(skeleton, fps, frames) of a BVH file without parsing its frames: cheap enough to check every
    input of a batch before any work (a file is read only up to its ``Frame Time`` line)."""
    text, path, _ = _source_text(_head_of(source), None) if _is_path(source) else _source_text(source, None)
    if _is_path(source):
        path = str(source)
    hdr, pos, motion_line = _parse_hierarchy(text, path)
    T, frame_time, _, _ = _motion_header(text, pos, motion_line, path)
    skel = Skeleton(hdr.names, np.array(hdr.parents, dtype=np.int64), np.array(hdr.offsets, dtype=np.float64),
                    hdr.channels, hdr.end_sites)
    return skel, _fps(frame_time), T


# ----------------------------------------------------------------------------------------------
# write
# ----------------------------------------------------------------------------------------------
def _dfs_order(skel: Skeleton) -> list[int]:
    """Joints in the order a BVH file lists them (depth first, children by index)."""
    roots = [j for j in range(skel.num_joints) if skel.parents[j] < 0]
    if len(roots) != 1:
        raise BVHError(f"cannot write a skeleton with {len(roots)} roots as BVH (exactly one ROOT)")
    children: list[list[int]] = [[] for _ in range(skel.num_joints)]
    for j, p in enumerate(skel.parents):
        if p >= 0:
            children[p].append(j)
    order, todo = [], [roots[0]]
    while todo:
        j = todo.pop()
        order.append(j)
        todo.extend(reversed(children[j]))
    return order


def _hierarchy_text(skel: Skeleton, precision: int) -> str:
    ends: list[list[tuple[float, float, float]]] = [[] for _ in range(skel.num_joints)]
    for j, off in skel.end_sites:
        ends[j].append(off)

    def xyz(v: Sequence[float]) -> str:
        return " ".join(f"{float(x):.{precision}f}" for x in v)

    out = ["HIERARCHY"]

    def emit(j: int, depth: int) -> None:
        ind = "\t" * depth
        chans = skel.channels[j]
        out.extend([f"{ind}{'JOINT' if depth else 'ROOT'} {skel.names[j]}", f"{ind}{{",
                    f"{ind}\tOFFSET {xyz(skel.offsets[j])}",
                    f"{ind}\tCHANNELS {len(chans)}{''.join(' ' + c for c in chans)}"])
        for c in skel.children(j):
            emit(c, depth + 1)
        for off in ends[j]:
            out.extend([f"{ind}\tEnd Site", f"{ind}\t{{", f"{ind}\t\tOFFSET {xyz(off)}", f"{ind}\t}}"])
        out.append(f"{ind}}}")

    emit(_dfs_order(skel)[0], 0)
    return "\n".join(out) + "\n"


def _channel_matrix(motion: Motion) -> np.ndarray:
    """(T, C) channel values in file order: positions, and Euler angles in degrees."""
    skel = motion.skeleton
    order = _dfs_order(skel)
    lay = _layout([skel.channels[j] for j in order], order)
    out = np.zeros((motion.num_frames, lay.C + 1))
    out[:, lay.pos_cols] = motion.positions[:, lay.pos_joints, lay.pos_axes]
    for eorder, (joints, cols) in lay.rot_groups.items():
        out[:, cols] = quat_to_euler(motion.rotations[:, joints], eorder, degrees=True)
    return out[:, :lay.C]


def format_bvh(motion: Motion, *, precision: int = 6) -> str:
    """The BVH text of ``motion``: the skeleton's channel layout, End Sites, ``Frame Time`` = 1/fps,
    values with ``precision`` decimals. A joint without rotation (position) channels drops its
    rotation (position) values."""
    for what, arr in (("rotations", motion.rotations), ("positions", motion.positions)):
        if not np.isfinite(arr).all():
            raise ShapeError(f"{what}: contains NaN or inf, cannot write BVH")
    data = _channel_matrix(motion)
    T, C = data.shape
    head = _hierarchy_text(motion.skeleton, precision)
    row = " ".join([f"%.{precision}f"] * C) + "\n"
    body = (row * T) % tuple(data.ravel().tolist()) if C else "\n" * T
    return f"{head}MOTION\nFrames: {T}\nFrame Time: {1.0 / motion.fps:.12g}\n{body}"


def write_bvh(path: PathLike, motion: Motion, *, precision: int = 6) -> None:
    """Write ``motion`` as BVH atomically: a temporary file in the same folder, then ``os.replace``."""
    text = format_bvh(motion, precision=precision)
    atomic_write_text(path, text)
