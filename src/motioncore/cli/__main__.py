"""``python -m motioncore.cli ...``: the `motioncore` command."""
from __future__ import annotations

import sys

from .main import main

sys.exit(main())
