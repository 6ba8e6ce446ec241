"""Shared fixtures. Tests that need the real mocap skip only when its folder is absent."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from motioncore.data import data_root

HAVE_DATA = data_root().is_dir()
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"mocap folder {data_root()} absent (set MOTIONCORE_DATA)")


@pytest.fixture(scope="session")
def raw():
    """``raw("mann_dog/mann_dog_bvh_46clips.tar.xz")``: that archive of the data root unpacked into the data
    cache (``motioncore.data.cache.cache_root()``) on demand, at run time; skips only when it is absent."""
    from motioncore.data.cache import unpack

    def get(rel: str) -> Path:
        archive = data_root() / rel
        if not archive.is_file():
            pytest.skip(f"{archive} absent (set MOTIONCORE_DATA)")
        return unpack(archive, progress=False)

    return get


@pytest.fixture
def one_thread():
    """Tiny models: one intra-op thread (on a busy 2-core machine two threads ran ~10x slower)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@contextlib.contextmanager
def server_process(folder: Path, *extra: str):
    """A real `python -m motioncore_server` on a random loopback port with a tmp connection file:
    yields (process, connection file path, first log line as a dict); stops it afterwards."""
    conn, log = folder / "conn.json", folder / "server.log"
    with log.open("a") as err:
        p = subprocess.Popen([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--port", "0",
                              "--device", "cpu", "--workers", "1", "--threads", "1", *extra],
                             stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = p.stdout.readline()
        if not line:
            p.wait(10)
            raise RuntimeError(f"server did not start:\n{log.read_text()[-3000:]}")
        yield p, conn, json.loads(line)
    finally:
        p.terminate()
        try:
            p.wait(15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
