"""A compact, self-contained slice of the infill-body training data (``motioncore train infill-body --pack``), for a
machine that cannot read the mocap: a lent GPU gets the working tree and what it carries (64 MiB in all), never
``../shared``. One ``.npz``: every ``step``-th augmented clip (rotations in float16, the root chain's translations
in float32, every other joint's translation once per clip, since it is its rest offset), the validation windows
and the position statistics. ``load_pack`` rebuilds what ``build_data`` and ``validation_sets`` return; the
reconstruction is checked when the pack is written (rotations to float16 precision, the root chain's translations
exactly, every other joint's to 1e-4 cm).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from motioncore.errors import MotioncoreError

__all__ = ["write_pack", "load_pack"]

BYTES_PER_FRAME = 22 * 4 * 2 + 2 * 3 * 4  # rotations float16 + the root chain's translations float32


def write_pack(data: dict[str, Any], val: dict, path: Path, max_mb: float = 18.0, val_windows: int = 80) -> str:
    """Write the pack (atomically); returns a one-line description. ``max_mb`` bounds its size."""
    from motioncore.io.atomic import atomic_write

    bounds = np.asarray(data["bounds"])
    frames = int((bounds[:, 1] - bounds[:, 0]).sum())
    step = max(1, int(np.ceil(frames * BYTES_PER_FRAME / (max_mb * 2**20))))
    pick = np.arange(0, len(bounds), step)
    chain = [0, 1]
    rots, chain_pos, rest, new_bounds, start = [], [], [], [], 0
    for c in pick:
        a, b = bounds[c]
        p = np.asarray(data["positions"][a:b], np.float32)
        others = np.delete(p, chain, axis=1)
        if np.abs(others - others[:1]).max() > 1e-4:
            raise MotioncoreError(f"pack: clip {c} moves a joint below the root chain; cannot pack it compactly")
        rots.append(np.asarray(data["rotations"][a:b], np.float16))
        chain_pos.append(p[:, chain])
        rest.append(p[0])
        new_bounds.append((start, start + b - a))
        start += b - a
    n = min(val_windows, min(len(v[0]) for v in val["sets"].values()))
    arrays = {"rotations": np.concatenate(rots), "chain_positions": np.concatenate(chain_pos),
              "rest": np.stack(rest), "bounds": np.asarray(new_bounds, np.int64),
              "source": np.asarray(data["source"])[pick], "val_mean": np.asarray(val["mean"]),
              "val_std": np.asarray(val["std"])}
    for name, (q, p) in val["sets"].items():
        idx = np.linspace(0, len(q) - 1, n).astype(int)
        arrays[f"val_{name}_rotations"] = np.asarray(q[idx], np.float32)
        arrays[f"val_{name}_positions"] = np.asarray(p[idx], np.float32)
    describe = (f"{data['describe']}; packed: every {step}th clip ({len(pick)} clips, {start:,} frames)")
    meta = {"skeleton": data["skeleton"].to_dict(), "convention": np.asarray(data["convention"]).tolist(),
            "describe": describe, "val_sets": list(val["sets"]), "chain": chain}
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)

    atomic_write(Path(path), save)
    return f"{path}: {describe}, {Path(path).stat().st_size / 2**20:.1f} MB"


def load_pack(path: Path) -> tuple[dict[str, Any], dict]:
    """(training data as ``build_data`` returns it, validation sets as ``validation_sets`` returns them)."""
    from motioncore.core.skeleton import Skeleton

    if not Path(path).is_file():
        raise MotioncoreError(f"--data-pack {path}: no such file (write one with `motioncore train infill-body "
                              "--pack PATH` on a machine with the mocap)")
    with np.load(path) as z:
        a = {k: z[k] for k in z.files}
    meta = json.loads(bytes(a.pop("meta_json")).decode())
    bounds = a["bounds"]
    rest = a["rest"]
    pos = np.repeat(rest, bounds[:, 1] - bounds[:, 0], axis=0)  # every joint at its clip's rest offset ...
    pos[:, meta["chain"]] = a["chain_positions"]  # ... the root chain as captured
    data = {"rotations": a["rotations"].astype(np.float32), "positions": pos, "bounds": bounds,
            "source": a["source"], "skeleton": Skeleton.from_dict(meta["skeleton"]),
            "convention": np.asarray(meta["convention"]), "describe": meta["describe"]}
    sets = {n: (a[f"val_{n}_rotations"].astype(np.float64), a[f"val_{n}_positions"].astype(np.float64))
            for n in meta["val_sets"]}
    return data, {"sets": sets, "mean": a["val_mean"], "std": a["val_std"]}
