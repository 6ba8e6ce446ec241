"""Servers for tests: one in a thread of this process (`thread_server`), one in a subprocess (`spawn`, `stop`),
a bare DEALER speaking the protocol (`Raw`), a process's resident memory (`rss_kb`)."""
from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import zmq
from motioncore_server.app import Server
from motioncore_server.config import ServerConfig
from motioncore_server.registry import Registry

from motioncore.wire import protocol as P
from motioncore.wire.client import read_connection_file, secure_socket

X = np.linspace(-1, 1, 342, dtype=np.float32)   # the debug model's input


@contextlib.contextmanager
def thread_server(folder: Path, registry: Registry | None = None, **cfg):
    """A started server serving from a thread; stopped (and checked stopped) on exit."""
    cfg.setdefault("debug", True)
    conn = folder / f"server-{uuid.uuid4().hex[:8]}.json"
    srv = Server(ServerConfig(port=0, connection_file=conn, **cfg), registry=registry)
    srv.start()
    t = threading.Thread(target=srv.serve, name="test-server", daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.request_stop(force=True)
        t.join(10)
        assert not t.is_alive(), "server thread did not stop"


class Raw:
    """A bare DEALER speaking the protocol, for pipelining and crafted messages."""

    def __init__(self, conn: Path, key: str | None = None, **opts):
        self.info = read_connection_file(conn)
        self.codec = P.Codec(key or self.info["key"], P.CLIENT_LIMITS)
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        for k, v in opts.items():
            self.sock.setsockopt(getattr(zmq, k), v)
        secure_socket(self.sock, self.info["key"])   # the transport token of the real key
        self.sock.connect(f"tcp://127.0.0.1:{self.info['port']}")

    def send(self, type: str, content=None, arrays=None) -> str:
        rid = P.new_id()
        self.sock.send_multipart(self.codec.encode(type, content, arrays, id=rid), copy=False)
        return rid

    def recv(self, timeout: float = 10.0) -> P.Message:
        if not self.sock.poll(int(timeout * 1000)):
            raise TimeoutError("no message")
        return self.codec.decode(self.sock.recv_multipart())

    def until_final(self, rid: str, timeout: float = 10.0) -> tuple[list[P.Message], P.Message]:
        """(progress messages, final) for request ``rid``; other messages are skipped."""
        prog = []
        end = time.monotonic() + timeout
        while True:
            m = self.recv(max(0.01, end - time.monotonic()))
            if m.parent_id != rid:
                continue
            if m.is_final:
                return prog, m
            prog.append(m)

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def spawn(conn: Path, log: Path, *args: str) -> tuple[subprocess.Popen, dict]:
    """``python -m motioncore_server --debug`` in a subprocess; returns once it listens."""
    with log.open("a") as err:
        p = subprocess.Popen([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--debug",
                              *args], stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline()
    if not line:
        p.wait(10)
        raise RuntimeError(f"server did not start:\n{log.read_text()[-3000:]}")
    return p, json.loads(line)


def stop(p: subprocess.Popen) -> int:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        return p.wait(15)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")
