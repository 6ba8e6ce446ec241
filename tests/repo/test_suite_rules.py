"""Rules of the test suite itself: no test module imports another (shared helpers live in conftest.py and
tests/helpers/), every test that launches the real bpy carries the ``blender`` marker, and
``MOTIONCORE_SKIP_BLENDER=1`` skips every such test."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
MODULES = sorted(TESTS.rglob("test_*.py"))


def _imported(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_no_test_module_imports_another():
    hits = {str(f.relative_to(TESTS)): sorted(m for m in _imported(ast.parse(f.read_text())) if m.startswith("test_"))
            for f in MODULES}
    assert {k: v for k, v in hits.items() if v} == {}


def _marks_blender(node: ast.AST) -> bool:
    return "mark.blender" in ast.unparse(node)


def _launches_bpy(tree: ast.Module) -> set[str]:
    """Module-level functions that reach ``bpy_python`` (directly or through another such function)."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    names = {n: {x.id for x in ast.walk(f) if isinstance(x, ast.Name)} | {x.attr for x in ast.walk(f)
                                                                          if isinstance(x, ast.Attribute)}
             for n, f in funcs.items()}
    hit = {n for n, used in names.items() if "bpy_python" in used}
    while True:
        more = {n for n, used in names.items() if used & hit} - hit
        if not more:
            return hit
        hit |= more


def test_every_test_that_launches_bpy_is_marked_blender():
    unmarked, launching = [], 0
    for f in MODULES:
        tree = ast.parse(f.read_text())
        module_mark = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          and _marks_blender(n.value) for n in tree.body)
        for name in sorted(_launches_bpy(tree)):
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
            if name.startswith("test_"):
                launching += 1
                if not (module_mark or any(_marks_blender(d) for d in fn.decorator_list)):
                    unmarked.append(f"{f.relative_to(TESTS)}::{name}")
    assert launching >= 8   # the rule is checked on the real-bpy tests, not on none
    assert unmarked == []


def test_every_test_module_sits_in_an_area_folder_with_a_unique_name_under_500_lines():
    """tests/<area>/test_<what it tests>.py: pytest imports test modules by basename (the default "prepend"
    import mode, no ``__init__.py``, so that ``from conftest import ...`` and ``helpers`` keep working), so two
    modules of one name in two folders would collide; and a file over 500 lines is split by what it tests."""
    assert len(MODULES) >= 50   # the rule is checked on the suite, not on none
    assert [str(f.relative_to(TESTS)) for f in MODULES if f.parent == TESTS] == []
    names = [f.name for f in MODULES]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert list((TESTS).rglob("__init__.py")) == [TESTS / "helpers" / "__init__.py"]
    long = {str(f.relative_to(TESTS)): n for f in MODULES if (n := len(f.read_text().splitlines())) > 500}
    assert long == {}


@pytest.mark.parametrize("skip, status, outcome", [("1", 0, "1 passed, 1 skipped"), ("", 1, "1 failed, 1 passed")])
def test_skip_blender_skips_every_blender_test(tmp_path, skip, status, outcome):
    """A copy of tests/conftest.py beside a blender-marked test that would fail and an unmarked one."""
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text("import pytest\n\n\n@pytest.mark.blender\ndef test_bpy():\n"
                                          "    raise AssertionError('ran')\n\n\ndef test_plain():\n    pass\n")
    env = {**os.environ, "MOTIONCORE_SKIP_BLENDER": skip, "MOTIONCORE_DATA": str(tmp_path / "no-data")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers",
                        "-o", "markers=blender: real bpy", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == status and outcome in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
