"""The one registry of model kinds: each family registers here once, as one ``Family`` record.

A checkpoint's JSON names its ``kind``; everything that acts on a kind asks this module instead of comparing names:
which config and net to build (``models.registry``), which command runs it (``task``), which request types the
server serves and with which loader, whether it answers deterministically (one answer, its Bezier base beside
it), whether it learns at request time, how ``motioncore train`` and ``motioncore eval`` reach it, and which
bundled model is the default where none is named. Classes and hooks are named by dotted path (``"module:attr"``) and
imported on first use (``hook``), so this low layer never imports the families it lists.

Outside this module and ``families/``, no code names a kind (tests/repo/test_kind_names.py counts them).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Kind", "Family", "FAMILIES", "KINDS", "spec", "kinds_for", "family", "family_kinds", "default_model",
           "defaults", "hook", "controller", "trainable", "recipe_family"]


@dataclass(frozen=True)
class Kind:
    """One checkpoint kind and what every layer needs to know of it."""

    kind: str                      # the checkpoint JSON's "kind"
    config: str                    # "module:Class" of its frozen config dataclass
    model: str                     # "module:Class" of its torch module
    task: str                      # the command family that runs it: infill, controller, style or judge
    serves: tuple[str, ...] = ()   # the server's request types (empty: not served)
    loader: str | None = None      # the server's loader for it: infill, controller or style
    deterministic: bool = False    # one answer (temperature and samples repeat it), its Bezier base beside it
    family: str | None = None      # "module:Class" of its in-filling family (``infill.family.InfillFamily``), resolved
    #                                once when the model is loaded (``infill.family.family_for``)
    learn: str | None = None       # request-time learning on the clip's own keys: "adapt" (a request) or "learn" (a field)
    plain_mlp: bool = False        # a controller net that takes the phase as a plain input (no modes)
    gated: bool = False            # a controller whose gating network blends expert weights (MANN; no phase output)
    modes: tuple[str, ...] = ()    # a controller's runtime modes (empty: outputs only)
    base: str | None = None        # the kind of the unadapted base a style model is trained and judged beside

    def __post_init__(self) -> None:
        for f in ("config", "model"):
            if ":" not in getattr(self, f):
                raise ValueError(f"{self.kind}.{f}: expected 'module:attr', got {getattr(self, f)!r}")
        if self.task not in TASKS:
            raise ValueError(f"{self.kind}.task: one of {TASKS}, got {self.task!r}")


@dataclass(frozen=True)
class Family:
    """One model family (``families/<package>/``): its kinds, its training and evaluation entry points, and the
    bundled models it makes the default for a use (``defaults``: use -> bundled name)."""

    package: str                              # families/<package>/
    kinds: tuple[Kind, ...]
    train: str | None = None                  # "module:function" behind ``motioncore train <train_name>`` (args -> exit code)
    train_name: str | None = None             # the name ``motioncore train`` takes
    train_checks: bool = False                # the CLI checks --data, --config and --out before ``train`` runs
    baseline: str | None = None               # ``--baseline``: the comparison net the controllers' recipe trains
    train_data: str | None = None             # the registered set the controllers' recipe trains on by default
    defaults: tuple[tuple[str, str], ...] = ()  # (use, bundled model): infill, infill.variations, infill.hands, demo.infill


TASKS = ("infill", "controller", "style", "judge")
_F = "motioncore.families."
FAMILIES: tuple[Family, ...] = (
    Family("pfnn", (Kind("pfnn", _F + "pfnn.model:PFNNConfig", _F + "pfnn.model:PFNN", "controller",
                         serves=("pfnn.rollout",), loader="controller",
                         modes=("outputs", "weights", "constant", "linear", "cubic")),
                    Kind("phase-mlp", _F + "pfnn.model_baselines:PhaseMLPConfig", _F + "pfnn.model_baselines:PhaseMLP",
                         "controller", serves=("pfnn.rollout",), loader="controller", plain_mlp=True)),
           train_name="pfnn", train_checks=True, baseline="phase-mlp", train_data="bandai"),
    Family("mann", (Kind("mann", _F + "mann.model:MANNConfig", _F + "mann.model:MANN", "controller",
                         serves=("mann.rollout",), loader="controller", gated=True, modes=("outputs", "weights")),),
           train_name="mann", train_checks=True, baseline="mann-1", train_data="dog"),
    Family("anyorder", (Kind("anyorder", _F + "anyorder.model:AnyOrderConfig", _F + "anyorder.model:AnyOrderTransformer",
                             "infill", serves=("infill",), loader="infill",
                             family=_F + "anyorder.fill:AnyOrderFamily"),),
           train=_F + "anyorder.train:train_anyorder_from_args", train_name="anyorder", train_checks=True,
           defaults=(("infill.variations", "anyorder-body"),)),
    Family("body", (Kind("infill-body", _F + "body.model:InfillBodyConfig", _F + "body.model:InfillBody", "infill",
                         serves=("infill", "adapt"), loader="infill", deterministic=True, learn="adapt",
                         family=_F + "body.fill_clip:BodyFamily"),),
           train=_F + "body.train_loop:train_infill_body_from_args", train_name="infill-body",
           defaults=(("infill", "infill-body"), ("demo.infill", "infill-body"))),
    Family("hands", (Kind("infill-hands", _F + "hands.model:InfillHandsConfig", _F + "hands.model:InfillHands",
                          "infill", serves=("infill",), loader="infill", deterministic=True, learn="learn",
                          family=_F + "hands.fill_clip:HandsFamily"),),
           train=_F + "hands.train:train_from_args", train_name="infill-hands",
           defaults=(("infill.hands", "infill-hands"), ("infill.hands.variations", "anyorder-hands"))),
    Family("style", (Kind("learnet-pfnn", _F + "style.model:LearnetPFNNConfig", _F + "style.model:LearnetPFNN", "style",
                          serves=("style.adapt",), loader="style", base="pfnn"),
                     Kind("style-judge", _F + "style.model_judge:StyleJudgeConfig", _F + "style.model_judge:StyleJudge",
                          "judge")),
           defaults=(("style", "learnet-biped"), ("style.base", "pfnn-style-base"), ("style.judge", "style-judge"))),
)
KINDS: dict[str, Kind] = {k.kind: k for f in FAMILIES for k in f.kinds}


def spec(kind_or_meta: str | dict[str, Any] | None) -> Kind | None:
    """The record of a kind (or of a checkpoint's metadata, by its ``kind``); None for an unknown one."""
    kind = kind_or_meta.get("kind") if isinstance(kind_or_meta, dict) else kind_or_meta
    return KINDS.get(str(kind)) if kind is not None else None


def kinds_for(task: str) -> tuple[str, ...]:
    """The kinds a command family runs (``task``: infill, controller, style, judge), in registration order."""
    return tuple(k.kind for k in KINDS.values() if k.task == task)


def family(kind_or_meta: str | dict[str, Any] | None) -> str | None:
    """The package of the family a kind (or a checkpoint's metadata) belongs to (``families/<package>/``)."""
    kind = kind_or_meta.get("kind") if isinstance(kind_or_meta, dict) else kind_or_meta
    return next((f.package for f in FAMILIES for k in f.kinds if k.kind == kind), None)


def family_kinds(package: str) -> tuple[str, ...]:
    """The kinds of one family, its main kind first."""
    return next(tuple(k.kind for k in f.kinds) for f in FAMILIES if f.package == package)


def controller(kind: str | None) -> bool:
    return (k := spec(kind)) is not None and k.task == "controller"


def default_model(use: str) -> str:
    """The bundled model for a use (``infill``, ``infill.variations``, ``infill.hands``, ``demo.infill``)."""
    for f in FAMILIES:
        for u, name in f.defaults:
            if u == use:
                return name
    raise KeyError(f"no family names a default model for {use!r}")


def defaults() -> dict[str, str]:
    """Every use -> its default bundled model (the server lists this for clients)."""
    return {u: name for f in FAMILIES for u, name in f.defaults}


def recipe_family(name: str) -> Family | None:
    """The family whose ``motioncore train`` name, kind or ``--baseline`` net ``name`` is (controllers' recipe)."""
    return next((f for f in FAMILIES if name in (f.train_name, f.baseline, *(k.kind for k in f.kinds))), None)


def trainable() -> dict[str, Family]:
    """``motioncore train`` NAME -> its family, in registration order."""
    return {f.train_name: f for f in FAMILIES if f.train_name}


def hook(path: str) -> Callable[..., Any] | type:
    """Import ``"module:attr"`` and return the attribute."""
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)
