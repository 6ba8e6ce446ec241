"""Each figure has one home: the JSON its command wrote under docs/results/. Every block between
`<!-- results:ID -->` markers in docs/results.md, the README and the topic pages equals its render from that
JSON (`scripts/results_md.py --check`), and no page copies a block's table or figures outside a block."""
from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("results_md", ROOT / "scripts" / "results_md.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_block_equals_the_render_of_its_json_and_no_page_copies_one():
    rm = _script()
    assert rm.scan(write=False) == []


def test_every_section_is_one_command_that_writes_its_own_json_and_says_when_it_ran():
    rm = _script()
    from motioncore.cli.main import build_parser

    for sid, cmd in rm.SECTIONS.items():
        words = shlex.split(cmd)
        assert words[0] == "motioncore" and words[words.index("--json") + 1] == f"docs/results/{sid}.json"
        build_parser().parse_args(words[1:])     # a command the CLI takes
        run = json.loads((ROOT / "docs" / "results" / f"{sid}.run.json").read_text())
        assert run["command"] == cmd and re.fullmatch(r"20\d\d-\d\d-\d\d", run["date"]) and run["seconds"] > 0
    assert {p.name for p in (ROOT / "docs" / "results").glob("*.json")} == {   # no JSON without its command
        f"{sid}{ext}" for sid in rm.SECTIONS for ext in (".json", ".run.json")}


def test_a_changed_figure_in_a_block_is_caught():
    rm = _script()
    text = (ROOT / "docs" / "results.md").read_text()
    m = rm.BLOCK.search(text)
    assert m is not None
    cache, homes = {}, set()
    assert rm.check_page("docs/results.md", text, cache, homes)[1] == []
    figure = re.search(r"\d+\.\d+", m.group(2)).group(0)
    changed = text[:m.start(2)] + m.group(2).replace(figure, figure + "1", 1) + text[m.end(2):]
    new, problems = rm.check_page("docs/results.md", changed, cache, homes)
    assert len(problems) == 1 and "differs from its JSON's render" in problems[0]
    assert new == text     # --write puts the JSON's figure back


def test_a_copied_table_or_quoted_row_outside_a_block_is_caught():
    rm = _script()
    text = (ROOT / "docs" / "results.md").read_text()
    block = next(m.group(2) for m in rm.BLOCK.finditer(text) if m.group(1) == "infill-bandai")
    header, _, row = [line for line in block.splitlines() if line.startswith("|")][:3]
    figures = re.findall(r"\d+\.\d{3,}", row)[:4]
    assert len(figures) == 4
    assert rm.stray_copies({"docs/x.md": f"{header}\n|---|\n| a | 1 |\n"}, [block]) != []
    assert rm.stray_copies({"docs/x.md": f"Interp: {' / '.join(figures)} at 5 / 15 / 30 / 45.\n"}, [block]) != []
    assert rm.stray_copies({"docs/x.md": f"<!-- results:a -->{row}<!-- /results:a -->\n"}, [block]) == []
    assert rm.stray_copies({"docs/x.md": "| model | 0.123 |\n"}, [block]) == []
