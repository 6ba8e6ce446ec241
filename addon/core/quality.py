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


def style_report(done: str, content: Mapping[str, Any]) -> tuple[str, str]:
    """(the operator's status line, a warning line or "") for a ``style.adapt`` reply's content: the fit's
    seconds (``code_fit``) and the example's quality (``exemplar_quality``), after ``done``."""
    fit, quality = content.get("code_fit"), content.get("exemplar_quality")
    line = done if not fit else f"{done}; style code fitted to the example in {float(fit['seconds']):.1f} s"
    if not quality:
        return line, ""
    note = quality_note(quality)
    return f"{line}; {note}", ("" if quality.get("ok", True) else note)
