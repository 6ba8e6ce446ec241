"""What the body in-fill's request-time gate did, as one clause of the In-fill report (bpy-free)."""
from __future__ import annotations

from typing import Any


def gate_message(fits: list[dict[str, Any]]) -> str:
    """What the gate did, for the report: where the correction was scaled toward Blender's curve, how much and
    why (its error on pseudo-gaps cut from the animator's own keys)."""
    out = []
    for f in fits:
        if f.get("method") == "none":
            out.append(f"gaps of {f.get('frames', f['length'])}: no keyed stretch to check the model on, used as trained")
        elif f["rot"] < 1.0 or f["root"] < 1.0:
            err = f.get("error") or {}
            why = (f" (on {f['pseudo']} test gaps cut from your keys: model {err['model'][0]:.1f} cm, Blender's "
                   f"curve {err['bezier'][0]:.1f} cm)") if err.get("model") else ""
            kept = "kept Blender's curve" if f["rot"] == 0.0 and f["root"] == 0.0 else \
                f"correction at {f['rot']:.0%} (root {f['root']:.0%})"
            out.append(f"gaps of {f.get('frames', f['length'])}: {kept}{why}")   # the scene's own frames
        pe = f.get("plant_error") or {}
        if not f.get("plant", True) and pe.get("unjudged"):
            out.append(f"gaps of {f.get('frames', f['length'])}: feet not planted ({pe['unjudged']} to test planting on)")
        elif not f.get("plant", True) and pe.get("planted"):
            out.append(f"gaps of {f.get('frames', f['length'])}: feet not planted (on {f['pseudo']} test gaps cut from your keys "
                       f"planting cost error: {pe['unplanted'][0]:.1f} -> {pe['planted'][0]:.1f} cm)")
    return ("; " + "; ".join(out)) if out else ""
