"""BVH files: vectorised reader, atomic writer and a read-write-read round-trip check.

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
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.motion import Motion
from ..core.rotations import euler_to_quat, quat_angle, quat_to_euler
from ..core.skeleton import Skeleton
from ..errors import BVHError, MotioncoreError, ShapeError
from .atomic import atomic_write_text

__all__ = ["read_bvh", "read_bvh_header", "write_bvh", "format_bvh", "roundtrip", "roundtrip_main", "RoundtripResult"]

PathLike = str | os.PathLike[str]

_CHANNELS = {c.lower(): c for a in "XYZ" for c in (f"{a}position", f"{a}rotation")}
_MOTION_RE = re.compile(r"^[ \t]*MOTION[ \t]*$", re.MULTILINE)
_FRAMES_RE = re.compile(r"^Frames\s*:\s*(\S*)$", re.IGNORECASE)
_FRAME_TIME_RE = re.compile(r"^Frame\s+Time\s*:\s*(\S*)$", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------
# hierarchy
# ----------------------------------------------------------------------------------------------
@dataclass
class _Block:
    """A declared block: a joint (index into the joints) or an End Site (index into the end sites)."""

    kind: str  # "joint" or "end"
    index: int  # joint index, or end-site index
    name: str
    line: int
    has_offset: bool = False
    has_channels: bool = False


@dataclass
class _Hierarchy:
    """Parses the lines before MOTION into names, parents, offsets, channels and end sites.
    Errors carry no path: `_parse_hierarchy` adds it (the parse is cached across files)."""

    names: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    offsets: list[tuple[float, float, float]] = field(default_factory=list)
    channels: list[tuple[str, ...]] = field(default_factory=list)
    end_sites: list[tuple[int, tuple[float, float, float]]] = field(default_factory=list)
    joint_lines: dict[str, int] = field(default_factory=dict)  # name -> line it was declared on
    stack: list[_Block] = field(default_factory=list)
    pending: _Block | None = None  # declared, waiting for its "{"
    seen_header: bool = False
    root_done: bool = False
    line: int = 0

    def error(self, message: str, line: int | None = None) -> BVHError:
        return BVHError(message, line=self.line if line is None else line)

    def feed(self, lineno: int, toks: list[str]) -> None:
        self.line, i = lineno, 0
        while i < len(toks):
            i = self._token(toks, i)

    def _token(self, toks: list[str], i: int) -> int:
        key = toks[i].upper()
        if key == "{":
            if self.pending is None:
                raise self.error("unbalanced braces: '{' without a JOINT, ROOT or End Site before it")
            self.stack.append(self.pending)
            self.pending = None
            return i + 1
        if self.pending is not None:
            pend = self.pending
            raise self.error(f"expected '{{' after {pend.name!r} (line {pend.line}), got {toks[i]!r}")
        if key == "}":
            self._close()
            return i + 1
        if key == "HIERARCHY":
            if self.seen_header or self.names:
                raise self.error("unexpected second HIERARCHY")
            self.seen_header = True
            return i + 1
        if key in ("ROOT", "JOINT"):
            return self._joint(key, toks, i)
        if key == "END":
            return self._end_site(toks, i)
        if key == "OFFSET":
            return self._offset(toks, i)
        if key == "CHANNELS":
            return self._channels(toks, i)
        raise self.error(f"unexpected {toks[i]!r} in the hierarchy")

    def _joint(self, key: str, toks: list[str], i: int) -> int:
        rest = toks[i + 1:]
        opens = bool(rest) and rest[-1] == "{"
        name = " ".join(rest[:-1] if opens else rest)
        if not self.seen_header:
            raise self.error(f"{key} before HIERARCHY (missing HIERARCHY line?)")
        if not name:
            raise self.error(f"{key} without a joint name")
        if key == "ROOT" and (self.stack or self.root_done):
            raise self.error(f"several ROOTs are not supported (second ROOT {name!r})" if self.root_done
                             else f"ROOT {name!r} inside another joint")
        if key == "JOINT" and not self.stack:
            raise self.error(f"JOINT {name!r} outside the ROOT block (unbalanced braces?)")
        if self.stack and self.stack[-1].kind == "end":
            raise self.error(f"JOINT {name!r} inside an End Site")
        if name in self.names:
            raise self.error(f"duplicate joint name {name!r} (first on line {self.joint_lines[name]})")
        self.joint_lines[name] = self.line
        self.names.append(name)
        self.parents.append(self.stack[-1].index if self.stack else -1)
        self.offsets.append((0.0, 0.0, 0.0))
        self.channels.append(())
        self.pending = _Block("joint", len(self.names) - 1, name, self.line)
        if opens:
            self.stack.append(self.pending)
            self.pending = None
        return len(toks)

    def _end_site(self, toks: list[str], i: int) -> int:
        if i + 1 >= len(toks) or toks[i + 1].upper() != "SITE":
            raise self.error(f"expected 'End Site', got {' '.join(toks[i:i + 2])!r}")
        if not self.stack or self.stack[-1].kind != "joint":
            raise self.error("End Site outside a joint")
        self.end_sites.append((self.stack[-1].index, (0.0, 0.0, 0.0)))
        self.pending = _Block("end", len(self.end_sites) - 1, "End Site", self.line)
        return i + 2

    def _offset(self, toks: list[str], i: int) -> int:
        if not self.stack:
            raise self.error("OFFSET outside a joint block")
        block = self.stack[-1]
        if block.has_offset:
            raise self.error(f"second OFFSET in {block.name!r}")
        vals = toks[i + 1:i + 4]
        xyz = tuple(_finite(v) for v in vals)
        if len(vals) != 3 or any(v is None for v in xyz):
            raise self.error(f"OFFSET of {block.name!r} needs 3 finite numbers, got {' '.join(vals)!r}")
        if block.kind == "joint":
            self.offsets[block.index] = xyz  # type: ignore[assignment]
        else:
            self.end_sites[block.index] = (self.end_sites[block.index][0], xyz)  # type: ignore[assignment]
        block.has_offset = True
        return i + 4

    def _channels(self, toks: list[str], i: int) -> int:
        if not self.stack or self.stack[-1].kind != "joint":
            raise self.error("CHANNELS outside a joint block")
        block = self.stack[-1]
        if block.has_channels:
            raise self.error(f"second CHANNELS in {block.name!r}")
        count = toks[i + 1] if i + 1 < len(toks) else ""
        names = toks[i + 2:]
        if not count.isdigit():
            raise self.error(f"CHANNELS of {block.name!r}: expected a channel count, got {count!r}")
        if int(count) != len(names):
            raise self.error(f"channel count mismatch: CHANNELS {count} of {block.name!r} lists "
                             f"{len(names)} names ({' '.join(names)})")
        canon = tuple(_CHANNELS.get(n.lower(), "") for n in names)
        for raw, c in zip(names, canon, strict=True):
            if not c:
                raise self.error(f"unknown channel name {raw!r} in {block.name!r} "
                                 "(expected X/Y/Z position/rotation)")
        if len(set(canon)) != len(canon):
            raise self.error(f"repeated channel in {block.name!r}: {' '.join(names)}")
        self.channels[block.index] = canon
        block.has_channels = True
        return len(toks)

    def _close(self) -> None:
        if not self.stack:
            raise self.error("unbalanced braces: '}' without a matching '{'")
        block = self.stack.pop()
        if not block.has_offset:
            raise self.error(f"{block.name!r} (line {block.line}) has no OFFSET")
        if block.kind == "joint" and not block.has_channels:
            raise self.error(f"joint {block.name!r} (line {block.line}) has no CHANNELS")
        if not self.stack:
            self.root_done = True

    def finish(self, motion_line: int | None, last_line: int) -> None:
        """Check the hierarchy is complete; ``motion_line`` None means the file has no MOTION line."""
        open_block = self.pending or (self.stack[-1] if self.stack else None)
        if open_block is not None:
            what = f"{open_block.name!r} (line {open_block.line}) is not closed"
            if motion_line is None:
                raise self.error(f"truncated file: it ends inside the hierarchy; {what}", last_line)
            raise self.error(f"unbalanced braces: {what} before MOTION", motion_line)
        if not self.names:
            raise self.error("no ROOT joint in the hierarchy" if self.seen_header
                             else "missing HIERARCHY (not a BVH file?)", motion_line or last_line)
        if motion_line is None:
            raise self.error("truncated file: missing MOTION section after the hierarchy", last_line)


def _finite(tok: str) -> float | None:
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if np.isfinite(v) else None


# ----------------------------------------------------------------------------------------------
# motion section
# ----------------------------------------------------------------------------------------------
def _next_line(text: str, pos: int, lineno: int) -> tuple[str | None, int, int]:
    """Next non-blank line from ``pos`` (the start of line ``lineno + 1``): (stripped line or None
    at end of text, position after it, its line number)."""
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        lineno += 1
        line = text[pos:end].strip()
        pos = end + 1
        if line:
            return line, pos, lineno
    return None, pos, lineno


def _motion_header(text: str, pos: int, lineno: int, path: str | None) -> tuple[int, float, int, int]:
    """Parse ``Frames:`` and ``Frame Time:`` after MOTION. Returns (T, frame time, position of the
    first data line, line number before it)."""
    line, pos, lineno = _next_line(text, pos, lineno)
    m = _FRAMES_RE.match(line or "")
    if line is None:
        raise BVHError("truncated file: missing 'Frames:' line after MOTION", lineno, path)
    if m is None:
        raise BVHError(f"expected 'Frames: N' after MOTION, got {line[:60]!r}", lineno, path)
    if not m.group(1).isdigit():
        raise BVHError(f"Frames: expects a whole number >= 1, got {m.group(1)!r}", lineno, path)
    frames = int(m.group(1))
    if frames == 0:
        raise BVHError("Frames: 0: the clip has no frames (a clip needs at least one)", lineno, path)
    line, pos, lineno = _next_line(text, pos, lineno)
    m = _FRAME_TIME_RE.match(line or "")
    if line is None:
        raise BVHError("truncated file: missing 'Frame Time:' line after 'Frames:'", lineno, path)
    if m is None:
        raise BVHError(f"expected 'Frame Time: SECONDS' after 'Frames:', got {line[:60]!r}", lineno, path)
    ft = _finite(m.group(1))
    if ft is None or ft <= 0:
        raise BVHError(f"Frame Time must be a positive number, got {m.group(1)!r}", lineno, path)
    return frames, ft, pos, lineno


def _fast_frames(body: str, C: int) -> np.ndarray | None:
    """All motion numbers in one C call, (T, C); None if anything is off (the slow path says what)."""
    if not body.strip():
        return np.empty((0, C))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            data = np.loadtxt(io.StringIO(body), dtype=np.float64, comments=None, ndmin=2)
    except (ValueError, Warning):
        return None
    return data if data.shape[1] == C else None


def _slow_frames(body: str, lineno: int, T: int, C: int, frames_line: int, path: str | None) -> np.ndarray:
    """Line-by-line parse that names the first bad line; returns the data if it finds nothing wrong."""
    rows: list[list[float]] = []
    last = lineno
    for k, line in enumerate(body.split("\n"), start=lineno + 1):
        toks = line.split()
        if not toks:
            continue
        if len(rows) == T:
            raise BVHError(f"frame count mismatch: more motion lines than 'Frames: {T}' (line {frames_line}) "
                           f"says; extra frame {T + 1} here", k, path)
        if len(toks) != C:
            raise BVHError(f"frame {len(rows) + 1}: wrong number of values: expected {C} (one per channel), "
                           f"got {len(toks)}", k, path)
        row = []
        for t in toks:
            try:
                v = float(t)
            except ValueError:
                raise BVHError(f"frame {len(rows) + 1}: not a number: {t!r}", k, path) from None
            if not np.isfinite(v):
                raise BVHError(f"frame {len(rows) + 1}: non-finite value {t!r}", k, path)
            row.append(v)
        rows.append(row)
        last = k
    if len(rows) < T:
        raise BVHError(f"truncated file / frame count mismatch: 'Frames: {T}' (line {frames_line}) but only "
                       f"{len(rows)} motion lines; frame {len(rows) + 1} missing", last + 1, path)
    return np.array(rows, dtype=np.float64).reshape(T, C)


def _frames(body: str, lineno: int, T: int, C: int, frames_line: int, path: str | None) -> np.ndarray:
    data = _fast_frames(body, C)
    if data is not None and data.shape[0] == T and np.isfinite(data).all():
        return data
    return _slow_frames(body, lineno, T, C, frames_line, path)


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


def read_bvh_header(source: PathLike) -> tuple[Skeleton, float, int]:
    """(skeleton, fps, frames) of a BVH file without parsing its frames: cheap enough to check every
    input of a batch before any work."""
    text, path, _ = _source_text(source, None)
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


# ----------------------------------------------------------------------------------------------
# round trip
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoundtripResult:
    """Worst differences between a file and its read-write-read copy."""

    path: str
    frames: int
    joints: int
    max_rot_err_deg: float  # worst quat_angle over frames and joints, degrees
    max_pos_err: float  # worst absolute local-translation difference, file units

    def ok(self, tol: float = 1e-4) -> bool:
        return self.max_rot_err_deg <= tol and self.max_pos_err <= tol


def roundtrip(path: PathLike, *, precision: int = 6) -> RoundtripResult:
    """Read ``path``, write it to a temporary file, read that back and compare (joints by name)."""
    a = read_bvh(path)
    with tempfile.TemporaryDirectory(prefix="motioncore-bvh-") as tmp:
        copy = Path(tmp) / (Path(path).stem + ".bvh")
        write_bvh(copy, a, precision=precision)
        b = read_bvh(copy)
    idx = [b.skeleton.index(n) for n in a.skeleton.names]
    if a.rotations.size:
        rot = float(np.degrees(np.max(quat_angle(a.rotations, b.rotations[:, idx]))))
        pos = float(np.max(np.abs(a.positions - b.positions[:, idx])))
    else:
        rot = pos = 0.0
    return RoundtripResult(str(path), a.num_frames, a.skeleton.num_joints, rot, pos)


def roundtrip_main(files: list[str], tol: float = 1e-4) -> int:
    """Round-trip every file, print one line each plus a summary; 0 if all are within ``tol``."""
    if not files:
        print("motioncore: error: bvh roundtrip: no BVH files given (or none in the folders given)", file=sys.stderr)
        return 2
    width = max(12, min(40, max(len(Path(f).stem) for f in files)))
    print(f"{'file':<{width}} {'frames':>7} {'joints':>6} {'rot err deg':>12} {'pos err cm':>12}  status")
    failed, worst_rot, worst_pos = 0, 0.0, 0.0
    for f in files:
        try:
            r = roundtrip(f)
        except (MotioncoreError, OSError) as e:
            failed += 1
            print(f"{Path(f).stem:<{width}} ERROR: {e}")
            continue
        worst_rot, worst_pos = max(worst_rot, r.max_rot_err_deg), max(worst_pos, r.max_pos_err)
        failed += not r.ok(tol)
        print(f"{Path(f).stem:<{width}} {r.frames:>7} {r.joints:>6} {r.max_rot_err_deg:>12.3g} "
              f"{r.max_pos_err:>12.3g}  {'OK' if r.ok(tol) else 'FAIL'}")
    print(f"{len(files)} files, {failed} failed (tol {tol:g}); worst rotation error {worst_rot:.3g} deg, "
          f"worst position error {worst_pos:.3g} cm")
    return 1 if failed else 0
