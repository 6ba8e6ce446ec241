"""Which layer a library module belongs to, for the layer and architecture tests.

A folder of ``src/motioncore`` is one layer. A family package (``families/<family>/``) is one unit: its modules may
import one another (no cycle), and against the shared layers each module ranks by its role, read from the first
word of its name (``ROLES``); a family's training ranks as ``training``, which sits at the top of the library.
"""
from __future__ import annotations

ROLES = {
    "model": "models", "features": "features",
    "fill": "tasks", "gate": "tasks", "adapt": "tasks", "loss": "tasks", "generate": "tasks",
    "evaluate": "eval", "train": "training",
}


def layer_of(mod: str) -> str:
    """``motioncore.tasks.locomotion`` -> ``tasks``; ``motioncore.families.body.gate`` -> ``tasks`` (its role)."""
    parts = mod.split(".")
    if len(parts) > 3 and parts[1] == "families":
        return ROLES[parts[3].split("_")[0]]
    return parts[1] if len(parts) > 1 else "__init__"


def family_of(mod: str) -> str | None:
    """``motioncore.families.body.gate`` -> ``motioncore.families.body``; None outside the families."""
    parts = mod.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and parts[1] == "families" else None
