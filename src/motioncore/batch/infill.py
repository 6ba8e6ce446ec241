"""Batch in-filling: fill dropped or marked frames in many BVH clips with an any-order checkpoint.

``motioncore batch infill SRC --out DIR`` reads every BVH under SRC (folder or glob), finds the frames to
fill, fills them with ``motioncore.infill.fill`` and writes ``DIR/<base name>.bvh`` (temporary file
+ rename, so a killed run leaves no half file; a re-run skips finished outputs) plus ``DIR/report.json``
(per file: status, frames filled, gaps, foot skate (`batch.skate`), seconds, error and stage). Inputs are never modified; a bad file
is recorded and the batch goes on; the exit code is 1 when any file failed.

Frames to fill, per clip (both may be used together):

- ``--gaps FILE.json``: ``{"<clip base name>": [[start, end], ...]}``, end exclusive, in the clip's frames;
- ``--frozen N``: runs of at least N frames identical to the frame before them (every rotation and the
  root, bit for bit; a capture that froze) are refilled, the frame before the run kept as the key.

Any biped is filled on its own skeleton and at its own frame rate (``fill_motion``): a clip on another
skeleton than the checkpoint's goes through the model's skeleton and back as ``motioncore eval infill`` does
(`eval.keyed.on_skeleton`: the body read from the clip's frames, `retarget.topology`), a clip at another rate
to the model's rate and back (`infill.fill`). Each output has the input's skeleton, frame rate
and frame count, and a BVH output keeps every frame outside the gaps byte for byte (the input's own lines).
Clips whose body cannot be mapped onto the model's (a quadruped) are refused before any work; the report
names, per file, the model joints the clip lacks and the clip's joints the model does not drive (those
follow the Bezier of their keys). See docs/batch.md.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MotioncoreError
from ..infill import Request, family_for, fill
from ..infill.learn import learn
from ..io.atomic import check_output_dir
from ..models.kinds import default_model, spec
from .errors import BatchError
from .files import CLIP_SUFFIXES, discover, output_path, read_motion, write_motion
from .runner import run_job

__all__ = ["frozen_runs", "gap_mask", "fill_file", "fill_motion", "run_batch_infill"]

STAGES = ("read", "gaps", "map", "fill", "write")


def frozen_runs(rotations: np.ndarray, root: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """[start, end) runs of at least ``min_len`` frames equal to the frame before them (bit for bit)."""
    from ..core.gaps import runs as mask_runs

    same = np.r_[False, (rotations[1:] == rotations[:-1]).all((1, 2)) & (root[1:] == root[:-1]).all(1)]
    return [(s, e) for s, e in mask_runs(same) if e - s >= min_len]


def gap_mask(T: int, gaps: Sequence[Sequence[int]]) -> np.ndarray:
    """(T,) bool: True on the frames to fill. Raises ValueError naming a bad range."""
    fill = np.zeros(T, bool)
    for g in gaps:
        if len(g) != 2 or not all(isinstance(v, int) for v in g):
            raise ValueError(f"gap {g!r}: expected [start, end] (integers, end exclusive)")
        s, e = g
        if not 0 <= s < e <= T:
            raise ValueError(f"gap [{s}, {e}] is outside the clip's {T} frames or empty")
        fill[s:e] = True
    return fill


def fill_motion(m: Any, model: Any, meta: dict, todo: np.ndarray, joint_map: Any = None, temperature: float = 0.0,
                seed: int = 0, adapt: float = 0.0, info: dict | None = None, adapt_steps: int = 0,
                plant_feet: bool = True) -> Any:
    """``m`` (a Motion on any biped skeleton, at any rate) with the frames ``todo`` (T,) filled by ``model``:
    on the model's skeleton directly, else through it and back (``joint_map``: model joint -> clip joint,
    default `retarget.auto_map` on the clip's frames). Frames outside ``todo`` come back bit-identical.
    ``infill-body``: the gate is fitted on the clip's own keys; ``adapt`` > 0 seconds (or ``adapt_steps`` > 0
    learning steps): Learn This Action first (``families.body.adapt``); ``plant_feet``: the feet planted
    (``families.body.fill_plant``; the gate keeps it off for a gap length where it costs error). ``info`` (a dict)
    receives ``gate`` (its weights, pseudo-gap errors and planting per gap length), ``plant`` (what planting did)
    and ``adapt`` (before / after, steps; or why it was skipped)."""
    from ..core.motion import Motion
    from ..core.skeleton import Skeleton
    from ..eval.keyed import on_skeleton
    msk = Skeleton.from_dict(meta["skeleton"])
    rj = int(meta["root_joint"])
    learns_by_adapt = (k := spec(meta)) is not None and k.learn == "adapt"
    family = family_for(meta)   # the model's in-fill family, resolved once per clip (``infill.family``)

    def fill_on_model(_sk: Any, q: np.ndarray, p: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_q, out_p = q.copy(), p.copy()
        for n in range(q.shape[0]):   # the model at its rate, the clip at its own (`fill_clip_at`)
            net, kw = _adapted(model, meta, q[n], p[n, :, rj], known[n], m.fps, adapt, info, adapt_steps, family) \
                if (adapt > 0 or adapt_steps > 0) and learns_by_adapt else (model, {})
            f = fill(Request(net, meta, q[n], p[n, :, rj], known[n], m.fps, temperature=temperature, seed=seed,
                             plant_feet=plant_feet, family=family, **kw))
            out_q[n], out_p[n, :, rj] = f.rotations[0], f.root[0]
            if info is not None and f.gate is not None:
                info["gate"] = f.gate.summary()
                info["mean_weight"] = round(f.gate.mean_weight(), 3)
            if info is not None and learns_by_adapt:   # the body in-fill: what planting its feet did
                info["plant"] = f.plant
        return out_q, out_p

    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    run = on_skeleton(fill_on_model, msk, None if conv is None else np.asarray(conv, np.float64), joint_map)
    known = ~np.asarray(todo, bool)
    q, p = run(m.skeleton, m.rotations[None], m.positions[None], known[None])
    q = np.where(known[:, None, None], m.rotations, q[0])   # bit-identical outside the gaps
    p = np.where(known[:, None, None], m.positions, p[0])
    return Motion(m.skeleton, q, p, m.fps, m.name)


def _adapted(model: Any, meta: dict, q: np.ndarray, root: np.ndarray, known: np.ndarray, fps: float, seconds: float,
             info: dict | None, steps: int = 0, family: Any = None) -> tuple[Any, dict[str, Any]]:
    """Learn This Action on the clip's keys (``infill.learn``, at the model's rate): (the network to fill with, the
    request fields it sets). Too little keyed to learn from: the shipped model, and ``info["adapt"]`` says why."""
    try:   # ``seconds`` a limit (the family's default when 0), ``steps`` the budget
        learnt = learn(Request(model, meta, q, root, known, fps, family=family),
                       seconds=seconds if seconds > 0 else None, steps=steps or None)
    except MotioncoreError as e:
        if info is not None:
            info["adapt"] = {"skipped": str(e)}
        return model, {}
    if info is not None:
        info["adapt"] = learnt.summary
    return learnt.model, learnt.fields


def fill_file(path: str, out_dir: str, model_name: str, gaps: Mapping[str, Any], frozen: int,
              temperature: float = 0.0, seed: int = 0, fmt: str = "bvh", adapt: float = 0.0,
              adapt_steps: int = 0, plant_feet: bool = True) -> dict[str, Any]:
    """Fill one clip (``fill_motion``); a JSON-ready result dict (never raises for a bad file): status, gaps,
    frames filled, the clip's rate, ``unmapped`` (model joints the clip lacks) and ``bezier_only`` (clip
    joints the model does not drive)."""
    from ..core.gaps import runs as mask_runs
    from ..core.skeleton import Skeleton
    from ..models.registry import load_model
    from ..retarget import auto_map, clip_poses

    t0 = time.perf_counter()
    out = output_path(path, out_dir, fmt)
    res: dict[str, Any] = {"file": str(path), "output": str(out), "status": "failed", "stage": None, "error": None}
    stage = "read"
    try:
        m = read_motion(path)
        res["fps"] = m.fps
        stage = "map"
        model, meta = _cached_model(model_name, load_model)
        msk = Skeleton.from_dict(meta["skeleton"])
        jm = None
        if list(m.skeleton.names) != list(msk.names):
            jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
            res["unmapped"] = list(jm.unmapped)
            res["bezier_only"] = [n for n in m.skeleton.names if n not in set(jm.pairs.values())]
        stage = "gaps"
        rj = int(meta["root_joint"]) if jm is None else (   # the joint whose path is the root's
            m.skeleton.index(jm.pairs[jm.roles["hips"]]) if jm.roles.get("hips") in jm.pairs else 0)
        todo = gap_mask(m.num_frames, gaps.get(Path(path).stem, []))
        for s, e in (frozen_runs(m.rotations, m.positions[:, rj], frozen) if frozen else []):
            todo[s:e] = True
        res["gaps"] = [[a, b] for a, b in mask_runs(todo)]
        res["frames_filled"] = int(todo.sum())
        if todo.all():
            raise ValueError("every frame is marked to fill: no key left")
        stage = "fill"
        info: dict[str, Any] = {}
        filled = fill_motion(m, model, meta, todo, jm, temperature, seed, adapt, info, adapt_steps,
                             plant_feet) if todo.any() \
            else m
        res.update(info)  # the gate's weights per gap length (and Learn This Action's result): what was scaled
        if todo.any():   # the feet over the filled frames against Bezier's and the input's (batch.skate)
            from .skate import skate_report

            res["skate"] = skate_report(m, filled, todo)
        stage = "write"
        _write_spliced(path, out, filled, todo)
        res.update(status="ok", stage=None)
    except Exception as e:  # noqa: BLE001  (a bad file is reported, never fatal)
        res.update(error=f"{type(e).__name__}: {e}", stage=stage)
    res["seconds"] = time.perf_counter() - t0
    return res


def _write_spliced(src: str, out: Path, filled: Any, todo: np.ndarray) -> None:
    """A BVH from a BVH: the input's own bytes (hierarchy, frame count and time, each frame's line, its line
    endings: CRLF stays CRLF) with only the lines of the filled frames replaced, so nothing outside the gaps
    changes by a byte. Only the filled frames are formatted. Other formats: ``write_motion``."""
    from ..core.motion import Motion
    from ..io.atomic import atomic_write
    from ..io.bvh import format_bvh

    if Path(src).suffix.lower() != ".bvh" or out.suffix.lower() != ".bvh":
        write_motion(out, filled)
        return
    old = Path(src).read_bytes().splitlines(keepends=True)
    o = next(i for i, line in enumerate(old) if line.lstrip().lower().startswith(b"frame time")) + 1
    rows = [i for i in range(o, len(old)) if old[i].strip()]
    if len(rows) != len(todo):
        write_motion(out, filled)   # not one line per frame: the whole clip as written by write_bvh
        return
    at = np.flatnonzero(todo)
    if at.size:
        sub = Motion(filled.skeleton, filled.rotations[at], filled.positions[at], filled.fps, filled.name)
        new = format_bvh(sub).splitlines()
        n = next(i for i, line in enumerate(new) if line.lstrip().lower().startswith("frame time")) + 1
        for k, t in enumerate(at):
            line = old[rows[t]]
            end = line[len(line.rstrip(b"\r\n")):]   # the input's own line ending (none on a last line without)
            old[rows[t]] = new[n + k].encode("ascii") + end
    data = b"".join(old)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    atomic_write(out, write)


_MODELS: dict[str, Any] = {}


def _cached_model(name: str, load: Any) -> Any:
    if name not in _MODELS:
        _MODELS[name] = load(name)
    return _MODELS[name]


def run_batch_infill(src: str, out_dir: str, model: str = default_model("infill"), gaps_file: str | None = None,
                     frozen: int = 0, temperature: float = 0.0, seed: int = 0, progress: bool = True,
                     use_ray: bool = False, ray_address: str | None = None, workers: int | None = None,
                     chunk: int | None = None, fmt: str = "bvh", adapt: float = 0.0, adapt_steps: int = 0,
                     plant_feet: bool = True) -> dict[str, Any]:
    """Fill every clip under ``src``; writes and returns the report (see the module docstring); ``plant_feet``
    False leaves the body in-fill's feet unplanted (``--no-plant-feet``). With
    ``use_ray`` / ``ray_address`` the same per-file function runs as Ray tasks (`batch.runner.run_files`).
    Every argument is checked before any work (``BatchError`` naming it): the output folder, the model
    (an any-order in-filling checkpoint), ``frozen`` >= 0, the gap file (its shape, every gap inside its clip's
    frames; keys naming no input clip are warned about on stderr and listed in the report's ``gaps_unmatched``)."""
    from ..models.registry import check_model

    out = Path(out_dir)
    if not gaps_file and not frozen:
        raise BatchError("nothing to fill: give --gaps FILE.json and/or --frozen N")
    if frozen < 0:
        raise BatchError(f"--frozen: expected a frame count >= 1 (0: off), got {frozen}")
    if adapt < 0 or adapt > 600:
        raise BatchError(f"--adapt: expected 0-600 seconds of Learn This Action per clip (0: off), got {adapt:g}")
    if adapt_steps < 0 or adapt_steps > 100000:
        raise BatchError(f"--adapt-steps: expected 0-100000 learning steps per clip (0: off), got {adapt_steps}")
    if fmt not in ("bvh", "fbx", "blend"):
        raise BatchError(f"--format: expected bvh, fbx or blend, got {fmt!r}")
    check_output_dir(out, "--out", (src,))
    try:
        check_model(model, "infill")
    except MotioncoreError as e:
        raise BatchError(str(e)) from None
    gaps: dict[str, Any] = {}
    if gaps_file:
        gaps = _read_gaps(gaps_file)
    files = discover(src, exclude=out, suffix=CLIP_SUFFIXES)
    if not files:
        raise BatchError(f"no .bvh, .fbx or .blend files under {src!r}")
    gaps, unmatched = _match_gaps(gaps, files, gaps_file)
    if unmatched and not gaps and not frozen:
        raise BatchError(f"--gaps {gaps_file}: nothing to fill: no key names a clip in {src} ({_listed(unmatched)}; "
                         f"keys are clip base names such as {files[0].stem!r})")
    _check_gap_ranges(gaps, files, gaps_file)
    if unmatched:   # one gaps file for a shot, this run over part of its folder: said, and the run goes on
        print(f"batch infill: warning: --gaps {gaps_file}: {len(unmatched)} key(s) name no clip in {src}, left out: "
              f"{_listed(unmatched)} (report.json: gaps_unmatched)", file=sys.stderr)
    refused = _check_joints(files, model)
    meta: dict[str, Any] = {"job": "infill", "src": str(src), "out": str(out), "model": model, "gaps_file": gaps_file,
                            "gaps_unmatched": unmatched,
                            "frozen": frozen, "temperature": temperature, "seed": seed, "adapt": adapt,
                            "adapt_steps": adapt_steps,
                            "plant_feet": plant_feet,
                            "started": datetime.now(UTC).isoformat(),
                            "mode": "ray" if (use_ray or ray_address) else "in-process"}
    return run_job(fill_file, files, out, fmt, {"model_name": model, "gaps": gaps, "frozen": frozen,
                                                "temperature": temperature, "seed": seed, "fmt": fmt,
                                                "adapt": adapt, "adapt_steps": adapt_steps,
                                                "plant_feet": plant_feet}, meta,
                   desc="infill", unit="clip", progress=progress, use_ray=use_ray, ray_address=ray_address,
                   workers=workers, chunk=chunk, refused=refused,
                   totals=lambda rs: {"frames_filled": sum(r.get("frames_filled", 0) for r in rs if r["status"] == "ok")})


def _check_joints(files: Sequence[Path], model: str) -> dict[Path, str]:
    """Before any work: {file: one line} for the BVH inputs whose body cannot be mapped onto the model's
    (`batch.run.check_skeletons`: each distinct skeleton once, on its first clip's frames)."""
    from ..core.skeleton import Skeleton
    from ..models.checkpoint import read_meta
    from ..models.registry import resolve
    from .run import check_skeletons

    sk = Skeleton.from_dict(read_meta(resolve(model))["skeleton"])
    return {f: why.replace("give --map FILE", "retarget it first with --map FILE") for f, why in
            check_skeletons([f for f in files if read_header_names(f) != list(sk.names)], sk, None).items()}


def read_header_names(f: Path) -> list[str] | None:
    from ..io.bvh import read_bvh_header

    try:
        return list(read_bvh_header(f)[0].names) if f.suffix.lower() == ".bvh" else None
    except (MotioncoreError, OSError):
        return None


def _read_gaps(gaps_file: str) -> dict[str, Any]:
    """The gap file, its shape checked: ``{"clip": [[start, end], ...]}`` with whole numbers."""
    try:
        gaps = json.loads(Path(gaps_file).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BatchError(f"--gaps {gaps_file}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(gaps, dict) or not all(isinstance(v, list) for v in gaps.values()):
        raise BatchError(f"--gaps {gaps_file}: expected {{\"clip name\": [[start, end], ...]}}")
    for k, v in gaps.items():
        for g in v:
            if (not isinstance(g, list) or len(g) != 2 or not all(type(x) is int for x in g)
                    or not 0 <= g[0] < g[1]):
                raise BatchError(f"--gaps {gaps_file}: {k!r}: gap {g!r} is not [start, end] with 0 <= start < end "
                                 "(whole frames, end exclusive)")
    return gaps


def _match_gaps(gaps: dict[str, Any], files: Sequence[Path], gaps_file: str | None
                ) -> tuple[dict[str, Any], list[str]]:
    """(gaps keyed by each input's base name, the keys that name no input clip). A key may be the base name or
    the file name (``clip.bvh``). Keys naming no clip are left for the caller to warn about: one gaps file serves
    a shot, and a run over part of the shot's folder uses the keys of its clips."""
    stems = {f.stem for f in files}
    names = {f.name: f.stem for f in files}
    out: dict[str, Any] = {}
    unknown = []
    for k, v in gaps.items():
        stem = k if k in stems else names.get(k)
        if stem is None:
            unknown.append(k)
        else:
            out.setdefault(stem, []).extend(v)
    return out, unknown


def _listed(keys: Sequence[str], most: int = 8) -> str:
    return ", ".join(repr(u) for u in keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _check_gap_ranges(gaps: Mapping[str, Any], files: Sequence[Path], gaps_file: str | None) -> None:
    """Before any work (nothing written): every gap of every BVH input against its clip's frame count, read from
    its header (`io.bvh.read_bvh_header`). A gap past a clip's end stops the run (``BatchError``, exit 2) with
    one line naming the clip, the gap and the clip's length (and how many more are out). A header that cannot
    be read, and .fbx / .blend clips, are left to the per-file job (stage ``gaps``)."""
    from ..io.bvh import read_bvh_header

    bad = []
    for f in files:
        if f.stem not in gaps or f.suffix.lower() != ".bvh":
            continue
        try:
            T = read_bvh_header(f)[2]
        except (MotioncoreError, OSError):
            continue
        bad += [(f, g, T) for g in gaps[f.stem] if g[1] > T]
    if bad:
        f, g, T = bad[0]
        more = f" ({len(bad) - 1} more gap(s) past their clip's end)" if len(bad) > 1 else ""
        raise BatchError(f"--gaps {gaps_file}: {f.stem!r} ({f}): gap [{g[0]}, {g[1]}] is past the clip's end: it has "
                         f"{T} frames (0-{T - 1}; end exclusive, so end <= {T}){more}; nothing was written")
