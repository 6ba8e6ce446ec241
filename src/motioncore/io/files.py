"""Finding input files in folders and checking their extensions."""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import UsageError

__all__ = ["check_suffix", "files_with_suffix"]


def one_of(suffixes: Sequence[str]) -> str:
    """``.bvh, .fbx or .blend``."""
    return suffixes[0] if len(suffixes) == 1 else f"{', '.join(suffixes[:-1])} or {suffixes[-1]}"


def check_suffix(path: str | os.PathLike[str], suffixes: Sequence[str], arg: str) -> Path:
    """``path`` if its extension (any case) is one of ``suffixes``, else a `UsageError` in one line that
    names the argument and says what is accepted."""
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        got = repr(p.suffix) if p.suffix else "no extension"
        raise UsageError(f"{arg} {path}: expected a {one_of(suffixes)} file, got {got}")
    return p


def files_with_suffix(folder: str | os.PathLike[str], suffix: str) -> list[Path]:
    """Files under ``folder`` (searched recursively) whose name ends in ``suffix`` in any case
    (``.bvh`` finds ``walk.BVH`` too), sorted."""
    suffix = suffix.lower()
    return sorted(f for f in Path(folder).rglob("*") if f.name.lower().endswith(suffix) and f.is_file())
