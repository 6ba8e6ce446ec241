"""Y-up (the models, BVH) <-> Z-up (Blender) axes: the one place the swap is written.

Blender's importers turn Y-up data +90 degrees about X: a model vector (x, y, z) is (x, -z, y) in Blender and
a Blender vector (X, Y, Z) is (X, Z, -Y) in the model's axes; a model world rotation G is A G A^-1 there.
Vendored into the Blender add-on by scripts/build_addon.py (imports numpy only).
"""
from __future__ import annotations

import numpy as np

Y_UP_TO_Z_UP = np.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0])   # A: +90 degrees about X, WXYZ


def z_up_to_y_up(v: np.ndarray) -> np.ndarray:
    """(..., 3) Blender Z-up vectors -> the models' Y-up axes: (x, y, z) = (X, Z, -Y)."""
    v = np.asarray(v, np.float64)
    return np.stack([v[..., 0], v[..., 2], -v[..., 1]], axis=-1)


def y_up_to_z_up(v: np.ndarray) -> np.ndarray:
    """The inverse of :func:`z_up_to_y_up`: (X, Y, Z) = (x, -z, y)."""
    v = np.asarray(v, np.float64)
    return np.stack([v[..., 0], -v[..., 2], v[..., 1]], axis=-1)
