"""The server's settings (``ServerConfig``, checked in ``__post_init__``) and their resolution: the interface to bind
(``resolve_ip``: loopback only unless ``allow_remote``) and the torch device (``resolve_device``).
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import torch

from motioncore.wire.protocol import Limits

SEND_HWM = 1000   # messages queued per peer and direction in libzmq (docs/protocol.md: the one send limit)


def is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def resolve_ip(host: str) -> tuple[str, bool]:
    """(IP literal to bind, whether every address of ``host`` is loopback). Host names such as
    ``localhost`` are resolved (IPv4 preferred)."""
    try:
        return str(ipaddress.ip_address(host)), is_loopback(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as e:
        raise ValueError(f"cannot resolve --ip {host!r}: {e}") from None
    addrs = sorted({i[4][0] for i in infos}, key=lambda a: ":" in a)
    if not addrs:
        raise ValueError(f"--ip {host!r} resolves to no address")
    return addrs[0], all(is_loopback(a) for a in addrs)


@dataclass
class ServerConfig:
    ip: str = "127.0.0.1"                 # interface to bind; anything but loopback needs allow_remote
    port: int | None = None               # None: the connection file's port if it has one, else random
    allow_remote: bool = False            # permit a non-loopback ip (messages are signed, not encrypted)
    connection_file: Path | None = None   # None: motioncore.wire.client.default_connection_file()
    device: str = "auto"                  # auto | cpu | cuda | cuda:N
    models: list[Path] = field(default_factory=list)        # extra checkpoints
    models_dirs: list[Path] = field(default_factory=list)   # folders of checkpoints
    workers: int = 2                      # worker threads (concurrent jobs)
    threads: int | None = None            # torch intra-op threads; None: cores // (workers + 1), at least 1
    queue: int = 64                       # queued jobs before `busy`
    batching: bool = True                 # micro-batch concurrent single-frame rollouts
    batch_max: int = 32                   # largest batch
    batch_window_ms: float = 1.0          # how long a batch waits for company
    limits: Limits = field(default_factory=Limits)
    grace_s: float = 2.0                  # on shutdown, how long running jobs may finish
    heartbeat_ms: int = 1000              # ZMTP heartbeat interval (timeout is 3x)
    debug: bool = False                   # add the debug.* request types and the debug.mlp model
    debug_hidden: int = 512               # hidden width of debug.mlp (benchmarks vary the compute)
    bundled: bool = False                 # register motioncore's bundled checkpoints (lazily); the CLI turns it on
    key: str | None = None                # HMAC key; None: a fresh random one on every start
    send_hwm: int = SEND_HWM              # per-peer libzmq queue (tests lower it to exercise held replies)

    def __post_init__(self) -> None:
        ip, loopback = resolve_ip(self.ip)
        if not loopback and not self.allow_remote:
            raise ValueError(f"refusing to bind {self.ip!r}: only loopback is allowed without --allow-remote")
        self.ip = ip
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        if self.key is not None and not self.key:
            raise ValueError("an explicit key must not be empty")
        for k in ("workers", "queue", "batch_max", "heartbeat_ms", "send_hwm"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.threads is None:
            self.threads = max(1, (os.cpu_count() or 2) // (self.workers + 1))

    def public(self) -> dict:
        """The settings a client may read (``health``, the listening log line): workers, threads, queue, batching."""
        return {"workers": self.workers, "threads": self.threads, "queue": self.queue, "batching": self.batching,
                "batch_max": self.batch_max, "batch_window_ms": self.batch_window_ms,
                "heartbeat_ms": self.heartbeat_ms, "debug": self.debug}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: only {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}")
    return dev
