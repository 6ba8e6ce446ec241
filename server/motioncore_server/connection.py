"""Connection files: how clients find the server and its key (as Jupyter's kernel-*.json).

A connection file is JSON ``{transport, ip, port, key, signature_scheme, server_session, pid}`` written
atomically with mode 0600 inside a 0700 folder (``motioncore.wire.client.runtime_dir()`` by default).

Every start gets a fresh key (unless one is passed explicitly) and a new ``server_session``, so a message
captured from an earlier run is never accepted again. A server started on an existing file reuses only
its port (clients of a crashed server re-read the file on their next timeout and reconnect), and only if
the file is trusted: owned by this user and closed to group and others; otherwise it refuses to start and
says how to fix it. A file that names a live server (its pid exists and its port accepts connections) is
never taken over. On shutdown the server removes the file only if it still names its own session.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import tempfile
import uuid
from pathlib import Path
from typing import Any

from motioncore.wire.client import (
    ConnectionFileError,
    check_private_file,
    default_connection_file,
    read_connection_file,
    runtime_dir,
)
from motioncore.wire.protocol import SIGNATURE_SCHEME

__all__ = ["default_connection_file", "is_live", "new_key", "new_session", "previous", "read_key_file",
           "remove_if_ours", "write"]


def new_key() -> str:
    """256 random bits as hex: the HMAC key."""
    return secrets.token_hex(32)


def new_session() -> str:
    return uuid.uuid4().hex


def _private_dir(folder: Path) -> None:
    """Create ``folder`` (0700). The shared default folder must also be ours and closed to others."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder != runtime_dir():
        return  # a folder the user chose: the file itself is 0600
    st = folder.stat()
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        raise ConnectionFileError(f"{folder} is not a private folder of this user (owner uid {st.st_uid}, "
                                  f"mode {oct(st.st_mode & 0o777)}): refusing to put a key there")


def previous(path: Path) -> dict[str, Any] | None:
    """The fields of an existing, well-formed connection file at ``path`` (to reuse its port), else None.
    Raises ConnectionFileError if the file exists but others could have planted, read or changed it."""
    path = Path(path)
    if not path.exists():
        return None
    check_private_file(path)
    try:
        return read_connection_file(path)
    except ConnectionFileError:
        return None   # ours but malformed (an interrupted write): overwritten


def is_live(info: dict[str, Any], timeout: float = 0.5) -> bool:
    """True if the server a connection file names still runs: its pid exists and its port accepts TCP."""
    pid = info.get("pid")
    if isinstance(pid, int) and pid > 0 and hasattr(os, "kill"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass   # exists, another user's
    try:
        with socket.create_connection((info["ip"], info["port"]), timeout=timeout):
            return True
    except (OSError, ValueError, TypeError):
        return False


def read_key_file(path: Path) -> str:
    """An explicit key (``--key-file``): the file's first line, trusted only if private (as a connection file)."""
    check_private_file(path)
    key = Path(path).read_text().strip().splitlines()[0].strip() if Path(path).read_text().strip() else ""
    if not key or not key.isascii():
        raise ConnectionFileError(f"key file {path} must hold a non-empty ASCII key on its first line")
    return key


def write(path: Path, *, ip: str, port: int, key: str, server_session: str) -> Path:
    """Write the connection file atomically with mode 0600; returns its path."""
    path = Path(path)
    _private_dir(path.parent)
    info = {"transport": "tcp", "ip": ip, "port": port, "key": key, "signature_scheme": SIGNATURE_SCHEME,
            "server_session": server_session, "pid": os.getpid()}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # created 0600
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(info, f, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def remove_if_ours(path: Path, server_session: str) -> bool:
    """Delete the file if it still belongs to ``server_session`` (a newer server may have replaced it)."""
    try:
        info = previous(Path(path))
    except ConnectionFileError:
        return False
    if info is None or info.get("server_session") != server_session:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
