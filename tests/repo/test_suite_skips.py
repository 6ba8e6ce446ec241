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
        pytest.skip(f"mocap folder {data_root()} absent (set MOTIONCORE_DATA)")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text(f"import pytest\n\n\ndef test_one():\n    pytest.skip({reason!r})\n")
    env = {**src_env(), "MOTIONCORE_DATA": str(data_root())}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == status, p.stdout[-2000:] + p.stderr[-2000:]
    assert ("skipped although the mocap is present" in p.stderr) == bool(status)
