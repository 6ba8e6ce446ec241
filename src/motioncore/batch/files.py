"""The files of a batch job: finding its inputs (`discover`), naming its outputs (`output_path`), reading and
writing a clip by its suffix (.bvh; .fbx and .blend through bpy), and the result record each per-file
function returns (`start_result`, `error_text`)."""
from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import MotioncoreError
from ..io.files import check_suffix, files_with_suffix

__all__ = ["CLIP_SUFFIXES", "discover", "error_text", "output_path", "read_motion", "start_result", "write_motion"]


def discover(src: str | os.PathLike[str], exclude: Path | None = None,
             suffix: str | Sequence[str] = ".bvh", arg: str = "SRC") -> list[Path]:
    """Input files, sorted: a folder is searched recursively for ``*<suffix>`` in any case (BVH by default;
    several suffixes may be given); a glob (``**`` recursive) keeps the matches with such a suffix; a single
    file must have one (`check_suffix`, else `UsageError` naming ``arg``). Files under ``exclude`` (the output
    folder) are left out."""
    suffixes = (suffix,) if isinstance(suffix, str) else tuple(suffix)
    p = Path(src)
    if p.is_dir():
        files = [f for s in suffixes for f in files_with_suffix(p, s)]
    elif p.is_file():
        files = [check_suffix(p, suffixes, arg)]
    else:
        files = [Path(f) for f in glob.glob(str(src), recursive=True)
                 if Path(f).is_file() and Path(f).suffix.lower() in suffixes]
    files = [f for f in files if not f.name.startswith(".")]  # temporaries of an interrupted write
    if exclude is not None:
        ex = exclude.resolve()
        files = [f for f in files if ex not in f.resolve().parents]
    return sorted(set(files))


def output_path(path: str | os.PathLike[str], out_dir: str | os.PathLike[str], fmt: str = "bvh") -> Path:
    """``out_dir / <input base name>.<fmt>``."""
    return Path(out_dir) / (Path(path).stem + "." + fmt)


CLIP_SUFFIXES = (".bvh", ".fbx", ".blend")   # .fbx and .blend through bpy (the `blender` extra)


_HANDED: dict[tuple[str, int, int], Any] = {}   # one clip read by the pre-flight check, for its job to take


def _stamp(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    st = os.stat(path)
    return (str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


def read_motion(path: str | os.PathLike[str], keep: bool = False) -> Any:
    """A clip from .bvh (motioncore.io.bvh) or .fbx / .blend (motioncore.io.blender, needs bpy). ``keep``: hold
    it for the next read of the same unchanged file in this process (a batch's check, then its job: a long
    clip is parsed once); that read takes it."""
    try:
        held = _HANDED.pop(_stamp(path), None)
    except OSError:
        held = None
    if held is not None:
        return held
    if Path(path).suffix.lower() in (".fbx", ".blend"):
        from ..io.blender import read_blender

        m = read_blender(path)
    else:
        from ..io.bvh import read_bvh

        m = read_bvh(path)
    if keep:
        _HANDED.clear()
        _HANDED[_stamp(path)] = m
    return m


def write_motion(path: str | os.PathLike[str], motion: Any) -> None:
    """Write atomically as .bvh, .fbx or .blend by the suffix."""
    if Path(path).suffix.lower() in (".fbx", ".blend"):
        from ..io.blender import write_blender

        write_blender(path, motion)
        return
    from ..io.bvh import write_bvh

    write_bvh(path, motion)


def error_text(e: BaseException) -> str:
    """A per-file error for report.json: our own errors as they are, others with their type."""
    return str(e) if isinstance(e, MotioncoreError) else f"{type(e).__name__}: {e}"


def start_result(path: str, out_dir: str, fmt: str) -> tuple[Path, dict[str, Any]]:
    """The output path of ``path`` and the result dict a per-file job returns: status "skipped" when
    the output already exists (resumable runs), else "failed" until the job sets "ok"."""
    out = output_path(path, out_dir, fmt)
    return out, {"file": str(path), "out": str(out), "status": "skipped" if out.exists() else "failed",
                 "stage": None, "error": None, "frames": 0, "seconds": 0.0}
