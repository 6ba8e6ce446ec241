"""The any-order transformer's heads: functions on its raw output parameters (B, L, P). Negative
log-likelihood and entropy per element, sampling one value per element with caller-drawn noise, and the
projection of sampled 6D rotations onto valid rotations. A categorical head (K classes) or a mixture of K
diagonal Gaussians over each element's E value dims.

Legend: B batch, L tokens, K mixture components or classes, E element value width, P raw head outputs
per token (K logits, or K * (1 + 2E) for the mixture).
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from motioncore.core.rotations import matrix_to_rot6d, rot6d_to_matrix
from motioncore.families.anyorder.model import AnyOrderConfig

__all__ = ["nll", "entropy", "mog_nll", "mog_entropy", "split_mog", "sample_values", "project"]

MIN_STD = 1e-4  # floor on every mixture standard deviation (keeps the NLL bounded)


@functools.lru_cache(maxsize=32)
def _layout(cfg: AnyOrderConfig) -> tuple[Tensor, list[tuple[int, Tensor]]]:
    return cfg.layout()


def _dim_mask(cfg: AnyOrderConfig, channel: Tensor) -> Tensor:
    """(..., E) bool: the value dims used by each element's grid channel (...,)."""
    return _layout(cfg)[0].to(channel.device)[channel]


def split_mog(params: Tensor, num_mixtures: int) -> tuple[Tensor, Tensor, Tensor]:
    """Raw mixture outputs (..., K(1 + 2E)) -> logits (..., K), mean (..., K, E), std (..., K, E).
    std = softplus(raw) + MIN_STD."""
    K = num_mixtures
    E = (params.shape[-1] // K - 1) // 2
    rest = params[..., K:].unflatten(-1, (K, 2 * E))  # (..., K, 2E): means then raw stds per component
    return params[..., :K], rest[..., :E], F.softplus(rest[..., E:]) + MIN_STD


def mog_nll(logits: Tensor, mean: Tensor, std: Tensor, x: Tensor, dim_mask: Tensor) -> Tensor:
    """Negative log-density (nats) of x (..., E) under a diagonal Gaussian mixture, over the dims where
    ``dim_mask`` (..., E) is True. logits (..., K), mean/std (..., K, E) -> (...)."""
    z = (x.unsqueeze(-2) - mean) / std  # (..., K, E)
    lp = -0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)
    lp = torch.where(dim_mask.unsqueeze(-2), lp, 0.0).sum(-1)  # (..., K) per-component log-density
    return -torch.logsumexp(logits.log_softmax(-1) + lp, -1)


def mog_entropy(logits: Tensor, std: Tensor, dim_mask: Tensor) -> Tensor:
    """Upper bound (nats) on a diagonal mixture's differential entropy: H(pi) + sum_k pi_k H(N_k).
    Exact for one component; tight when the components barely overlap. (...) from logits (..., K)."""
    logp = logits.log_softmax(-1)
    h_comp = torch.where(dim_mask.unsqueeze(-2), std.log() + 0.5 * math.log(2 * math.pi * math.e), 0.0).sum(-1)
    return (logp.exp() * (h_comp - logp)).sum(-1)


def nll(cfg: AnyOrderConfig, params: Tensor, value: Tensor, channel: Tensor) -> Tensor:
    """Negative log-likelihood (nats) per element: params (..., P), value (...) long or (..., E),
    channel (...) grid channel of each predicted element -> (...)."""
    if cfg.head == "categorical":
        return -params.log_softmax(-1).gather(-1, value.unsqueeze(-1)).squeeze(-1)
    logits, mean, std = split_mog(params, cfg.num_mixtures)
    return mog_nll(logits, mean, std, value, _dim_mask(cfg, channel))


def entropy(cfg: AnyOrderConfig, params: Tensor, channel: Tensor) -> Tensor:
    """Entropy (nats) per predicted element (...): exact for categorical, the ``mog_entropy`` upper
    bound for the mixture (differential, so it grows with the channel's width)."""
    if cfg.head == "categorical":
        logp = params.log_softmax(-1)
        return -(logp.exp() * logp).sum(-1)
    logits, _, std = split_mog(params, cfg.num_mixtures)
    return mog_entropy(logits, std, _dim_mask(cfg, channel))


def _pick(logits: Tensor, temperature: float, uniform: Tensor) -> Tensor:
    """Index (...) drawn from softmax(logits / temperature) by inverse CDF; argmax at temperature 0."""
    if temperature == 0:
        return logits.argmax(-1)
    cdf = (logits / temperature).softmax(-1).cumsum(-1)  # (..., K)
    return (cdf < uniform.unsqueeze(-1)).sum(-1).clamp(max=logits.shape[-1] - 1)


def sample_values(cfg: AnyOrderConfig, params: Tensor, channel: Tensor, temperature: float,
                  uniform: Tensor, normal: Tensor | None = None) -> Tensor:
    """Sample one value per element from params (..., P) with noise drawn by the caller: uniform (...)
    in [0, 1) and, for the mixture, normal (..., E). Temperature scales logits by 1/t and the std by
    sqrt(t); t = 0 gives the mode (categorical) or the mean of the most likely component (mixture).
    Returns (...) long or (..., E), with 6D rotations projected onto valid rotations (``project``)."""
    if cfg.head == "categorical":
        return _pick(params, temperature, uniform)
    logits, mean, std = split_mog(params, cfg.num_mixtures)
    k = _pick(logits, temperature, uniform)[..., None, None].expand(*mean.shape[:-2], 1, mean.shape[-1])
    mu, sd = mean.gather(-2, k).squeeze(-2), std.gather(-2, k).squeeze(-2)  # (..., E) chosen component
    x = mu if temperature == 0 else mu + sd * math.sqrt(temperature) * normal
    return project(cfg, x, channel)


def project(cfg: AnyOrderConfig, values: Tensor, channel: Tensor) -> Tensor:
    """Zero the unused (padded) dims and map every 6D rotation slice to the nearest valid 6D rotation
    by Gram-Schmidt. values (..., E), channel (...) -> (..., E)."""
    if cfg.head == "categorical":
        return values
    mask, rots = _layout(cfg)
    out = values * mask.to(values.device)[channel]
    if not rots:
        return out
    idx = torch.tensor([off + i for off, _ in rots for i in range(6)], device=values.device)  # (6S,)
    d = out[..., idx].unflatten(-1, (len(rots), 6))  # (..., S, 6) every rotation slice at once
    sel = torch.stack([chans.to(values.device)[channel] for _, chans in rots], -1).unsqueeze(-1)  # (..., S, 1)
    gs = torch.where(sel, matrix_to_rot6d(rot6d_to_matrix(d)), d)
    out = out.clone()
    out[..., idx] = gs.flatten(-2)
    return out
