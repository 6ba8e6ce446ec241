"""In-fill's Keys = Reduced against Every Frame in real Blender (issue 49's targets): the CMU subject-07 walks and the
LAFAN1 clip (../shared/mocap, evaluation only) imported with Blender's BVH importer at its defaults, 12 gaps of 15
and of 30 frames (at 30 fps: CMU's 120 fps clips get 60 and 120 scene frames, the same time), filled with
``bpy.ops.motioncore.infill`` through a live server (infill-body, temperature 0), once with each Keys setting
(tests/blender/reduced_keys.py).

    PYTHONPATH=src:server python bench/reduced_keys.py [--blender 5.0.1] [--lengths 15 30] [--out DIR]

Per set: keys written / keys of the every-frame fill; world joint positions of Blender's reduced curve against its
every-frame curve (max, mean cm); jerk (mean |third difference| of the joint positions, cm / frame^3) of both, over
the filled frames (the curve written) and over the gaps and 3 frames either side (the way in and out of them); mean position error (cm) and rotation error (deg) against the deleted truth of both.
Then the time to reduce 10,000 filled keys (`keyfit` alone, and the add-on's plan with its world check) against
the same run's baseline, a plain every-frame copy of the values.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import blender_infill as bi  # noqa: E402

from motioncore.core.gaps import context_frames  # noqa: E402

GAPS = 12


def lafan_clip() -> str:
    from motioncore.data.cache import data_root, unpack
    folder = unpack(data_root() / "lafan1_sample" / "lafan1_sample.tar.xz", progress=False)
    return str(folder / "lafan1_walk_7184f.bvh")


def cmu_walks() -> list[str]:
    first = Path(bi.cmu_test_clips()[0])   # 07_01: the walks of subject 07 lie beside it
    return sorted(str(p) for p in first.parent.glob("07_*.bvh"))


def clip_specs(lengths: tuple[int, ...]) -> list[dict]:
    from motioncore.io.bvh import read_bvh
    out = []
    for length in lengths:
        have = 0
        for p in cmu_walks():
            if have >= GAPS:
                break
            mo = read_bvh(p)
            ctx = context_frames(mo.fps)
            n = int(round(length * mo.fps / 30.0))
            gaps = bi.place_gaps(mo.num_frames, n, GAPS - have, context=ctx)
            if gaps:
                have += len(gaps)
                out.append({"name": f"cmu-{Path(p).stem}-{length}", "set": f"CMU 07|{length}", "path": p,
                            "rotate_mode": None, "fps": mo.fps, "gaps": gaps, "context": ctx, "unit_cm": 2.54 / 0.45})
        p = lafan_clip()
        mo = read_bvh(p)
        ctx = context_frames(mo.fps)
        out.append({"name": f"lafan-{length}", "set": f"LAFAN1|{length}", "path": p, "rotate_mode": None,
                    "fps": mo.fps, "gaps": bi.place_gaps(mo.num_frames, length, GAPS, context=ctx), "context": ctx,
                    "unit_cm": 1.0, "figure": ["LeftUpLeg", "rotation_euler", 6] if length == 15 else None,
                    "edit": "LeftArm" if length == 15 else None})
    return out


def run(spec: dict, version: str, workdir: Path) -> tuple[dict, dict]:
    return bi.run_driver(spec, version, workdir, "reduced_keys.py")


def world(d: dict, name: str, key: str, cm: float) -> np.ndarray:
    """(F, B, 3) world joint positions in cm of the evaluated poses ``key``."""
    return d[f"{name}/{key}"][..., :3, 3] @ d[f"{name}/object"][:3, :3].T * cm


def jerk(p: np.ndarray, frames: np.ndarray) -> float:
    """Mean |third difference| of positions (F, B, 3) over runs of consecutive ``frames``."""
    cut = np.flatnonzero(np.diff(frames) > 1) + 1
    vals = [np.linalg.norm(np.diff(q, 3, axis=0), axis=-1) for q in np.split(p, cut) if len(q) > 3]
    return float(np.concatenate([v.ravel() for v in vals]).mean())


def figures(d: dict, info: dict, name: str, cm: float) -> dict:
    dense, red = world(d, name, "dense", cm), world(d, name, "reduced", cm)
    dev = np.linalg.norm(red - dense, axis=-1)
    jf = d[f"{name}/jframes"]
    err = {tag: bi.errors(d, {**info, "unit_cm": cm}, name, tag) for tag in ("dense", "reduced")}
    fr = d[f"{name}/frames"]
    jin = {tag: jerk(world(d, name, tag, cm), fr) for tag in ("dense", "reduced")}   # the filled frames alone
    return {"jerk_in_dense": jin["dense"], "jerk_in_reduced": jin["reduced"], "keys": info["keys_reduced"], "every": info["keys_dense"], "max_cm": float(dev.max()),
            "sum_cm": float(dev.sum()), "n": int(dev.size), "jerk_dense": jerk(world(d, name, "j_dense", cm), jf),
            "jerk_reduced": jerk(world(d, name, "j_reduced", cm), jf), "err_dense": err["dense"],
            "err_reduced": err["reduced"], "gaps": len(d[f"{name}/frames"])}


def table(spec: dict, d: dict, res: dict, version: str) -> tuple[str, dict]:
    sets: dict[str, list[dict]] = {}
    for c in spec["clips"]:
        info = res[c["name"]]
        if "error" in info:
            raise RuntimeError(info["error"])
        sets.setdefault(c["set"], []).append({**figures(d, info, c["name"], c["unit_cm"]), "gaps_n": len(c["gaps"])})
    rows = [f"Blender {version}", "",
            "| clip | gap frames (30 fps) | gaps | keys written / every frame | reduced vs dense: max / mean cm | "
            "jerk in the gaps: reduced / dense | jerk, gaps and 3 frames either side: reduced / dense | error vs truth, dense: cm / deg | reduced: cm / deg |",
            "|---|---|---|---|---|---|---|---|---|"]
    out = {}
    for s, fs in sets.items():
        keys, every = sum(f["keys"] for f in fs), sum(f["every"] for f in fs)
        mx, mean = max(f["max_cm"] for f in fs), sum(f["sum_cm"] for f in fs) / sum(f["n"] for f in fs)
        w = np.array([f["gaps"] for f in fs], np.float64)
        jd, jr, jid, jir = (float(np.average([f[k] for f in fs], weights=w))
                            for k in ("jerk_dense", "jerk_reduced", "jerk_in_dense", "jerk_in_reduced"))
        ed = np.average([f["err_dense"] for f in fs], axis=0, weights=w)
        er = np.average([f["err_reduced"] for f in fs], axis=0, weights=w)
        clip, length = s.split("|")
        rows.append(f"| {clip} | {length} | {sum(f['gaps_n'] for f in fs)} | {keys:,} / {every:,} = "
                    f"{keys / every:.3f} | {mx:.3f} / {mean:.4f} | {jir:.4f} / {jid:.4f} | {jr:.4f} / {jd:.4f} | {ed[0]:.3f} / {ed[1]:.3f} | "
                    f"{er[0]:.3f} / {er[1]:.3f} |")
        out[s] = {"ratio": keys / every, "max_cm": mx, "mean_cm": mean, "jerk": [jr, jd], "jerk_in": [jir, jid], "err_dense": ed.tolist(),
                  "err_reduced": er.tolist()}
    return "\n".join(rows), out


def timing(n_keys: int = 10_000, repeats: int = 3) -> str:
    """Seconds to reduce ``n_keys`` filled keys of smooth motion (sums of slow sines, 22 bones x 3 Euler channels,
    15-frame gaps) with `keyfit.fit_span`, against the same run's baseline (copying the values every frame)."""
    from motioncore.core import keyfit
    rng = np.random.default_rng(0)
    n_span = 15
    spans = n_keys // n_span
    t = np.arange(n_span)[:, None]
    vals = sum(rng.normal(0, 0.3, (1, spans)) * np.sin(t / rng.uniform(4, 12, (1, spans)) + rng.uniform(0, 6, (1, spans)))
               for _ in range(3))
    tol = 0.005 / 0.8 / np.sqrt(3.0) * 0.5
    best = batch = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        kept = sum(keyfit.fit_span(vals[:, i], tol)[0].size for i in range(spans))
        best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        kept_b = sum(k.size for k, _ in keyfit.fit_spans(vals, np.full(spans, tol)))
        batch = min(batch, time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(20):
        _ = [vals[:, i].copy() for i in range(spans)]
    base = (time.perf_counter() - t0) / 20
    return (f"reduced {spans * n_span:,} filled keys to {kept:,} in {best:.3f} s span by span, to {kept_b:,} in "
            f"{batch:.3f} s batched (`fit_spans`; best of {repeats}); baseline (a copy of every value) {base:.4f} s: "
            f"{best / base:.0f}x and {batch / base:.0f}x")


def figure(d: dict, name: str, out: Path, channel: int | None = None, title: str = "") -> Path:
    """One channel of the figure bone (the one that moves most, unless ``channel``), as Blender evaluated its F-curves
    (every 0.1 frame): the every-frame fill, the reduced keys with their handles and the curve through them, and the
    animator's keys."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    chans = sorted(int(k[len(f"{name}/fig_dense"):]) for k in d if k.startswith(f"{name}/fig_dense")
                   and k[len(f"{name}/fig_dense"):].isdigit())
    c = channel if channel is not None else max(chans, key=lambda i: np.ptp(d[f"{name}/fig_dense{i}"][:, 1]))
    dense, red = d[f"{name}/fig_dense{c}"], d[f"{name}/fig_reduced{c}"]
    keys, user = d[f"{name}/fig_reduced_keys{c}"], d[f"{name}/fig_user{c}"]
    lo, hi = dense[0, 0], dense[-1, 0]
    deg = 180.0 / np.pi
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    ax.plot(dense[:, 0], dense[:, 1] * deg, color="0.55", lw=3.0, label="In-fill, Keys = Every Frame")
    ax.plot(red[:, 0], red[:, 1] * deg, color="tab:blue", lw=1.3, label="In-fill, Keys = Reduced")
    gen = keys[:, 6] > 0
    k = keys[gen & (keys[:, 0] >= lo) & (keys[:, 0] <= hi)]
    for row in k:
        ax.plot([row[2], row[0], row[4]], [row[3] * deg, row[1] * deg, row[5] * deg], color="tab:orange", lw=0.9)
    ax.plot(k[:, 2], k[:, 3] * deg, "o", ms=3, color="tab:orange", mfc="white")
    ax.plot(k[:, 4], k[:, 5] * deg, "o", ms=3, color="tab:orange", mfc="white", label="reduced keys' handles")
    ax.plot(k[:, 0], k[:, 1] * deg, "D", ms=5, color="tab:orange", label=f"reduced keys ({len(k)})")
    u = user[(user[:, 0] >= lo) & (user[:, 0] <= hi)]
    ax.plot(u[:, 0], u[:, 1] * deg, "s", ms=4, color="black", label="the animator's keys")
    ax.set_xlabel("frame")
    ax.set_ylabel(f"rotation_euler[{c}] (degrees)")
    ax.set_title(title or f"{name}: one channel, F-curves evaluated by Blender")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out)
    return out


def timing_plan(repeats: int = 3) -> str:
    """Seconds for the add-on's whole Keys = Reduced plan (fit per channel, check in world joint positions, tighten)
    of 22 quaternion bones over eight 15-frame gaps of the LAFAN1 clip's own motion (10,560 filled keys), against
    the same run's baseline (the every-frame positions the check computes, once)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.addon import addon_module

    from motioncore.io.bvh import read_bvh
    kr = addon_module("core.keyreduce")
    mo = read_bvh(lafan_clip())
    sk = mo.skeleton
    q = np.asarray(mo.rotations[2000:2280], np.float64)
    par = list(sk.parents)
    off = np.asarray(sk.offsets, np.float64)
    heads = np.zeros((len(par), 3))
    for j, p in enumerate(par):
        heads[j] = off[j] + (heads[p] if p >= 0 else 0.0)
    rig = {"bones": list(sk.names), "modes": ["QUATERNION"] * len(par), "heads": heads, "up": par,
           "offsets": {b: None for b in sk.names}, "root": sk.names[0]}
    frames = np.arange(q.shape[0], dtype=np.float64)
    todo = np.zeros(q.shape[0], bool)
    for g in range(8):
        todo[20 + 32 * g:35 + 32 * g] = True
    raw = [q[:, j] for j in range(len(par))]
    best, plain, plan = np.inf, np.inf, None
    for _ in range(repeats):
        for batched in (True, False):
            chans = [kr.Channel(f"b{j}", b, raw[j].copy(), todo.copy(), j, "QUATERNION")
                     for j, b in enumerate(sk.names)]
            t0 = time.perf_counter()
            p = kr.plan(rig, frames, raw, chans, 0.5, 0.1, 1.0, batched=batched)
            dt = time.perf_counter() - t0
            if batched:
                best, plan = min(best, dt), p
            else:
                plain = min(plain, dt)
    t0 = time.perf_counter()
    kr.positions(rig, dict(enumerate(raw)), rig["modes"], np.zeros((q.shape[0], 3)))
    base = time.perf_counter() - t0
    return (f"the add-on's plan: {plan.every_frame:,} filled keys to {plan.written:,} (max {plan.max_cm:.3f} cm, mean "
            f"{plan.mean_cm:.4f}) in {best:.3f} s batched, {plain:.3f} s channel by channel (best of {repeats}); baseline "
            f"(the joint positions once) {base:.4f} s: {best / base:.0f}x and {plain / base:.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blender", default="5.0.1")
    ap.add_argument("--lengths", type=int, nargs="+", default=[15, 30])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--only", default="", help="run the clips whose name contains this")
    ap.add_argument("--figure", type=Path, default=None, help="also draw the figure clip's channel to this PNG")
    a = ap.parse_args()
    print(timing())
    print(timing_plan())
    if a.timing_only:
        return
    work = a.out or Path(tempfile.mkdtemp(prefix="reduced-keys-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = {"clips": [c for c in clip_specs(tuple(a.lengths)) if a.only in c["name"]]}
    d, res = run(spec, a.blender, work)
    text, _ = table(spec, d, res, a.blender)
    for c in spec["clips"]:
        print(c["name"], res[c["name"]].get("report_reduced"))
    print(text)
    (work / "table.md").write_text(text)
    if a.figure:
        name = next(c["name"] for c in spec["clips"] if c.get("figure"))
        c = next(c for c in spec["clips"] if c.get("figure"))
        title = (f"{Path(c['path']).stem} in Blender {a.blender}: {c['figure'][0]}, two {name.split('-')[-1]}-frame "
                 "gaps (F-curves as Blender evaluates them)")
        print(f"figure: {figure(d, name, a.figure, title=title)}")
    print(f"arrays and reports in {work}")


if __name__ == "__main__":
    main()
