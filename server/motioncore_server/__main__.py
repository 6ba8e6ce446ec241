"""``python -m motioncore_server`` (also ``motioncore serve``): run the motion server until SIGINT/SIGTERM.

Prints one JSON line to stdout once it listens: ``{"connection_file": ..., "endpoint": ..., "server_session": ...}``.
Logs go to stderr as JSON lines.
"""
from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import signal
import sys
from pathlib import Path

from motioncore.errors import MotioncoreError
from motioncore.wire.protocol import Limits, ProtocolError

from . import setup_logging
from .app import Server
from .config import ServerConfig
from .connection import default_connection_file, read_key_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ip", default="127.0.0.1", help="interface to bind (default 127.0.0.1; others need --allow-remote)")
    p.add_argument("--port", type=int, default=None,
                   help="TCP port; 0 = a random free port (default: the connection file's port if it exists, else 0)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --ip (messages are signed, not encrypted)")
    p.add_argument("--connection-file", type=Path, default=None, help=f"default: {default_connection_file()}")
    p.add_argument("--key-file", type=Path, default=None,
                   help="use the key on this file's first line (mode 0600, yours) instead of a fresh one per start")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto: CUDA when available)")
    p.add_argument("--model", type=Path, action="append", default=[], help="extra checkpoint (repeatable)")
    p.add_argument("--models-dir", type=Path, action="append", default=[], help="folder of checkpoints (repeatable)")
    p.add_argument("--workers", type=int, default=2, help="worker threads (default 2)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default cores // (workers + 1))")
    p.add_argument("--queue", type=int, default=64, help="queued requests before 'busy' (default 64)")
    p.add_argument("--no-batching", dest="batching", action="store_false", help="run every rollout step alone")
    p.add_argument("--batch-max", type=int, default=32, help="largest micro-batch (default 32)")
    p.add_argument("--batch-window-ms", type=float, default=1.0, help="micro-batch collection window (default 1 ms)")
    p.add_argument("--max-message-mb", type=float, default=64, help="largest accepted request (default 64 MiB)")
    p.add_argument("--grace", type=float, default=2.0, help="seconds running jobs get to finish at shutdown")
    p.add_argument("--heartbeat-ms", type=int, default=1000, help="ZMTP heartbeat interval (default 1000)")
    p.add_argument("--no-bundled", dest="bundled", action="store_false",
                   help="do not serve motioncore's bundled checkpoints (pfnn-biped, mann-dog)")
    p.add_argument("--debug", action="store_true", help="add debug.* request types and the debug.mlp model")
    p.add_argument("--debug-hidden", type=int, default=512, help="hidden width of the debug.mlp model (default 512)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def config_from_args(a: argparse.Namespace) -> ServerConfig:
    total = int(a.max_message_mb * (1 << 20))
    limits = Limits(max_message_bytes=total, max_buffer_bytes=min(total, Limits().max_buffer_bytes))
    key = read_key_file(a.key_file) if a.key_file is not None else None
    return ServerConfig(ip=a.ip, port=a.port, allow_remote=a.allow_remote, connection_file=a.connection_file, key=key,
                        device=a.device, models=a.model, models_dirs=a.models_dir, workers=a.workers,
                        threads=a.threads, queue=a.queue, batching=a.batching, batch_max=a.batch_max,
                        batch_window_ms=a.batch_window_ms, limits=limits, grace_s=a.grace,
                        heartbeat_ms=a.heartbeat_ms, debug=a.debug, debug_hidden=a.debug_hidden,
                        bundled=a.bundled)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m motioncore_server", description="The motioncore motion server.")
    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    try:
        server = Server(config_from_args(args))
        server.start()
    except (ValueError, OSError, MotioncoreError, ProtocolError) as e:
        print(f"motioncore serve: error: {e}", file=sys.stderr)
        return 2

    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1)   # `kill -USR1 PID` prints every thread's stack to stderr
    server.install_signal_handlers()
    # torch and numpy leave ~10^5 long-lived objects: move them out of the cyclic GC's reach so a full
    # collection does not stall the socket loop for milliseconds (it set the p99 of `health`)
    gc.collect()
    gc.freeze()
    print(json.dumps({"connection_file": str(server.connection_file), "endpoint": server.endpoint,
                      "server_session": server.session}), flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
