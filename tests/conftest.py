"""Shared fixtures. Tests that need the real mocap skip only when its folder is absent."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from motioncore.data import data_root

needs_data = pytest.mark.usefixtures("mocap_data")   # checked at run time, never at collection

# With the mocap present, a skip must be one of these (no Blender, no GPU, a machine that forbids mounting);
# `pytest_sessionfinish` fails the run on any other (a cache not unpacked, a hard-coded path).
ALLOWED_SKIPS = ("MOTIONCORE_SKIP_BLENDER", "bpy", "Blender", "Python 3.11", "CUDA", "GPU", "tmpfs")
_SKIPS: list[tuple[str, str]] = []   # (test id, reason) of this session's skips


@pytest.fixture(scope="session")
def mocap_data() -> Path:
    """The mocap folder (``data_root()``); skips, at run time, when it is absent."""
    if not data_root().is_dir():
        pytest.skip(f"{NEEDS_MOCAP} (folder {data_root()} absent; set MOTIONCORE_DATA, README: the captures)")
    return data_root()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``MOTIONCORE_SKIP_BLENDER=1``: every test marked ``blender`` (each one that launches the real bpy) skips."""
    if os.environ.get("MOTIONCORE_SKIP_BLENDER") == "1":
        skip = pytest.mark.skip(reason="MOTIONCORE_SKIP_BLENDER=1")
        for item in items:
            if item.get_closest_marker("blender"):
                item.add_marker(skip)


NEEDS_MOCAP = "needs the mocap"   # every skip for want of the captures starts so (`mocap_data`, `raw`, the hook below)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Without the mocap, a test that reached for it (a ``DataError`` from `motioncore.data`: an archive or a set
    not found) skips with one line naming what it needed, whether it declared the need (`needs_data`, `raw`) or
    not; with the mocap present nothing changes (CI runs them all)."""
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or rep.skipped or data_root().is_dir():
        return
    from motioncore.errors import DataError

    if call.excinfo.errisinstance(DataError):
        first = str(call.excinfo.value).split(". Set MOTIONCORE_DATA")[0]
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0,
                        f"Skipped: {NEEDS_MOCAP} ({first}; set MOTIONCORE_DATA, README: the captures)")


def skip_summary(skips: list[tuple[str, str]]) -> str:
    """One line: how many tests skipped, by reason ("612 skipped: 580 need the mocap, 32 MOTIONCORE_SKIP_BLENDER=1")."""
    kinds: dict[str, int] = {}
    for _, r in skips:
        r = r.removeprefix("Skipped: ")
        k = ("need the mocap" if NEEDS_MOCAP in r else "MOTIONCORE_SKIP_BLENDER=1" if "MOTIONCORE_SKIP_BLENDER" in r
             else r.split(" (")[0][:60])
        kinds[k] = kinds.get(k, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"{len(skips)} skipped" + (f": {parts}" if parts else "")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    ran = sum(len(terminalreporter.stats.get(k, [])) for k in ("passed", "failed", "error", "xfailed", "xpassed"))
    terminalreporter.write_line(f"motioncore: {ran} ran, {skip_summary(_SKIPS)}")


def unexpected_skips(skips: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The skips whose reason names none of `ALLOWED_SKIPS`."""
    return [(t, r) for t, r in skips if not any(a in r for a in ALLOWED_SKIPS)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):   # an expected failure (xfail) is no skip
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPS.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With the mocap present, a skip for any other reason than no Blender / no GPU fails the run."""
    bad = unexpected_skips(_SKIPS) if data_root().is_dir() else []
    if bad:
        print(f"\n{len(bad)} test(s) skipped although the mocap is present ({data_root()}):", file=sys.stderr)
        for t, r in bad:
            print(f"  {t}: {r}", file=sys.stderr)
        if exitstatus == 0:
            session.exitstatus = 1


@pytest.fixture(scope="session")
def raw():
    """``raw("mann_dog/mann_dog_bvh_46clips.tar.xz")``: that archive of the data root unpacked into the data
    cache (``motioncore.data.cache.cache_root()``) on demand, at run time; skips only when it is absent."""
    from motioncore.data.cache import unpack

    def get(rel: str) -> Path:
        archive = data_root() / rel
        if not archive.is_file():
            pytest.skip(f"{NEEDS_MOCAP} ({archive} absent; set MOTIONCORE_DATA, README: the captures)")
        return unpack(archive, progress=False)

    return get


ARCHIVES = {  # short names for `raw_file`
    "bandai2": "bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz",
    "cmu": "cmu_01-03/cmu_bvh_converted_subjects_01-03.tar.xz",
    "hands": "manipnet_hands/manipnet_8takes_hands_objects.tar.xz",
    "dog": "mann_dog/mann_dog_bvh_46clips.tar.xz",
    "lafan1": "lafan1_sample/lafan1_sample.tar.xz",   # evaluation and tests only, never training
}


@pytest.fixture(scope="session")
def raw_file(raw):
    """``raw_file("bandai2", "dataset-2_walk_active_005.bvh")``: the first match of a glob inside an archive
    of `ARCHIVES`, unpacked on demand (`raw`); a missing member of a present archive fails, never skips."""
    def get(key: str, pattern: str) -> Path:
        hits = sorted(raw(ARCHIVES[key]).glob(pattern))
        assert hits, f"no {pattern} in the unpacked {ARCHIVES[key]}"
        return hits[0]

    return get


@pytest.fixture(scope="session")
def bandai_walk(raw_file) -> Path:
    """dataset-2_walk_active_005.bvh (Bandai dataset 2, 30 fps), unpacked on demand."""
    return raw_file("bandai2", "dataset-2_walk_active_005.bvh")


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
