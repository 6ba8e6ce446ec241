"""Shared pieces of the `motioncore` command line: the parser class (one error prefix, one line, exit
2), argument types that check ranges while parsing, and SIGTERM handling. Stdlib only."""
from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

PREFIX = "motioncore: error:"
# where the run times in help texts were measured (wall time of the command, --threads 1, the machine loaded)
MEASURED_ON = ("measured on a 2-core AMD EPYC, 24 GB, no GPU, --threads 1, 2026-11-28, while the machine was shared "
               "with other jobs and loaded: load average 5-7")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``motioncore: error: <command>: <problem>``, exit 2
    (the sub-command parsers inherit it)."""

    def error(self, message: str) -> NoReturn:
        cmd = self.prog.removeprefix("motioncore").strip()
        self.exit(2, f"{PREFIX} {cmd + ': ' if cmd else ''}{message} (see {self.prog} --help)\n")


def _number(kind: type, low: float, inclusive: bool, what: str) -> Callable[[str], Any]:
    def parse(v: str) -> Any:
        try:
            x = kind(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {v!r}") from None
        if not (math.isfinite(x) and (x >= low if inclusive else x > low)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v!r}")
        return x

    parse.__name__ = what
    return parse


positive_int = _number(int, 0, False, "a positive integer")
nonneg_int = _number(int, 0, True, "an integer >= 0")
positive_float = _number(float, 0.0, False, "a positive number")
nonneg_float = _number(float, 0.0, True, "a number >= 0")


DEFAULT_THREADS = max(1, min(2, os.cpu_count() or 1))   # torch's own default (every core) contends with other work


def add_threads(p: argparse.ArgumentParser, what: str = "") -> None:
    """``--threads N``: torch's CPU threads for the command (set before any work)."""
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS,
                   help=f"CPU threads for torch{what} (default {DEFAULT_THREADS}: at most 2, so a busy machine is not "
                        "oversubscribed; 1 is fastest when another job holds a core)")


def set_threads(n: int) -> None:
    """torch.set_num_threads(n) (imports torch)."""
    import torch

    torch.set_num_threads(n)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that batch jobs write their report and temporaries are
    removed on the way out (as on Ctrl-C); the command then exits 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises `Terminated` (main thread only; elsewhere nothing changes)."""
    try:
        old = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def fail(message: str) -> int:
    """Print one error line on stderr; the exit code 2."""
    print(f"{PREFIX} {message}", file=sys.stderr)
    return 2
