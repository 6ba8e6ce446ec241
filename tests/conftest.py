"""Shared fixtures. Tests that need the real mocap skip only when its folder is absent."""
from __future__ import annotations

import pytest

from motioncore.data import data_root

HAVE_DATA = data_root().is_dir()
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"mocap folder {data_root()} absent (set MOTIONCORE_DATA)")
