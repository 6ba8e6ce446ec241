"""Headless entry point: retarget a folder of clips onto one skeleton (``motioncore retarget``).

    python scripts/batch_retarget.py SRC --target T.bvh --out DIR [--contacts] [--format fbx] [--ray]

Same arguments as ``motioncore retarget --help``; see docs/batch.md.
"""
from __future__ import annotations

import sys

from motioncore.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["retarget", *sys.argv[1:]]))
