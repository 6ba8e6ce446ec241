"""Connection files: how clients find the server and its key (as Jupyter's kernel-*.json).

A connection file is JSON ``{transport, ip, port, key, signature_scheme, server_session, pid}`` written
atomically with mode 0600 inside a 0700 folder (``motioncore.wire.client.runtime_dir()`` by default). A server
started on an existing file reuses its ip, port and key (so clients of a crashed server reconnect by
themselves) but always gets a new ``server_session``. On shutdown the server removes the file only if it
still names its own session.
"""
from __future__ import annotations

import json
import os
import secrets
import stat
import tempfile
import uuid
from pathlib import Path
from typing import Any

from motioncore.wire.client import ConnectionFileError, default_connection_file, read_connection_file, runtime_dir
from motioncore.wire.protocol import SIGNATURE_SCHEME

__all__ = ["default_connection_file", "new_key", "new_session", "previous", "remove_if_ours", "write"]


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
    """The fields of an existing, well-formed connection file at ``path`` (to reuse port and key), else None."""
    try:
        return read_connection_file(path)
    except ConnectionFileError:
        return None


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
    info = previous(Path(path))
    if info is None or info.get("server_session") != server_session:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
