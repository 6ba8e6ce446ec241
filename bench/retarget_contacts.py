"""What `motioncore retarget --contacts` does to foot skate, on the CMU clips of the retarget tests and of
docs/retarget.md's feet table, as a TD runs it.

Each source BVH as captured (120 fps: CMU 02_01 and 03_01 in cm, CMU 07_01 and 07_03 in ASF units) is retargeted
onto the Bandai rig of walk_active_005 (cm: the walk of tests/retarget/test_retarget_feet.py, the target of the feet
table) by `batch.run.run_batch` (the command's own code) with and without ``contacts``; foot skate is
``core.feet.skate`` (cm/s at the clip's rate, weighted by nearness to the ground) on the target's ankles and toes,
each joint's ground taken from the plain output, over every frame but the first (a CMU capture's T-pose). Prints
the skate without and with --contacts and their ratio (the same-run baseline is the plain retarget), and the
source's own skate in cm (its units by `retarget.contacts.source_cm_per_unit`).

    python bench/retarget_contacts.py
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_name  # noqa: E402

CLIPS = (("cmu_01-03/cmu_bvh_converted_subjects_01-03.tar.xz", "cmu_bvh/02_01.bvh"),
         ("cmu_01-03/cmu_bvh_converted_subjects_01-03.tar.xz", "cmu_bvh/03_01.bvh"),
         ("cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz", "cmu_bvh_hahne/07_01.bvh"),
         ("cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz", "cmu_bvh_hahne/07_03.bvh"))
TARGET = ("bandai_namco/dataset-2_locomotion_walk_turn_run.tar.xz", "dataset-2_walk_active_005.bvh")


def _file(archive: str, member: str) -> Path:
    from motioncore.data.cache import data_root, unpack

    root = unpack(data_root() / archive, progress=False)
    hits = sorted(root.rglob(Path(member).name))
    if not hits:
        raise SystemExit(f"{member} not in {archive}")
    return hits[0]


def _skate(motion, ground=None, unit=1.0):
    from motioncore.core import feet as F
    from motioncore.retarget import clip_poses
    from motioncore.retarget.contacts import feet_of

    legs = feet_of(motion.skeleton, clip_poses(motion))
    joints = [j for leg in legs for j in leg]
    gp = motion.global_transforms()[1][1:]   # from frame 1: a CMU capture's frame 0 is a T-pose
    g = F.ground(gp, joints) if ground is None else ground
    return F.skate(gp, motion.fps, joints, g, unit=unit), g


def main() -> None:
    from motioncore.batch.run import run_batch
    from motioncore.io.bvh import read_bvh
    from motioncore.retarget.contacts import source_cm_per_unit

    print(f"{cpu_name()}; clips retargeted onto the Bandai rig of walk_active_005 by the retarget command's code")
    print(f"{'clip':<8} {'frames':>6} {'source cm/s':>11} {'plain cm/s':>10} {'--contacts':>10} {'ratio':>6}")
    target = _file(*TARGET)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for archive, member in CLIPS:
            src = Path(tmp) / "src" / Path(member).stem
            src.mkdir(parents=True)
            shutil.copy(_file(archive, member), src)
            out = {}
            for contacts in (False, True):
                o = Path(tmp) / f"{src.name}_{contacts}"
                run_batch(src, target, o, contacts=contacts, progress=False)
                out[contacts] = read_bvh(o / Path(member).name)
            source = read_bvh(src / Path(member).name)
            s_src = _skate(source, unit=source_cm_per_unit(source.skeleton))[0]
            plain, ground = _skate(out[False])
            pinned, _ = _skate(out[True], ground)
            rows.append((plain, pinned))
            print(f"{src.name:<8} {source.num_frames:>6} {s_src:>11.1f} {plain:>10.1f} {pinned:>10.1f} "
                  f"{pinned / plain:>6.2f}")
    print(f"mean of the clips: plain {sum(r[0] for r in rows) / len(rows):.1f} cm/s, --contacts "
          f"{sum(r[1] for r in rows) / len(rows):.1f} cm/s")


if __name__ == "__main__":
    main()
