"""Command-line flags from a frozen config dataclass: one ``--field-name`` flag per field, defaults from
the dataclass, booleans as ``--x/--no-x``. Used by the experiment scripts."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any

_TYPES = {"int": int, "float": float, "str": str}


def parse_config(cls: type, description: str, argv: list[str] | None = None) -> Any:
    """An instance of ``cls`` from command-line flags."""
    p = argparse.ArgumentParser(description=description)
    for f in fields(cls):
        flag = "--" + f.name.replace("_", "-")
        name = f.type if isinstance(f.type, str) else f.type.__name__
        default = None if f.default is MISSING else f.default
        if name == "bool":
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=_TYPES.get(name, str), default=default, help=f"default {default}")
    return cls(**vars(p.parse_args(argv)))
