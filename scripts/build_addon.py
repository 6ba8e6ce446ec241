"""Build the Blender extension zip: vendor the library modules it runs (VENDORED), fetch pyzmq and msgspec wheels, zip the add-on.

    python scripts/build_addon.py                 # -> dist/motioncore_blender-<version>.zip
    python scripts/build_addon.py --skip-wheels   # offline: no wheels, no wheels list in the manifest

The zip has blender_manifest.toml at its root, as bpy.ops.extensions.package_install_files expects.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYZMQ = "pyzmq==27.3.0"
MSGSPEC = "msgspec==0.22.0"   # the protocol's C JSON codec; without it the vendored protocol falls back to json
WHEELS = (PYZMQ, MSGSPEC)
# (pip --python-version, --abi, [--platform ...]) per target: cp311 for Blender 4.2-5.0, abi3 for 5.1+.
PLATFORMS = (["manylinux_2_28_x86_64", "manylinux_2_26_x86_64", "manylinux_2_17_x86_64"], ["win_amd64"],
             ["macosx_10_15_universal2", "macosx_11_0_arm64", "macosx_10_15_x86_64"])
PYTHONS = (("3.11", "cp311"), ("3.13", "abi3"))
EXCLUDE_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}
EXCLUDE_FILES = {"README.md"}
_WHEELS_RE = re.compile(r"^wheels\s*=\s*\[.*?\]\s*$", re.S | re.M)


# The library modules the add-on runs as they are (stdlib, numpy and zmq only; tests/addon/test_addon_vendor.py):
VENDORED = (
    "wire/protocol.py",    # the wire format
    "wire/errors.py",      # its typed errors (codes)
    "wire/replay.py",      # its replay protection
    "wire/jsonwire.py",    # its header JSON (msgspec or stdlib)
    "wire/client.py",      # the server client (Client methods, connection files)
    "core/fcurve.py",      # Blender's F-curve Bezier in numpy: the add-on evaluates your keys' curves with it
    "core/keyfit.py",      # the fewest Bezier keys that hold a fill: the add-on's Keys = Reduced
    "core/quat_np.py",     # WXYZ quaternions in numpy
    "core/axes.py",        # Y-up <-> Z-up
    "core/gaps.py",        # gaps, the windows around them, whole-frame masks: one rule for library and add-on
    "core/feet.py",        # foot skate and contacts: the In-fill's report measures the feet as the library does
    "core/plant.py",       # feet planted in filled frames: the add-on plants the rig's own feet after the correction
    "core/plant_smooth.py",  # its blends flat at the keys, floor lift and turn cap
    "retarget/rest.py",    # rest alignment: a rig's pose onto the model's skeleton and back
    "retarget/names.py",   # joint-name presets: one vocabulary for the library's and the add-on's bone maps
    "retarget/topology.py",  # bodies from the hierarchy and the pose: the bone map's first step, as the library's
)
_RELATIVE = re.compile(r"^from \.\.\w+\.(\w+) import", re.M)   # from ..core.quat_np import -> from .quat_np import


def vendored_text(text: str) -> str:
    """A library module as the add-on holds it, flat in ``vendor/``: the one rewrite is an import of another
    vendored module, ``from ..<folder>.<module> import`` -> ``from .<module> import``."""
    return _RELATIVE.sub(r"from .\1 import", text)


def vendor(addon_dir: Path, src_dir: Path = ROOT / "src" / "motioncore") -> list[Path]:
    """Copy ``VENDORED`` from the library (``src_dir``) into ``addon_dir/vendor`` (`vendored_text`), with an
    ``__init__.py``. Returns the written files."""
    out_dir = addon_dir / "vendor"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for rel in VENDORED:
        src = src_dir / rel
        (out_dir / src.name).write_text(vendored_text(src.read_text(encoding="utf-8")), encoding="utf-8")
        written.append(out_dir / src.name)
    init = out_dir / "__init__.py"
    init.write_text('"""Copies of motioncore modules (scripts/build_addon.py VENDORED); do not edit."""\n')
    return [init, *written]


def download_wheels(addon_dir: Path) -> list[Path]:
    """pip download the pyzmq and msgspec wheels for every Blender Python and platform into ``addon_dir/wheels``.
    msgspec has no abi3 wheels, so for Python 3.13 it is fetched as cp313."""
    dest = addon_dir / "wheels"
    dest.mkdir(exist_ok=True)
    for py, abi in PYTHONS:
        for plats in PLATFORMS:
            for req in WHEELS:
                req_abi = "cp" + py.replace(".", "") if req == MSGSPEC and abi == "abi3" else abi
                cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--no-deps", "-d", str(dest),
                       "--python-version", py, "--implementation", "cp", "--abi", req_abi]
                for p in plats:
                    cmd += ["--platform", p]
                subprocess.run([*cmd, req], check=True)
    return sorted(dest.glob("*.whl"))


def manifest_text(addon_dir: Path, wheels: list[Path] | None) -> str:
    """The manifest with its ``wheels`` list set to ``wheels`` (None: the list removed)."""
    text = (addon_dir / "blender_manifest.toml").read_text(encoding="utf-8")
    if wheels is None:
        new = ""
    else:
        new = "wheels = [\n" + "".join(f'  "./wheels/{w.name}",\n' for w in wheels) + "]"
    text = _WHEELS_RE.sub(new, text, count=1)
    tomllib.loads(text)   # still valid TOML
    return text


def _files(addon_dir: Path, with_wheels: bool) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(addon_dir):
        rel = Path(dirpath).relative_to(addon_dir)
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDE_DIRS and (with_wheels or rel.parts or d != "wheels"))
        for f in sorted(filenames):
            if f in EXCLUDE_FILES or f == "blender_manifest.toml" and not rel.parts or f.endswith((".pyc", ".zip")):
                continue
            out.append(Path(dirpath) / f)
    return out


def build_zip(addon_dir: Path, dist_dir: Path, wheels: list[Path] | None) -> Path:
    """Zip the add-on (manifest at the root) to dist/motioncore_blender-<version>.zip, atomically."""
    manifest = manifest_text(addon_dir, wheels)
    version = tomllib.loads(manifest)["version"]
    dist_dir.mkdir(parents=True, exist_ok=True)
    target = dist_dir / f"motioncore_blender-{version}.zip"
    fd, tmp = tempfile.mkstemp(prefix=".motioncore_blender-", suffix=".zip.tmp", dir=dist_dir)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("blender_manifest.toml", manifest)
            for f in _files(addon_dir, wheels is not None):
                z.write(f, f.relative_to(addon_dir).as_posix())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # an ordinary file's mode, not mkstemp's 0600
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def build(addon_dir: Path = ROOT / "addon", dist_dir: Path = ROOT / "dist", *, skip_wheels: bool = False,
          src_dir: Path = ROOT / "src" / "motioncore") -> Path:
    vendor(addon_dir, src_dir)
    wheels = None if skip_wheels else download_wheels(addon_dir)
    return build_zip(addon_dir, dist_dir, wheels)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-wheels", action="store_true", help="offline build: no pyzmq wheels in the zip")
    ap.add_argument("--addon-dir", type=Path, default=ROOT / "addon")
    ap.add_argument("--dist", type=Path, default=ROOT / "dist")
    args = ap.parse_args(argv)
    print(build(args.addon_dir, args.dist, skip_wheels=args.skip_wheels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
