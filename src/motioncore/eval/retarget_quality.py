"""Retargeting quality: every CMU clip (subjects 01-03 and 05-09) onto the Bandai skeleton (``motioncore eval retarget``).

Per clip (resampled to ``fps``), with and without the contact-preserving option (`retarget.contacts`):

- **foot skating**: horizontal slide of the ankles and toes per frame while in contact, cm/frame
  (`eval.controllers.skating_terms`, contacts found on each motion itself with leg-relative thresholds,
  `retarget.contacts.contact_thresholds`); the source's own figure for reference;
- **end-effector orientation error**: the world rotation of each mapped end effector (hands, feet,
  head) relative to the reference pose, against the source's: angle(Gt Rt^-1, Gs Rs^-1), degrees;
- **chain direction error**: the angle between the target's and the source's world vectors of the
  end-effector chains (hip to ankle, upper arm to hand, hips to head), degrees: what the proportions
  and the IK change;
- **A->B->A round trip**: CMU -> Bandai -> CMU, on the CMU joints mapped both ways: bone direction
  error (degrees, each such joint to its mapped child), joint position error relative to the root (cm),
  the root path error (cm), and the world rotation error (degrees) with twist included: the rest
  alignment cannot pin the twist about bones whose rest offsets are collinear (CMU's thorax, neck and
  clavicle bones all start upward), so that part is arbitrary and shows here, not in positions.

Also a stick-figure PNG strip of one walk (source above, retargeted below) for a person to check.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.kinematics import find_body_joints, resample
from ..core.motion import Motion
from ..core.rotations import quat_inv, quat_mul
from ..core.skeleton import Skeleton
from ..data import load
from ..retarget import auto_map, rest_rotations, retarget
from ..retarget.contacts import contact_thresholds


@dataclass
class Options:
    fps: float = 30.0
    png: str | None = "docs/img/retarget_cmu_bandai.png"
    strip_clip: str = "02_01"  # CMU subject 2 trial 1: a walk
    out: str | None = None     # JSON of per-clip figures


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angle (degrees) between unit quaternions (..., 4)."""
    d = np.abs(np.sum(a * b, axis=-1))
    return np.degrees(2 * np.arccos(np.clip(d, -1.0, 1.0)))


def _vec_angle(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    nu, nv = np.linalg.norm(u, axis=-1), np.linalg.norm(v, axis=-1)
    c = np.sum(u * v, axis=-1) / np.maximum(nu * nv, 1e-12)
    return np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))


def skating(m: Motion) -> tuple[float, int]:
    """(summed slide in the motion's units, frame pairs in contact) of its ankles and toes."""
    from .controllers import skating_terms

    feet = list(find_body_joints(m.skeleton).feet)
    h, v = contact_thresholds(m.skeleton)
    _, gp = m.global_transforms()
    tot, pairs, _, _ = skating_terms(gp[:, feet], m.fps, h, v)
    return tot, pairs


def _chains(target: Skeleton, roles: dict[str, str], pairs: dict[str, str]) -> list[tuple[str, str]]:
    want = [("l_upper_leg", "l_foot"), ("r_upper_leg", "r_foot"), ("l_upper_arm", "l_hand"),
            ("r_upper_arm", "r_hand"), ("hips", "head")]
    out = []
    for a, b in want:
        ja, jb = roles.get(a), roles.get(b)
        if ja in pairs and jb in pairs:
            out.append((ja, jb))
    return out


def clip_figures(src: Motion, target: Skeleton) -> dict[str, Any]:
    jm = auto_map(src.skeleton, target)
    out: dict[str, Any] = {"frames": src.num_frames}
    moved = {k: retarget(src, target, jm, contacts=c) for k, c in (("plain", False), ("contacts", True))}
    s_tot, s_pairs = skating(src)
    out["skate_source"] = s_tot / max(s_pairs, 1)
    gs, ps = src.global_transforms()
    Rs, Rt = rest_rotations(src.skeleton, target, jm)
    tgt_idx = {n: i for i, n in enumerate(target.names)}
    src_idx = {n: i for i, n in enumerate(src.skeleton.names)}
    ends = [r for r in ("l_hand", "r_hand", "l_foot", "r_foot", "head") if jm.roles.get(r) in jm.pairs]
    chains = _chains(target, jm.roles, jm.pairs)
    for k, m in moved.items():
        tot, pairs = skating(m)
        out[f"skate_{k}"] = tot / max(pairs, 1)
        gt, pt = m.global_transforms()
        errs = []
        for r in ends:
            j = tgt_idx[jm.roles[r]]
            s = src_idx[jm.pairs[jm.roles[r]]]
            errs.append(_angle(quat_mul(gt[:, j], quat_inv(Rt[j])), quat_mul(gs[:, s], quat_inv(Rs[j]))))
        out[f"end_orient_deg_{k}"] = float(np.mean(errs)) if errs else None
        cerr = []
        for a, b in chains:
            vt = pt[:, tgt_idx[b]] - pt[:, tgt_idx[a]]
            vs = ps[:, src_idx[jm.pairs[b]]] - ps[:, src_idx[jm.pairs[a]]]
            cerr.append(_vec_angle(vt, vs))
        out[f"chain_dir_deg_{k}"] = float(np.mean(cerr)) if cerr else None
    # A -> B -> A
    back_map = auto_map(target, src.skeleton)
    back = retarget(moved["plain"], src.skeleton, back_map)
    both = [src_idx[n] for n in src.skeleton.names if n in back_map.pairs and back_map.pairs[n] in jm.pairs]
    gb, pb = back.global_transforms()
    out["roundtrip_rot_deg"] = float(_angle(gb[:, both], gs[:, both]).mean())   # world rotations, twist included
    kids = [(j, next((c for c in both if src.skeleton.parents[c] == j), None)) for j in both]
    bones = [(j, c) for j, c in kids if c is not None]
    out["roundtrip_bone_deg"] = float(np.mean([_vec_angle(pb[:, c] - pb[:, j], ps[:, c] - ps[:, j]).mean()
                                               for j, c in bones])) if bones else None
    root = find_body_joints(src.skeleton).root
    rel_b, rel_s = pb[:, both] - pb[:, [root]], ps[:, both] - ps[:, [root]]
    out["roundtrip_pos_cm"] = float(np.linalg.norm(rel_b - rel_s, axis=-1).mean())
    out["roundtrip_root_cm"] = float(np.linalg.norm(pb[:, root] - ps[:, root], axis=-1).mean())
    out["mapped"], out["unmapped"] = len(jm.pairs), list(jm.unmapped)
    return out


