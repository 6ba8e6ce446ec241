"""What one in-fill request is (``Request``), what it returns (``Filled``) and what a model family does with it
(``InfillFamily``: ``fit`` its request-time weights on the clip's own keys, ``fill`` the plan's gaps).

Each in-filling kind names its family class in ``models.kinds`` (``Kind.family``, "module:Class"); ``family_for``
resolves it once per kind, when a model is loaded (the server's loader, ``batch infill``, the evaluations), and the
request carries the instance: ``infill.fill`` calls its methods by name, no hook in between.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import MotioncoreError
from ..models.kinds import hook, spec
from .plan import InfillPlan

__all__ = ["Request", "Filled", "InfillFamily", "family_for"]


@dataclass(frozen=True)
class Filled:
    rotations: np.ndarray  # (S, T, J, 4) local unit quaternions WXYZ
    root: np.ndarray  # (S, T, 3) local translation of the checkpoint's root joint
    known: np.ndarray  # (T, J + 1) the keys used
    filled: np.ndarray  # (T, J + 1) the elements filled
    base_rotations: np.ndarray | None = None  # (S, T, J, 4) infill-body: the Bezier base it corrected
    base_root: np.ndarray | None = None  # (S, T, 3)
    gate: Any = None  # infill-body: the request-time gate (``families.body.gate.Gate``) or None
    plant: dict | None = None  # infill-body: what planting the feet did (``families.body.fill_plant``), None when off
    plan: InfillPlan | None = None  # the request's plan (its per-gap table: ``plan.table()``)
    rate: dict | None = None  # infill-body with ``Request.rate``: the scene-rate check (``families.body.gate_rate``)


@dataclass(frozen=True)
class Request:
    """One in-fill: ``rotations`` (T, J, 4) on the checkpoint's skeleton, ``root`` (T, 3) the local translation of its
    ``root_joint``, ``known`` (T,) or (T, J + 1) bool, at ``fps`` (None: the checkpoint's rate); ``fill`` the elements
    to fill (default every unknown one). The rest as ``infill.fill_clip_at`` documents them. ``rate`` (infill-body
    at a scene rate): "scene" checks whether another rate fills the keys closer and reports it, "best" also fills at
    that rate. ``family``: the model's family (``family_for``, resolved when the model was loaded)."""

    model: Any
    meta: dict
    rotations: Any
    root: Any
    known: Any
    fps: float | None = None
    fill: Any = None
    mirror: bool = False
    order: str = "bisection"
    temperature: float = 0.0
    n_samples: int = 1
    seed: int = 0
    k: int | None = None
    check: Callable[[], None] | None = None
    window: int | None = 80
    object_track: tuple[np.ndarray, np.ndarray] | None = None
    residual: Any = 1.0
    gate: Any = True
    gate_limit: int | None = None
    learn: float | None = None
    plant_feet: bool | str = True
    curve: str | None = None
    rate: str | None = None
    donor: bool = False  # infill-body: the clip's own keyed motion offered per gap, the gate choosing (families.body.fill_donor)
    family: Any = field(default=None, compare=False)


class InfillFamily(Protocol):
    """An in-filling family: ``checks_clip`` (the plan validates the whole clip against the checkpoint), ``own_rate``
    (a clip faster than the model is filled at its own rate), ``fit`` (the request-time weights on the clip's own
    keys: the body's gate; None where the family has none), ``fill`` (the plan's gaps, any route) and ``learn`` (the
    request-time learning, ``infill.learn``)."""

    checks_clip: bool
    own_rate: bool

    def fit(self, request: Request, plan: InfillPlan) -> Any: ...

    def fill(self, request: Request, plan: InfillPlan) -> Filled: ...

    def learn(self, request: Request, **budget: Any) -> Any: ...   # ``infill.learn``: Learn This Action


_RESOLVED: dict[str, InfillFamily] = {}


def family_for(meta: dict, model: Any = None) -> InfillFamily:
    """The family instance of a checkpoint's kind (``meta["kind"]``, else the network's own ``kind``), resolved from
    ``models.kinds`` once per kind (at load)."""
    kind = spec(meta) or spec(getattr(model, "kind", None))
    if kind is None or kind.family is None:
        raise MotioncoreError(f"model kind {meta.get('kind')!r} does not fill (no in-fill family)")
    if kind.kind not in _RESOLVED:
        _RESOLVED[kind.kind] = hook(kind.family)()
    return _RESOLVED[kind.kind]
