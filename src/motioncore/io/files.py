"""Finding input files in folders. Stdlib only."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["files_with_suffix"]


def files_with_suffix(folder: str | os.PathLike[str], suffix: str) -> list[Path]:
    """Files under ``folder`` (searched recursively) whose name ends in ``suffix`` in any case
    (``.bvh`` finds ``walk.BVH`` too), sorted."""
    suffix = suffix.lower()
    return sorted(f for f in Path(folder).rglob("*") if f.name.lower().endswith(suffix) and f.is_file())
