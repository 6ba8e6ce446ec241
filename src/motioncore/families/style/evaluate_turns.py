"""How fast the style model's joints turn (issue 40): every joint's fastest frame-to-frame local rotation
change, walking in held-out and training styles' codes, on the demo path, a sharp 90 degree turn and the
judge's paths, against the training data's 99.9th percentile plus a margin.

Codes as a request makes them (`families.style.generate.StyleAdapter.fit`): held-out styles, ``n_exemplars`` exemplar
clips each (`style_heldout.pick_exemplars`, the clips `motioncore eval style` uses); training styles, each
style's fixed exemplar. The limit is `core.kinematics.rotation_step_limits` over the Bandai train split's
locomotion clips (every style), as `tests/controllers/test_controller_flips.py` and `eval style` use.

Legend: J joints, T frames.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from motioncore.core.kinematics import rotation_step_limits, rotation_steps
from motioncore.core.motion import Motion
from motioncore.tasks.paths import Path


def sharp_turn() -> Any:
    """3 m straight along +Z, then a right angle onto +X for 3 m, at a walk (as test_controller_flips)."""
    return Path(np.array([[0.0, 0.0], [0.0, 3.0], [3.0, 3.0]]), None, None, ("walk",) * 3)


def path_walk(ctl: Any, path: Any) -> Motion:
    """The walk the demo writes for ``path``: 1.5 x the planned time, cut on arrival."""
    track = ctl.track(path)
    ro = ctl.rollout([path], int(1.5 * track.duration * ctl.fps))
    arrived = np.flatnonzero(ro.progress[0] >= track.length - 5.0)
    return ro.motion(0, "walk").slice(0, int(arrived[0]) + 1 if len(arrived) else ro.frames)


def code_turns(ctl: Any, paths: dict[str, Any]) -> dict[str, np.ndarray]:
    """(J,) fastest per-frame turn (degrees) of each joint on each of ``paths`` (name -> Path: the demo's
    path, a sharp turn) and on the judged walks."""
    from motioncore.families.style.evaluate_judge import WALK_SPEED_MPS, walks

    out = {name: rotation_steps(path_walk(ctl, p).rotations).max(0) for name, p in paths.items()}
    out["judged walks"] = np.max([rotation_steps(m.rotations).max(0) for m in walks(ctl, WALK_SPEED_MPS)], 0)
    return out


def measure_turns(paths: dict[str, Any], model: str = "learnet-biped", n_exemplars: int = 3, margin: float = 0.10,
                  clips: list | None = None, progress: bool = True) -> dict[str, Any]:
    """Per code group (held-out fitted, training fitted) and path group (``paths``, name -> Path, plus the
    judged walks), each joint's fastest turn, the joints over ``(1 + margin)`` x the data's p99.9 and the
    worst ratio to the p99.9."""
    from motioncore.data import load
    from motioncore.families.pfnn.features import locomotion_clips
    from motioncore.families.style.evaluate import pick_exemplars
    from motioncore.families.style.generate import StyleAdapter
    from motioncore.families.style.train_heldout import StyleConfig, prepare

    t0 = time.perf_counter()
    ad = StyleAdapter.load(model)
    exp = ad.meta.get("experiment") or {}
    cfg = StyleConfig(**{k: (tuple(v) if k == "holdouts" else v) for k, v in exp.items()
                         if k in ("data", "holdouts", "exemplar_content", "window_min_s", "window_max_s", "balance", "seed")})
    clips = load(cfg.data, None, progress=progress) if clips is None else clips
    prep = prepare(cfg, clips)
    lim = rotation_step_limits([c.motion for c in locomotion_clips([c for c in clips if c.split == "train"])])
    codes: dict[str, list[tuple[str, np.ndarray]]] = {"held-out": [], "training": []}
    for h in cfg.holdouts:
        for ex in pick_exemplars(prep, h, n_exemplars, ad.min_rows * 2):
            codes["held-out"].append((prep.clips[ex].name, ad.fit(prep.clips[ex].motion)))
    for s in sorted(prep.bank):
        codes["training"].append((prep.clips[prep.style_exemplar[s]].name, ad.fit(prep.clips[prep.style_exemplar[s]].motion)))
    names = ad.skeleton.names
    res: dict[str, Any] = {"model": model, "margin": margin, "limits_deg": dict(zip(names, lim.round(2).tolist(), strict=True)),
                           "groups": {}}
    for group, items in codes.items():
        per: dict[str, list[np.ndarray]] = {}
        worst_code: dict[str, tuple[float, str]] = {}
        for name, z in items:
            for path, t in code_turns(ad.controller(z), paths).items():
                per.setdefault(path, []).append(t)
                r = float((t / np.maximum(lim, 1e-6)).max())
                if r > worst_code.get(path, (0.0, ""))[0]:
                    worst_code[path] = (r, name)
            if progress:
                print(f"[turns] {group} {name}: worst ratio {max(v[0] for v in worst_code.values()):.2f}", flush=True)
        res["groups"][group] = {}
        for path, ts in per.items():
            worst = np.max(ts, 0)  # (J,)
            over = worst > (1 + margin) * lim
            res["groups"][group][path] = {
                "codes": len(ts), "worst_ratio": float((worst / np.maximum(lim, 1e-6)).max()),
                "worst_joint": names[int(np.argmax(worst / np.maximum(lim, 1e-6)))], "worst_code": worst_code[path][1],
                "over": {names[j]: [round(float(worst[j]), 1), round(float(lim[j]), 1)] for j in np.flatnonzero(over)},
                "max_turn_deg": dict(zip(names, worst.round(2).tolist(), strict=True))}
    res["passes"] = not any(v["over"] for g in res["groups"].values() for v in g.values())
    res["wall_s"] = time.perf_counter() - t0
    return res


def format_turns(res: dict[str, Any]) -> str:
    lines = [f"Fastest per-frame turn of {res['model']} against the data's p99.9 x {1 + res['margin']:.2f}",
             "| codes | path | worst joint: deg / p99.9 | worst ratio | joints over |", "|---|---|---|---|---|"]
    lim = res["limits_deg"]
    for group, paths in res["groups"].items():
        for path, v in paths.items():
            j = v["worst_joint"]
            over = ", ".join(f"{n} {a:.1f}/{b:.1f}" for n, (a, b) in v["over"].items()) or "none"
            lines.append(f"| {group} ({v['codes']}) | {path} | {j} {v['max_turn_deg'][j]:.1f} / {lim[j]:.1f} | "
                         f"{v['worst_ratio']:.2f} | {over} |")
    lines.append(f"passes: {res['passes']} ({res['wall_s']:.0f} s)")
    return "\n".join(lines)

