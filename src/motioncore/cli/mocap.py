"""``motioncore data`` (the registered mocap sets: list, unpack) and ``motioncore bvh`` (roundtrip, resample).

`cli/main.py` registers them with ``add_subcommands(sub)``. Heavy imports happen inside the handlers so
``motioncore --help`` stays instant.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .args import nonneg_float, positive_float


def _cmd_data_list(args: argparse.Namespace) -> int:
    from ..data import REGISTRY, summary

    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        from ..errors import UsageError

        raise UsageError(f"data list: unknown set(s) {unknown}; registered: {sorted(REGISTRY)}")
    names = args.names or list(REGISTRY)  # every set, the unions (bandai = bandai1 + bandai2) included
    rows = [summary(n) for n in names]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = f"{'dataset':<15} {'clips':>5} {'train':>5} {'test':>5} {'frames':>8} {'fps':>5} {'joints':>6}  licence"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<15} {r['clips']:>5} {r['train']:>5} {r['test']:>5} {r['frames']:>8} {r['fps']:>5g} "
              f"{r['joints']:>6}  {r['licence']}")
    return 0


def _cmd_data_unpack(args: argparse.Namespace) -> int:
    from ..data import REGISTRY, data_root
    from ..data.cache import unpack

    names = args.names or [n for n in REGISTRY if not REGISTRY[n].union]
    seen: set[str] = set()
    for n in names:
        for rel, _ in REGISTRY[n].parts:
            if rel not in seen:
                seen.add(rel)
                print(unpack(data_root() / rel))
    return 0


def _cmd_data_rig(args: argparse.Namespace) -> int:
    """A rig file for ``--target``: the first clip of a registered set, its skeleton and first ``--frames`` frames
    (the data's own pose; written from the mocap on this machine, never shipped)."""
    from ..core.motion import Motion
    from ..data import REGISTRY, load
    from ..io.bvh import write_bvh

    if args.name not in REGISTRY:
        print(f"motioncore data rig: unknown set {args.name!r}; `motioncore data list` names them", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.suffix.lower() != ".bvh" or out.is_dir():
        print(f"motioncore data rig: OUT must be a .bvh file path, got {args.out!r}", file=sys.stderr)
        return 2
    clips = load(args.name, progress=False)
    if not clips:
        print(f"motioncore data rig: set {args.name!r} has no clips", file=sys.stderr)
        return 1
    m = clips[0].motion
    n = max(1, min(args.frames, m.num_frames))
    write_bvh(out, Motion(m.skeleton, m.rotations[:n], m.positions[:n], m.fps, out.stem))
    print(f"{out}: {args.name} rig ({m.skeleton.num_joints} joints, {n} frames of {clips[0].name} at {m.fps:g} fps)")
    return 0


def _cmd_bvh_roundtrip(args: argparse.Namespace) -> int:
    from ..io.bvh_roundtrip import roundtrip_main
    from ..io.files import files_with_suffix

    files: list[str] = []
    for f in args.files:
        p = Path(f)
        files += [str(x) for x in files_with_suffix(p, ".bvh")] if p.is_dir() else [f]
    return roundtrip_main(files, tol=args.tol)


def _cmd_bvh_resample(args: argparse.Namespace) -> int:
    from ..core.kinematics import resample
    from ..errors import UsageError
    from ..io.atomic import check_output_dir, check_output_file
    from ..io.bvh import read_bvh, write_bvh
    from ..io.files import check_suffix, files_with_suffix

    src = Path(args.src)
    if src.is_dir():
        out = check_output_dir(args.out, "OUT", (src,))
        pairs = [(f, out / f.relative_to(src).with_suffix(".bvh")) for f in files_with_suffix(src, ".bvh")]
        if not pairs:
            raise UsageError(f"IN {src}: no .bvh files in the folder")
    elif src.is_file():
        pairs = [(check_suffix(src, (".bvh",), "IN"), check_output_file(args.out, "OUT", (src,), suffixes=(".bvh",)))]
    else:
        raise UsageError(f"IN {src}: no such file or folder (expected a .bvh file or a folder of them)")
    for f, o in pairs:
        m = read_bvh(f)
        r = resample(m, args.fps)
        o.parent.mkdir(parents=True, exist_ok=True)
        write_bvh(o, r)
        print(f"{o}: {m.num_frames} frames at {m.fps:g} fps -> {r.num_frames} at {args.fps:g}")
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``data`` and ``bvh`` on the top-level subparsers."""
    data = sub.add_parser("data", help="registered mocap sets").add_subparsers(dest="action", required=True)
    d = data.add_parser("list", help="clips, frames, fps, joints and licence of each set")
    d.add_argument("names", nargs="*", help="registered set names (default: every set, unions included)")
    d.add_argument("--json", action="store_true", help="print the rows as JSON")
    d.set_defaults(func=_cmd_data_list)
    d = data.add_parser("unpack", help="unpack archives into the cache and print the folders")
    d.add_argument("names", nargs="*", help="registered set names (default: all)")
    d.set_defaults(func=_cmd_data_unpack)
    d = data.add_parser("rig", help="write a set's skeleton as a short BVH (a --target for retarget)")
    d.add_argument("name", help="registered set name (e.g. bandai)")
    d.add_argument("out", metavar="OUT", help="the .bvh to write (e.g. bandai_rig.bvh)")
    d.add_argument("--frames", type=int, default=2, help="frames of its first clip to keep (default 2)")
    d.set_defaults(func=_cmd_data_rig)

    bvh = sub.add_parser("bvh", help="BVH tools").add_subparsers(dest="action", required=True)
    b = bvh.add_parser("roundtrip", help="read, write, re-read; report worst errors; exit 1 above --tol")
    b.add_argument("files", nargs="+", help="BVH files or folders (searched recursively)")
    b.add_argument("--tol", type=nonneg_float, default=1e-4, help="max rotation error (deg) and position error")
    b.set_defaults(func=_cmd_bvh_roundtrip)
    b = bvh.add_parser("resample", help="resample BVH clips to another frame rate (slerp for rotations)")
    b.add_argument("src", metavar="IN", help="a .bvh file or a folder of them (searched recursively)")
    b.add_argument("out", metavar="OUT", help="the .bvh to write, or (IN a folder) the folder mirroring IN")
    b.add_argument("--fps", type=positive_float, required=True, help="the new frame rate (e.g. 30)")
    b.set_defaults(func=_cmd_bvh_resample)
