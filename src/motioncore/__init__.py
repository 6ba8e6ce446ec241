"""motioncore: neural motion synthesis for animators.

Quaternions are WXYZ (as Blender) everywhere. Lengths are centimetres unless a dataset says otherwise.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import BVHError, DataError, MotioncoreError, ShapeError

__all__ = ["__version__", "MotioncoreError", "BVHError", "DataError", "ShapeError"]
