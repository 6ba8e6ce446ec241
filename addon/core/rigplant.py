"""Feet planted on the rig itself (the library's ``core.plant``, vendored): after the body in-fill's answer is
applied as a correction of the rig's own curves, the rig's feet are planted again with the rig's own bone
lengths, so a rig of other proportions than the model's does not slide what the server planted.

The rig's pose for it: world rest-to-pose rotations ``D`` (`vendor.rest.rig_globals`, model axes, Y-up) and the
bones' rest heads; a bone's head is its nearest keyed ancestor's plus ``D`` of that ancestor applied to their
rest offset, the root bone's head is sent as the root translation (a root bone without a parent bone only).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor.axes import z_up_to_y_up
from ..vendor.gaps import runs
from ..vendor.topology import find_legs


def rig_legs(names: Sequence[str], model_skeleton: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    """[(thigh, shin, foot, toe or -1)] rig bone indices per leg, left then right: the model's legs by the
    library's one leg finder (`vendor.topology.find_legs`: the hierarchy first, then names), each joint taken to
    the rig bone that maps to it (``names``: the model joint of each rig column); [] if a leg is not mapped."""
    mn = list(model_skeleton["names"])
    col = {n: b for b, n in enumerate(names)}
    out: list[tuple[int, int, int, int]] = []
    for thigh, shin, foot, toe in find_legs(model_skeleton["parents"], np.asarray(model_skeleton["offsets"], float),
                                            mn):
        if any(mn[j] not in col for j in (thigh, shin, foot)):
            return []
        out.append((col[mn[thigh]], col[mn[shin]], col[mn[foot]], col[mn[toe]] if toe >= 0 and mn[toe] in col else -1))
    return out


def plant_rig(rotations: np.ndarray, root: np.ndarray, heads: np.ndarray, up: Sequence[int], root_bone: int,
              legs: list[tuple[int, int, int, int]], known: np.ndarray, todo: np.ndarray, fps: float,
              contacts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rig's (T, B, 4) rotations (model axes, rest as identity) and (T, 3) root translation (Z-up, armature
    units) with the feet planted on the frames ``todo`` (T,) (bool, or the plant's strength per frame from the gate,
    `planted_frames`: 0 not planted); ``known`` (T,) the keyed frames. ``contacts``: the
    server's contact output per leg (T, legs) or per foot (T, feet: each leg's foot, then its toe), bool or
    probabilities, used instead of contacts read from the rig's keys and fill."""
    from ..vendor.plant import Leg, plant_feet

    h = z_up_to_y_up(np.asarray(heads, np.float64))
    pos = np.zeros(rotations.shape[:2] + (3,))
    for b, u in enumerate(up):
        pos[:, b] = h[b] - h[u] if u >= 0 else h[b]
    pos[:, root_bone] = z_up_to_y_up(np.asarray(root, np.float64))
    strength = np.asarray(todo, np.float64)
    pl = plant_feet(list(up), rotations, pos, known, strength > 0, [Leg(*lg) for lg in legs], root_bone, fps,
                    contacts=contacts, strength=strength)
    from ..vendor.axes import y_up_to_z_up

    return pl.rotations, y_up_to_z_up(pl.positions[:, root_bone])


def planted_frames(known: np.ndarray, gate: Sequence[dict[str, Any]], scene_fps: float | None,
                   model_fps: float) -> np.ndarray:
    """(T,) per filled frame the strength of the plant the server's gate kept for its gap's length (the nearest
    fitted length, in model frames; `families.body.fill_plant.judge_plant`): 0 where it planted none, 1 without a
    gate or from a server that sends no strength."""
    out = np.zeros(len(known))
    k = model_fps / float(scene_fps or model_fps)
    for s, e in runs(~np.asarray(known, bool)):
        if not gate:
            out[s:e] = 1.0
            continue
        fit = min(gate, key=lambda g: abs(g["length"] - (e - s) * k))
        out[s:e] = float((fit.get("plant_error") or {}).get("strength", 1.0)) if fit.get("plant", True) else 0.0
    return out


def rig_feet(rc: Mapping[str, Any], known: np.ndarray, names: Sequence[str], info: Mapping[str, Any],
              bones: Sequence[str], ups: Sequence[int], root_bone: str | None, root_parent: int, fps: float | None
              ) -> tuple[int, list[tuple[int, int, int, int]], np.ndarray, np.ndarray] | None:
    """(root bone index, legs, keyed frames, the plant's strength per frame (0: not planted)) for `plant_rig` where
    the server planted feet (its reply's ``plant``) on a rig whose root bone has no parent bone; else None."""
    if not rc.get("plant") or root_parent >= 0 or root_bone is None or root_bone not in bones:
        return None
    legs = rig_legs(names, info["skeleton"])
    if not legs:
        return None
    leg_bones = [b for lg in legs for b in lg[:3]]
    todo = ~known[:, leg_bones].any(1) * planted_frames(known.all(1), rc.get("gate") or [], fps,
                                                        float(info.get("fps") or 30.0))
    return (list(bones).index(root_bone), legs, known.all(1), todo) if (todo > 0).any() else None
