"""One root exception for everything motioncore raises on bad user, file or wire input.

`assert` is kept for internal invariants only; anything a user can trigger raises one of these,
naming the field (or file and line) and what was wrong.
"""
from __future__ import annotations


class MotioncoreError(Exception):
    """Root of every error motioncore raises on purpose."""


class BVHError(MotioncoreError):
    """Malformed BVH text. Carries the file (if known) and 1-based line number."""

    def __init__(self, message: str, line: int | None = None, path: str | None = None):
        self.message, self.line, self.path = message, line, path
        where = ""
        if path is not None:
            where += f"{path}"
        if line is not None:
            where += f"{':' if where else 'line '}{line}"
        super().__init__(f"{where}: {message}" if where else message)


class DataError(MotioncoreError):
    """A dataset is missing, unreadable or not what its registry entry promises."""


class WholeFramesError(MotioncoreError):
    """A checkpoint that fills whole frames (``group_frames``) got keys that cover part of a frame."""


class ShapeError(MotioncoreError, ValueError):
    """An array argument has the wrong shape or dtype."""


class OutputError(MotioncoreError):
    """An output path cannot be used: an existing file where a folder is needed, not writable, an input."""


class UsageError(MotioncoreError):
    """A command-line argument is out of range or names something unusable (checked before any work)."""
