"""The sections of docs/results.md (one command each, its JSON under docs/results/) and the blocks rendered
from them (`scripts/results_md.py` writes and checks them). Standard library only.

SECTIONS: id -> the exact command, run from the repository root, that writes docs/results/<id>.json.
BLOCKS: block name -> (render function, the sections it reads); each function gets the sections' JSON (with
``_run``: the command, its UTC date and wall seconds) and returns Markdown.
"""
from __future__ import annotations

_INFILL = ("motioncore eval infill --data {data} --model zerovel --model interp --model bezier --model bezier-quat "
           "--model infill-body --model infill-body-cmu --model anyorder-body --threads 1 --json docs/results/{id}.json")
_KEYS = ("motioncore eval infill --data {data} --model interp --model bezier --model bezier-quat --model infill-body"
         "{more} --keys-every 8 --keys-every 16 --threads 1 --json docs/results/{id}.json")

SECTIONS: dict[str, str] = {
    "infill-bandai": _INFILL.format(data="bandai", id="infill-bandai"),
    "infill-cmu": _INFILL.format(data="cmu", id="infill-cmu"),
    "keys-bandai": _KEYS.format(data="bandai", more="", id="keys-bandai"),
    "keys-cmu": _KEYS.format(data="cmu", more=" --model infill-body-cmu", id="keys-cmu"),
    "clips": "motioncore eval clips --threads 1 --json docs/results/clips.json",
    "hands": "motioncore eval hands --threads 1 --json docs/results/hands.json",
    "demo": "motioncore demo --threads 1 --json docs/results/demo.json",
    "hands-anyorder": ("motioncore eval hands --model anyorder-hands --task all --max-windows 48 --threads 1 "
                       "--json docs/results/hands-anyorder.json"),
    "retarget": "motioncore eval retarget --json docs/results/retarget.json",
    "controllers": ("motioncore eval controllers --model pfnn-biped --model mann-dog --threads 1 "
                    "--json docs/results/controllers.json"),
}

LENGTHS = ("5", "15", "30", "45")
NAMES = {"zerovel": "Zero-Vel", "interp": "Interp", "bezier": "Bezier (Blender, Euler channels)",
         "bezier-quat": "Bezier (Blender, quaternion channels)", "infill-body": "**infill-body**",
         "infill-body-cmu": "infill-body-cmu (CMU data only)", "anyorder-body": "**anyorder-body**"}
METRICS = (("L2Q", 3), ("L2P", 3), ("NPSS", 4))


