"""Layer data: mocap datasets (registry, cache, splits, windows). May import io, core, errors.

Real mocap datasets: registry, content-hash cache, fixed clip-level splits, LaFAN1-style windows."""
from __future__ import annotations

from .cache import cache_root, data_root
from .datasets import Clip, get_spec, load, summary
from .registry import REGISTRY, DatasetSpec
from .windows import lafan1_windows, window_starts

__all__ = ["Clip", "DatasetSpec", "REGISTRY", "cache_root", "data_root", "get_spec", "lafan1_windows",
           "load", "summary", "window_starts"]
