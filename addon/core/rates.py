"""The In-fill report's warning when the scene's rate changes the fill (plain data, no bpy)."""
from __future__ import annotations

from typing import Any


def rate_message(checks: list[dict[str, Any] | None]) -> str:
    """A warning when the scene's rate changes the fill: another common rate filled test gaps cut from the
    animator's keys clearly closer (the server's ``rate`` check, ``motioncore.families.body.gate_rate``; it
    cannot tell the capture's rate itself, so the warning asks)."""
    c = next((c for c in checks if c and c.get("best")), None)
    if c is None:
        return ""
    return (f"; WARNING the scene's rate changes this fill: on {c['pseudo']} test gaps cut from your keys it is "
            f"{c['gain']:.0%} closer with the action at {c['best']:g} fps than at the scene's {c['fps']:g}. If the "
            f"action was captured at {c['best']:g} fps (Blender's BVH importer leaves the scene at 24 fps unless "
            f"Update Scene FPS is ticked), set the scene's Frame Rate to {c['best']:g} and fill again")
