"""Where the data cache lives: MOTIONCORE_CACHE, then XDG_CACHE_HOME."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_cache_follows_motioncore_cache_then_xdg(monkeypatch, tmp_path):
    from motioncore.data.cache import cache_root

    monkeypatch.setenv("MOTIONCORE_CACHE", str(tmp_path / "mc"))
    assert cache_root() == tmp_path / "mc"
    monkeypatch.delenv("MOTIONCORE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "motioncore"
