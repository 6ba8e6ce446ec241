"""Shared by the rotation tests: a numpy/torch backend wrapper and random rotations (WXYZ quaternions)."""
from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.transform import Rotation

N = 64


class Backend:
    """Converts float64 numpy references to one backend/dtype and checks outputs come back the same way."""

    def __init__(self, name: str, dtype: type):
        self.name, self.dtype = name, dtype
        self.atol = 5e-5 if dtype == np.float32 else 1e-9

    def __call__(self, x):
        a = np.asarray(x, dtype=self.dtype)
        return torch.from_numpy(a.copy()) if self.name == "torch" else a

    def np(self, y) -> np.ndarray:
        """Output back to float64 numpy, after checking its type and dtype match the input's."""
        if self.name == "torch":
            assert isinstance(y, torch.Tensor)
            assert y.dtype == (torch.float32 if self.dtype == np.float32 else torch.float64)
            return y.detach().numpy().astype(np.float64)
        assert isinstance(y, np.ndarray) and y.dtype == self.dtype
        return y.astype(np.float64)


BACKENDS = [("numpy", np.float32), ("numpy", np.float64), ("torch", np.float32), ("torch", np.float64)]


def rand_quat(n: int = N, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal((n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def sp_quat(q: np.ndarray) -> Rotation:
    return Rotation.from_quat(np.asarray(q, dtype=np.float64), scalar_first=True)


def sign_free_err(a: np.ndarray, b: np.ndarray) -> float:
    """max(1 - |<a, b>|) over unit quaternions: 0 iff a == +-b."""
    return float(np.max(1.0 - np.abs(np.sum(a * b, axis=-1))))


def assert_rotation(m: np.ndarray, atol: float) -> None:
    eye = np.broadcast_to(np.eye(3), m.shape)
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), eye, atol=atol)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=atol)


def rand_euler(n: int = N, seed: int = 1, gimbal: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-np.pi, np.pi, (n, 3))
    a[:, 1] = np.where(rng.random(n) < 0.5, -np.pi / 2, np.pi / 2) if gimbal else a[:, 1] * 0.49
    return a

