"""The registered mocap sets: where each lives, its labels, licence and fixed train/test split.

Splits hold out whole clips (takes), never frames of a clip seen in training:
- ``bandai2``: take number divisible by 5 (..._005, _010, ...) is test: ~20% of every
  (content, style) group, so every style is represented on both sides.
- ``bandai-gestures``: dataset 2's standing gestures, split as ``bandai2``.
- ``bandai1``: crc32 of the file stem divisible by 5 (most groups have a single take).
- ``dog``: crc32 of the clip id divisible by 5.
- ``manipnet-left/right``: takes ``mug3`` and ``teapot3`` are test (their objects also appear in
  training takes ``mug1`` and ``teapot2``).
- ``cmu``: whole subjects held out: subjects 05 (modern dance) and 07 (walks) are test, so CMU figures are
  figures on performers never seen in training; subjects 01-03, 06, 08 and 09 are train. ``cmu`` is the union of
  ``cmu01-03`` (CMU's ASF joint names, cm) and ``cmu05-09`` (the MotionBuilder-friendly conversion, other joint
  names, ASF units), the latter mapped onto the former's skeleton when its cache is built
  (``retarget.cmu.hahne_to_asf``).
"""
from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BANDAI_LICENCE = "CC BY-NC 4.0"
BANDAI_CITE = "Kobayashi et al. 2023, arXiv:2306.08861 (Bandai Namco Research Motion dataset)"
DOG_CITE = "Zhang, Starke, Komura, Saito 2018, Mode-Adaptive Neural Networks for Quadruped Motion Control"
HANDS_CITE = "Zhang, Ye, Shiratori, Komura 2021, ManipNet"
CMU_CITE = ("The data used in this project was obtained from mocap.cs.cmu.edu. "
            "The database was created with funding from NSF EIA-0196217.")
CMU_LICENCE = "CMU terms: research and inclusion in products, no resale"


@dataclass(frozen=True)
class DatasetSpec:
    """One registered set. ``parts`` lists (archive relative to the data root, glob of BVH files
    inside the unpacked archive)."""

    name: str
    parts: tuple[tuple[str, str], ...]
    fps: float
    licence: str
    citation: str
    description: str
    split: Callable[[Path], str]  # BVH path -> "train" | "test"
    labels: Callable[[Path, Path], dict] = field(default=lambda bvh, root: {})  # (BVH, data root) -> labels
    union: tuple[str, ...] = ()  # a composite set: the clips of these registered sets, in order
    # "module:function" (parsed clip, data root) -> clip as cached; resolved when a cache is built, so a
    # conversion that needs a higher layer (a retarget) is named here without this layer importing it
    convert: str | None = None


def _crc_test(key: str) -> str:
    return "test" if zlib.crc32(key.encode()) % 5 == 0 else "train"


def _take_number(stem: str) -> int:
    m = re.search(r"_(\d+)$", stem)
    return int(m.group(1)) if m else 0


def _bandai2_split(p: Path) -> str:
    return "test" if _take_number(p.stem) % 5 == 0 else "train"


def _bandai_labels(cfg_dir: Callable[[Path, Path], Path]) -> Callable[[Path, Path], dict]:
    def labels(bvh: Path, root: Path) -> dict:
        js = bvh.with_suffix(".json")
        out: dict = {"take": _take_number(bvh.stem)}
        if js.is_file():
            ids = json.loads(js.read_text())
            cfg = cfg_dir(bvh, root)
            for key, fname in (("content", "content_label.txt"), ("style", "style_label.txt")):
                names = (cfg / fname).read_text().split() if (cfg / fname).is_file() else []
                idx = int(ids[key])
                out[key + "_id"] = idx
                out[key] = names[idx].split("_", 1)[1] if idx < len(names) else str(idx)
        return out

    return labels


_DOG_ACTIONS = ("sit_stand", "sit_walk", "walk_run", "stepup_jump", "jump_down", "sit", "stand", "walk",
                "run", "turn", "hop", "jump", "beg", "shake")


def _dog_labels(bvh: Path, root: Path) -> dict:
    """Clip name from the motion_imitation clip table (e.g. D1_007_KAN01_001 -> dog_walk00); the
    action family is the name without its number (walk, run, sit, sit_stand, jump...)."""
    table = root / "mann_dog" / "dog_clips_info_from_motion_imitation.txt"
    names: dict[str, str] = {}
    if table.is_file():
        for line in table.read_text().splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 2:
                names[parts[0].rstrip("*")] = parts[1]
    name = names.get(bvh.stem, bvh.stem)
    family = next((a for a in _DOG_ACTIONS if name.startswith("dog_" + a)), "unknown")
    return {"clip_name": name, "action": family}


def _hand_labels(bvh: Path, root: Path) -> dict:
    obj = [p for p in bvh.parent.glob("*.bvh") if p.name not in ("leftHand.bvh", "rightHand.bvh")]
    return {"take": bvh.parent.name, "object_file": obj[0].name if obj else None}


_HAND_TEST = {"mug3", "teapot3"}

REGISTRY: dict[str, DatasetSpec] = {}


def _register(spec: DatasetSpec) -> None:
    REGISTRY[spec.name] = spec


