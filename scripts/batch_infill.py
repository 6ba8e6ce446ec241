"""Headless entry point: fill dropped frames and marked gaps in a folder of clips (``motioncore batch infill``).

    python scripts/batch_infill.py SRC --out DIR [--frozen N] [--gaps gaps.json] [--ray | --ray-address ADDR]

Same arguments as ``motioncore batch infill --help``; see docs/batch.md.
"""
from __future__ import annotations

import sys

from motioncore.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["batch", "infill", *sys.argv[1:]]))
