"""BVH text grammar: the HIERARCHY section (tokens -> names, parents, offsets, channels, end sites) and
the MOTION section (``Frames:`` / ``Frame Time:`` and the frame lines -> a (T, C) float64 array).

Legend: T frames, C channels (all joints' channel columns in file order).

Every error is a ``BVHError`` naming the 1-based line. The frame lines are parsed in one C call
(``np.loadtxt``); a slow line-by-line pass runs only when that fails, to name the bad line. Building a
:class:`Motion` from these values is ``bvh.read_bvh``'s job.
"""
from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import BVHError

_CHANNELS = {c.lower(): c for a in "XYZ" for c in (f"{a}position", f"{a}rotation")}
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
    Errors carry no path: `bvh._parse_hierarchy` adds it (the parse is cached across files)."""

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
