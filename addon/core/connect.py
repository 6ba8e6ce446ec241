"""Connect: check the server's connection file, say hello, and start a local server when asked (no bpy).
``connect_job`` runs on the worker thread; the servers it started stop with the add-on (`stop_started`)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .messages import describe_error
from .requests import PROTOCOL_VERSION

_STARTED: list[subprocess.Popen] = []   # servers Connect started (stopped when the add-on is disabled)


def stop_started(timeout: float = 5.0) -> int:
    """Terminate the servers Connect started; returns how many were still running."""
    n = 0
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            n += 1
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return n


def _status(hello: dict[str, Any], where: str = "") -> dict[str, Any]:
    v = hello.get("protocol_version")
    if v != PROTOCOL_VERSION:
        return {"state": "version mismatch", "detail": f"the server speaks protocol {v}, the add-on {PROTOCOL_VERSION}"
                + (f" ({where})" if where else ""), "hello": hello}
    types = ", ".join(t for t in hello.get("types", []) if not t.startswith("debug."))
    return {"state": "connected", "hello": hello, "where": where,
            "detail": f"{hello.get('device', '?')}: {len(hello.get('models', []))} models; {types}"
                      + (f"; {where}" if where else "")}


def check_connection_file(path: Any) -> None:
    """Refuse a connection file the add-on cannot trust: its key signs every message, so a file another
    user owns, or one others may read or write (anyone could then answer as the server), is not used.
    Raises ValueError naming the file. (POSIX only; a missing file is the client's error to report.)"""
    import stat
    if path is None or os.name != "posix":
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if st.st_uid != os.getuid():
        raise ValueError(f"connection file {path} belongs to another user (uid {st.st_uid}): not used; point the "
                         "add-on's Connection file preference at your own server's file")
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"connection file {path} is readable or writable by others (mode "
                         f"{stat.S_IMODE(st.st_mode):o}): its key is not secret, so the server cannot be "
                         "authenticated; restart the server (it writes the file 0600) or chmod 600 it")


def _untrusted(message: str) -> bool:
    """True for the wire client's refusals of a connection file others may read or that another user owns
    (as opposed to a missing file, which means the server is not running)."""
    return " has mode " in message or " belongs to " in message


def server_identity(path: Any, hello: dict[str, Any]) -> str:
    """Which server Connect reached: its connection file, endpoint, pid and session."""
    try:
        info = json.loads(Path(path).read_text()) if path is not None else {}
    except (OSError, ValueError):
        info = {}
    ep = f"tcp://{info.get('ip', '?')}:{info.get('port', '?')}" if info else "?"
    sess = str(hello.get("server_session") or info.get("server_session") or "")[:8]
    pid = info.get("pid")
    return (f"server at {ep}" + (f" (pid {pid})" if pid else "") + (f", session {sess}" if sess else "")
            + f", connection file {path}")


def resolve_command(command: str) -> list[str]:
    """The server command as argv, its program found: a name on PATH, an absolute path, a virtual
    environment's folder (its bin/motioncore, Scripts\\motioncore.exe on Windows) or its Python alone
    (the motioncore next to it; a Python with arguments runs as given). Blender's PATH rarely holds a venv's bin (only an activated shell's
    does), so `motioncore` is also looked for in ~/.local/bin. Raises ValueError saying what to set."""
    import sys
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the Server command preference is empty: set it to e.g. "
                         "'/path/to/motioncore/.venv/bin/motioncore serve'")
    prog = Path(os.path.expanduser(argv[0]))
    exe = "motioncore.exe" if sys.platform == "win32" else "motioncore"
    sub = "Scripts" if sys.platform == "win32" else "bin"
    cands: list[Path] = []
    if prog.is_dir():                                   # a venv folder
        cands = [prog / sub / exe]
        argv = [str(cands[0])] + (argv[1:] or ["serve"])
    elif prog.name.startswith("python") and prog.parent.name in ("bin", "Scripts") and len(argv) == 1:
        cands = [prog.parent / exe]                     # the venv's interpreter alone: its motioncore
        argv = [str(cands[0]), "serve"]
    elif prog.is_absolute() or os.sep in argv[0]:
        cands = [prog]
    else:
        found = shutil.which(argv[0])
        cands = [Path(found)] if found else [Path.home() / ".local" / "bin" / argv[0]]
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return [str(c)] + argv[1:]
    raise ValueError(f"could not find {argv[0]!r} (looked at {', '.join(str(c) for c in cands)}; Blender's PATH "
                     "does not include a virtual environment's bin folder): set Preferences > Add-ons > "
                     "motioncore > Server command to the full path, e.g. '/path/to/motioncore/.venv/bin/motioncore "
                     "serve', or to the venv's folder")


def connect_job(make_client: Callable[[], Any], start_command: str = "", wait_s: float = 30.0
                ) -> Callable[[Any], dict[str, Any]]:
    """Connect: ``{"state": "connected" | "not running" | "version mismatch", "detail", "hello"?,
    "started"?, "where"?}``; the detail names the server reached and its connection file. A connection
    file that is not the user's own, or that others can read, is refused (`check_connection_file`). With
    ``start_command`` (e.g. ``motioncore serve``; `resolve_command` finds the program) a server that is
    not running is started as a subprocess (no shell) and waited for up to ``wait_s`` seconds. Makes its
    own clients (the connection file may not exist before the server starts), so run it on a worker whose
    factory returns None."""
    def hello() -> dict[str, Any]:
        c = make_client()
        try:
            path = getattr(c, "path", None)
            check_connection_file(path)
            h = c.hello()
            return _status(h, server_identity(path, h) if path is not None else "")
        finally:
            c.close()

    def job(_: Any) -> dict[str, Any]:
        try:
            return hello()
        except ValueError as e:   # a connection file that cannot be trusted: never started over, never used
            if getattr(e, "code", None) is None and str(e).startswith("connection file"):
                return {"state": "not trusted", "detail": str(e)}
            first: Exception = e
        except Exception as e:   # no connection file, no reply, wrong key or version
            if getattr(e, "code", None) == "connection_file" and _untrusted(str(e)):   # the client's own check
                return {"state": "not trusted", "detail": str(e)}
            first = e
        if getattr(first, "code", None) == "bad_version":
            return {"state": "version mismatch", "detail": describe_error("Connect", first)}
        if not start_command:
            return {"state": "not running", "detail": describe_error("Connect", first)}
        try:
            argv = resolve_command(start_command)
        except ValueError as e:
            return {"state": "not running", "detail": f"no server answered and it cannot be started: {e}"}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except (OSError, ValueError) as e:
            return {"state": "not running", "detail": f"could not start {start_command!r}: {e}"}
        _STARTED.append(proc)
        deadline, last = time.monotonic() + wait_s, first
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return {"state": "not running", "detail": f"{start_command!r} exited with code {proc.returncode}"}
            try:
                return {**hello(), "started": proc.pid}
            except Exception as e:
                last = e
                time.sleep(0.25)
        return {"state": "not running", "started": proc.pid,
                "detail": f"started {start_command!r} (pid {proc.pid}) but it did not answer within {wait_s:g} s: {last}"}
    return job
