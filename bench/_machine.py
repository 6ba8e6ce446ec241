"""The machine line every benchmark prints (bench scripts run as `python bench/NAME.py`)."""
from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    """platform.processor(), or the model name from /proc/cpuinfo where that is empty (Linux)."""
    name = platform.processor()
    if not name and Path("/proc/cpuinfo").exists():
        lines = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
        name = lines[0].split(":", 1)[1].strip() if lines else ""
    return name or "unknown CPU"
