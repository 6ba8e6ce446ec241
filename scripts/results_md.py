"""Each figure has one home: the JSON its command writes under docs/results/.

A *section* is one command run with ``--json docs/results/<id>.json``; beside it ``<id>.run.json`` records the
command as run, the UTC date and the wall seconds. A *block* is a piece of Markdown rendered from one or more
sections' JSON, between ``<!-- results:BLOCK -->`` and ``<!-- /results:BLOCK -->`` in docs/results.md (every
section's home) or in the README and the topic pages (a headline row, a figure quoted in a sentence). The prose
around the blocks is written by hand.

    python scripts/results_md.py --check        # exit 1 when a block differs from its JSON's render
    python scripts/results_md.py --write        # rewrite every block from the JSON
    python scripts/results_md.py --run ID ...   # re-run those sections' commands (one thread), then --write
    python scripts/results_md.py --list         # the sections, their commands and dates

Standard library only (the renders live in scripts/results_views.py); `--run` needs the `motioncore` command.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_views import BLOCKS, SECTIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
HOME = ROOT / "docs" / "results.md"
BLOCK = re.compile(r"<!-- results:([\w.-]+) -->(.*?)<!-- /results:\1 -->", re.S)


def doc_files() -> list[Path]:
    """The pages that may carry blocks: the README and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def load_section(sid: str) -> dict:
    """The section's JSON and its run record (``_run``); a clear error when either is missing or stale."""
    data, run = RESULTS / f"{sid}.json", RESULTS / f"{sid}.run.json"
    if not data.is_file() or not run.is_file():
        raise SystemExit(f"docs/results/{sid}.json or .run.json is missing: python scripts/results_md.py --run {sid}")
    rec = json.loads(run.read_text())
    if rec.get("command") != SECTIONS[sid]:
        raise SystemExit(f"docs/results/{sid}.json came from another command ({rec.get('command')!r}); "
                         f"python scripts/results_md.py --run {sid}")
    found = json.loads(data.read_text())
    return {"_run": rec, **(found if isinstance(found, dict) else {"results": found})}   # a list: its rows


def render(block: str, cache: dict[str, dict]) -> str:
    fn, sids = BLOCKS[block]
    for s in sids:
        if s not in cache:
            cache[s] = load_section(s)
    return fn(*[cache[s] for s in sids])


def _wrap(text: str, old: str) -> str:
    """A block written on its own lines keeps its own lines; an inline one stays inline."""
    return f"\n{text}\n" if old.startswith("\n") else text


def check_page(rel: str, text: str, cache: dict[str, dict], homes: set[str]) -> tuple[str, list[str]]:
    """The page with every block rendered from its JSON, and the problems: unknown blocks, blocks that differ.
    ``homes`` collects the sections shown in docs/results.md."""
    problems: list[str] = []

    def sub(m: re.Match) -> str:
        block, old = m.group(1), m.group(2)
        if block not in BLOCKS:
            problems.append(f"{rel}: unknown block {block!r} (scripts/results_views.py BLOCKS)")
            return m.group(0)
        if rel == "docs/results.md":
            homes.update(BLOCKS[block][1])
        new = _wrap(render(block, cache), old)
        if new != old:
            problems.append(f"{rel}: block {block!r} differs from its JSON's render")
        return f"<!-- results:{block} -->{new}<!-- /results:{block} -->"

    return BLOCK.sub(sub, text), problems


NUMBER = re.compile(r"(?<![\w.])\d+\.\d{3,}(?![\w.])")   # figures with 3 or more decimals: not a ratio, not a date


def _header(line: str) -> str:
    return re.sub(r"[*\s]", "", line).lower()


def stray_copies(pages: dict[str, str], rendered: list[str]) -> list[str]:
    """Tables and figures outside the blocks that copy a block's: a table with a block's header, or a line
    quoting four consecutive figures of a block's row (a copy that will go stale when the JSON changes)."""
    headers, runs = set(), set()
    for text in rendered:
        for line in text.splitlines():
            if line.startswith("|") and not set(line) <= set("|:- "):
                nums = NUMBER.findall(line)
                runs.update(tuple(nums[i:i + 4]) for i in range(len(nums) - 3))
                if not nums:
                    headers.add(_header(line))
    problems = []
    for rel, text in pages.items():
        outside = BLOCK.sub("", text)
        for line in outside.splitlines():
            nums = NUMBER.findall(line)
            if line.startswith("|") and _header(line) in headers:
                problems.append(f"{rel}: a table with the columns of a results block, outside any block: {line[:60]}")
            elif any(tuple(nums[i:i + 4]) in runs for i in range(len(nums) - 3)):
                problems.append(f"{rel}: figures copied from a results block, outside any block: {line[:60]}")
    return problems


def scan(write: bool) -> list[str]:
    """Render every block found in the pages; the problems (and, with ``write``, the pages rewritten)."""
    problems, cache, homes, pages, rendered = [], {}, set(), {}, []
    for page in doc_files():
        rel = str(page.relative_to(ROOT))
        text = page.read_text()
        out, found = check_page(rel, text, cache, homes)
        problems += found
        pages[rel] = out
        rendered += [m.group(2) for m in BLOCK.finditer(out)]
        if write and out != text:
            page.write_text(out)
    problems += [f"docs/results.md: no block shows section {sid!r}" for sid in SECTIONS if sid not in homes]
    return problems + stray_copies(pages, rendered)


def run_sections(ids: list[str]) -> None:
    """Run each section's command from the repository root, one thread, and record the run beside its JSON."""
    beside = Path(sys.executable).with_name("motioncore")   # the venv this script runs in, then the PATH
    exe = str(beside) if beside.is_file() else shutil.which("motioncore")
    if exe is None:
        raise SystemExit("--run: no `motioncore` command beside this Python or on the PATH; install the package first")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for sid in ids:
        cmd = SECTIONS[sid]
        argv = shlex.split(cmd)
        argv[0] = exe
        print(f"{sid}: {cmd}", flush=True)
        t0 = time.time()
        done = subprocess.run(argv, cwd=ROOT, env=env)
        if done.returncode:
            raise SystemExit(f"{sid}: the command failed (exit {done.returncode}); docs/results/{sid}.json kept as it was")
        rec = {"command": cmd, "date": time.strftime("%Y-%m-%d", time.gmtime()), "seconds": round(time.time() - t0)}
        (RESULTS / f"{sid}.run.json").write_text(json.dumps(rec, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="exit 1 when a block differs from its JSON's render")
    g.add_argument("--write", action="store_true", help="rewrite every block from the JSON")
    g.add_argument("--run", nargs="+", metavar="ID", help="re-run these sections' commands, then --write")
    g.add_argument("--list", action="store_true", help="print the sections and their commands")
    args = ap.parse_args(argv)
    if args.list:
        for sid, cmd in SECTIONS.items():
            rec = RESULTS / f"{sid}.run.json"
            when = json.loads(rec.read_text())["date"] if rec.is_file() else "never run"
            print(f"{sid} ({when}): {cmd}")
        return 0
    if args.run:
        unknown = [s for s in args.run if s not in SECTIONS]
        if unknown:
            raise SystemExit(f"--run {' '.join(unknown)}: no such section; sections: {', '.join(SECTIONS)}")
        run_sections(args.run)
    problems = scan(write=not args.check)
    if args.check:
        for p in problems:
            print(p)
        if problems:
            print("python scripts/results_md.py --write rewrites the blocks from the JSON")
        return 1 if problems else 0
    left = [p for p in problems if "differs from its JSON" not in p]
    for p in left:
        print(p)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
