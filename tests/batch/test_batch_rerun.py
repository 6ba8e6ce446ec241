"""A re-run of a batch job over the same folder skips the finished outputs and keeps what the last report said of
them: each skipped file's entry is its last entry (gate, skate, planting, timings; for retarget the unmapped joints,
the feet), marked skipped now and saying when its output was written, also after a run killed midway."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import needs_data
from helpers.cli import main

pytestmark = [pytest.mark.timeout(300), needs_data, pytest.mark.usefixtures("one_thread")]
CMU_0509 = "cmu_05-09/cmu_bvh_hahne_subjects_05-09.tar.xz"
NOW = {"status", "skipped", "written"}   # what a skipped entry says of this run; everything else is the last run's


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _by_name(rep: dict) -> dict[str, dict]:
    return {Path(r["file"]).name: r for r in rep["files"]}


def test_batch_infill_rerun_keeps_each_skipped_clips_entry(tmp_path, raw):
    """Two CMU walks at 120 fps, as captured (ASF units), each with a half-second gap: the second run over the
    same folder plus a new clip writes the new clip only; the two skipped entries are the first run's (gate,
    skate, planting, gaps, seconds) with status skipped, the time of the skip and when they were written; a third
    run keeps them again, with the same written time."""
    cmu = raw(CMU_0509) / "cmu_bvh_hahne"
    src = tmp_path / "shot"
    src.mkdir()
    for n in ("07_01", "07_02"):
        shutil.copy(cmu / f"{n}.bvh", src)
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"07_01": [[120, 180]], "07_02": [[100, 160]], "07_03": [[200, 260]]}))
    out = tmp_path / "out"
    argv = ["batch", "infill", str(src), "--out", str(out), "--gaps", str(gaps), "--quiet"]
    assert main(argv) == 0
    first = _by_name(_report(out))
    for r in first.values():
        assert r["status"] == "ok" and r["written"] and r["gate"] and r["skate"]["filled"] is not None
        assert "plant" in r and r["seconds"] > 0
    mtimes = {n: (out / n).stat().st_mtime_ns for n in ("07_01.bvh", "07_02.bvh")}

    shutil.copy(cmu / "07_03.bvh", src)   # the shot grows; the finished clips are skipped
    assert main(argv) == 0
    rep = _report(out)
    assert rep["counts"] == {"total": 3, "ok": 1, "skipped": 2, "failed": 0, "not_run": 0}
    second = _by_name(rep)
    assert second["07_03.bvh"]["status"] == "ok" and second["07_03.bvh"]["gaps"] == [[200, 260]]
    assert rep["frames_filled"] == 60   # this run's work only
    for n, old in first.items():
        new = second[n]
        assert new["status"] == "skipped" and new["written"] == old["written"] and new["skipped"] >= old["written"]
        assert {k: v for k, v in new.items() if k not in NOW} == {k: v for k, v in old.items() if k not in NOW}
        assert (out / n).stat().st_mtime_ns == mtimes[n]

    assert main(argv) == 0   # and again: entries kept from a report whose entries were themselves carried
    third = _by_name(_report(out))
    for n, old in second.items():
        assert third[n]["status"] == "skipped" and third[n]["written"] == old["written"]
        assert {k: v for k, v in third[n].items() if k not in NOW} == {k: v for k, v in old.items() if k not in NOW}


def test_retarget_rerun_keeps_each_skipped_clips_entry(tmp_path, raw):
    """Retarget two CMU walks (ASF units) onto a Bandai clip's rig: the re-run's report keeps the
    skipped files' unmapped joints, feet moves and per-file entries."""
    from motioncore.data import load
    from motioncore.io.bvh import write_bvh

    cmu = raw(CMU_0509) / "cmu_bvh_hahne"
    src = tmp_path / "takes"
    src.mkdir()
    for n in ("07_01", "07_02"):
        shutil.copy(cmu / f"{n}.bvh", src)
    target = tmp_path / "rig.bvh"
    write_bvh(target, load("bandai2", "test", progress=False)[0].motion)
    out = tmp_path / "out"
    argv = ["retarget", str(src), "--target", str(target), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    rep1 = _report(out)
    first = _by_name(rep1)
    assert all(r["status"] == "ok" and r["written"] for r in first.values())
    assert main(argv) == 0
    rep2 = _report(out)
    assert rep2["counts"]["skipped"] == 2 and rep2["counts"]["ok"] == 0
    for n, old in first.items():
        new = _by_name(rep2)[n]
        assert new["status"] == "skipped" and new["written"] == old["written"]
        assert {k: v for k, v in new.items() if k not in NOW} == {k: v for k, v in old.items() if k not in NOW}
    for key in ("unmapped", "feet", "below_ground"):
        assert rep2[key] == rep1[key]
    assert rep1["feet"]   # the CMU clips were moved onto the rig's contact height: something to keep

    # a run killed by SIGKILL leaves its running report: the next run still keeps the entries it held
    from motioncore.batch.run import run_batch

    (out / "07_02.bvh").unlink()   # to redo
    left = []

    def killed(res):   # the report as the kill leaves it, then stop
        left.append((out / "report.json").read_text())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(src, target, out, progress=False, on_result=killed)
    assert json.loads(left[0])["status"] == "running"
    (out / "report.json").write_text(left[0])   # SIGKILL: no final report written over it
    assert main(argv) == 0
    rep4 = _by_name(_report(out))
    redone = rep4["07_02.bvh"]   # rewritten by the killed run, whose entry died with it: not the old entry
    assert redone["status"] == "skipped" and redone["written"] is None and "feet" not in redone
    kept = rep4["07_01.bvh"]
    assert kept["status"] == "skipped" and kept["written"] == first["07_01.bvh"]["written"]
    assert {k: v for k, v in kept.items() if k not in NOW} == {k: v for k, v in first["07_01.bvh"].items()
                                                                  if k not in NOW}


def test_batch_generate_rerun_keeps_each_skipped_paths_entry(tmp_path):
    """A path walked once keeps its frames and distance to the path in the re-run's report."""
    src = tmp_path / "paths"
    src.mkdir()
    (src / "straight.json").write_text(json.dumps({"points": [[0, 0], [0, 2]]}))
    out = tmp_path / "out"
    argv = ["batch", "generate", str(src), "--out", str(out), "--quiet", "--threads", "1"]
    assert main(argv) == 0
    [old] = _report(out)["files"]
    assert old["status"] == "ok" and old["path_error_cm"] >= 0 and old["frames"] > 0
    assert main(argv) == 0
    rep = _report(out)
    [new] = rep["files"]
    assert rep["counts"]["skipped"] == 1 and rep["frames_written"] == 0
    assert new["status"] == "skipped" and new["written"] == old["written"]
    assert {k: v for k, v in new.items() if k not in NOW} == {k: v for k, v in old.items() if k not in NOW}
