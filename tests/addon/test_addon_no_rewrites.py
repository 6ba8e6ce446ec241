"""The add-on computes nothing the vendored library provides (scripts/build_addon.py VENDORED), judged by source
and by behaviour, not by name:

- source: every sizeable expression of a vendored function (a quaternion product, a rotation matrix, an Euler
  solution, an axis swap, a sign-continuity pass), with variable names and the kind of slice left out, must not
  appear in an add-on module outside vendor/;
- behaviour: every plain add-on function that takes one or two arrays is called on random quaternions and
  vectors, and must not return what a vendored function returns for the same input.

Each side is checked to catch a planted rewrite, so the test can fail."""
from __future__ import annotations

import ast
import copy
import inspect
import itertools
import textwrap
from pathlib import Path

import numpy as np
from helpers.addon import addon_module
from helpers.blender import build_addon_module

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon"
SRC = ROOT / "src" / "motioncore"
MIN_NODES = 24   # smaller expressions (a norm, a clip, a normalisation) are everyday numpy, not a rewrite
PURE = ("core.keys", "core.rigclip", "core.requests", "core.rigmap", "core.rates")   # plain logic, no I/O


class _Shape(ast.NodeTransformer):
    """Names to one token, every slice or ellipsis in a subscript to one token, ``axis=`` values to one token:
    ``v[..., 0]`` and ``r[:, 0]`` are the same component, whatever the arrays are called."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(id="_", ctx=ast.Load()), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.copy_location(ast.arg(arg="_"), node)

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        return ast.copy_location(ast.Name(id=":", ctx=ast.Load()), node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if node.value is Ellipsis:
            return ast.copy_location(ast.Name(id=":", ctx=ast.Load()), node)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg == "axis":
            return ast.copy_location(ast.keyword(arg="axis", value=ast.Name(id="_", ctx=ast.Load())), node)
        self.generic_visit(node)
        return node


def _shapes(tree: ast.AST) -> dict[str, int]:
    """Normalised dump -> line of every expression of at least MIN_NODES nodes (leading indices unified)."""
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and sum(1 for _ in ast.walk(node)) >= MIN_NODES:
            norm = _Shape().visit(copy.deepcopy(node))
            out.setdefault(ast.dump(norm), getattr(node, "lineno", 0))
    return out


def _vendored_shapes() -> dict[str, str]:
    shapes: dict[str, str] = {}
    for rel in build_addon_module().VENDORED:
        tree = ast.parse((SRC / rel).read_text())
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            for s in _shapes(fn):
                shapes.setdefault(s, f"{rel}:{fn.name}")
    return shapes


def _addon_files() -> list[Path]:
    return [f for f in sorted(ADDON.rglob("*.py")) if "vendor" not in f.parts]


def _copies_in(text: str, vendored: dict[str, str]) -> list[str]:
    return [f"line {line}: as {vendored[s]}" for s, line in _shapes(ast.parse(text)).items() if s in vendored]


# (add-on module, vendored function) pairs whose shared expression is no rewrite, each with the reason
NOT_A_COPY = {("core/feet_report.py", "retarget/rest.py:bends"):
              "posed bone heads by forward kinematics; rest.bends walks the same sum inside, no vendored function "
              "returns the heads"}


def test_no_addon_module_repeats_a_vendored_computation_in_its_source():
    vendored = _vendored_shapes()
    assert len(vendored) > 40
    found = {}
    for f in _addon_files():
        rel = str(f.relative_to(ADDON))
        c = [x for x in _copies_in(f.read_text(), vendored) if (rel, x.split(" as ")[1]) not in NOT_A_COPY]
        if c:
            found[rel] = c
    assert found == {}
    # the check sees a rewrite: the quaternion product, an Euler solution and the axis swap, renamed
    planted = textwrap.dedent('''
        def spin(p, r):
            pw, px, py, pz = np.moveaxis(np.asarray(p, np.float64), -1, 0)
            rw, rx, ry, rz = np.moveaxis(np.asarray(r, np.float64), -1, 0)
            return np.stack([pw * rw - px * rx - py * ry - pz * rz, pw * rx + px * rw + py * rz - pz * ry,
                             pw * ry - px * rz + py * rw + pz * rx, pw * rz + px * ry - py * rx + pz * rw], -1)

        def swap(loc):
            return np.stack([loc[:, 0], loc[:, 2], -loc[:, 1]], axis=1)
    ''')
    hits = " ".join(_copies_in(planted, vendored))
    assert "core/quat_np.py:quat_mul" in hits and "core/axes.py:z_up_to_y_up" in hits, hits


def _inputs() -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(3)
    q = rng.normal(size=(7, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    v = rng.normal(size=(7, 3)) * 10.0
    q2 = rng.normal(size=(7, 4))
    q2 /= np.linalg.norm(q2, axis=-1, keepdims=True)
    return [(q,), (v,), (q, v), (q, q2), (v, v * 0.5)]


def _call(fn, args):
    try:
        with np.errstate(all="ignore"):
            out = fn(*[a.copy() for a in args])
    except Exception:
        return None
    return out if isinstance(out, np.ndarray) and out.size and np.isfinite(out).all() else None


def _array_functions(module) -> dict[str, object]:
    """Plain functions of ``module`` defined there whose required positional parameters number one or two."""
    out = {}
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if fn.__module__ != module.__name__:
            continue
        ps = [p for p in inspect.signature(fn).parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if 1 <= len(ps) <= 2:
            out[name] = fn
    return out


def _same_behaviour(mine: dict[str, object], theirs: dict[str, object]) -> list[str]:
    hits = []
    for args in _inputs():
        want = {n: o for n, f in theirs.items() if (o := _call(f, args)) is not None}
        for (n, f) in mine.items():
            got = _call(f, args)
            if got is None:
                continue
            for t, o in want.items():
                if o.shape == got.shape and np.allclose(o, got, atol=1e-9):
                    hits.append(f"{n} behaves as {t} on {len(args)} argument(s) of shape {args[0].shape}")
    return sorted(set(hits))


def test_no_addon_function_behaves_as_a_vendored_one():
    vendored = {}
    for rel in build_addon_module().VENDORED:
        if rel.startswith("wire/"):
            continue
        mod = addon_module(f"vendor.{Path(rel).stem}")
        vendored |= {f"{rel}:{n}": f for n, f in _array_functions(mod).items()}
    assert {"core/quat_np.py:quat_mul", "core/axes.py:y_up_to_z_up", "core/quat_np.py:quat_continuity"} <= set(vendored)
    mine = {f"{m}.{n}": f for m in PURE for n, f in _array_functions(addon_module(m)).items()}
    assert len(mine) > 10
    assert _same_behaviour(mine, vendored) == []
    # the check sees a rewrite: a sign-continuity pass and an axis swap written another way
    def continuity(q):
        out = np.array(q, np.float64)
        for t in range(1, len(out)):
            if np.dot(out[t], out[t - 1]) < 0:
                out[t:] *= -1
        return out

    def to_blender(v):
        return np.asarray(v) @ np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])

    planted = _same_behaviour({"continuity": continuity, "to_blender": to_blender}, vendored)
    assert any(p.startswith("continuity behaves as core/quat_np.py:quat_continuity") for p in planted), planted
    assert any(p.startswith("to_blender behaves as core/axes.py:y_up_to_z_up") for p in planted), planted
    assert list(itertools.chain(planted))
