"""The package layout: no import cycle, and each folder of motioncore imports only the layers below it.

The graph comes from scripts/import_depth.py (read with `ast`, nothing imported). Edges are every import
that can run: module-level ones *and* lazy ones inside functions (a lazy import that closes a cycle still
couples the two modules); only `if TYPE_CHECKING:` blocks are skipped. A module-level cycle is the hard
failure (Python can fail to import it); the lazy-inclusive test keeps the design honest. Against the folder
order of issue 48 (a family package one unit, between retarget and tasks), an import that runs up fails unless
it is one of the listed ones still to go (``UPWARD_LEFT``).
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from helpers.layers import family_of, layer_of

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_import_depth_under_test", ROOT / "scripts" / "import_depth.py")
assert _spec and _spec.loader
deps = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = deps   # dataclasses look their module up there
_spec.loader.exec_module(deps)

# Bottom-up: a module may import its own folder and any folder of a strictly lower rank.
# errors.py and configs.py are the root: stdlib-only modules every layer may use.
RANK = {
    "errors": 0, "configs": 0,   # top-level leaf modules
    "wire": 0,                   # protocol + client: stdlib, numpy, zmq only (vendored into the add-on)
    "core": 1,                   # rotations, skeleton, motion, kinematics
    "io": 2,                     # bvh, blender, atomic
    "data": 3,                   # datasets, cache, windows
    "features": 4,               # PFNN / MANN feature layouts
    "models": 5,                 # nets, registry, checkpoint, sampling
    "train": 6,                  # the shared training loop and the controllers' recipe
    "retarget": 7,               # joint maps and retargeting (missing joints: a filler passed in, tasks.joints)
    "infill": 8,                 # one in-fill request: its plan, the family protocol, resampling, fill(request)
    "tasks": 9,                  # locomotion, paths, style
    "eval": 10,                  # benchmarks
    "training": 11,              # a family's own training (families/*/train*.py): may validate with the benchmarks
    "families": 11,              # the families' package __init__ files (docstrings only)
    "batch": 11,
    "cli": 12,                   # the `motioncore` command
}
WIRE_THIRD_PARTY = {"numpy", "zmq", "msgspec"}  # msgspec: the C JSON codec (optional, stdlib fallback)


_layer, _family = layer_of, family_of


def test_no_module_level_import_cycle():
    g = deps.graph(deps.edges(), lazy=False)
    assert deps.cycles(g) == []


def test_no_import_cycle_counting_imports_inside_functions():
    g = deps.graph(deps.edges(), lazy=True)
    assert deps.cycles(g) == []


def test_every_folder_and_top_level_module_has_a_layer():
    files = deps.module_files()
    layers = {_layer(m) for m in files if m.startswith("motioncore.")}
    assert layers <= set(RANK), f"place these in tests/repo/test_layers.py RANK: {sorted(layers - set(RANK))}"


def test_each_folder_imports_only_layers_below_it():
    bad = []
    for e in deps.edges():
        if not e.src.startswith("motioncore.") or e.dst == "motioncore":
            continue
        if not e.dst.startswith("motioncore."):
            bad.append(f"{e.src}:{e.line} imports {e.dst}")  # motioncore never imports motioncore_server
            continue
        a, b = _layer(e.src), _layer(e.dst)
        if _family(e.src) is not None and _family(e.src) == _family(e.dst):
            continue   # one family, one unit
        if a != b and RANK[b] >= RANK[a]:
            bad.append(f"{e.src}:{e.line} ({a}, rank {RANK[a]}) imports {e.dst} ({b}, rank {RANK[b]})")
    assert not bad, "\n".join(bad)


def test_top_level_package_imports_only_errors():
    for e in deps.edges():
        if e.src == "motioncore":
            assert e.dst == "motioncore.errors", e


def test_wire_imports_only_stdlib_numpy_zmq_and_itself():
    folder = ROOT / "src" / "motioncore" / "wire"
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:   # relative: only a sibling inside wire/
                    assert node.level == 1, f"{path.name}:{node.lineno}"
                    continue
                names = [node.module or ""]
            else:
                continue
            for n in names:
                top = n.split(".")[0]
                assert top in sys.stdlib_module_names or top in WIRE_THIRD_PARTY, f"{path.name}:{node.lineno} {n}"


def test_each_folder_init_says_what_the_layer_is_and_may_import():
    for init in sorted((ROOT / "src" / "motioncore").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        first = doc.splitlines()[0] if doc else ""
        assert first.startswith("Layer ") and "import" in first.lower(), f"{init}: {first!r}"


def test_import_depth_script_runs(capsys):
    assert deps.main([]) == 0
    assert "import depth:" in capsys.readouterr().out


def test_no_source_file_over_500_lines():
    """Issue 25: files split by responsibility. The add-on's vendor/ copies are built from src/ (checked there)."""
    long = {str(f.relative_to(ROOT)): n for d in ("src", "server", "addon") for f in sorted((ROOT / d).rglob("*.py"))
            if "vendor" not in f.parts and (n := len(f.read_text().splitlines())) > 500}
    assert long == {}


