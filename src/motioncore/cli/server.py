"""The ``motioncore ping`` and ``motioncore serve`` commands: the server's latency from the client's side,
and the server itself (run as its own module: motioncore never imports the server package)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from ..wire import protocol as P
from ..wire.client import ENV_CONNECTION_FILE, Client, default_connection_file


def ping(connection_file: str | os.PathLike | None = None, n: int = 10, timeout: float = 5.0) -> dict[str, Any]:
    """Send ``health`` n times; round-trip p50/p99 in microseconds plus the server's hello fields."""
    with Client(connection_file, timeout=timeout) as c:
        server = c.hello()
        times = []
        for _ in range(max(1, n)):
            t0 = time.perf_counter_ns()
            c.health()
            times.append((time.perf_counter_ns() - t0) / 1000)
    return {"n": len(times), "p50_us": round(float(np.percentile(times, 50)), 1),
            "p99_us": round(float(np.percentile(times, 99)), 1), "server": server}


def _cmd_ping(args: argparse.Namespace) -> int:
    try:
        print(json.dumps(ping(args.connection_file, args.n, args.timeout)))
    except (P.ProtocolError, OSError) as e:
        print(f"motioncore: error: ping: {e}", file=sys.stderr)
        return 2
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    # motioncore never imports the server package: run it as its own module with the same arguments.
    argv = [sys.executable, "-m", "motioncore_server", *args.server_args]
    if os.name == "posix":
        os.execv(sys.executable, argv)  # the server becomes this process: signals reach it directly
    return subprocess.call(argv)


def add_subcommands(subparsers: Any) -> None:
    """Add ``ping`` and ``serve`` to the ``motioncore`` command's subparsers."""
    p = subparsers.add_parser("ping", help="send health requests to the motion server; print latency JSON")
    p.add_argument("--connection-file", help=f"default: ${ENV_CONNECTION_FILE} or {default_connection_file()}")
    p.add_argument("-n", type=int, default=10, help="number of health requests (default 10)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per request (default 5)")
    p.set_defaults(func=_cmd_ping)
    # every argument goes through untouched to `python -m motioncore_server` (try `motioncore serve --help`)
    s = subparsers.add_parser("serve", help="run the motion server (same arguments as python -m motioncore_server)",
                              add_help=False, prefix_chars="\x00")
    s.add_argument("server_args", nargs="*", help="passed to the server as they are (motioncore serve --help "
                   "lists them: --ip, --port, --device, --connection-file, ...)")
    s.set_defaults(func=_cmd_serve)
