"""The feet in the In-fill's report: foot skate (``vendor.feet`` = the library's core/feet.py) of what was written
over the filled frames and the key on either side, of Blender's curve of your keys there, and of your fully keyed
frames (pairs of consecutive ones: how much the feet slide where you keyed every frame, the capture's own),
each foot and toe bone's ground taken from your fully keyed frames. Pure Python + numpy.

Positions come from the rig's rest heads and the rotations the add-on sends and writes (model axes, the rig's rest
as identity, `rigmap.to_model`), composed down each bone's nearest keyed ancestor, the root bone's head at its
translation; bones above the root stay at rest. Legend: T frames, B bones.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor import feet, topology
from ..vendor.axes import z_up_to_y_up
from ..vendor.gaps import MODEL_FPS
from ..vendor.quat_np import quat_apply
from ..vendor.rest import rig_globals


def rig_positions(rotations: np.ndarray, root: np.ndarray, heads: np.ndarray, up: Sequence[int], root_bone: int,
                  root_parent: int) -> np.ndarray:
    """(T, B, 3) bone heads in armature units, Y-up: ``rotations`` (T, B, 4) as sent, ``root`` (T, 3) the root
    bone's head relative to its parent (Z-up, `rigclip.root_in_parent`), ``heads`` (B, 3) rest heads (Z-up)."""
    q = np.asarray(rotations, np.float64)
    d = rig_globals(q, up)
    h = z_up_to_y_up(heads)
    rel = z_up_to_y_up(root)
    T, B = q.shape[:2]
    p = np.zeros((T, B, 3))
    for b in range(B):
        u = up[b]
        if b == root_bone:
            p[:, b] = rel if root_parent < 0 else p[:, root_parent] + quat_apply(d[:, root_parent], rel)
        elif u < 0:
            p[:, b] = h[b]
        else:
            p[:, b] = p[:, u] + quat_apply(d[:, u], np.broadcast_to(h[b] - h[u], (T, 3)))
    return p


def rig_feet(bones: Sequence[str], heads: np.ndarray, parents: Sequence[int], poses: np.ndarray) -> list[int]:
    """The rig's foot and toe bones by topology (`vendor.topology`, left and right from ``poses`` (F, B, 3), Y-up);
    [] for a rig without two legs (a hand)."""
    h = z_up_to_y_up(heads)
    offsets = np.array([h[b] - h[p] if p >= 0 else h[b] for b, p in enumerate(parents)])
    body = topology.find_body(np.asarray(parents), offsets, list(bones), poses)
    if body is None or not body.parts.get("l_leg_end") or not body.parts.get("r_leg_end"):
        return []
    return [j for leg in topology.foot_joints(body) for j in leg]


def skate_figures(rig: Mapping[str, Any], segments: Sequence[Mapping[str, Any]], rotations: Sequence[np.ndarray],
                  roots: Sequence[np.ndarray], fps: float, cm_per_unit: float) -> dict[str, float] | None:
    """{"filled", "bezier", "keyed"} cm/s (NaN where no foot is near its ground), pooled over the segments; None
    when the rig has no feet. ``rotations`` / ``roots``: what was written per segment ((T, B, 4), (T, 3))."""
    bones = list(rig["bones"])
    rb = bones.index(rig["root"]) if rig.get("root") in bones else -1
    rp = rig["up"][rb] if rb >= 0 else -1
    sums: dict[str, list[float]] = {k: [0.0, 0.0] for k in ("filled", "bezier", "keyed")}
    found = False
    for g, q, r in zip(segments, rotations, roots, strict=True):
        keyed = np.asarray(g["known"], bool).all(axis=1)
        if keyed.all() or "bezier" not in g:
            continue
        pos = {"filled": rig_positions(q, r, rig["heads"], rig["up"], rb, rp),
               "bezier": rig_positions(g["bezier"], g["bezier_root"], rig["heads"], rig["up"], rb, rp)}
        idx = rig_feet(bones, np.asarray(rig["heads"]), rig["parents"], pos["filled"][::max(1, len(q) // 32)])
        if not idx:
            return None
        found = True
        ref = pos["filled"][keyed] if keyed.sum() >= 2 else pos["filled"]
        ground = feet.ground(ref, idx)
        span = feet.fill_span(keyed)
        for name, frames in (("filled", span), ("bezier", span), ("keyed", keyed)):
            a, b = feet.skate_sums(pos["filled" if name == "keyed" else name], fps, idx, ground, frames,
                                   unit=cm_per_unit)
            sums[name][0] += a
            sums[name][1] += b
    if not found:
        return None
    return {k: (a / b if b > 0 else float("nan")) for k, (a, b) in sums.items()}


def skate_message(figures: Mapping[str, float] | None) -> str:
    """The report's words for `skate_figures`: '' for a rig without feet."""
    if not figures:
        return ""
    bez = f"Blender's curve {figures['bezier']:.0f}" if np.isfinite(figures["bezier"]) else ""
    keyed = f"your keyed frames {figures['keyed']:.0f}" if np.isfinite(figures["keyed"]) else ""
    ref = "; ".join(x for x in (bez, keyed) if x)
    ref = f" ({ref})" if ref else ""
    if not np.isfinite(figures["filled"]):
        return (f"; no foot comes within {feet.SKATE_H:g} cm of the ground your keys stand on in the filled frames"
                + (f" (cm/s: {ref[2:]}" if ref else ""))
    return f"; feet slide {figures['filled']:.0f} cm/s where down in the filled frames{ref}"


def report_feet(rig: Mapping[str, Any], segments: Sequence[Mapping[str, Any]], arrays: Mapping[str, np.ndarray],
                pick: int, fps: float | None, content: Mapping[str, Any]) -> str:
    """The In-fill's report words for the feet (`skate_message`) from the reply as the operator holds it
    (``rotations.i`` / ``root.i``, sample ``pick``; ``content["scale"]``: model cm per rig unit); a failure to
    measure is said, never raised (the keys are the job; this is a figure about them)."""
    try:
        rots = [np.asarray(arrays[f"rotations.{i}"][pick], np.float64) for i in range(len(segments))]
        roots = [np.asarray(arrays[f"root.{i}"][pick], np.float64) for i in range(len(segments))]
        return skate_message(skate_figures(rig, segments, rots, roots, float(fps or MODEL_FPS),
                                           float(content.get("scale") or 1.0)))
    except Exception as e:   # noqa: BLE001  (a figure about the fill never stops the fill)
        return f"; feet not measured ({type(e).__name__}: {e})"
