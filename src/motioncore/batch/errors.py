"""The errors of the batch jobs: ``BatchError`` (a batch cannot start) and ``ReportError`` (its report
could not be written)."""
from __future__ import annotations

from ..errors import MotioncoreError

__all__ = ["BatchError", "ReportError"]


class BatchError(MotioncoreError):
    """A batch cannot start (no inputs, unreadable target, output folder = source folder, no Ray...)."""


class ReportError(BatchError):
    """The work ran but ``report.json`` could not be written (e.g. the disk is full); no report is left."""

    exit_code = 1
