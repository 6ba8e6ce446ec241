"""Headless entry point: one clip per path file with a path controller (``motioncore batch generate``).

    python scripts/batch_generate.py SRC --out DIR [--model pfnn-biped] [--ray | --ray-address ADDR]

Same arguments as ``motioncore batch generate --help``; see docs/batch.md.
"""
from __future__ import annotations

import sys

from motioncore.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["batch", "generate", *sys.argv[1:]]))