def stick_strip(src: Motion, moved: Motion, path: str | Path, frames: int = 6, seconds: float = 2.0) -> Path:
    """Side views (x, y) of ``frames`` poses over ``seconds``: the source above, the retargeted below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = np.linspace(0, min(src.num_frames - 1, int(seconds * src.fps)), frames).astype(int)
    fig, axes = plt.subplots(2, frames, figsize=(2.0 * frames, 4.6), sharey="row")
    for row, (m, label) in enumerate(((src, f"source: CMU {src.name}"), (moved, "retargeted onto Bandai (--contacts)"))):
        _, gp = m.global_transforms()
        root = find_body_joints(m.skeleton).root
        travel = gp[-1, root, [0, 2]] - gp[0, root, [0, 2]]
        d = travel / max(np.linalg.norm(travel), 1e-9)     # the side view looks across the direction of travel
        static = np.ptp(gp, axis=0).max(axis=-1) < 1e-6     # a fixed ground joint (Bandai's joint_Root): not drawn
        for col, t in enumerate(idx):
            ax = axes[row, col]
            p = gp[t] - gp[t, root] * np.array([1.0, 0.0, 1.0])   # centred on the root's ground point
            x = p[:, 0] * d[0] + p[:, 2] * d[1]
            for j, par in enumerate(m.skeleton.parents):
                if par >= 0 and not static[par]:
                    ax.plot(x[[par, j]], p[[par, j], 1], "-", color="tab:blue" if row == 0 else "tab:orange", lw=1.5)
            ax.set_aspect("equal")
            ax.set_xlim(-90, 90)
            ax.set_xticks([])
            ax.set_title(f"{t / m.fps:.2f} s", fontsize=8)
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
    fig.suptitle("CMU -> Bandai retargeting, side view (walking to the right; cm)", fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def run(opts: Options, progress: bool = True) -> dict[str, Any]:
    from tqdm import tqdm

    target = load("bandai2", "test", progress=False)[0].motion.skeleton
    clips = load("cmu", progress=False)
    per = {}
    for c in tqdm(clips, desc="retarget quality", unit="clip", disable=not progress):
        src = resample(c.motion, opts.fps)
        src.name = c.name
        per[c.name] = clip_figures(src, target)
    keys = [k for k in next(iter(per.values())) if k not in ("frames", "mapped", "unmapped")]
    w = np.array([v["frames"] for v in per.values()], float)
    summary = {k: float(np.average([v[k] for v in per.values()], weights=w)) for k in keys
               if all(v[k] is not None for v in per.values())}
    res = {"clips": len(per), "frames": int(w.sum()), "fps": opts.fps, "target": "bandai2 skeleton",
           "summary": summary, "per_clip": per}
    if opts.png:
        c = next(x for x in clips if x.name == opts.strip_clip)
        src = resample(c.motion, opts.fps)
        src.name = c.name
        moved = retarget(src, target, auto_map(src.skeleton, target), contacts=True)
        res["png"] = str(stick_strip(src, moved, opts.png))
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(res, indent=1))
    return res


def markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    lines = [f"CMU subjects 01-03 and 05-09 ({res['clips']} clips, {res['frames']} frames at {res['fps']:g} fps) onto the "
             "Bandai skeleton; frame-weighted means.", "",
             "| | plain | --contacts |", "|---|---:|---:|",
             f"| foot skating (cm/frame in contact; source {s['skate_source']:.3f}) | {s['skate_plain']:.3f} | "
             f"{s['skate_contacts']:.3f} |",
             f"| end-effector world orientation error (deg) | {s['end_orient_deg_plain']:.4f} | "
             f"{s['end_orient_deg_contacts']:.4f} |",
             f"| end-effector chain direction error (deg) | {s['chain_dir_deg_plain']:.2f} | "
             f"{s['chain_dir_deg_contacts']:.2f} |", "",
             f"A->B->A (CMU -> Bandai -> CMU, joints mapped both ways): bone directions {s['roundtrip_bone_deg']:.2f} deg, "
             f"joint positions relative to the root {s['roundtrip_pos_cm']:.3f} cm, root path {s['roundtrip_root_cm']:.3f} cm; "
             f"world rotations {s['roundtrip_rot_deg']:.1f} deg with twist about the bones included."]
    return "\n".join(lines)
