"""Imports inside functions, counted with `ast` (nothing imported): all of them, and those of the project's own
modules (``motioncore``, ``motioncore_server``, relative imports), per file.

    python scripts/lazy_imports.py            # totals for src/, server/, addon/, scripts/ and bench/
    python scripts/lazy_imports.py --files    # and the count per file, most first

A lazy import of a heavy dependency (torch, matplotlib, ray, bpy) keeps a light path light; a lazy import of
the project's own module usually dodges an import cycle or a layer (issue 48 asks for at most 40 of those).
"""
from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "src" / "motioncore", ROOT / "server" / "motioncore_server", ROOT / "addon", ROOT / "scripts",
           ROOT / "bench")   # as issue 48 counted them: 573 in 84 files, 454 of the project's own, at e414e91
OWN = ("motioncore", "motioncore_server")


def lazy_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, of the project's own modules) for each import statement inside a function of ``path``."""
    out: list[tuple[int, bool]] = []

    def walk(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if lazy and isinstance(child, ast.Import):
                out.append((child.lineno, any(a.name.split(".")[0] in OWN for a in child.names)))
            elif lazy and isinstance(child, ast.ImportFrom):
                out.append((child.lineno, bool(child.level) or (child.module or "").split(".")[0] in OWN))
            walk(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text(), str(path)), False)
    return out


def count(folders: tuple[Path, ...] = FOLDERS) -> tuple[int, int, Counter, Counter]:
    """(all lazy imports, the project's own, per file all, per file own)."""
    every, own = Counter(), Counter()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            found = lazy_imports(path)
            rel = str(path.relative_to(ROOT))
            if found:
                every[rel] = len(found)
                own[rel] = sum(o for _, o in found)
    return sum(every.values()), sum(own.values()), every, own


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", action="store_true", help="the count per file")
    a = ap.parse_args(argv)
    n, n_own, every, own = count()
    print(f"imports inside functions: {n} in {len(every)} files; of the project's own modules: {n_own} "
          f"in {sum(1 for v in own.values() if v)} files")
    if a.files:
        for rel, k in own.most_common():
            print(f"{k:4d} own / {every[rel]:4d} all  {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
