"""docs/architecture.md against the code: every file and folder it names exists, every function, class or
constant it names in parentheses beside a file is defined there, each line of its "Import directions" holds,
and the library rows of its layer table are in an order every import between them respects."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

from helpers.layers import family_of, layer_of

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
LIB = ROOT / "src" / "motioncore"
TOPS = ("src/", "server/", "addon/", "scripts/", "tests/", "docs/", "bench/")
NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)?$")


def _build_addon():
    spec = importlib.util.spec_from_file_location("_build_addon_for_docs", ROOT / "scripts" / "build_addon.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _import_depth():
    spec = importlib.util.spec_from_file_location("_import_depth_for_docs", ROOT / "scripts" / "import_depth.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # its dataclasses look the module up there
    spec.loader.exec_module(mod)
    return mod


VENDORED = {Path(v).name: LIB / v for v in _build_addon().VENDORED}   # addon/vendor/<name> is a built copy


def _rows(section: str) -> list[str]:
    text = DOC.read_text()
    start = text.index(section)
    end = text.find("\n## ", start + 1)
    return [ln for ln in text[start:end if end > 0 else None].splitlines() if ln.startswith("| ") and "---" not in ln]


def _source(rel: str) -> Path:
    """The file a named path stands for: an add-on vendor copy is its library source."""
    if rel.startswith("addon/vendor/") and rel.endswith(".py"):
        return VENDORED.get(Path(rel).name, ROOT / rel)
    return ROOT / rel


def _resolve(row: str) -> list[tuple[int, str]]:
    """(position, repository path) of every file or folder a table row names; a bare `name.py` is in the
    folder of the path named before it in the row, `folder/...` without a top folder is in src/motioncore."""
    out, cur = [], None
    for m in re.finditer(r"`([^`\s]+)`", row):
        tok = m.group(1)
        if not (tok.endswith(".py") or tok.endswith("/")):
            continue
        if tok.startswith(TOPS):
            rel = tok
        elif "/" in tok:
            rel = f"src/motioncore/{tok}"
        elif cur is not None:
            rel = f"{cur.rstrip('/') if cur.endswith('/') else str(Path(cur).parent)}/{tok}"
        else:
            rel = f"src/motioncore/{tok}"
        out.append((m.start(), rel))
        cur = rel
    return out


def _defined(path: Path) -> set[str]:
    """Top-level defs, classes and assigned names of a module, and Class.method."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            names |= {f"{node.name}.{f.name}" for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _named_in_parentheses(row: str, paths: list[tuple[int, str]]) -> list[tuple[str, str]]:
    """(path, name) for `path` (`name`, ...), `path` (= `other`: `name`, ...) and (`path`: `name`, ...)."""
    at = dict(paths)
    out = []
    for m in re.finditer(r"\(([^()]*)\)", row):
        inner, before = m.group(1), row[:m.start()].rstrip()
        head = re.match(r"\s*=?\s*`([^`]+\.py)`\s*:?", inner)
        if head:
            owner = next((p for pos, p in paths if pos == m.start() + 1 + head.start(1) - 1), None)
            if inner.lstrip().startswith("="):
                owner = _resolve(f"`{head.group(1)}`")[0][1]
            rest = inner[head.end():]
        else:
            prev = re.search(r"`([^`]+\.py)`$", before)
            if not prev:
                continue
            owner, rest = at.get(prev.start()), inner
        names = [t for t in re.findall(r"`([^`]+)`", rest) if NAME.match(t) and not t.endswith(".py")]
        out += [(owner, n) for n in names if owner]
    return out


def test_every_file_and_folder_named_exists():
    missing = []
    for section in ("## The layers", "## One in-fill request"):
        for row in _rows(section):
            for _, rel in _resolve(row):
                if rel == "addon/vendor/":
                    continue   # built by scripts/build_addon.py, git-ignored
                if not _source(rel).exists():
                    missing.append(rel)
    assert missing == []


def test_every_name_beside_a_file_is_defined_there():
    checked, undefined = 0, []
    for section in ("## The layers", "## One in-fill request"):
        for row in _rows(section):
            for rel, name in _named_in_parentheses(row, _resolve(row)):
                checked += 1
                if name not in _defined(_source(rel)):
                    undefined.append(f"{rel}: {name}")
    assert checked >= 25   # the rule is checked on the request path's owners, not on none
    assert undefined == []


AREAS = {"motioncore": [LIB], "server": [ROOT / "server"], "addon": [ROOT / "addon"], "wire": [LIB / "wire"]}
MODULE = {"server": "motioncore_server"}   # the name an area is imported by


def _top_imports(area: str) -> set[str]:
    """Top-level names an area's files import (module level and inside functions); the add-on's built
    vendor/ copies are the library's and are checked there."""
    out = set()
    for folder in AREAS[area]:
        for path in folder.rglob("*.py"):
            if "vendor" in path.relative_to(folder).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    out |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    out.add(node.module.split(".")[0])
    return out


def _directions() -> list[str]:
    text = DOC.read_text()
    start = text.index("## Import directions")
    end = text.find("\n## ", start + 1)
    return [ln[2:] for ln in text[start:end].splitlines() if ln.startswith("- ")]


def test_each_import_direction_holds():
    lines = _directions()
    assert len(lines) >= 4
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for line in lines:
        area = re.match(r"`(\w+)`", line).group(1)
        named = [MODULE.get(n, n) for n in re.findall(r"`(\w+)`", line)[1:]]
        imported = _top_imports(area)
        if " never imports " in line:
            assert not imported & set(named), line
        elif " imports only " in line and line.endswith("and the standard library."):
            assert imported - stdlib - set(named) - {area} == set(), line
        elif " imports " in line:
            assert set(named) <= imported, line
        else:
            raise AssertionError(f"not a direction this test reads: {line}")


def test_the_library_rows_are_in_an_order_every_import_respects():
    """A library folder imports only folders in rows above its own (a row's folders import none of each other)."""
    row_of = {}
    for i, row in enumerate(_rows("## The layers")):
        for _, rel in _resolve(row.split("|")[2]):
            if rel.startswith("src/motioncore/"):
                row_of[rel[len("src/motioncore/"):].strip("/").removesuffix(".py")] = i
    deps = _import_depth()
    def row(mod: str) -> str:   # a family's training sits in the families' row
        layer = layer_of(mod)
        return "families" if layer == "training" else layer

    layers = {row(m) for m in deps.module_files() if m.startswith("motioncore.")}
    assert layers - {"__init__"} <= set(row_of), sorted(layers - set(row_of))
    wrong = []
    for e in deps.edges():
        if not (e.src.startswith("motioncore.") and e.dst.startswith("motioncore.")):
            continue
        if family_of(e.src) is not None and family_of(e.src) == family_of(e.dst):
            continue   # one family, one unit
        a, b = row(e.src), row(e.dst)
        if a != b and a in row_of and not row_of[b] < row_of[a]:
            wrong.append(f"{e.src}:{e.line} imports {e.dst}")
    assert wrong == []
