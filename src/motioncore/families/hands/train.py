"""The ``infill-hands`` recipe: a ridge map from each finger gap's inputs to a smooth correction over Blender's
Bezier (``families.hands.fill``), chosen on a validation take and bundled fp16 (``motioncore train infill-hands``).

Data: ManipNet's 6 training takes at 30 fps, the right hands and the left hands mirrored onto the right
(``infill.rate.mirror_x``; the left bone offsets are x-mirrors), cut like ``eval hands``' windows at stride 2,
with the keys of the animator's tasks (``TRAIN_TASKS``: the eval's two and two other gap shapes). Every gap
appears twice, with the object and without it (a rig without an object sends none), so the object's worth is
measured on one model. The test takes (mug3, teapot3) are never read.

Choice: the ridge penalty and the correction's weight are chosen on the validation take (``VAL_TAKE``, its
right hand at the eval's stride, held out from the fit), by the mean over the eval's two tasks of the finger
error's ratio to Bezier; then the map is refitted on all 6 takes with that choice.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from motioncore.families.anyorder.evaluate_hands import TASKS, HandsTask, bezier_channels, hand_keys
from motioncore.families.hands import fill as hf

__all__ = ["VAL_TAKE", "TRAIN_TASKS", "gap_set", "ridge", "errors", "choose", "to_model", "train", "train_from_args"]

VAL_TAKE = "mug1"
TRAIN_TASKS = {"wrist-every-10": TASKS["wrist-every-10"](), "wrist-only": TASKS["wrist-only"](),
               "wrist-every-5-short": HandsTask(every=5, window=20), "wrist-every-1-long": HandsTask(every=1, window=60)}
LAMBDAS = (1000.0, 3000.0, 10000.0, 30000.0, 100000.0)
WEIGHTS = (0.25, 0.5, 0.75, 1.0)
STD_FLOOR = 0.05
# finger gaps shorter than this (frames at 30 fps) stay Blender's Bezier: on the training takes the map's
# correction is worse than Bezier below it (5 frames 1.11x, 9 1.04x, 14 1.01x, 20 0.995x, 30 0.987x)
MIN_GAP = 20


def _mirrored(clip):
    """A left-hand clip as its mirror image (a right hand), with the object mirrored too."""
    from dataclasses import replace

    from motioncore.data.datasets import Clip
    from motioncore.infill import mirror_x

    q, p = mirror_x(clip.motion.rotations, clip.motion.positions)
    oq, op = mirror_x(clip.extras["object_rotations"][:, None], clip.extras["object_positions"][:, None])
    return Clip(replace(clip.motion, rotations=q, positions=p, name=f"{clip.name} (left, mirrored)"), clip.split,
                clip.labels, {"object_rotations": oq[:, 0], "object_positions": op[:, 0]})


def gap_set(clip, task: HandsTask, stride: int, use_object: bool = True) -> dict[str, np.ndarray]:
    """The finger gaps of ``clip``'s windows under ``task``'s keys: inputs "x" (N, D), target coefficients "c"
    (N, K, F * 3), and for scoring "bez", "truth" (N, n, F, 4), "basis" (n, K), "starts" (N,)."""
    from motioncore.data.windows import window_starts

    m = clip.motion
    keys = hand_keys(task, tuple(m.skeleton.names), 0)
    J = m.skeleton.num_joints
    starts = np.asarray(list(window_starts(m.num_frames, task.window, stride)))
    idx = starts[:, None] + np.arange(task.window)
    q = m.rotations[idx]  # (N, T, J, 4)
    bez = bezier_channels(q, keys)
    (gap,) = hf.finger_gaps(keys[:, 1:J].all(1))
    a, b, closed = gap
    wk = keys[:, 0] & keys[:, J]
    has = use_object and "object_rotations" in clip.extras
    x = []
    for i, s in enumerate(starts):
        wq, wp = hf.interp_track(q[i, :, 0], m.positions[s:s + task.window, 0], wk)
        obj = (clip.extras["object_rotations"][idx[i]], clip.extras["object_positions"][idx[i]]) if has else None
        x.append(hf.gap_inputs(bez[i, :, 1:], wq, wp, gap, obj))
    basis = hf.gap_basis(b - a, closed)
    fb, ft = bez[:, a:b, 1:], q[:, a:b, 1:]
    res = hf.gap_residual(fb.reshape(-1, J - 1, 4), ft.reshape(-1, J - 1, 4)).reshape(len(starts), b - a, -1)
    c = np.einsum("kn,bnf->bkf", np.linalg.pinv(basis), res)
    return {"x": np.stack(x), "c": c, "bez": fb, "truth": ft, "basis": basis, "starts": starts}


def ridge(x: np.ndarray, c: np.ndarray, lam: float) -> dict[str, np.ndarray]:
    """Ridge regression of coefficients (N, K, F3) on standardised inputs (N, D), the intercept unpenalised:
    {"mean", "std", "weight" (D, K * F3), "bias" (K * F3,)}."""
    x = np.asarray(x, np.float64)
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd < 1e-9, 1.0, np.maximum(sd, STD_FLOOR))
    z = (x - mu) / sd
    y = c.reshape(len(c), -1)
    ym, zm = y.mean(0), z.mean(0)
    zc = z - zm
    w = np.linalg.solve(zc.T @ zc + lam * np.eye(z.shape[1]), zc.T @ (y - ym))
    return {"mean": mu, "std": sd, "weight": w, "bias": ym - zm @ w}


def predict(fit: dict[str, np.ndarray], x: np.ndarray, k: int) -> np.ndarray:
    return (((np.asarray(x, np.float64) - fit["mean"]) / fit["std"]) @ fit["weight"] + fit["bias"]).reshape(len(x), k, -1)


def errors(s: dict[str, np.ndarray], coef: np.ndarray | None = None) -> np.ndarray:
    """(N,) mean finger angle (degrees) per gap of a ``gap_set``, Bezier corrected by ``coef`` (None: Bezier)."""
    from motioncore.core.rotations import quat_angle

    f = s["bez"]
    if coef is not None:
        delta = np.einsum("nk,bkf->bnf", s["basis"], coef).reshape(f.shape[:3] + (3,))
        from motioncore.core.rotations import axis_angle_to_quat, quat_mul, quat_normalize

        f = quat_normalize(quat_mul(f, axis_angle_to_quat(delta)))
    return np.degrees(quat_angle(f, s["truth"])).mean((1, 2))


def _stack(sets: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([s["x"] for s in sets]), np.concatenate([s["c"] for s in sets])


def build(clips, stride: int, progress: bool = True) -> list[dict]:
    """Every task's gap set of every clip, with the object and without."""
    out = []
    for c in clips:
        for name, task in TRAIN_TASKS.items():
            for obj in (True, False):
                out.append({**gap_set(c, task, stride, obj), "task": name, "take": c.name, "object": obj})
        if progress:
            print(f"  {c.name}: {sum(len(s['x']) for s in out if s['take'] == c.name)} gaps", flush=True)
    return out