_register(DatasetSpec(
    "bandai1", (("bandai_namco/dataset-1_all.tar.xz", "Bandai-Namco-Research-Motiondataset-1/data/*.bvh"),),
    30.0, BANDAI_LICENCE, BANDAI_CITE, "Bandai Namco dataset 1: 17 contents x 15 styles, 22 joints",
    lambda p: _crc_test(p.stem), _bandai_labels(lambda bvh, root: bvh.parent.parent / "cfg")))
_register(DatasetSpec(
    "bandai2", (("bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz", "*.bvh"),),
    30.0, BANDAI_LICENCE, BANDAI_CITE, "Bandai Namco dataset 2: walk/turn-left/turn-right/run, 7 styles",
    _bandai2_split, _bandai_labels(lambda bvh, root: root / "bandai_namco" / "cfg_dataset-2")))
_register(DatasetSpec(
    "bandai-gestures", (("bandai_namco/dataset-2_gestures.tar.xz", "dataset-2_gestures/*.bvh"),),
    30.0, BANDAI_LICENCE, BANDAI_CITE, "Bandai Namco dataset 2: standing gestures (raise or wave one or both hands), "
    "7 styles", _bandai2_split, _bandai_labels(lambda bvh, root: root / "bandai_namco" / "cfg_dataset-2")))
_register(DatasetSpec(
    "bandai", REGISTRY["bandai1"].parts + REGISTRY["bandai2"].parts, 30.0, BANDAI_LICENCE, BANDAI_CITE,
    "Bandai Namco datasets 1 and 2 together (same 22-joint skeleton)", _bandai2_split,
    union=("bandai1", "bandai2")))
_register(DatasetSpec(
    "dog", (("mann_dog/mann_dog_bvh_46clips.tar.xz", "mann_dog/*.bvh"),), 60.0, "CC BY-NC 4.0", DOG_CITE,
    "MANN dog mocap, 46 clips, 21 joints + 6 end sites (paws)", lambda p: _crc_test(p.stem), _dog_labels))
for _side in ("left", "right"):
    _register(DatasetSpec(
        f"manipnet-{_side}", (("manipnet_hands/manipnet_8takes_hands_objects.tar.xz", f"*/{_side}Hand.bvh"),),
        120.0, "CC BY-NC", HANDS_CITE, f"ManipNet {_side} hand, 8 takes, 17 joints, with object 6-DoF pose",
        lambda p: "test" if p.parent.name in _HAND_TEST else "train", _hand_labels))
CMU_TEST_SUBJECTS = ("05", "07")  # modern dance and walks: whole performers never seen in training
CMU0103 = ("cmu_01-03/cmu_bvh_converted_subjects_01-03.tar.xz", "cmu_bvh/*.bvh")
_CMU0509 = ("cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz", "cmu_bvh_hahne/*.bvh")
ASF_UNIT_CM = 2.54 / 0.45  # CMU's ASF length unit in cm (cmu_05-09/SOURCE.md)
# cmu_05-09's joint names (the MotionBuilder-friendly conversion) -> CMU's ASF names (cmu_01-03), one to one
HAHNE_TO_ASF = {
    "Hips": "root", "LowerBack": "lowerback", "Spine": "upperback", "Spine1": "thorax", "Neck": "lowerneck",
    "Neck1": "upperneck", "Head": "head",
    **{f"{s}{a}": f"{t}{b}" for s, t in (("Left", "l"), ("Right", "r")) for a, b in (
        ("UpLeg", "femur"), ("Leg", "tibia"), ("Foot", "foot"), ("ToeBase", "toes"), ("Shoulder", "clavicle"),
        ("Arm", "humerus"), ("ForeArm", "radius"), ("Hand", "wrist"), ("FingerBase", "hand"),
        ("HandIndex1", "fingers"))},
    "LHipJoint": "lhipjoint", "RHipJoint": "rhipjoint", "LThumb": "lthumb", "RThumb": "rthumb",
}


def _cmu_split(p: Path) -> str:
    return "test" if p.stem.split("_")[0] in CMU_TEST_SUBJECTS else "train"


def _cmu_labels(bvh: Path, root: Path) -> dict:
    return {"subject": bvh.stem.split("_")[0], "trial": _take_number(bvh.stem)}


_register(DatasetSpec(
    "cmu01-03", (CMU0103,), 120.0, CMU_LICENCE, CMU_CITE, "CMU subjects 01-03, 28 trials, 31 joints (ASF names)",
    _cmu_split, _cmu_labels))
_register(DatasetSpec(
    "cmu05-09", (_CMU0509,), 120.0, CMU_LICENCE, CMU_CITE,
    "CMU subjects 05-09 (dance, dribbling, walks, runs), 70 trials, mapped onto the cmu01-03 skeleton",
    _cmu_split, _cmu_labels, convert="motioncore.retarget.cmu:hahne_to_asf"))
_register(DatasetSpec(
    "cmu", (CMU0103, _CMU0509), 120.0, CMU_LICENCE, CMU_CITE,
    "CMU subjects 01-03 and 05-09 on one 31-joint skeleton; subjects 05 and 07 held out whole",
    _cmu_split, _cmu_labels, union=("cmu01-03", "cmu05-09")))
