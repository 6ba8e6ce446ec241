"""Where the data is, where its cache goes, and content-hash-keyed unpacking.

The raw mocap is never copied into the repository. Archives are unpacked (and clips preprocessed)
into ``$MOTIONCORE_CACHE`` (default ``~/.cache/motioncore``), under a folder named by the sha256 of
the archive's bytes, so a changed archive can never be served from a stale cache.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from tqdm import tqdm

from ..errors import DataError

_REPO = Path(__file__).resolve().parents[3]


def data_root() -> Path:
    """``$MOTIONCORE_DATA``, else ``../shared/mocap`` (relative to the working directory, then to
    the source checkout)."""
    env = os.environ.get("MOTIONCORE_DATA")
    if env:
        return Path(env).expanduser()
    for cand in (Path.cwd() / ".." / "shared" / "mocap", _REPO.parent / "shared" / "mocap"):
        if cand.is_dir():
            return cand.resolve()
    return (Path.cwd() / ".." / "shared" / "mocap").resolve()


def cache_root() -> Path:
    """``$MOTIONCORE_CACHE``, else ``$XDG_CACHE_HOME/motioncore`` or ``~/.cache/motioncore``."""
    env = os.environ.get("MOTIONCORE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "motioncore"


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def require(path: Path) -> Path:
    """``path`` if it exists, else a DataError that says how to point motioncore at the data."""
    if not path.exists():
        raise DataError(f"{path} not found. Set MOTIONCORE_DATA to the folder holding the mocap "
                        f"(currently {data_root()}).")
    return path


def unpack(archive: Path, progress: bool = True) -> Path:
    """Unpack a .tar.xz into the cache (once per content hash) and return the folder.
    Extraction goes to a temporary folder renamed into place, so a killed run leaves nothing half-done."""
    archive = require(archive)
    digest = file_sha256(archive)[:16]
    dest = cache_root() / "raw" / f"{archive.name.split('.')[0]}-{digest}"
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for m in tqdm(members, desc=f"unpack {archive.name}", unit="file", disable=not progress,
                          leave=False):
                tar.extract(m, tmp, filter="data")  # 'data' refuses absolute paths, links out, devices
        os.replace(tmp, dest)
    except tarfile.TarError as e:
        raise DataError(f"{archive}: not a readable tar archive ({e})") from e
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