def f(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def ran(*secs: dict) -> str:
    """The run line of a table: each section's date, command and wall time."""
    return "; ".join(f"{s['_run']['date']}, `{s['_run']['command']}` ({s['_run']['seconds']} s)" for s in secs)


def table(header: list[str], rows: list[list[str]], right: int = 1) -> str:
    """A Markdown table; every column from ``right`` on is right-aligned (figures)."""
    align = "|" + "|".join(":---" if i < right else "---:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(r) + " |" for r in [header, *rows]]
    return "\n".join([lines[0], align, *lines[1:]])


# ----------------------------------------------------------------------------------- eval infill (LaFAN1)
def _lafan_header() -> list[str]:
    return ["model"] + [f"{m}@{n}" for m, _ in METRICS for n in LENGTHS]


def _lafan_row(res: dict, model: str) -> list[str]:
    return [NAMES.get(model, model)] + [f(res[model][m].get(n), nd) for m, nd in METRICS for n in LENGTHS]


def _ratio_row(res: dict, model: str, base: str, label: str) -> list[str]:
    return [label] + [f(res[model][m][n] / res[base][m][n], 2) for m, _ in METRICS for n in LENGTHS]


def _windows(res: dict) -> str:
    return {"bandai": "the Bandai test split, 636 windows", "cmu": "CMU test subjects 05 and 07, 107 windows"}[
        "cmu" if "--data cmu" in res["_run"]["command"] else "bandai"]


def lafan(res: dict) -> str:
    """Every model but the sampling one, with infill-body's ratios to Interp and to the quaternion Bezier."""
    models = [m for m in ("zerovel", "interp", "bezier", "bezier-quat", "infill-body", "infill-body-cmu") if m in res]
    rows = [_lafan_row(res, m) for m in models]
    rows.append(_ratio_row(res, "infill-body", "interp", "infill-body / Interp"))
    rows.append(_ratio_row(res, "infill-body", "bezier-quat", "infill-body / Bezier (quaternion)"))
    return f"{ran(res)}; {_windows(res)}:\n\n{table(_lafan_header(), rows)}"


def lafan_anyorder(res: dict) -> str:
    """The sampling model of the same run (temperature 0, bisection order), its baselines in the table above."""
    rows = [_lafan_row(res, "anyorder-body"), _ratio_row(res, "anyorder-body", "interp", "anyorder-body / Interp")]
    return (f"{ran(res)}; {_windows(res)}; the baselines are the Zero-Vel, Interp and Bezier rows of this run's "
            f"`infill-body` table above:\n\n{table(_lafan_header(), rows)}")


def ratio_line(res: dict) -> str:
    """infill-body's L2Q over Interp's at 5 / 15 / 30 / 45 frames, for a sentence."""
    return " / ".join(f(res["infill-body"]["L2Q"][n] / res["interp"]["L2Q"][n], 2) for n in LENGTHS)


def _quad(res: dict, model: str, metric: str, nd: int = 3) -> str:
    return " / ".join(f(res[model][metric].get(n), nd) for n in LENGTHS)


def jerk(bandai: dict, cmu: dict) -> str:
    """L2Q, L2P, jerk over the truth's and the safety limits' weight, at 5 / 15 / 30 / 45 frames, both sets."""
    rows = []
    for label, res in (("Bandai test", bandai), ("CMU test", cmu)):
        for m in ("interp", "bezier-quat", "infill-body"):
            w = _quad(res, m, "Weight", 2) if "Weight" in res[m] else "-"
            name = "Bezier (quaternion)" if m == "bezier-quat" else NAMES[m]
            rows.append([label, name, _quad(res, m, "L2Q"), _quad(res, m, "L2P"), _quad(res, m, "Jerk", 2), w])
    return (f"{ran(bandai, cmu)}. L2Q / L2P at 5 / 15 / 30 / 45 frames; jerk over the truth's:\n\n"
            + table(["data", "model", "L2Q", "L2P", "Jerk", "Weight"], rows, right=6))


# ----------------------------------------------------------------------------------- eval infill --keys-every
def keys(res: dict) -> str:
    header = ["model"] + [f"{m} every {n}" for m, _ in METRICS for n in ("8", "16")]
    models = [m for m in ("interp", "bezier", "bezier-quat", "infill-body", "infill-body-cmu") if m in res]
    rows = [[NAMES[m]] + [f(res[m][k][n], nd) for k, nd in METRICS for n in ("8", "16")] for m in models]
    return f"{ran(res)}:\n\n{table(header, rows)}"


def keys_line(bandai: dict, cmu: dict) -> str:
    """One sentence: L2Q with a key every 8 / 16 frames, infill-body against both Beziers, both sets."""
    def part(label: str, res: dict) -> str:
        q = {m: " / ".join(f(res[m]["L2Q"][n]) for n in ("8", "16")) for m in ("infill-body", "bezier", "bezier-quat")}
        return f"{label} infill-body {q['infill-body']} against Bezier {q['bezier']} (quaternion {q['bezier-quat']})"
    return f"{part('Bandai', bandai)}; {part('CMU', cmu)}"


# ----------------------------------------------------------------------------------- eval clips
def clips(res: dict) -> str:
    """Error over Blender's Bezier (cm, degrees) and jerk over the truth's, per gap length."""
    s, rows = res["summary"], []
    cols = [c for c in ("shipped", "unplanted") if c in next(iter(s.values()))]   # unplanted: since feet are planted
    for n, by in s.items():
        g = by["gate"]
        rows.append([f"{n} frames", *[f"{f(by[c]['cm'])} / {f(by[c]['deg'])} / {f(by[c]['jerk'])}" for c in cols],
                     f"**{f(g['cm'])} / {f(g['deg'])} / {f(g['jerk'])}**", f(g["weight"], 2), f(by["bezier"]["jerk"])])
    clips_n = next(iter(s.values()))["gate"]["clips"]
    return (f"{ran(res)}; {clips_n} clips, up to 12 gaps per clip and length:\n\n"
            + table(["gap", *[f"{c} cm / deg / jerk" for c in cols], "**gate (default)** cm / deg / jerk",
                     "mean gate weight (rotations)", "Bezier jerk"], rows, right=len(cols) + 2))


# ----------------------------------------------------------------------------------- the demo
def demo_line(res: dict) -> str:
    d = res["infill"]
    return (f"{d['model_deg']:.2f} deg from the truth (Interp {d['interp_deg']:.2f}) with jerk "
            f"{d['jerk_over_truth']:.2f}x the walk's")


def demo(res: dict) -> str:
    d = res["infill"]
    return (f"{ran(res)}: the walk re-filled by `{d['model']}` from {d['keys']} of its {d['frames']} frames (10, then a "
            f"key every 20) is {demo_line(res)}, hips included; its feet slide {d['skate_cm_s']:.1f} cm/s where down, "
            f"{d['skate_over_walk']:.1f}x the walk's {d['walk_skate_cm_s']:.1f} (Interp {d['interp_skate_over_walk']:.1f}x)")



# ----------------------------------------------------------------------------------- eval hands (infill-hands)
def hands(res: dict) -> str:
    """Per task, each take and the mean: Interp, Bezier, the model, its ratios (95% interval), without the object,
    the object's worth (the model with it over the model without)."""
    def ci(r: dict, key: str, nd: int = 3) -> str:
        lo, hi = r[f"{key}_interval"]
        return f"{r[key]:.{nd}f} ({lo:.{nd}f}-{hi:.{nd}f})"
    rows = []
    for task, t in res.items():
        if task.startswith("_"):
            continue
        for take, r in [*t["takes"].items(), ("mean", t["summary"])]:
            rows.append([task, take, str(r["windows"]), f(r["interp"], 2), f(r["bezier"], 2), f"**{f(r['model'], 2)}**",
                         ci(r, "model_over_bezier"), ci(r, "model_over_interp"), f(r["model_no_object"], 2),
                         ci(r, "object_worth", 4)])
    return (f"{ran(res)}:\n\n" + table(["task", "take", "windows", "Interp", "Bezier", "**infill-hands**", "/ Bezier",
                                        "/ Interp", "without the object", "object's worth (with / without)"], rows, 3))


# ----------------------------------------------------------------------------------- foot skate (core.feet)
def _x(v: float) -> str:
    return f"{v:.2f}x"


def skate(bandai: dict, cmu: dict, kb: dict, kc: dict, clip: dict, dem: dict) -> str:
    """The fill's foot skate over the capture's on the same frames (Bezier: Euler channels), and GMD's skating
    ratio (capture / Interp / Bezier / infill-body), from every in-fill command's JSON."""
    models, rows = ("interp", "bezier", "infill-body"), []
    for label, res, n_win in (("Bandai", bandai, 636), ("CMU", cmu, 107)):
        for n in LENGTHS:
            where = f"`eval infill --data {label.lower()}`, {n_win} windows, {n} frames"
            gmd = " / ".join(f(res[m]["GMD"][n]) for m in models)
            rows.append([where, f(res["interp"]["Skate truth cm/s"][n], 1), *[_x(res[m]["Skate"][n]) for m in models],
                         f"{f(res['interp']['GMD truth'][n])} / {gmd}"])
    for label, res in (("bandai", kb), ("cmu", kc)):
        where = f"`eval infill --data {label} --keys-every 8 --keys-every 16`, key every 8 / 16"
        truth = " / ".join(f(res["interp"]["Skate truth cm/s"][n], 1) for n in ("8", "16"))
        cells = [" / ".join(_x(res[m]["Skate"][n]) for n in ("8", "16")) for m in models]
        gmd = "; ".join(f"{f(res['interp']['GMD truth'][n])} / " + " / ".join(f(res[m]["GMD"][n]) for m in models)
                        for n in ("8", "16"))
        rows.append([where, truth, *cells, gmd])
    for n, by in clip["summary"].items():
        b, g = by["bezier"], by["gate"]
        rows.append([f"`eval clips` (CMU 05 + 07, {g['clips']} clips, gate on), {n} frames", f(g["skate_truth"], 1), "",
                     _x(b["skate_over_truth"]), _x(g["skate_over_truth"]),
                     f"{f(g['skating_ratio_truth'])} / - / {f(b['skating_ratio'])} / {f(g['skating_ratio'])}"])
    d = dem["infill"]
    rows.append(["`motioncore demo` (a key every 20 frames)", f(d["walk_skate_cm_s"], 1),
                 f"{d['interp_skate_over_walk']:.1f}x", "", f"{d['skate_over_walk']:.1f}x ({d['skate_cm_s']:.1f} cm/s)", ""])
    secs = (bandai, cmu, kb, kc, clip, dem)
    dates = " and ".join(sorted({r["_run"]["date"] for r in secs}))
    files = ", ".join(r["_run"]["command"].split("--json ")[1].split("/")[-1] for r in secs)
    return (f"{dates}, from the JSON of the runs whose commands head the tables above (`motioncore eval infill` on "
            f"Bandai and CMU, with gaps and with `--keys-every`; `motioncore eval clips`; `motioncore demo`; "
            f"docs/results/: {files}):\n\n"
            + table(["where (command)", "capture cm/s", "Interp", "Bezier", "infill-body",
                     "GMD's ratio: capture / Interp / Bezier / infill-body"], rows))


def skate_line(bandai: dict, cmu: dict, clip: dict, dem: dict) -> str:
    """One sentence: the fill's foot skate over the capture's, whole clips, windows and the demo."""
    by = clip["summary"]
    gate = " / ".join(_x(v["gate"]["skate_over_truth"]) for v in by.values())
    bez = " / ".join(_x(v["bezier"]["skate_over_truth"]) for v in by.values())
    lens = " / ".join(by)
    win = {k: " / ".join(_x(r["infill-body"]["Skate"][n]) for n in ("15", "30")) for k, r in (("b", bandai), ("c", cmu))}
    return (f"`eval clips` on CMU 05 + 07 with the gate, {gate} the capture's skate at {lens} frames (Bezier {bez}); "
            f"`eval infill` {win['b']} (Bandai, 15 / 30) and {win['c']} (CMU); the demo "
            f"{dem['infill']['skate_over_walk']:.1f}x")


# ----------------------------------------------------------------------------------- eval retarget
def retarget(res: dict) -> str:
    """Every CMU clip onto the Bandai skeleton, plain and with --contacts (frame-weighted means)."""
    m = res["summary"]
    rows = [[f"foot skating, cm/frame in contact (the CMU source: {m['skate_source']:.3f})", f(m["skate_plain"]),
             f(m["skate_contacts"])],
            ["end-effector world orientation error (hands, feet, head), degrees", f(m["end_orient_deg_plain"], 4),
             f(m["end_orient_deg_contacts"], 4)],
            ["end-effector chain direction error (hip-ankle, shoulder-hand, hips-head), degrees",
             f(m["chain_dir_deg_plain"], 2), f(m["chain_dir_deg_contacts"], 2)]]
    return (f"{ran(res)}; {res['clips']} clips, {res['frames']:,} frames at {res['fps']:g} fps:\n\n"
            + table(["", "plain", "`--contacts`"], rows))


def retarget_roundtrip(res: dict) -> str:
    m = res["summary"]
    return (f"bone directions {m['roundtrip_bone_deg']:.2f} degrees, joint positions relative to the root "
            f"{m['roundtrip_pos_cm']:.3f} cm, root path {m['roundtrip_root_cm']:.3f} cm. World rotations differ by "
            f"{m['roundtrip_rot_deg']:.1f} degrees on average")


# ----------------------------------------------------------------------------------- eval controllers
_CONTROLLER = {"pfnn-biped": "PFNN (`pfnn-biped`)", "mann-dog": "MANN, 8 experts (`mann-dog`)"}
_FORMS = {"weights": ("exact, blended weights", 4), "cubic": ("cubic (precomputed)", 4),
          "constant": ("constant (nearest of 50)", 50), "linear": ("linear (lerp of 10)", 10)}


def _g(v: float) -> str:
    """Two significant figures below 1 (an error near zero), two decimals above."""
    return f"{v:.2f}" if v >= 1 else f"{v:.2g}".replace("e-0", "e-")


def controllers(res: dict) -> str:
    """The bundled controllers on held-out clips, each with its ground truth's skating."""
    rows = []
    for r in res["results"]:
        rows.append([_CONTROLLER.get(r["model"], r["model"]), f(r["next_frame_cm"], 2), f(r["skate_cm"], 2),
                     f(r["path_error_cm"], 1), f(r["tracking_cm"], 1)])
        rows.append(["ground-truth mocap", "–", f(r["gt_skate_cm"], 2), "–", "–"])
    return (f"{ran(res)}:\n\n" + table(["model", "next-frame joint error (cm)", "foot skating (cm/frame in contact)",
                                        "path error (cm)", "root tracking (cm)"], rows))


def controller_forms(res: dict) -> str:
    """PFNN's evaluation forms against the exact model (blended outputs) on the biped test rows."""
    modes = next(r["modes"] for r in res["results"] if r.get("modes"))
    rows = [["exact, blended outputs (default)", "4", "–", "–", "–"]]
    rows += [[_FORMS[m][0], str(_FORMS[m][1]), _g(v["max_abs"]), _g(v["mean_abs"]), f(v["pose_cm"])]
             for m, v in modes.items() if m in _FORMS]
    return (f"{ran(res)}:\n\n" + table(["form", "stored weight sets", "max abs error (z-scored output)", "mean abs error",
                                        "joint position error vs exact (cm)"], rows))


def hands_anyorder(res: dict) -> str:
    """The sampling hand model on the animator's three tasks: T = 0, best and mean of 5 samples, grasp timing."""
    rows = []
    for task, r in res.items():
        if task.startswith("_"):
            continue
        t = r["timing_frames"]
        rows.append([task, f"{r['model_name']} (bundled)", "yes" if r["object"] else "no", f(r["interp"], 2),
                     f(r["bezier"], 2), f(r["model"], 2), f(r["model"] / r["interp"], 2), f(r["best_of_5"], 2),
                     f(r["mean_of_5"], 2), f(r["diversity"], 2),
                     f"{t['interp']:.1f} / {t['bezier']:.1f} / {t['model']:.1f} / {t['samples']:.1f} "
                     f"({r['timing']['closings']})"])
    n = next(v["windows"] for k, v in res.items() if not k.startswith("_"))
    return (f"{ran(res)}; {n} windows evenly spread:\n\n"
            + table(["task", "model", "object", "Interp", "Bezier", "model (T=0)", "ratio to Interp", "best of 5",
                     "mean of 5", "diversity", "timing Interp / Bezier / model / samples (frames; closings)"], rows, 3))


# ----------------------------------------------------------------------------------- the README's headline table
_HOME = "docs/results.md#"
_ANCHOR = {"infill": "infill-body-deterministic-what-the-add-on-the-server-at-temperature-0-and-batch-infill-use",
           "clips": "whole-clips-motioncore-eval-clips", "hands": "hands-infill-hands"}


def _bold_if(text: str, wins: bool) -> str:
    return f"**{text}**" if wins else text


def readme(bandai: dict, cmu: dict, clip: dict, hand: dict) -> str:
    """One row per task: Interp, Blender's Bezier and the model, bold where the model is below both everywhere."""
    rows = []
    for label, res in (("body in-fill, Bandai test takes", bandai), ("body in-fill, CMU performers never trained on", cmu)):
        wins = all(res["infill-body"]["L2Q"][n] < min(res["interp"]["L2Q"][n], res["bezier-quat"]["L2Q"][n])
                   for n in LENGTHS)
        rows.append([label, "`infill-body`", _quad(res, "interp", "L2Q"), _quad(res, "bezier-quat", "L2Q"),
                     _bold_if(_quad(res, "infill-body", "L2Q"), wins),
                     f"[{res['_run']['date']}]({_HOME}{_ANCHOR['infill']})"])
    g = [by["gate"] for by in clip["summary"].values()]
    gate = (" / ".join(f(x["cm"], 2) for x in g) + " cm, " + " / ".join(f(x["deg"], 2) for x in g) + " deg")
    rows.append(["whole CMU clips never trained on, 12 gaps, with the gate", "`infill-body`", "-",
                 " / ".join("1" for _ in g) + " (here Bezier on Euler channels, `eval clips`' reference)", _bold_if(gate, all(x["cm"] < 1 and x["deg"] < 1 for x in g)),
                 f"[{clip['_run']['date']}]({_HOME}{_ANCHOR['clips']})"])
    h = hand["wrist-every-10"]["summary"]
    rows.append(["fingers around wrist keys (ManipNet)", "`infill-hands`", f"{h['interp']:.2f}°", f"{h['bezier']:.2f}°",
                 _bold_if(f"{h['model']:.2f}°", h["model"] < min(h["interp"], h["bezier"])),
                 f"[{hand['_run']['date']}]({_HOME}{_ANCHOR['hands']})"])
    dates = sorted({r["_run"]["date"] for r in (bandai, cmu, clip, hand)})
    return (f"Measured {' and '.join(dates)}; each row's exact command, its date and the whole table: the link in its "
            f"last column.\n\n" + table(["task (held-out data)", "model", "Interp", "Bezier, quaternion channels "
                                          "(`bezier-quat`)", "model", "measured"], rows, right=6))

BLOCKS = {
    "infill-bandai": (lafan, ["infill-bandai"]),
    "infill-cmu": (lafan, ["infill-cmu"]),
    "infill-bandai.anyorder": (lafan_anyorder, ["infill-bandai"]),
    "infill-cmu.anyorder": (lafan_anyorder, ["infill-cmu"]),
    "infill-bandai.ratio": (ratio_line, ["infill-bandai"]),
    "infill-cmu.ratio": (ratio_line, ["infill-cmu"]),
    "infill.jerk": (jerk, ["infill-bandai", "infill-cmu"]),
    "keys-bandai": (keys, ["keys-bandai"]),
    "keys-cmu": (keys, ["keys-cmu"]),
    "keys.line": (keys_line, ["keys-bandai", "keys-cmu"]),
    "clips": (clips, ["clips"]),
    "demo": (demo, ["demo"]),
    "demo.line": (demo_line, ["demo"]),
    "skate": (skate, ["infill-bandai", "infill-cmu", "keys-bandai", "keys-cmu", "clips", "demo"]),
    "skate.line": (skate_line, ["infill-bandai", "infill-cmu", "clips", "demo"]),
    "retarget": (retarget, ["retarget"]),
    "retarget.roundtrip": (retarget_roundtrip, ["retarget"]),
    "hands": (hands, ["hands"]),
    "hands-anyorder": (hands_anyorder, ["hands-anyorder"]),
    "controllers": (controllers, ["controllers"]),
    "controllers.forms": (controller_forms, ["controllers"]),
    "readme": (readme, ["infill-bandai", "infill-cmu", "clips", "hands"]),
}
