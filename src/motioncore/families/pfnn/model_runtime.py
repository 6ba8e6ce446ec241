"""Holden's precomputed PFNN runtime (inference only): ``PFNNRuntime`` built from a trained ``PFNN``
(``families.pfnn.model``) in one of its modes (constant: 50 sets, nearest; linear: 10 sets, lerp; cubic: the 4
control points, exact), and ``runtime_error``, its largest difference from the exact model.

Legend: B batch, K control points, S stored sets, D features.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from motioncore.errors import ShapeError
from motioncore.families.pfnn.model import PFNN, catmull_rom_dense, catmull_rom_weights, check_batch

__all__ = ["RUNTIME_SETS", "PFNNRuntime", "runtime_error"]


# --- precomputed runtime (inference only) -----------------------------------------------------------------

RUNTIME_SETS = {"constant": 50, "linear": 10}  # stored weight sets per mode; cubic stores the K control points


class PFNNRuntime:
    """Holden's precomputed inference modes, built from a trained PFNN, evaluation only (no dropout,
    no autograd). ``constant``: S = 50 sets W(i/50), the nearest one is used (Holden's pfnn.cpp floors
    instead; nearest halves the phase error). ``linear``: S = 10 sets W(j/10), the two neighbours are
    lerped. ``cubic``: the K control points and the Catmull-Rom spline, exact.

    Call ``runtime(x, phase)``: x (B, D_in) or (D_in,), phase a float (cycles) or a (B,) tensor. No
    per-sample W is ever built. One row with a float phase runs ``addmm`` on its stored sets with no
    grouping work at all. A batch is sorted by phase, so the rows that use a stored set are one or two
    contiguous runs, and each layer runs one ``addmm`` per stored set and run, the rows scaled by their
    blend coefficient (`_run_sorted`). Where a constant-mode batch touches more than
    ``POINTS_AFTER_SETS`` stored sets, reading that many 2.4 MB sets costs more than evaluating the K
    control points for every row, and since every stored set is a blend of them (``set_coeff``), the
    batch runs that way instead (`_run_points`). All paths agree with the row-by-row evaluation to float
    rounding (tests/models/test_pfnn.py). A style code z given to ``from_model`` is baked into every stored set
    and control point (the adapter does not depend on phase).
    """

    POINTS_AFTER_SETS = 24  # constant mode: distinct stored sets above which a batch runs on the control points (the
    # crossover measured by bench/pfnn_latency.py: 16 sets 0.40x the MLP, the control points 0.25x, 50 sets 0.17x)

    def __init__(self, mode: str, weights: list[torch.Tensor], biases: list[torch.Tensor],
                 points: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor] | None = None):
        if mode not in ("constant", "linear", "cubic"):
            raise ValueError(f"mode: expected 'constant', 'linear' or 'cubic', got {mode!r}")
        self.mode = mode
        self.weights = [w.detach().contiguous() for w in weights]  # per layer (S, D_out, D_in)
        self.biases = [b.detach().contiguous() for b in biases]  # per layer (S, D_out)
        self.num_sets = self.weights[0].shape[0]
        self.input_dim = self.weights[0].shape[2]
        # optional: the K control points each stored set blends, per layer (K, D_in, D_out) transposed for
        # one (B, D_in) @ (D_in, K * D_out) product, biases (K, D_out), and the blend of each set (S, K)
        self.points = None if points is None else (
            [w.detach().permute(2, 0, 1).reshape(w.shape[2], -1).contiguous() for w in points[0]],
            [b.detach().contiguous() for b in points[1]], points[2].detach())

    @classmethod
    @torch.no_grad()
    def from_model(cls, model: PFNN, mode: str = "cubic", z: torch.Tensor | None = None) -> PFNNRuntime:
        """Precompute the stored sets of ``mode`` from ``model`` (optionally with style code z (1, Z))."""
        K = model.cfg.control_points
        if mode == "cubic":
            coeff = None
        elif mode in RUNTIME_SETS:
            S = RUNTIME_SETS[mode]
            phases = torch.arange(S, dtype=torch.float64) / S  # (S,) set i sits at phase i / S
            coeff = catmull_rom_dense(phases, K)  # (S, K)
        else:
            raise ValueError(f"mode: expected 'constant', 'linear' or 'cubic', got {mode!r}")
        deltas = _style_deltas(model, z)
        weights, biases, cp_w, cp_b = [], [], [], []
        for i, layer in enumerate(model.net.layer_list()):
            w: torch.Tensor = layer.weight  # (K, D_out, D_in)
            b: torch.Tensor = layer.bias  # (K, D_out)
            if deltas is not None:
                w = w + deltas[i]  # (K, D_out, D_in) + (D_out, D_in): sum_k c_k = 1, so it blends through
            cp_w.append(w.clone())
            cp_b.append(b.clone())
            if coeff is not None:
                c = coeff.to(w.dtype)
                w = torch.einsum("sk,koi->soi", c, w)  # (S, D_out, D_in)
                b = c @ b  # (S, D_out)
            weights.append(w.clone())
            biases.append(b.clone())
        points = None if coeff is None or mode != "constant" else (cp_w, cp_b, coeff)
        return cls(mode, weights, biases, points)

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored sets (and the control points, where kept for batches)."""
        held = self.weights + self.biases + ([] if self.points is None else self.points[0] + self.points[1])
        return sum(t.numel() * t.element_size() for t in held)

    def terms(self, phase: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """phase (B,) -> (idx (B, m) long, w (B, m)): the stored sets each row blends (m = 1, 2 or 4)."""
        S = self.num_sets
        if self.mode == "cubic":
            return catmull_rom_weights(phase, S)
        pscale = phase.to(torch.float64) * S  # (B,)
        if self.mode == "constant":
            idx = torch.floor(pscale + 0.5).long() % S  # nearest stored set
            return idx[:, None], torch.ones(phase.shape[0], 1, dtype=torch.float64)  # (B, 1) each
        base = torch.floor(pscale)
        j0 = base.long() % S
        t = pscale - base  # (B,) lerp amount
        return torch.stack([j0, (j0 + 1) % S], dim=1), torch.stack([1.0 - t, t], dim=1)  # (B, 2) each

    def terms_float(self, p: float) -> tuple[list[int], list[float]]:
        """``terms`` for one phase as python ints and floats (no tensor work on the batch-1 path)."""
        S = self.num_sets
        pscale = p * S
        base = math.floor(pscale)
        if self.mode == "constant":
            return [math.floor(pscale + 0.5) % S], [1.0]
        t = pscale - base
        if self.mode == "linear":
            return [base % S, (base + 1) % S], [1.0 - t, t]
        t2, t3 = t * t, t * t * t
        sets = [(base + j) % S for j in (-1, 0, 1, 2)]
        return sets, [-0.5 * t + t2 - 0.5 * t3, 1.0 - 2.5 * t2 + 1.5 * t3, 0.5 * t + 2.0 * t2 - 1.5 * t3, -0.5 * t2 + 0.5 * t3]

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, phase: float | torch.Tensor) -> torch.Tensor:
        single = x.ndim == 1
        x2 = x[None] if single else x  # (B, D_in)
        B = check_batch(x2, self.input_dim)
        if B == 1 and not isinstance(phase, torch.Tensor):  # fast path: python ints and floats only
            sets, weights = self.terms_float(float(phase))
            y = self._run(x2, sets, weights)
        else:
            if not isinstance(phase, torch.Tensor):
                phase = torch.full((B,), float(phase), dtype=torch.float64)
            if phase.shape != (B,):
                raise ShapeError(f"phase: expected ({B},) or a float, got {tuple(phase.shape)}")
            idx, w = self.terms(phase.to(x2.device))
            if self.points is not None and len(idx[:, 0].unique()) > self.POINTS_AFTER_SETS:
                y = self._run_points(x2, idx[:, 0])
            else:
                y = self._run_sorted(x2, idx, w)
        return y[0] if single else y

    def _run_sorted(self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x (B, D_in) with each row's stored sets idx (B, m) and blend w (B, m): rows sorted by their first
        set, so the rows using set s are contiguous runs (cyclic: at most two); per layer one addmm per set
        and run, rows scaled by their coefficient c (B, S) (c * W_s h = W_s (c h))."""
        B, S = x.shape[0], self.num_sets
        order = torch.argsort(idx[:, 0])
        idx = idx[order]
        coeff = torch.zeros(B, S, dtype=x.dtype, device=x.device).scatter_add_(1, idx, w[order].to(x.dtype))  # (B, S)
        plan = _runs(coeff != 0)
        single = idx.shape[1] == 1  # constant mode: every coefficient is 1
        h, last = x[order], len(self.weights) - 1
        for i, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            y = torch.empty(B, W.shape[1], dtype=x.dtype, device=x.device) if single else coeff @ b  # (B, D_out)
            for s, a, e in plan:
                if single:
                    torch.addmm(b[s], h[a:e], W[s].T, out=y[a:e])
                else:
                    y[a:e].addmm_(h[a:e] * coeff[a:e, s, None], W[s].T)
            h = F.elu_(y) if i < last else y
        out = torch.empty_like(h)
        out[order] = h
        return out

    def _run_points(self, x: torch.Tensor, sets: torch.Tensor) -> torch.Tensor:
        """x (B, D_in) through the K control points, blended per row by the coefficients of its stored set
        ``sets`` (B,): one (B, D_in) @ (D_in, K * D_out) product per layer."""
        assert self.points is not None
        weights, biases, set_coeff = self.points
        c = set_coeff[sets].to(x.dtype)  # (B, K)
        h, last = x, len(weights) - 1
        for i, (W, b) in enumerate(zip(weights, biases, strict=True)):
            K, D = b.shape
            per_point = (h @ W).view(-1, K, D)  # (B, K, D_out): every control point's W_k h
            y = torch.bmm(c[:, None, :], per_point)[:, 0] + c @ b  # (B, D_out)
            h = F.elu_(y) if i < last else y
        return h

    def _run(self, h: torch.Tensor, sets: list[int], w: Sequence[float | torch.Tensor]) -> torch.Tensor:
        """h (n, D_in) through every layer with the blend sum_j w_j (W_sets[j] h + b_sets[j]);
        w holds floats (one row) or (n, 1) tensors."""
        last = len(self.weights) - 1
        for i, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            y = torch.addmm(b[sets[0]], h, W[sets[0]].T)  # (n, D_out)
            if not (isinstance(w[0], float) and w[0] == 1.0):
                y.mul_(w[0])
            for k, wk in zip(sets[1:], w[1:], strict=True):
                y.add_(torch.addmm(b[k], h, W[k].T).mul_(wk))
            h = F.elu_(y) if i < last else y
        return h


def _runs(used: torch.Tensor) -> list[tuple[int, int, int]]:
    """(set, start, stop) of every run of consecutive True rows in each column of ``used`` (B, S)."""
    B = used.shape[0]
    pad = torch.zeros(1, used.shape[1], dtype=torch.int8, device=used.device)
    edges = torch.diff(torch.cat([pad, used.to(torch.int8), pad]), dim=0)  # (B + 1, S): +1 run starts, -1 stops
    starts, stops = (edges.T == 1).nonzero().tolist(), (edges.T == -1).nonzero().tolist()  # column-major order
    assert len(starts) == len(stops) and all(a[0] == b[0] for a, b in zip(starts, stops))
    return [(s, a, min(e, B)) for (s, a), (_, e) in zip(starts, stops)]


def _style_deltas(model: PFNN, z: torch.Tensor | None) -> list[torch.Tensor] | None:
    """Per layer, the explicit adapter weight M1 diag(f(z)) M2 (D_out, D_in) for one style code, or None."""
    if z is None:
        return None
    if model.net.adapters is None:
        raise ValueError("z: this model has no style adapters (style_rank = 0); pass z=None")
    z = z.reshape(1, -1)  # (1, Z)
    return [adapter.weight(z)[0] for adapter in model.net.adapter_list()]


@torch.no_grad()
def runtime_error(model: PFNN, mode: str, x: torch.Tensor, phase: torch.Tensor, z: torch.Tensor | None = None) -> float:
    """Max abs difference between ``PFNNRuntime.from_model(model, mode)`` and the exact model (in eval
    mode) on x (B, D_in), phase (B,). The model's train/eval state is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        zb = None if z is None else z.reshape(1, -1).expand(x.shape[0], -1)  # (B, Z)
        exact = model(x, phase, zb)
        approx = PFNNRuntime.from_model(model, mode, z)(x, phase)
    finally:
        model.train(was_training)
    return float((approx - exact).abs().max())
