"""Issue 26: what a newcomer hits (wrong skeletons, threads, bad inputs, case of .BVH, skipped tests,
broken pipes, long paths, resampling). One test (or a few) per item of the issue."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from motioncore.cli import main as cli_main

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    """The command's exit code, whether argparse exits or the command returns."""
    try:
        return cli_main.main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "server")])}


# ---------------------------------------------------------------------------------------------- item 6
def test_closed_stdout_is_quiet():
    """`motioncore models | head -1` where head has already gone: exit 0 or 141, nothing on stderr."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write: every write is EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "motioncore.cli", "models"], stdout=w, stderr=subprocess.PIPE,
                           env=_env(), text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode in (0, 141), p.stderr
    assert p.stderr == ""
