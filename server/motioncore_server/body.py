"""The body in-fill's request-time learning on the server: the ``adapt`` request (Learn This Action) and the
cache of adapted copies, keyed by a hash of the keys (``motioncore.families.body.adapt.keys_hash``): an ``infill``
with the same keys uses the adapted copy, and the gate is fitted on the pseudo-gaps adapting held out."""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from motioncore.errors import MotioncoreError
from motioncore.families.body.adapt import DEFAULT_SECONDS, DEFAULT_STEPS, keys_hash
from motioncore.infill import Request
from motioncore.infill.learn import learn
from motioncore.wire.protocol import InvalidRequest

__all__ = ["AdaptCache", "adapt_body", "CACHE_SIZE"]

log = logging.getLogger("motioncore_server.body")

CACHE_SIZE = 4  # adapted copies kept (about 7 MB each in float32)


class AdaptCache:
    """Adapted copies by the hash of their keys, least recently used dropped first. Thread-safe."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: str, adapted: Any) -> None:
        with self._lock:
            self._items[key] = adapted
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def for_request(self, model, meta: dict, q: np.ndarray, root: np.ndarray, known: np.ndarray,
                    content: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """(network, fill_clip arguments, reply fields) for an ``infill`` request: the adapted copy when these
        keys were learnt (its gate on the pseudo-gaps adapting held out), else the model."""
        gate = bool(content.get("gate", True))
        plant = content.get("plant_feet", True)
        plant = plant if plant == "judge" else bool(plant)
        curve = content.get("curve")   # the user's keys' interpolation: the gate's blend from the curve they have
        key = keys_hash(q, root, known)
        ad = self.get(key)
        log.info("infill keys", extra={"fields": {"keys": key, "adapted": ad is not None}})
        if ad is None:
            return model, {"gate": gate, "plant_feet": plant, "curve": curve}, {}
        return (ad.model, {"gate": gate, "gate_limit": ad.held or None, "plant_feet": plant, "curve": curve},
                {"adapted": ad.summary()})


def adapt_body(model, meta: dict, name: str, cache: AdaptCache, q: np.ndarray, root: np.ndarray, known: np.ndarray,
               content: dict[str, Any], ctx: Any, family: Any = None) -> tuple[dict, dict]:
    """The ``adapt`` request: Learn This Action on the request's keys (at the model's rate), with progress and
    cancellation; the copy is cached for later ``infill`` requests with the same keys."""
    key = keys_hash(q, root, known)
    seconds = float(content.get("seconds") or DEFAULT_SECONDS)
    hit = cache.get(key)
    if hit is not None and not content.get("again"):
        return {"model": name, "adapted": hit.summary(), "cached": True}, {}

    def progress(frac: float, message: str) -> None:
        ctx.progress(int(round(frac * 100)), 100, message)

    try:
        steps = int(content.get("steps") or DEFAULT_STEPS)   # the budget in steps; ``seconds`` limits it
        ad = learn(Request(model, meta, q, root, known, content.get("fps"), family=family), seconds=seconds,
                   steps=steps, progress=progress, cancel=ctx.cancelled, key=key).detail
    except MotioncoreError as e:
        raise InvalidRequest(str(e)) from None
    ctx.check_cancelled()  # Esc: nothing is cached, the reply is the cancellation
    cache.put(key, ad)
    log.info("adapted", extra={"fields": {"keys": key, "steps": ad.steps, "used": ad.used}})
    return {"model": name, "adapted": ad.summary(), "cached": False}, {}
