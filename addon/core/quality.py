"""What the add-on says about a style example's quality: the server's ``exemplar_quality`` (a
``style.adapt`` reply, `motioncore.families.style.generate_quality`) as one line for Blender's status bar."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def quality_note(quality: Mapping[str, Any]) -> str:
    """One line: the fit's held-out error, and every warning (empty warnings: the example is usable)."""
    cm = quality.get("held_out_cm") or {}
    err = (f"held-out error {float(cm['fitted']):.2f} cm (no style {float(cm['no_style']):.2f})"
           if "fitted" in cm and "no_style" in cm else "")
    warnings = [str(w) for w in quality.get("warnings") or []]
    if not warnings:
        return f"example OK: {err}" if err else "example OK"
    return "check the Style Example: " + "; ".join(warnings) + (f"; {err}" if err else "")
