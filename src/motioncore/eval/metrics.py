"""In-betweening metrics of Harvey et al. 2020 (LaFAN1 benchmark): L2Q, L2P and NPSS.

Legend: N windows, T frames (the transition frames only), J joints, D = J*4 (or J*3) flattened
channels. Pure numpy. Each metric also has a ``*_terms``/``*_frames`` form returning the per-frame or
per-channel pieces, so callers can accumulate over batches and get exactly the full-set value.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError

STD_EPS = 1e-8  # floor for position_stats' std: a constant training channel must not divide by zero


def _check_same(name: str, pred: np.ndarray, gt: np.ndarray, last: int | None, min_ndim: int) -> None:
    if pred.shape != gt.shape:
        raise ShapeError(f"{name}: pred and gt shapes differ: {pred.shape} vs {gt.shape}")
    if pred.ndim < min_ndim or (last is not None and pred.shape[-1] != last):
        want = f"(N, T, J, {last})" if last is not None else "(N, T, D) or (N, T, J, C)"
        raise ShapeError(f"{name}: expected {want}, got {pred.shape}")


def l2q_frames(pred_gq: np.ndarray, gt_gq: np.ndarray) -> np.ndarray:
    """Per-frame L2 norm of the flattened (J*4) global-quaternion difference.
    (N, T, J, 4) x2 -> (N, T). Quaternions are compared as given (no sign canonicalisation)."""
    pred_gq, gt_gq = np.asarray(pred_gq, dtype=np.float64), np.asarray(gt_gq, dtype=np.float64)
    _check_same("l2q", pred_gq, gt_gq, 4, 3)
    return np.sqrt(np.sum((pred_gq - gt_gq) ** 2, axis=(-2, -1)))


def l2q(pred_gq: np.ndarray, gt_gq: np.ndarray) -> float:
    """L2Q: mean over windows and frames of :func:`l2q_frames`. (N, T, J, 4) x2 -> float."""
    return float(np.mean(l2q_frames(pred_gq, gt_gq)))


def l2p_frames(pred_gp: np.ndarray, gt_gp: np.ndarray, x_mean: np.ndarray, x_std: np.ndarray) -> np.ndarray:
    """Per-frame L2 norm of the difference of z-normalised, flattened (J*3) global positions.
    (N, T, J, 3) x2, x_mean and x_std reshapeable to (J*3,) (LaFAN1's (1, J*3, 1) works) -> (N, T)."""
    pred_gp, gt_gp = np.asarray(pred_gp, dtype=np.float64), np.asarray(gt_gp, dtype=np.float64)
    _check_same("l2p", pred_gp, gt_gp, 3, 3)
    D = pred_gp.shape[-2] * 3
    mean = np.asarray(x_mean, dtype=np.float64).reshape(-1)
    std = np.asarray(x_std, dtype=np.float64).reshape(-1)
    if mean.shape != (D,) or std.shape != (D,):
        raise ShapeError(f"l2p: x_mean and x_std need {D} values, got {mean.size} and {std.size}")
    flat = pred_gp.shape[:-2] + (D,)
    pred_n = (pred_gp.reshape(flat) - mean) / std
    gt_n = (gt_gp.reshape(flat) - mean) / std
    return np.sqrt(np.sum((pred_n - gt_n) ** 2, axis=-1))


def l2p(pred_gp: np.ndarray, gt_gp: np.ndarray, x_mean: np.ndarray, x_std: np.ndarray) -> float:
    """L2P: mean over windows and frames of :func:`l2p_frames`. (N, T, J, 3) x2 -> float."""
    return float(np.mean(l2p_frames(pred_gp, gt_gp, x_mean, x_std)))


def _power_cdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, T, D) -> cumulative normalised power spectrum over time (N, T, D) and total power (N, D).
    A channel with zero total power gets a cdf of zeros (defined, never NaN)."""
    power = np.real(np.fft.fft(x, axis=1)) ** 2
    total = np.sum(power, axis=1)
    safe = np.where(total > 0, total, 1.0)
    norm = np.where((total > 0)[:, None, :], power / safe[:, None, :], 0.0)
    return np.cumsum(norm, axis=1), total


def npss_terms(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-window, per-channel EMD between the power-spectrum cdfs, and the weights (the ground
    truth's total power). (N, T, D) or (N, T, J, C) x2 -> emd (N, D), weight (N, D)."""
    pred, gt = np.asarray(pred, dtype=np.float64), np.asarray(gt, dtype=np.float64)
    _check_same("npss", pred, gt, None, 3)
    pred = pred.reshape(pred.shape[:2] + (-1,))
    gt = gt.reshape(gt.shape[:2] + (-1,))
    cdf_pred, _ = _power_cdf(pred)
    cdf_gt, gt_total = _power_cdf(gt)
    emd = np.sum(np.abs(cdf_pred - cdf_gt), axis=1)
    return emd, gt_total


def weighted_mean(emd: np.ndarray, weight: np.ndarray) -> float:
    """``np.average(emd, weights=weight)``; the plain mean if every weight is zero (no NaN)."""
    total = float(np.sum(weight))
    if total <= 0:
        return float(np.mean(emd))
    return float(np.sum(emd * weight) / total)


def npss(pred: np.ndarray, gt: np.ndarray) -> float:
    """NPSS (Gopalakrishnan et al. 2019, as in LaFAN1's ``fast_npss``): power spectrum
    ``real(fft(x, axis=time))**2``, normalised per channel, cumulated over time; EMD = L1 distance of
    the cdfs; average over windows and channels weighted by the ground truth's total power.
    Channels whose ground truth has zero total power get zero weight.
    (N, T, D) or (N, T, J, C) x2 -> float."""
    return weighted_mean(*npss_terms(pred, gt))


def position_stats(global_positions: np.ndarray, eps: float = STD_EPS) -> tuple[np.ndarray, np.ndarray]:
    """Training normalisation statistics, as LaFAN1's ``get_train_stats``: per-dimension mean and
    (population) std of the flattened global positions over all windows and frames.
    (N, T, J, 3) -> mean (J*3,), std (J*3,). The std is floored at ``eps`` so a constant channel
    does not divide by zero in :func:`l2p`."""
    x = np.asarray(global_positions, dtype=np.float64)
    if x.ndim != 4 or x.shape[-1] != 3:
        raise ShapeError(f"global_positions: expected (N, T, J, 3), got {x.shape}")
    flat = x.reshape(-1, x.shape[2] * 3)
    return flat.mean(axis=0), np.maximum(flat.std(axis=0), eps)
