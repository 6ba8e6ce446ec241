"""`motioncore batch infill --gaps`: every gap is checked against its clip's frame count (from the BVH header)
before anything is written; a gaps file naming clips that are not in SRC serves a run over part of a shot."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import needs_data
from helpers.cli import main

pytestmark = [pytest.mark.timeout(300), needs_data, pytest.mark.usefixtures("one_thread")]
CMU_0509 = "cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz"


def _snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.fixture
def shot(tmp_path, raw) -> Path:
    """Three CMU takes as captured (120 fps; 07_01 has 317 frames, 07_02 330, 07_03 416)."""
    src = tmp_path / "shot"
    src.mkdir()
    for n in ("07_01", "07_02", "07_03"):
        shutil.copy(raw(CMU_0509) / "cmu_bvh_hahne" / f"{n}.bvh", src)
    return src


def test_a_gap_past_its_clips_end_stops_the_run_before_anything_is_written(shot, tmp_path, capsys):
    from motioncore.io.bvh import read_bvh_header

    assert read_bvh_header(shot / "07_02.bvh")[2] == 330
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"07_01": [[100, 160]], "07_02": [[280, 330], [300, 360]], "07_03": [[900, 960]]}))
    out = tmp_path / "out"
    before = _snapshot(tmp_path)
    assert main(["batch", "infill", str(shot), "--out", str(out), "--gaps", str(gaps), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("motioncore: error: --gaps "), err
    # the first gap out, its clip and the clip's length; [280, 330] ends on the last frame (end exclusive): fine
    assert "'07_02'" in err and "gap [300, 360]" in err and "330 frames" in err and "1 more" in err, err
    assert not out.exists() and _snapshot(tmp_path) == before   # nothing written, not even report.json

    gaps.write_text(json.dumps({"07_02": [[280, 330]]}))   # the last frame is a gap's last frame: allowed
    assert main(["batch", "infill", str(shot), "--out", str(out), "--gaps", str(gaps), "--quiet"]) == 0


def test_gap_keys_naming_no_clip_are_warned_about_and_the_run_goes_on(shot, tmp_path, capsys):
    """One gaps file for the whole shot, a run over part of its folder: the keys of the clips elsewhere are named
    in one warning line and in report.json, and the clips here are filled."""
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(shot / "07_01.bvh", part)
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"07_01": [[100, 160]], "07_02": [[40, 80]], "07_03.bvh": [[50, 90]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(part), "--out", str(out), "--gaps", str(gaps), "--quiet"]) == 0
    err = capsys.readouterr().err
    [warning] = [line for line in err.splitlines() if "name no clip" in line]
    assert "warning" in warning and "'07_02', '07_03.bvh'" in warning and "2 key(s)" in warning
    rep = json.loads((out / "report.json").read_text())
    assert rep["gaps_unmatched"] == ["07_02", "07_03.bvh"]
    [r] = rep["files"]
    assert r["status"] == "ok" and r["gaps"] == [[100, 160]] and r["frames_filled"] == 60


def test_gap_keys_naming_no_clip_at_all_leave_nothing_to_fill(shot, tmp_path, capsys):
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"wlak": [[5, 10]], "jog": [[1, 2]]}))
    out = tmp_path / "out"
    assert main(["batch", "infill", str(shot), "--out", str(out), "--gaps", str(gaps), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nothing to fill" in err and "'wlak', 'jog'" in err and "'07_01'" in err, err
    assert not out.exists()
