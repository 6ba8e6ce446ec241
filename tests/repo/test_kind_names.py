"""Each model family registers once (``motioncore.models.kinds``): no code outside its family and the registry names
a kind, and every record resolves to real code and bundled models."""
from __future__ import annotations

import ast
from pathlib import Path

from motioncore.models.checkpoint import read_meta
from motioncore.models.kinds import FAMILIES, KINDS, defaults, hook, trainable
from motioncore.models.registry import BUNDLED, bundled_names

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = (ROOT / "src" / "motioncore" / "families", ROOT / "src" / "motioncore" / "models" / "kinds.py",
           ROOT / "addon" / "vendor")   # the families themselves, the registry, and built copies


def kind_literals(folders: list[Path]) -> list[str]:
    """``file:line 'kind'`` for every string constant in the code that is exactly a registered kind's name
    (a docstring or help text that mentions a kind inside a sentence does not name it)."""
    out = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if any(path == a or a in path.parents for a in ALLOWED):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KINDS:
                    out.append(f"{path}:{node.lineno} {node.value!r}")
    return out


def test_no_kind_is_named_outside_its_family_and_the_registry():
    found = kind_literals([ROOT / "src" / "motioncore", ROOT / "server", ROOT / "addon"])
    assert found == [], "ask motioncore.models.kinds instead:\n" + "\n".join(found)


def test_the_count_catches_a_kind_named_in_code(tmp_path):
    (tmp_path / "m.py").write_text('MODEL = "infill-body"\nTEXT = "an infill-body checkpoint"\nif kind == "mann":\n'
                                   '    pass\n')
    assert [f.rsplit(" ", 1)[1] for f in kind_literals([tmp_path])] == ["'infill-body'", "'mann'"]


def test_every_record_resolves_to_its_code():
    for k in KINDS.values():
        cfg, model = hook(k.config), hook(k.model)
        assert isinstance(cfg, type) and isinstance(model, type), k.kind
        if k.family is not None:   # an in-filling family: a class with the protocol's methods (infill.family)
            fam = hook(k.family)
            assert isinstance(fam, type) and callable(fam.fit) and callable(fam.fill), k.kind
    for f in FAMILIES:
        assert f.train is None or callable(hook(f.train)), f.package
        assert (ROOT / "src" / "motioncore" / "families" / f.package / "__init__.py").is_file(), f.package
    assert set(trainable()) == {"pfnn", "mann", "anyorder", "infill-body", "infill-hands"}


def test_every_default_is_a_bundled_model_of_a_registered_kind():
    names = bundled_names()
    for use, name in defaults().items():
        assert name in names, (use, name)
        assert read_meta(BUNDLED / name)["kind"] in KINDS, (use, name)
    assert {read_meta(BUNDLED / n)["kind"] for n in names} <= set(KINDS)
