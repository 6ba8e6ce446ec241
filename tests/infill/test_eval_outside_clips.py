"""Outside clips evaluate: `eval infill --data GLOB` uses every window its clips allow and names a clip of another
rig that it leaves out; `eval clips --data GLOB` takes outside clips on different rigs, each mapped on its own, and
names the one no body maps onto (a dog). Real CMU 120 fps files as distributed (two namings) and the MANN dog."""
from __future__ import annotations

import shutil

import pytest
from helpers.cli import DOG, main

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("one_thread")]


def test_eval_infill_on_a_glob_uses_every_window_and_names_the_clip_left_out(raw, raw_file, tmp_path, capsys):
    src = tmp_path / "clips"
    src.mkdir()
    hahne = raw("cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz")
    for n in ("07_01", "07_02"):   # 317 and 330 frames at 120 fps: 80 and 83 at 30
        shutil.copy(next(hahne.rglob(f"{n}.bvh")), src / f"{n}.bvh")
    shutil.copy(raw_file("cmu", "**/01_01.bvh"), src / "01_01.bvh")   # CMU's ASF names: another hierarchy
    assert main(["eval", "infill", "--data", str(src / "*.bvh"), "--model", "bezier", "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "left out '01_01'" in err and "hierarchy differs" in err
    assert "7 test windows" in err   # windows every 5 frames: 3 + 4 (every 40 frames gave 1 + 1)


def test_eval_clips_takes_outside_clips_on_their_own_rigs_and_names_the_dog(raw, raw_file, tmp_path, capsys):
    src = tmp_path / "clips"
    src.mkdir()
    hahne = raw("cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz")
    shutil.copy(next(hahne.rglob("07_01.bvh")), src / "07_01.bvh")
    shutil.copy(raw_file("cmu", "**/01_01.bvh"), src / "01_01.bvh")
    shutil.copy(sorted(raw(DOG).rglob("*.bvh"))[0], src / "dog.bvh")
    json_out = tmp_path / "clips.json"
    assert main(["eval", "clips", "--data", str(src / "*.bvh"), "--lengths", "15", "--quiet", "--json",
                 str(json_out)]) == 0
    err = capsys.readouterr().err
    assert "left out 'dog'" in err
    import json

    rows = json.loads(json_out.read_text())["clips"]
    assert sorted(r["clip"] for r in rows) == ["01_01", "07_01"]
    assert all(r["gate"]["cm"] > 0 for r in rows)
