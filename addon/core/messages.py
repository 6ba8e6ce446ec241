"""The add-on's error lines: one line per failed job, in the add-on's words (no repeated operator name, the
add-on's controls where the library names a command-line flag)."""
from __future__ import annotations

import re

NOT_AVAILABLE = ("unknown_type", "model_unavailable")


def describe_error(label: str, err: BaseException) -> str:
    """One line for ``self.report({'ERROR'}, ...)``; typed server errors keep their code."""
    code = getattr(err, "code", None)
    msg = addon_words(label, str(getattr(err, "message", None) or err))
    if code in NOT_AVAILABLE:
        return f"{label}: not available on this server ({code}: {msg})"
    if code is not None:
        return f"{label}: server error {code}: {msg}"
    return f"{label}: {type(err).__name__}: {msg}"


def addon_words(label: str, msg: str) -> str:
    """A server's message as the add-on says it: without the operator's name it already starts with ("Learn This
    Action: Learn This Action: ..."), and with the add-on's control where the library names a command-line flag
    (``--frames N at F fps``: Length = Frame range, N frames)."""
    msg = msg.strip()
    while msg.startswith(f"{label}: "):
        msg = msg[len(label) + 2:].lstrip()
    return re.sub(r"give its length \(--frames (\d+) at ([\d.]+) fps\)",
                  r"set Length to Frame range with a range of \1 frames (at \2 fps)", msg)
