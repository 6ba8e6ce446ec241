"""The import graph of motioncore (and motioncore_server), read with `ast`: no module is imported.

    python scripts/import_depth.py            # longest module-level import chain inside motioncore
    python scripts/import_depth.py --lazy     # count imports inside functions as edges too

An edge A -> B means module A imports module B of the same packages: `import a.b`, `from a import b`
(b a submodule, else the package a itself), `from .b import name` and `from . import b` (resolved
against A's package). Importing a.b.c also runs the `__init__` of a and a.b; those parent packages are
not edges here (every module would otherwise depend on its own package). Module-level edges are the
ones outside any function; `lazy` edges are imports inside a function body (they run when called).
Imports under `if TYPE_CHECKING:` are never edges (they never run).

The depth is the number of modules on the longest chain of module-level edges, with any import
cycle (strongly connected component) condensed to one node first.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"motioncore": ROOT / "src" / "motioncore", "motioncore_server": ROOT / "server" / "motioncore_server"}


@dataclass(frozen=True)
class Edge:
    src: str    # importing module, dotted
    dst: str    # imported module, dotted
    lazy: bool  # inside a function body
    line: int   # line number in src


def module_files(packages: dict[str, Path] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under each package (a package is its __init__)."""
    out: dict[str, Path] = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """(node, lazy) for every Import/ImportFrom that can run, skipping `if TYPE_CHECKING:` blocks."""
    def walk(node: ast.AST, lazy: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), lazy)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            yield from walk(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def edges(packages: dict[str, Path] = PACKAGES) -> list[Edge]:
    """Every import from one module of `packages` to another."""
    files = module_files(packages)
    out: list[Edge] = []
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        here = mod if is_pkg else mod.rpartition(".")[0]   # the package that relative imports start from
        for node, lazy in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base_parts = here.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in files else base)
            for t in targets:
                # `import a.b.c` of a name that is not a module (an attribute): fall back to the longest module prefix
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    out.append(Edge(mod, t, lazy, node.lineno))
    return out


def graph(es: list[Edge], lazy: bool = False, within: str | None = None) -> dict[str, set[str]]:
    """Adjacency of module-level edges (plus lazy ones if asked), optionally only inside package `within`."""
    g: dict[str, set[str]] = {}
    for e in es:
        if e.lazy and not lazy:
            continue
        if within and not (_inside(e.src, within) and _inside(e.dst, within)):
            continue
        g.setdefault(e.src, set()).add(e.dst)
        g.setdefault(e.dst, set())
    return g


def _inside(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): every strongly connected component, singletons included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module: each holds at least one cycle."""
    return [c for c in strongly_connected(g) if len(c) > 1]


def longest_chain(g: dict[str, set[str]]) -> list[str]:
    """Longest path (in modules) of the graph with each cycle condensed to one node; a condensed node
    is shown as '{a|b|...}'."""
    comps = strongly_connected(g)
    comp_of = {m: i for i, c in enumerate(comps) for m in c}
    cg = {i: {comp_of[w] for m in c for w in g[m]} - {i} for i, c in enumerate(comps)}
    best: dict[int, list[int]] = {}

    def chain(i: int) -> list[int]:   # Tarjan returns components in reverse topological order
        if i not in best:
            tails = [chain(j) for j in cg[i]]
            best[i] = [i, *max(tails, key=len, default=[])]
        return best[i]

    for i in range(len(comps)):   # callees first, so the recursion stays shallow
        chain(i)
    path = max(best.values(), key=len)
    return [comps[i][0] if len(comps[i]) == 1 else "{" + "|".join(comps[i]) + "}" for i in path]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lazy", action="store_true", help="count imports inside functions as edges too")
    p.add_argument("--package", default="motioncore", help="measure inside this package (default motioncore)")
    a = p.parse_args(argv)
    g = graph(edges(), lazy=a.lazy, within=a.package)
    chain = longest_chain(g)
    print(f"modules: {len(g)}  edges: {sum(map(len, g.values()))}  import depth: {len(chain)}")
    print("longest chain: " + " -> ".join(chain))
    for c in cycles(g):
        print("cycle: " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