def choose(train_sets: list[dict], val_sets: list[dict]) -> tuple[dict, list[dict]]:
    """The (lambda, weight) with the least mean ratio to Bezier on the validation sets (the eval's tasks, with
    the object); returns the choice and the table of every pair."""
    x, c = _stack(train_sets)
    k = c.shape[1]
    val = [s for s in val_sets if s["task"] in TASKS and s["object"]]
    base = {s["task"]: errors(s).mean() for s in val}
    table = []
    for lam in LAMBDAS:
        fit = ridge(x, c, lam)
        preds = {s["task"]: predict(fit, s["x"], k) for s in val}
        for w in WEIGHTS:
            r = {s["task"]: float(errors(s, w * preds[s["task"]]).mean() / base[s["task"]]) for s in val}
            noobj = [t for t in val_sets if t["task"] in TASKS and not t["object"]]
            r_no = {t["task"]: float(errors(t, w * predict(fit, t["x"], k)).mean() / base[t["task"]]) for t in noobj}
            table.append({"lambda": lam, "weight": w, "ratio_to_bezier": r, "ratio_to_bezier_no_object": r_no,
                          "mean": float(np.mean(list(r.values())))})
    best = min(table, key=lambda row: row["mean"])
    return {**best, "bezier_deg": {t: float(v) for t, v in base.items()}}, table


def to_model(fit: dict[str, np.ndarray], weight: float, in_dim: int, k: int = hf.K_BASIS):
    """The ridge fit (times the chosen weight) as the linear ``InfillHands`` map."""
    import torch

    from motioncore.families.hands.model import InfillHands, InfillHandsConfig

    model = InfillHands(InfillHandsConfig(in_dim=in_dim, basis=k))
    with torch.no_grad():
        model.mean.copy_(torch.as_tensor(fit["mean"]))
        model.std.copy_(torch.as_tensor(fit["std"]))
        model.out.weight.copy_(torch.as_tensor(weight * fit["weight"].T))
        model.out.bias.copy_(torch.as_tensor(weight * fit["bias"]))
    return model.eval()


