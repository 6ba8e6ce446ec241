"""Atomic file writes: write to a temporary file beside the target, then ``os.replace`` it into place,
so a killed process never leaves a half-written file. Permissions are an ordinary file's (0666 less
the umask), not mkstemp's 0600."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputError


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp_path)`` on a temp file beside ``path``, then move it onto ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 text with Unix newlines, atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    return atomic_write(path, write)


def _first_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe(folder: Path) -> None:
    """Create and remove an empty temporary file in ``folder``: raises OSError when that is not possible
    (permissions, a read-only filesystem, no inodes left). Leaves nothing behind."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".motioncore-probe-")
    os.close(fd)
    os.unlink(tmp)


def check_output_dir(path: str | os.PathLike, arg: str = "--out",
                     inputs: tuple[str | os.PathLike, ...] = ()) -> Path:
    """Check, before any work and without writing anything, that ``path`` can be an output folder: not an
    existing file, nothing on the way to it a file, writable, and not one of ``inputs`` (files or folders).
    Raises ``OutputError`` (one line naming ``arg``)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{arg} {p}: is an existing file; expected a folder")
    base = _first_existing(p.absolute())
    if not base.is_dir():
        raise OutputError(f"{arg} {p}: {base} is a file, so the folder cannot be created")
    for i in inputs:
        ip = Path(i)
        if ip.exists() and ip.resolve() == p.resolve():
            raise OutputError(f"{arg} {p}: is an input ({i}); choose another folder (inputs are never overwritten)")
    try:
        _probe(base)
    except OSError as e:
        raise OutputError(f"{arg} {p}: not writable ({e.strerror or e})") from None
    return p


def check_output_file(path: str | os.PathLike, arg: str = "--out", inputs: tuple[str | os.PathLike, ...] = (),
                      suffixes: tuple[str, ...] = ()) -> Path:
    """As `check_output_dir` for a file to be written: not an existing folder, its folder creatable and
    writable, not an input, and (when given) one of ``suffixes``."""
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        raise OutputError(f"{arg} {p}: expected a {' or '.join(suffixes)} file name")
    if p.is_dir():
        raise OutputError(f"{arg} {p}: is a folder; expected a file name")
    for i in inputs:
        if Path(i).exists() and p.exists() and Path(i).resolve() == p.resolve():
            raise OutputError(f"{arg} {p}: is an input ({i}); choose another file")
    check_output_dir(p.parent if str(p.parent) else Path("."), f"{arg} {p}: folder")
    return p
