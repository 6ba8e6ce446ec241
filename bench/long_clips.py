"""Long clips at the cost of their gaps: `batch infill` and the server's whole-range `infill` request on a
20,000-frame 120 fps clip with 12 gaps against a 2,000-frame 120 fps clip with 3 gaps, in the same run.

The clips are real CMU 120 fps captures (subject 05, a test subject, the cmu05-09 set as `motioncore.data`
converts it: ASF joint names, cm) laid end to end and cut to length ("tiled"); every gap is 120 frames (1 s)
inside a take. Each `batch infill` is its own process (`python -m motioncore.cli batch infill ... --threads 1`):
wall time and its peak RSS. The server (`python -m motioncore_server --workers 1 --threads 1`, a fresh one per
clip, as an animator's session starts one) gets the add-on's request: the whole frame range on the model's
skeleton (the clip retargeted onto it), keys everywhere but the gaps, fps 120; the time is the request's, the
peak RSS the server's (VmHWM). Runs alternate (2,000, 20,000, 2,000, ...) so a busy machine slows both alike;
medians are printed with the ratio. Never asserts timings.

    python bench/long_clips.py [--repeats 3] [--long 20000] [--short 2000]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from _machine import cpu_name  # noqa: E402  (sibling module: bench scripts run as files)

GAP = 120


def tiled(T: int):
    """Subject 05's test takes end to end, cut to ``T`` frames (a Motion at 120 fps)."""
    from motioncore.core.motion import Motion
    from motioncore.data import load

    takes = [c.motion for c in load("cmu05-09", split="test", progress=False) if c.name.startswith("05_")]
    q, p, n, i = [], [], 0, 0
    while n < T:
        m = takes[i % len(takes)]
        q.append(m.rotations)
        p.append(m.positions)
        n, i = n + m.num_frames, i + 1
    return Motion(takes[0].skeleton, np.concatenate(q)[:T], np.concatenate(p)[:T], 120.0, f"cmu05_tiled_{T}")


def gaps_of(T: int, n: int) -> list[list[int]]:
    return [[int(s), int(s) + GAP] for s in np.linspace(200, T - 200 - GAP, n).astype(int)]


def run_batch(folder: Path, clip: Path, gaps: Path) -> tuple[float, float]:
    """(seconds, peak RSS MB) of one `batch infill` process."""
    out = folder / f"out_{clip.stem}_{time.perf_counter_ns()}"
    cmd = [sys.executable, "-m", "motioncore.cli", "batch", "infill", str(clip), "--out", str(out), "--gaps",
           str(gaps), "--quiet", "--threads", "1"]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    err = p.stderr.read() if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"batch infill failed ({p.returncode}): {err.strip()[-400:]}")
    rep = json.loads((out / "report.json").read_text())
    if rep["files"][0]["status"] != "ok":
        raise SystemExit(f"batch infill: {rep['files'][0]['error']}")
    return dt, usage.ru_maxrss / 1024.0


def model_request(m, gaps: list[list[int]]):
    """The add-on's whole-range request for clip ``m``: (rotations, root, known, joints) on the model's skeleton."""
    from motioncore.core.skeleton import Skeleton
    from motioncore.models.registry import load_model
    from motioncore.retarget import auto_map, clip_poses, retarget

    _, meta = load_model("infill-body")
    msk = Skeleton.from_dict(meta["skeleton"])
    conv = (meta.get("convention") or {}).get("mean_local_rotations")
    jm = auto_map(m.skeleton, msk, source_poses=clip_poses(m))
    r = retarget(m, msk, jm, convention=None if conv is None else np.asarray(conv, np.float64))
    known = np.ones(m.num_frames, bool)
    for s, e in gaps:
        known[s:e] = False
    return r.rotations, r.positions[:, int(meta["root_joint"])], known, list(msk.names)


def run_server(folder: Path, req) -> tuple[float, float]:
    """(request seconds, server peak RSS MB) on a fresh server."""
    from motioncore.wire.client import Client

    conn = folder / f"conn_{time.perf_counter_ns()}.json"
    p = subprocess.Popen([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--port", "0",
                          "--device", "cpu", "--workers", "1", "--threads", "1", "--log-level", "warning"],
                         stdout=subprocess.PIPE, text=True)
    try:
        if not p.stdout or not p.stdout.readline():
            raise SystemExit("server did not start")
        q, root, known, joints = req
        with Client(conn, timeout=600) as c:
            c.hello()
            t = time.perf_counter()
            reply = c.infill_rotations(q, root, known, model="infill-body", joints=joints, fps=120.0)
            dt = time.perf_counter() - t
        if reply.content.get("frames") != len(q):
            raise SystemExit(f"server infill: unexpected reply {reply.content}")
        hwm = [ln for ln in Path(f"/proc/{p.pid}/status").read_text().splitlines() if ln.startswith("VmHWM")]
        return dt, float(hwm[0].split()[1]) / 1024.0
    finally:
        p.terminate()
        p.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--long", type=int, default=20000)
    ap.add_argument("--short", type=int, default=2000)
    args = ap.parse_args()
    from motioncore.io.bvh import write_bvh

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sizes = {"short": (args.short, 3), "long": (args.long, 12)}
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {k: {"batch": [], "server": []} for k in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files, reqs = {}, {}
        for key, (T, n) in sizes.items():
            m = tiled(T)
            g = gaps_of(T, n)
            clip = folder / f"{m.name}.bvh"
            write_bvh(clip, m)
            (folder / f"gaps_{key}.json").write_text(json.dumps({m.name: g}))
            files[key] = (clip, folder / f"gaps_{key}.json")
            reqs[key] = model_request(m, g)
        for _ in range(args.repeats):
            for key in sizes:
                rows[key]["batch"].append(run_batch(folder, *files[key]))
                rows[key]["server"].append(run_server(folder, reqs[key]))
    print(f"# bench/long_clips.py, {datetime.now(UTC).date()}, {cpu_name()}, {os.cpu_count()} cores, one thread, "
          f"Python {platform.python_version()}; real CMU 120 fps takes (subject 05) tiled; gaps of {GAP} frames; "
          f"medians of {args.repeats} alternating runs\n")
    print("| path | clip | gaps | time (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    med = {}
    for path in ("batch", "server"):
        for key, (T, n) in sizes.items():
            t = statistics.median(r[0] for r in rows[key][path])
            mb = max(r[1] for r in rows[key][path])
            med[path, key] = (t, mb)
            print(f"| {'batch infill' if path == 'batch' else 'server infill (whole range)'} | {T:,} frames | {n} | "
                  f"{t:.1f} | {mb:.0f} |")
    print()
    for path in ("batch", "server"):
        (ts, ms), (tl, ml) = med[path, "short"], med[path, "long"]
        print(f"- {path}: {args.long:,} frames / {args.short:,} frames: time {tl / ts:.2f}x, peak RSS {ml / ms:.2f}x "
              f"({ml:.0f} MB)")


if __name__ == "__main__":
    main()
