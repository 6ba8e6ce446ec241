"""What the body in-fill's request-time gate did, as one clause of the In-fill report, and what Learn This Action did,
as its report (bpy-free)."""
from __future__ import annotations

from typing import Any

CURVE_NAMES = {"linear": "your linear curve", "constant": "your constant (stepped) keys"}


def gate_message(fits: list[dict[str, Any]]) -> str:
    """What the gate did, for the report: where the correction was scaled toward Blender's curve, how much and
    why (its error on pseudo-gaps cut from the animator's own keys); with LINEAR or CONSTANT keys, how the fill
    compares with the curve the user actually has and how far it was blended from it."""
    out = []
    for f in fits:
        n = f.get("frames", f["length"])   # the scene's own frames
        mine = CURVE_NAMES.get(str(f.get("curve") or ""))
        bez = "the Bezier of your keys" if mine else "Blender's curve"
        if f.get("method") == "none":
            out.append(f"gaps of {n}: no keyed stretch to check the model on, used as trained")
        elif f.get("method") == "too-long":
            out.append(f"gaps of {n}: longer than the model takes in one pass (100 frames at 30 fps), kept {bez}")
        elif f["rot"] < 1.0 or f["root"] < 1.0:
            err = f.get("error") or {}
            why = (f" (on {f['pseudo']} test gaps cut from your keys: model {err['model'][0]:.1f} cm, {bez} "
                   f"{err['bezier'][0]:.1f} cm)") if err.get("model") else ""
            kept = f"kept {bez}" if f["rot"] == 0.0 and f["root"] == 0.0 else \
                f"correction at {f['rot']:.0%} (root {f['root']:.0%})"
            out.append(f"gaps of {n}: {kept}{why}")
        ce = f.get("curve_error") or {}
        if mine and ce.get("curve"):
            b = float(f.get("blend", 1.0))
            how = "the model's fill" if b == 1.0 else f"kept {mine}" if b == 0.0 else \
                f"{b:.0%} of the way from {mine} to the model's fill"
            out.append(f"gaps of {n}: {how} (on {f['pseudo']} test gaps cut from your keys: fill "
                       f"{ce['fill'][0]:.1f} cm / {ce['fill'][1]:.1f} deg, {mine} {ce['curve'][0]:.1f} cm / "
                       f"{ce['curve'][1]:.1f} deg)")
        pe = f.get("plant_error") or {}
        if not f.get("plant", True) and pe.get("unjudged"):
            out.append(f"gaps of {n}: feet not planted ({pe['unjudged']} to test planting on)")
        elif not f.get("plant", True) and pe.get("planted"):
            out.append(f"gaps of {n}: feet not planted (on {f['pseudo']} test gaps cut from your keys "
                       f"planting cost error: {pe['unplanted'][0]:.1f} -> {pe['planted'][0]:.1f} cm, "
                       f"{pe['unplanted'][1]:.1f} -> {pe['planted'][1]:.1f} deg)")
        elif f.get("plant", True) and 0.0 < float(pe.get("strength", 1.0)) < 1.0:
            out.append(f"gaps of {n}: feet planted at {float(pe['strength']):.0%} strength (on {f['pseudo']} test "
                       "gaps cut from your keys a full plant cost error)")
    return ("; " + "; ".join(out)) if out else ""


def adapt_message(content: dict[str, Any]) -> str:
    """What Learn This Action did, for its report (the server's ``adapted``): steps and seconds, the held-out test
    gaps' error before and after, and whether In-fill uses the learnt copy, or why not (a time limit that stopped it
    under its minimum of steps, no gain on the held-out gaps, or too short an action to hold some back)."""
    ad = content.get("adapted") or {}
    if content.get("cached"):
        return "this action is learnt already (same keys): In-fill uses it"
    before = sum(ad.get("before_cm", {}).values())
    after = sum(ad.get("after_cm", {}).values())
    judged = f": test-gap error {before:.2f} -> {after:.2f} cm ({ad.get('held', 0)} held out)" if before else ""
    if not ad.get("used", True) and ad.get("steps", 0) < ad.get("min_steps", 0):   # too short for this machine
        return f"learnt for {ad['seconds']:.0f} s ({ad['steps']} steps){judged}: {ad['why']}; shipped model kept"
    if not ad.get("used", True):
        return (f"learnt for {ad.get('seconds', 0):.0f} s ({ad.get('steps', 0)} steps){judged}, " + (
            "which did not help" if ad.get("before_cm") else "but the action is too short to hold some keys "
            "back and check it") + ": In-fill keeps the shipped model" + ("" if before else " (key more frames)"))
    return (f"learnt this action in {ad.get('seconds', 0):.0f} s ({ad.get('steps', 0)} steps){judged}; "
            "In-fill uses it until the keys change")
