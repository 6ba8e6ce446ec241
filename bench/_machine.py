"""What every benchmark shares (bench scripts run as `python bench/NAME.py`): the machine line it prints and the
median wall time of a call."""
from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def cpu_name() -> str:
    """platform.processor(), or the model name from /proc/cpuinfo where that is empty (Linux)."""
    name = platform.processor()
    if not name and Path("/proc/cpuinfo").exists():
        lines = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
        name = lines[0].split(":", 1)[1].strip() if lines else ""
    return name or "unknown CPU"


def median_time(fn: Callable[[], object], calls: int) -> float:
    """Median seconds of ``calls`` calls of ``fn`` after one warm-up call (which fills any cache)."""
    fn()
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)
