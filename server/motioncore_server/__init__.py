"""motioncore_server: the ZeroMQ inference service (issue 5). Imports motioncore; never imported by it.

Modules: app (socket loop), config (ServerConfig), transport (ZAP admission, bounded reads, held replies),
handlers (request table), workers (pool, queues, micro-batching), registry (lazy model registry),
connection (connection files); ``python -m motioncore_server`` runs it.
Logs are JSON lines on stderr (logger ``motioncore_server``; structured fields go in ``extra={"fields": {...}}``).
"""
from __future__ import annotations

import json
import logging
import sys
import time


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, event, then the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(time.time(), 6), "level": record.levelname.lower(), "event": record.getMessage()}
        out.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "info") -> None:
    """Send the server's log to stderr as JSON lines."""
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(JsonFormatter())
    log = logging.getLogger("motioncore_server")
    log.handlers[:] = [h]
    log.setLevel(level.upper())
    log.propagate = False