def _takes(clips, take: str, keep: bool) -> list:
    return [c for c in clips if (c.name.split("/")[0] == take) == keep]


def train(out: Path, stride: int = 2, progress: bool = True, cv: bool = False) -> dict:
    """Choose on the validation take (``cv``: on each training take held out in turn, the mean), refit on all 6 training takes, write ``out``.json/.safetensors (fp16)."""
    import platform

    import torch

    from motioncore.data import load
    from motioncore.data.registry import HANDS_CITE
    from motioncore.models.checkpoint import save_model

    t0 = time.time()
    right = load("manipnet-right", "train", fps=30.0, progress=progress)
    left = [_mirrored(c) for c in load("manipnet-left", "train", fps=30.0, progress=progress)]
    if progress:
        print(f"gaps of {len(right)} right and {len(left)} mirrored left training takes (stride {stride})")
    sets = build(right + left, stride, progress)
    tables = {}
    for v in [c.name.split("/")[0] for c in right] if cv else [VAL_TAKE]:
        fit_sets = [s for s in sets if s["take"].split("/")[0] != v]
        val_clip = _takes(right, v, True)[0]
        val_sets = [{**gap_set(val_clip, TRAIN_TASKS[n], TRAIN_TASKS[n].stride, obj), "task": n, "object": obj}
                    for n in TASKS if n in TRAIN_TASKS for obj in (True, False)]
        tables[v] = choose(fit_sets, val_sets)
        if progress:
            print(f"  validation take {v}: best lambda {tables[v][0]['lambda']:g}, weight {tables[v][0]['weight']} "
                  f"(ratio to Bezier {tables[v][0]['mean']:.3f})", flush=True)
    table = [{**row, "mean": float(np.mean([tables[v][1][i]["mean"] for v in tables]))}
             for i, row in enumerate(tables[next(iter(tables))][1])]
    best = min(table, key=lambda row: row["mean"]) if cv else tables[VAL_TAKE][0]
    if progress:
        for row in table:
            print(f"  lambda {row['lambda']:g} weight {row['weight']}: mean ratio to Bezier {row['mean']:.3f}")
        print(f"chosen: lambda {best['lambda']:g}, weight {best['weight']} (mean ratio {best['mean']:.3f})")
    x, c = _stack(sets)
    fit = ridge(x, c, best["lambda"])
    model = to_model(fit, best["weight"], x.shape[1])
    J = right[0].motion.skeleton
    meta = {"task": "infill", "fps": 30.0, "root_joint": 0, "skeleton": J.to_dict(), "max_gap": 90,
            "min_gap": MIN_GAP,
            "recipe": {"method": "ridge over Bezier, sine basis per gap", "basis": hf.K_BASIS, "points": hf.M_POINTS,
                       "lambda": best["lambda"], "weight": best["weight"], "stride": stride,
                       "tasks": {k: v.__dict__ for k, v in TRAIN_TASKS.items()},
                       "validation": "leave-one-take-out over the 6 training takes" if cv else f"take {VAL_TAKE}"},
            "validation": {"takes": list(tables), "chosen": best, "table": table,
                           "per_take": {v: t[0] for v, t in tables.items()}},
            "training_data": f"ManipNet right hands and mirrored left hands, 6 training takes "
                             f"({', '.join(c.name.split('/')[0] for c in right)}), 30 fps: {len(x)} gaps "
                             "(half with the object, half without)",
            "licence": "CC BY-NC 4.0 (ManipNet data)", "citation": HANDS_CITE, "bundled_name": out.name,
            "torch": torch.__version__, "device": f"cpu ({platform.machine()}, 1 thread(s))",
            "object_cond": True, "hand": "r", "train_wall_s": round(time.time() - t0, 1)}
    save_model(out, model, "infill-hands", model.cfg.to_dict(), meta, half=True)
    if progress:
        print(f"wrote {out}.json ({time.time() - t0:.0f} s)")
    return meta


def train_from_args(args) -> int:
    out = Path(args.out or "runs/infill-hands") / "infill-hands" if not str(args.out or "").endswith("infill-hands") \
        else Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    train(out, progress=not args.quiet, cv=bool(getattr(args, "cv", False)))
    print(json.dumps({"checkpoint": f"{out}.json"}))
    return 0
