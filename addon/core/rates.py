"""The scene's rate as the In-fill reads it, and the report's line when the rate changes the fill (plain data, no
bpy)."""
from __future__ import annotations

from typing import Any

STANDARD = (23.976, 24.0, 25.0, 29.97, 30.0, 48.0, 50.0, 59.94, 60.0, 100.0, 120.0)   # common frame rates
TOLERANCE = 0.001   # a rate within 0.1% of a standard one is that one


def standard_rate(fps: float) -> float:
    """``fps`` as the standard rate it is within 0.1% of (Blender's BVH importer with Update Scene FPS sets a 30 fps
    capture's scene to fps 30, base 0.99999: 30.0003 fps, which is 30), else ``fps`` itself."""
    f = float(fps)
    near = min(STANDARD, key=lambda r: abs(r - f))
    return near if abs(near - f) <= TOLERANCE * near else f


def rate_message(checks: list[dict[str, Any] | None]) -> str:
    """One line when the scene's rate changes the fill: another common rate filled test gaps cut from the
    animator's keys clearly closer (the server's ``rate`` check, ``motioncore.families.body.gate_rate``). With
    ``filled_at`` the fill used that rate (the add-on's default); else it warns and says how to use it."""
    c = next((c for c in checks if c and c.get("best")), None)
    if c is None:
        return ""
    why = f"on {c['pseudo']} test gaps cut from your keys it fills {c['gain']:.0%} closer than at the scene's {c['fps']:g}"
    if c.get("filled_at"):
        return (f"; filled at {c['filled_at']:g} fps: {why} (your keys stay on their frames; Blender's BVH importer "
                f"leaves the scene at 24 fps unless Update Scene FPS is ticked; untick Best Rate to fill at the scene's)")
    return (f"; WARNING the scene's rate changes this fill: on {c['pseudo']} test gaps cut from your keys it is "
            f"{c['gain']:.0%} closer with the action at {c['best']:g} fps than at the scene's {c['fps']:g}. If the "
            f"action was captured at {c['best']:g} fps (Blender's BVH importer leaves the scene at 24 fps unless "
            f"Update Scene FPS is ticked), set the scene's Frame Rate to {c['best']:g} and fill again")
