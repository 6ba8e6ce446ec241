"""Request-time fitting of more than the code (issue 40, an experiment): after z is fitted (`families.style.adapt`),
a per-layer offset delta on each adapter's predicted diagonal, ``W_k + M1 diag(f(z) + delta) M2``, fitted
to the exemplar's own next frames with an L2 cost on delta, the step picked on the exemplar's last quarter
as for z. R numbers per adapter layer (48 on learnet-biped); every shared weight stays frozen.

`with_offsets` gives a copy of the PFNN whose adapters add the offsets (a controller walks it as a plain
PFNN through `StyledPFNN`).

Legend: N rows, L adapter layers, R adapter rank, Z style code.
"""
from __future__ import annotations

import copy
import time
from typing import Any

import torch
from torch import Tensor, nn

from motioncore.errors import MotioncoreError


class _Shifted(nn.Module):
    """f(z) + delta."""

    def __init__(self, f: nn.Module, delta: Tensor):
        super().__init__()
        self.f, self.delta = f, delta

    def forward(self, z: Tensor) -> Tensor:
        return self.f(z) + self.delta


def with_offsets(pfnn: nn.Module, deltas: Tensor, trainable: bool = False) -> nn.Module:
    """A copy of ``pfnn`` whose adapter k predicts f_k(z) + deltas[k] ((L, R)); ``trainable``: the deltas are
    the copy's only parameters that take gradients."""
    out = copy.deepcopy(pfnn)
    for p in out.parameters():
        p.requires_grad_(False)
    ads = out.net.adapter_list()
    if deltas.shape != (len(ads), ads[0].rank):
        raise MotioncoreError(f"deltas: expected ({len(ads)}, {ads[0].rank}), got {tuple(deltas.shape)}")
    for k, ad in enumerate(ads):
        d = nn.Parameter(deltas[k].detach().clone(), requires_grad=trainable)
        ad.f = _Shifted(ad.f, d)
    return out


def fit_offsets(pfnn: nn.Module, x: Tensor, y: Tensor, phase: Tensor, z: Tensor, steps: int = 40, lr: float = 0.05,
                l2: float = 0.05, holdout: float = 0.25, max_rows: int = 600, cols: Tensor | None = None
                ) -> tuple[nn.Module, dict[str, Any]]:
    """(the PFNN copy with the offsets kept, what happened): offsets fitted on the first (1 - holdout) of
    the rows (evenly subsampled to ``max_rows``), the step (0: no offsets) with the lowest error on the rest kept."""
    t0 = time.perf_counter()
    N = x.shape[0]
    if N > max_rows:
        keep = torch.linspace(0, N - 1, max_rows).round().long()
        x, y, phase, N = x[keep], y[keep], phase[keep], max_rows
    cut = N - max(1, int(round(holdout * N)))
    ads = pfnn.net.adapter_list()
    net = with_offsets(pfnn, torch.zeros(len(ads), ads[0].rank), trainable=True).eval()
    params = [a.f.delta for a in net.net.adapter_list()]
    opt = torch.optim.Adam(params, lr=lr)
    pick = (lambda o: o) if cols is None else (lambda o: o[:, cols])  # noqa: E731
    yy = pick(y)
    zf, zb = z.expand(cut, -1), z.expand(N - cut, -1)
    best, best_d, best_step, val = float("inf"), torch.zeros(len(ads), ads[0].rank), 0, []
    for step in range(steps + 1):
        with torch.no_grad():
            v = float(nn.functional.mse_loss(pick(net(x[cut:], phase[cut:], zb)), yy[cut:]))
        val.append(v)
        if v < best:
            best, best_d, best_step = v, torch.stack([p.detach().clone() for p in params]), step
        if step == steps:
            break
        loss = nn.functional.mse_loss(pick(net(x[:cut], phase[:cut], zf)), yy[:cut])
        loss = loss + l2 * torch.stack([p.pow(2).mean() for p in params]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return with_offsets(pfnn, best_d).eval(), {"best_step": best_step, "held_back_mse": val, "deltas": best_d,
                                               "fit_s": time.perf_counter() - t0}
