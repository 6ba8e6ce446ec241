"""The README and the docs check what matters, not their prose: the two set-up commands are the README's first
code blocks and .ci/run runs the test one verbatim; every `motioncore ...` command they quote parses with the
command's own parser; every link and repository path resolves; every table and figure in the README and
docs/results.md says the command and the date that gave it; models.md has a card for each bundled model."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMAND = re.compile(r"`(\.venv/bin/)?(motioncore|python|PYTHONPATH=\S+ \.venv/bin/python|pytest) [^`]+`")


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def test_readme_is_short_and_opens_with_the_two_setup_commands_ci_runs():
    readme = _readme()
    assert len(readme.splitlines()) <= 250
    head = readme.split("\n## ")[0]   # before the first section: what it is, and the set-up
    blocks = re.findall(r"```bash\n(.*?)\n```", head, re.S)
    assert len(blocks) == 2, blocks
    main_job, tests = blocks
    assert "pip install" in main_job and "motioncore demo" in main_job
    assert "pip install" in tests and "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_every_top_folder_has_a_readme():
    for folder in ("addon", "server", "src", "scripts", "tests", "bench", "docs"):
        text = (ROOT / folder / "README.md").read_text().strip()
        assert "import" in text, folder


# ------------------------------------------------------------------------------------------- commands
def _commands(text: str) -> list[str]:
    """Every `motioncore ...` in backticks or on a line of a bash block, without comments and the venv prefix."""
    fenced = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    found = [" ".join(c.split()) for c in spans if re.match(r"(\.venv/bin/)?motioncore\s", c)]
    for block in fenced:
        for part in re.split(r"&&|\n", block):
            part = part.split("  #")[0].strip()
            if re.match(r"(\.venv/bin/)?motioncore ", part):
                found.append(part)
    return [re.sub(r"^\.venv/bin/", "", c) for c in found]


def _parser():
    from motioncore.cli.main import build_parser

    return build_parser()


def _subparser(parser, words: list[str]):
    """The parser of a subcommand chain, and the words after it."""
    import argparse

    while words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or words[0] not in subs[0].choices:
            break
        parser, words = subs[0].choices[words[0]], words[1:]
    return parser, words


def _is_template(cmd: str) -> bool:
    return any(t in cmd for t in ("...", "|", "[", "$(", "<", "DIR", "PATH", "ADDR", "HEAD:"))


def _names_known_options(words: list[str]) -> str | None:
    """None if ``words`` name subcommands the CLI has, and then only options of the last one."""
    import argparse

    sub, rest = _subparser(_parser(), words)
    if rest and not rest[0].startswith("-") and any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
        return f"no subcommand {rest[0]!r}"
    opts = {o for a in sub._actions for o in a.option_strings}
    unknown = [w for w in rest if w.startswith("--") and w.split("=")[0] not in opts]
    return f"unknown options {unknown}" if unknown else None


def _check(cmd: str) -> str | None:
    """None if ``cmd`` is a command the CLI takes; else why not. A whole command must parse; a template
    (placeholders) or a mention (`motioncore retarget`, `motioncore train --object-cond`: required arguments
    left out) must name subcommands and options the CLI has."""
    import contextlib
    import io

    words = shlex.split(cmd)[1:]
    if _is_template(cmd):
        return _names_known_options(words)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _parser().parse_args(words)
    except SystemExit as e:
        if "the following arguments are required" in err.getvalue():
            return _names_known_options(words)
        return f"argparse exit {e.code}: {err.getvalue().strip()[-200:]}"
    return None


def test_every_quoted_command_is_one_the_cli_takes():
    checked, bad = 0, []
    for doc in DOCS:
        for cmd in _commands(doc.read_text()):
            checked += 1
            why = _check(cmd)
            if why:
                bad.append(f"{doc.relative_to(ROOT)}: {cmd} ({why})")
    assert checked >= 60   # the rule is checked on the docs' commands, not on none
    assert bad == []


def test_a_command_the_cli_does_not_take_is_caught():
    assert _check("motioncore eval infill --model interp --no-such-flag") is not None
    assert _check("motioncore eval nothing") is not None
    assert _check("motioncore train pfnn|mann --bogus") is not None
    assert _check("motioncore retarget --no-such-flag") is not None     # a mention with an unknown option
    assert _check("motioncore eval infill --data cmu --model interp") is None
    assert _check("motioncore train --object-cond") is None


# ------------------------------------------------------------------------------------------- links
def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", doc.read_text(), re.M)}


BUILT = ("addon/vendor/", "addon/wheels/", "dist/", "out/", "runs/")   # made by commands, not committed


def test_every_link_and_repository_path_resolves():
    bad = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                bad.append(f"{doc.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{doc.name}: {target} (no such heading)")
        for rel in re.findall(r"`((?:tests|bench|scripts|src|server|addon|docs)/[\w./-]+)", text):
            rel = rel.split("::")[0].rstrip(".")
            if rel.startswith(BUILT) or not (ROOT / rel).exists():
                bad += [] if rel.startswith(BUILT) else [f"{doc.name}: {rel}"]
    assert bad == []


# ------------------------------------------------------------------------------------------- figures
def _blocks(text: str) -> list[str]:
    return [b for b in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S)) if b.strip()]


def _figures(doc: Path) -> list[tuple[str, str]]:
    """(figure, the text that introduces it): a table or an image with the paragraphs since the last heading,
    table or image before it."""
    out, lead = [], []
    for block in _blocks(doc.read_text()):
        lines = block.strip().splitlines()
        if lines[0].startswith("#"):
            lead = [] if len(lines) == 1 else ["\n".join(lines[1:])]
        elif lines[0].startswith("|") or lines[0].startswith("!["):
            if not (lines[0].startswith("|") and doc.name != "README.md" and "results" not in doc.name):
                out.append((lines[0][:80], "\n".join(lead)))
            lead = [] if lines[0].startswith("|") else lead
        else:
            lead.append(block)
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/results.md", "docs/models.md"])
def test_every_figure_says_its_command_and_date(doc):
    figures = _figures(ROOT / doc)
    assert figures, doc
    missing = [f for f, lead in figures if not (DATE.search(lead) and COMMAND.search(lead))]
    assert missing == []


def test_models_md_has_a_card_per_bundled_model_with_its_licence():
    text = (ROOT / "docs" / "models.md").read_text()
    cards = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    ckpts = sorted((ROOT / "src" / "motioncore" / "checkpoints").glob("*.json"))
    assert len(ckpts) >= 9
    for ckpt in ckpts:
        meta = json.loads(ckpt.read_text())
        card = next((body for head, body in cards.items() if ckpt.stem in head.split(" and ")), None)
        assert card is not None, f"docs/models.md has no card for {ckpt.stem}"
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| [`{ckpt.stem}`]"))
        size = (ckpt.with_suffix(".safetensors").stat().st_size) / 1e6
        assert f"{size:.1f} MB" in row or (size < 0.25 and "0.2 MB" in row), (ckpt.stem, size, row)
        licence = re.split(r" \(|;|:", meta["licence"])[0]
        assert licence in row, (ckpt.stem, licence, row)
