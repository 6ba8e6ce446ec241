"""The library code the add-on runs is vendored by scripts/build_addon.py, never re-written: each copy equals
its source but for the one import rewrite, imports only stdlib, numpy, zmq (msgspec optional) and the other
copies, and no add-on module defines again what a copy provides."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from helpers.blender import build_addon_module

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "motioncore"
ADDON = ROOT / "addon"
build_addon = build_addon_module()


def test_every_vendored_copy_equals_its_source(tmp_path):
    written = build_addon.vendor(tmp_path)
    assert {p.name for p in written} == {"__init__.py"} | {Path(r).name for r in build_addon.VENDORED}
    for rel in build_addon.VENDORED:
        src = (SRC / rel).read_text().splitlines()
        got = (tmp_path / "vendor" / Path(rel).name).read_text().splitlines()
        assert len(got) == len(src), rel
        for a, b in zip(src, got):   # equal lines, or the import of another copy made flat
            assert a == b or (a.startswith("from ..") and b == "from ." + a.split(".", 3)[3]), (rel, a, b)


def test_the_rewrite_only_flattens_imports_of_other_copies():
    assert build_addon.vendored_text("from ..core.quat_np import quat_mul\nx = 1\n") == \
        "from .quat_np import quat_mul\nx = 1\n"
    assert build_addon.vendored_text("from . import protocol as P\n") == "from . import protocol as P\n"


def test_vendored_sources_import_only_stdlib_numpy_zmq_and_each_other():
    copies = {Path(r).stem for r in build_addon.VENDORED}
    allowed = set(sys.stdlib_module_names) | {"numpy", "zmq", "msgspec"}
    for rel in build_addon.VENDORED:
        for node in ast.walk(ast.parse((SRC / rel).read_text())):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, (rel, ast.unparse(node))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    names = {(node.module or "").split(".")[-1]} if node.module else {a.name for a in node.names}
                    assert names <= copies, (rel, ast.unparse(node))
                else:
                    assert node.module.split(".")[0] in allowed, (rel, ast.unparse(node))


def test_no_addon_module_defines_what_a_copy_provides():
    provided = set()
    for rel in build_addon.VENDORED:
        tree = ast.parse((SRC / rel).read_text())
        provided |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert {"quat_mul", "quat_apply", "z_up_to_y_up", "rest_rotations", "twists"} <= provided
    again = {f"{f.relative_to(ADDON)}:{n.name}" for f in sorted(ADDON.rglob("*.py")) if "vendor" not in f.parts
             for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.FunctionDef) and n.name in provided}
    assert again == set()


def test_the_add_on_talks_through_client_methods_never_raw_messages():
    """One request path: add-on code calls the Client's typed methods (``infill_rotations``, ``style_adapt``,
    ``retarget``, ``walk``, ``models`` ...), never ``call``/``submit`` with a message type of its own."""
    raw = []
    for f in sorted(ADDON.rglob("*.py")):
        if "vendor" in f.parts:
            continue
        for n in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            typed = bool(n.args) and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)
            waits = any(k.arg in ("progress", "cancel_when") for k in n.keywords)
            if ((n.func.attr in ("call", "submit") and (typed or len(n.args) >= 2))   # a worker submits one job
                    or (n.func.attr == "result" and waits)):
                raw.append(f"{f.relative_to(ADDON)}:{n.lineno}: {ast.unparse(n)[:80]}")
    assert raw == []


def test_gaps_are_windowed_by_the_one_vendored_rule():
    """The add-on reads its windows with the library's own rule (core/gaps.py, vendored): no add-on module
    defines its own windows, context or whole-frame mask."""
    rule = {n.name for n in ast.parse((SRC / "core" / "gaps.py").read_text()).body if isinstance(n, ast.FunctionDef)}
    assert {"windows", "context_frames", "whole_frames", "runs"} <= rule
    mine = {f"{f.relative_to(ADDON)}:{n.name}" for f in sorted(ADDON.rglob("*.py")) if "vendor" not in f.parts
            for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.FunctionDef)
            and (n.name in rule or n.name in ("gaps", "mask_runs"))}
    assert mine == set()
    uses = (ADDON / "blender" / "rigio.py").read_text()
    assert "gaps.windows(missing, gaps.context_frames(fps))" in uses


def test_the_vendor_readme_lists_exactly_what_is_vendored():
    import re

    listed = re.findall(r"^- `([\w/]+\.py)`", (ADDON / "vendor" / "README.md").read_text(), re.M)
    assert sorted(listed) == sorted(build_addon.VENDORED) and len(listed) == len(set(listed))