# The folders in the order issue 48 reads them, a family package one unit between retarget and tasks (a family
# is built on the shared layers; tasks, eval, batch and cli use the families): an import from a folder to one
# further down this list runs up the layers.
FOLDER_ORDER = ("wire", "core", "io", "data", "features", "models", "train", "retarget", "infill", "families", "tasks",
                "eval", "batch", "cli")
# (importing module, imported module) that still run up: issue 48's debt. Strike a pair off when it goes; the test
# fails on a new one and on one that went but is still listed.
UPWARD_LEFT = {
    ("families.anyorder.evaluate", "eval.baselines"), ("families.body.evaluate", "eval.keyed"),
    ("families.body.train_data", "eval.metrics"),
    ("families.body.train_loop", "eval.baselines"), ("families.body.train_loop", "eval.infill"),
    ("families.style.evaluate", "tasks.locomotion"),
    ("families.style.evaluate_judge", "tasks.paths"), ("families.style.evaluate_turns", "tasks.paths"),
    ("families.style.generate", "tasks.locomotion"), ("families.style.train_rollouts", "tasks.paths"),
    ("families.style.generate_outside", "tasks.locomotion"), ("families.style.generate_outside", "tasks.rollout"),
    ("train.controllers", "families.mann.features"), ("train.controllers", "families.pfnn.features"),
}


def upward_imports(edges) -> set[tuple[str, str]]:
    """(importing, imported) module pairs inside motioncore (prefix dropped) that run up ``FOLDER_ORDER``."""
    rank = {f: i for i, f in enumerate(FOLDER_ORDER)} | {"errors": 0, "configs": 0}
    out = set()
    for e in edges:
        if not (e.src.startswith("motioncore.") and e.dst.startswith("motioncore.")):
            continue
        a, b = e.src.split(".")[1], e.dst.split(".")[1]
        if a != b and rank[b] > rank[a]:
            out.add((e.src.removeprefix("motioncore."), e.dst.removeprefix("motioncore.")))
    return out


def test_no_import_runs_up_the_folders_but_the_listed_ones():
    up = upward_imports(deps.edges())
    assert up - UPWARD_LEFT == set(), "imports that run up the layers (move the shared piece down instead)"
    assert UPWARD_LEFT - up == set(), "these no longer run up: strike them off UPWARD_LEFT"


def test_the_upward_check_sees_an_import_up_and_none_down():
    E = deps.Edge
    assert upward_imports([E("motioncore.retarget.core", "motioncore.tasks.infill", True, 1)]) == {
        ("retarget.core", "tasks.infill")}
    assert upward_imports([E("motioncore.tasks.joints", "motioncore.retarget.mapping", False, 1),
                           E("motioncore.families.body.fill_plant", "motioncore.retarget.topology", False, 1)]) == set()
