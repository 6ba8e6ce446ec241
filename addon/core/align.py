"""One path from a rig to a model's skeleton and back, for every operator (plain numpy, no bpy): bones mapped by
the library's topology (`rigmap.auto_map` with the hierarchy: `vendor.topology`), poses carried by the library's
rest alignment read from the motion (`vendor.rest`, the library's retarget/rest.py). In-fill and Learn This
Action go this way in `requests.infill_segments_job`; Walk Along Path and Walk in Example's Style through
:func:`to_model` / :func:`to_rig` here.

Rig poses are pose rotations in each bone's own rest frame (WXYZ, as Blender); ``offsets`` (bone ->
`rigmap.rest_offset`) carry them to rest-relative rotations in the model's Y-up axes and back.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..vendor import rest
from ..vendor.axes import z_up_to_y_up
from ..vendor.quat_np import IDENT
from . import rigmap


def plan(bones: Sequence[str], parents: Sequence[int], heads: np.ndarray, model: Mapping[str, Any],
         rig_preset: str | None = None, overrides: Mapping[str, str] | None = None,
         sample: np.ndarray | None = None) -> dict[str, Any]:
    """The map and the alignment of a rig (``bones`` parents first, ``parents``, rest ``heads`` (B, 3) in
    armature space) to ``model`` {"names", "parents", "offsets", "convention" (optional)}; ``sample`` (N, B, 4)
    rest-relative rig locals in model axes to match the model's twist convention on (None: no twist).
    Returns the alignment (`vendor.rest.alignment`) with ``mapping`` (model joint -> bone) and ``unmapped``."""
    names = list(model["names"])
    off = model.get("offsets")
    off = np.zeros((len(names), 3)) if off is None or not len(off) else np.asarray(off, np.float64).reshape(-1, 3)
    rmap = rigmap.auto_map(list(bones), names, rig_preset=rig_preset, overrides=overrides, rig_parents=parents,
                           rig_heads=heads, model_parents=model["parents"], model_offsets=off)
    col = {b: i for i, b in enumerate(bones)}
    cols = [col.get(rmap.mapping.get(j, ""), -1) for j in names]
    conv = model.get("convention")
    sk = {"names": names, "parents": [int(p) for p in model["parents"]], "offsets": off,
          "convention": None if conv is None else np.asarray(conv, np.float64)}
    al = rest.alignment(sk, cols, z_up_to_y_up(heads), [int(p) for p in parents], sample)
    return {**al, "mapping": dict(rmap.mapping), "unmapped": list(rmap.unmapped)}


def rig_locals(pose: np.ndarray, bones: Sequence[str], offsets: Mapping[str, np.ndarray] | None) -> np.ndarray:
    """(T, B, 4) pose rotations (bone frames) -> rest-relative locals in model axes (`rigmap.to_model`)."""
    p = np.asarray(pose, np.float64)
    return np.stack([rigmap.to_model(p[:, b], (offsets or {}).get(n)) for b, n in enumerate(bones)], axis=1)


def to_model(pose: np.ndarray, bones: Sequence[str], offsets: Mapping[str, np.ndarray] | None,
             al: dict[str, Any]) -> np.ndarray:
    """(T, B, 4) a rig's pose rotations -> (T, J, 4) the model's local rotations (`rest.rig_to_model`)."""
    return rest.rig_to_model(rig_locals(pose, bones, offsets), al)[0]


def to_rig(q: np.ndarray, bones: Sequence[str], offsets: Mapping[str, np.ndarray] | None,
           al: dict[str, Any]) -> np.ndarray:
    """(T, J, 4) the model's local rotations -> (T, B, 4) pose rotations (bone frames) of the mapped bones' poses
    that point every mapped bone as the model's (`rest.model_to_rig`; unmapped bones at rest)."""
    q = np.asarray(q, np.float64)
    T, B = q.shape[0], len(bones)
    loc = rest.model_to_rig(q, np.tile(IDENT, (T, B, 1)), np.ones((T, B), bool), al)
    return np.stack([rigmap.to_rig(loc[:, b], (offsets or {}).get(n)) for b, n in enumerate(bones)], axis=1)
