"""The README's promises: exactly two set-up commands, and .ci/run runs the test one verbatim."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_has_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    head = readme.split("## Quickstart")[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", head, re.S)
    assert len(blocks) == 2, blocks
    main_job, tests = blocks
    assert "pip install" in main_job and "pip install" in tests
    assert "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_every_top_folder_has_a_readme():
    for folder in ("addon", "server", "src", "scripts", "tests", "bench", "docs"):
        text = (ROOT / folder / "README.md").read_text().strip()
        assert "import" in text, folder
