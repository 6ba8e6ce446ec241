"""The suite finds the mocap through the `raw` fixtures, and with the mocap present a skip for any other
reason than no Blender / no GPU fails the run (tests/conftest.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from helpers.cli import ROOT, src_env

pytestmark = pytest.mark.usefixtures("one_thread")


def test_no_test_hard_codes_the_data_cache():
    """Tests find the unpacked mocap through the `raw` fixtures (cache_root(), unpacked on demand)."""
    hits = [f"{f.name}:{i}" for f in sorted((ROOT / "tests").rglob("*.py")) if f.name != "test_suite_skips.py"
            for i, line in enumerate(f.read_text().splitlines(), 1)
            if "motioncore/raw" in line or '"motioncore" / "raw"' in line]
    assert hits == []


@pytest.mark.parametrize("reason, status", [("MOTIONCORE_SKIP_BLENDER=1", 0),
                                            ("the archive is not unpacked in the data cache", 1)])
def test_with_the_mocap_present_only_blender_or_gpu_skips_pass(tmp_path, reason, status):
    """The session check of tests/conftest.py, run on a one-test suite beside a copy of it."""
    import shutil

    from motioncore.data import data_root

    if not data_root().is_dir():
        pytest.skip(f"needs the mocap (folder {data_root()} absent; set MOTIONCORE_DATA)")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text(f"import pytest\n\n\ndef test_one():\n    pytest.skip({reason!r})\n")
    env = {**src_env(), "MOTIONCORE_DATA": str(data_root())}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == status, p.stdout[-2000:] + p.stderr[-2000:]
    assert ("skipped although the mocap is present" in p.stderr) == bool(status)


def test_without_the_mocap_a_test_that_reaches_for_it_skips_with_one_line(tmp_path):
    """A fresh clone has no ../shared: a test that reads the captures without declaring it (a ``DataError``, as
    `motioncore.data` raises it) skips naming what it needed, a test that declares it (`needs_data`) skips too, other
    failures still fail, and the run ends with one line of how many ran and why the others skipped."""
    import shutil

    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_three.py").write_text(
        "from conftest import needs_data\n"
        "from motioncore.data.cache import data_root, unpack\n\n\n"
        "def test_reads_it():\n    unpack(data_root() / 'cmu' / 'x.tar.xz')\n\n\n"
        "@needs_data\ndef test_declares_it():\n    pass\n\n\n"
        "def test_plain():\n    pass\n\n\n"
        "def test_breaks():\n    raise FileNotFoundError('not the mocap')\n")
    env = {**src_env(), "MOTIONCORE_DATA": str(tmp_path / "no-mocap-here")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out   # test_breaks
    assert "1 failed, 1 passed, 2 skipped" in out, out
    assert "needs the mocap (" in out and "x.tar.xz not found" in out, out
    assert "motioncore: 2 ran, 2 skipped: 2 need the mocap" in out, out
