"""The one request-time learning: Learn This Action on the clip's own keys (``learn(request, ...)``), done by the
model's family (``InfillFamily.learn``). The body in-fill fine-tunes a copy on pseudo-gaps at the model's rate and
holds some out for the gate (``families.body.adapt``); the hand in-fill learns the take on pseudo-gaps shaped like
its finger gaps and fits its gate on them (``families.hands.gate.learn_gate``). Either way the result (``Learnt``)
is the network to fill with and the request fields it sets; the server caches it by the keys (``keys_hash``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .family import Request, family_for

__all__ = ["Learnt", "learn"]


@dataclass(frozen=True)
class Learnt:
    """What learning gave: the network to fill with, the ``Request`` fields it sets (the body: ``gate_limit``, the
    gate fitted on the pseudo-gaps learning held out; the hands: ``residual``, its gate), and its summary (the
    reply's ``adapted``). ``detail``: the family's own record (``families.body.adapt.Adapted``)."""

    model: Any
    fields: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    detail: Any = None


def learn(request: Request, seconds: float | None = None, steps: int | None = None,
          progress: Callable[[float, str], None] | None = None, cancel: Callable[[], bool] | None = None,
          key: str | None = None) -> Learnt:
    """Learn ``request``'s clip (its keys at its rate) for ``steps`` learning steps or ``seconds`` of wall time, by
    its family; ``progress(fraction, message)``, ``cancel()`` True stops early; ``key``: the cache key the caller
    holds."""
    family = request.family or family_for(request.meta, request.model)
    return family.learn(request, seconds=seconds, steps=steps, progress=progress, cancel=cancel, key=key)
