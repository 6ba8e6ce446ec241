"""Every batch job's --help states the exit table of docs/batch.md, row for row (git-style: the help is the
contract), and no other exit claim."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "batch.md"
JOBS = (["retarget"], ["batch", "infill"], ["batch", "generate"])


def _norm(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def doc_table() -> list[tuple[str, str]]:
    """The rows of the table under "Exit status" in docs/batch.md."""
    text = DOC.read_text()
    at = text.index("Exit status")
    rows = re.findall(r"^\| ([^|]+) \| ([^|]+) \|$", text[at:].split("\n\n", 2)[1], re.M)
    return [(_norm(c), _norm(w)) for c, w in rows if c.strip() not in ("code", "---")]


def help_table(help_text: str) -> list[tuple[str, str]]:
    """The rows of the "exit status:" section at the end of a --help: a row starts with its code."""
    section = help_text[help_text.index("exit status:"):].splitlines()[1:]
    rows: list[list[str]] = []
    for line in section:
        m = re.match(r"^  (\d+(?: / \d+)?)\s{2,}(.*)$", line)
        if m:
            rows.append([m.group(1), m.group(2)])
        elif line.strip():
            rows[-1][1] += " " + line.strip()
    return [(_norm(c), _norm(w)) for c, w in rows]


def test_docs_state_an_exit_table():
    rows = doc_table()
    assert [c for c, _ in rows] == ["0", "1", "2", "130 / 143"]


@pytest.mark.parametrize("job", JOBS, ids=" ".join)
def test_help_states_the_docs_exit_table(job, capsys):
    assert main([*job, "--help"]) == 0
    out = capsys.readouterr().out
    assert help_table(out) == doc_table()
    before = out[:out.index("exit status:")]
    assert not re.search(r"\bexit(s)? (1|2)\b", before, re.I), "an exit claim outside the table"
