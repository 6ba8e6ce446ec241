"""`motioncore batch infill`: gaps and frozen runs found, filled by the bundled body model, outputs atomic
and resumable, bad files reported and not fatal."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data

from motioncore.batch.errors import BatchError
from motioncore.batch.infill import frozen_runs, gap_mask

pytestmark = pytest.mark.usefixtures("one_thread")


def test_frozen_runs_and_gap_masks():
    rot = np.random.default_rng(0).normal(size=(12, 2, 4))
    root = np.zeros((12, 3))
    rot[4:8] = rot[3]  # frames 4..7 repeat frame 3
    rot[10] = rot[9]  # a single repeat
    assert frozen_runs(rot, root, 2) == [(4, 8)]
    assert frozen_runs(rot, root, 1) == [(4, 8), (10, 11)]
    root[6, 0] = 1.0  # the root moved: not frozen there
    assert frozen_runs(rot, root, 2) == [(4, 6)]
    m = gap_mask(10, [[2, 4], [7, 8]])
    assert np.flatnonzero(m).tolist() == [2, 3, 7]
    for bad in ([[3, 3]], [[0, 11]], [[1]], [[1.5, 3]]):
        with pytest.raises(ValueError, match="gap"):
            gap_mask(10, bad)


@needs_data
def test_batch_fills_resumes_and_reports(tmp_path, capsys):
    from motioncore.cli.main import main
    from motioncore.core.rotations import quat_angle
    from motioncore.data import load
    from motioncore.io.bvh import read_bvh, write_bvh

    src = tmp_path / "src"
    src.mkdir()
    clips = load("bandai", "test", fps=30, progress=False)[:2]
    for c in clips:
        m = c.motion.slice(0, 60)
        m.rotations[20:30] = m.rotations[19]  # a frozen capture
        m.positions[20:30] = m.positions[19]
        write_bvh(src / f"{c.name.replace('/', '_')}.bvh", m)
    (src / "broken.bvh").write_text("HIERARCHY\nROOT nonsense\n")
    names = sorted(p.stem for p in src.glob("*.bvh") if p.stem != "broken")
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({names[0]: [[40, 50]]}))
    out = tmp_path / "out"
    rc = main(["batch", "infill", str(src), "--out", str(out), "--gaps", str(gaps), "--frozen", "5", "--quiet"])
    assert rc == 1  # the broken file
    rep = json.loads((out / "report.json").read_text())
    assert rep["counts"] == {"total": 3, "ok": 2, "skipped": 0, "failed": 1, "not_run": 0}
    assert rep["errors"][0]["stage"] == "read" and "broken" in rep["errors"][0]["file"]
    by = {r["file"].split("/")[-1][:-4]: r for r in rep["files"]}
    assert by[names[0]]["gaps"] == [[20, 30], [40, 50]] and by[names[0]]["frames_filled"] == 20
    assert by[names[1]]["gaps"] == [[20, 30]]
    a, b = read_bvh(src / f"{names[0]}.bvh"), read_bvh(out / f"{names[0]}.bvh")
    keep = np.ones(60, bool)
    keep[20:30] = keep[40:50] = False
    assert quat_angle(a.rotations[keep], b.rotations[keep]).max() < 1e-4  # keys as they were (BVH precision)
    assert quat_angle(a.rotations[21:30], b.rotations[21:30]).max() > 1e-3  # the frozen frames were refilled
    before = (out / f"{names[0]}.bvh").stat().st_mtime_ns
    assert main(["batch", "infill", str(src), "--out", str(out), "--frozen", "5", "--quiet"]) == 1
    rep = json.loads((out / "report.json").read_text())
    assert rep["counts"]["skipped"] == 2 and (out / f"{names[0]}.bvh").stat().st_mtime_ns == before
    assert not list(out.glob(".*.tmp"))
    capsys.readouterr()
    assert main(["batch", "infill", str(src), "--out", str(out), "--quiet"]) == 2
    assert "nothing to fill" in capsys.readouterr().err
    from motioncore.batch.infill import run_batch_infill

    with pytest.raises(BatchError, match="no .bvh, .fbx or .blend files"):
        run_batch_infill(str(tmp_path / "empty*"), str(out), frozen=3, progress=False)


@needs_data
def test_a_long_clip_is_filled_gap_by_gap_in_local_windows():
    from motioncore.core.gaps import CONTEXT
    from motioncore.data import load
    from motioncore.infill import fill_clip
    from motioncore.models.registry import load_model

    model, meta = load_model("anyorder-body")
    m = next(c.motion for c in load("bandai", "test", fps=30, progress=False) if c.motion.num_frames >= 200)
    q, root = m.rotations[:200], m.positions[:200, meta["root_joint"]]
    known = np.ones(200, bool)
    known[100:120] = False
    long = fill_clip(model, meta, q, root, known)  # 200 frames > window: the gap alone, in [90, 130)
    a, b = 100 - CONTEXT, 120 + CONTEXT
    local = fill_clip(model, meta, q[a:b], root[a:b], known[a:b], window=None)
    from motioncore.core.rotations import quat_angle

    assert quat_angle(long.rotations[0, a:b], local.rotations[0]).max() < 1e-5  # same rotations (signs may differ)
    np.testing.assert_array_equal(long.rotations[0, known], q[known])
    whole = fill_clip(model, meta, q, root, known, window=None)  # one 200-frame window: another answer
    assert quat_angle(whole.rotations[0, 100:120], long.rotations[0, 100:120]).max() > 1e-3
