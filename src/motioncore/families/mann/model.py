"""Mode-Adaptive Neural Network (Zhang, Starke, Komura, Saito, SIGGRAPH 2018).

Legend: B batch, K experts, D features (D_in, D_out per layer; D_g gating input), R style adapter
rank, Z style code size.

A small gating net maps the gating input g (B, D_g) (which columns of the pose those are is the
caller's choice: Starke used the 4 feet velocities, the speed and 6 actions) to softmax coefficients
a (B, K). Each motion-net layer holds K expert weight sets and uses, per sample, ``W = sum_k a_k W_k``
and ``b = sum_k a_k b_k`` (weights *and* biases are blended, which is not the same as blending the
outputs of K separate networks). Because the blend is linear per layer, ``W(a) x = sum_k a_k (W_k x)``
gives the same result without building W per sample: ``mode="outputs"`` (default, faster on CPU at
batch 1 to 256, see bench/pfnn_latency.py) or ``mode="weights"`` (builds W (B, D_out, D_in)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from motioncore.errors import ShapeError
from motioncore.families.pfnn.model import BlendedMLP, check_batch, check_dims, check_dropout, check_style


@dataclass(frozen=True)
class MANNConfig:
    input_dim: int  # D_in: motion-net input features per frame (480 in Starke's dog data)
    output_dim: int  # D_out: motion-net output features per frame (363 in Starke's dog data)
    gating_input_dim: int  # D_g: gating-net input features; the caller selects them (19 in Starke's data)
    hidden_dim: int = 512  # width of every motion-net hidden layer
    num_layers: int = 3  # motion-net expert-blended layers (ELU between them)
    gating_hidden: int = 32  # width of the two gating-net hidden layers
    num_experts: int = 8  # K: expert weight sets per motion-net layer (= gating outputs)
    dropout: float = 0.3  # drop probability on every layer's input of both nets in training (keep 0.7)
    style_rank: int = 0  # R: rank of each motion-net layer's one-shot style adapter (0 = off)
    style_dim: int = 0  # Z: size of the style code z the adapters read (0 = off; set both or neither)

    def __post_init__(self) -> None:
        check_dims(self, ("input_dim", "output_dim", "gating_input_dim", "hidden_dim", "num_layers", "gating_hidden", "num_experts"), minimum=1)
        check_dims(self, ("style_rank", "style_dim"), minimum=0)
        check_dropout(self)
        check_style(self)


def gating_net(in_dim: int, hidden: int, num_experts: int, dropout: float) -> nn.Sequential:
    """in -> hidden -> hidden -> K logits, ELU, dropout on each layer's input; init uniform
    +-sqrt(6 / (in + out)) (Starke's Gating.py), zero biases. Softmax is applied by the caller."""
    dims = [in_dim, hidden, hidden, num_experts]
    mods: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        linear = nn.Linear(d_in, d_out)
        bound = math.sqrt(6.0 / (d_in + d_out))
        nn.init.uniform_(linear.weight, -bound, bound)
        nn.init.zeros_(linear.bias)
        mods += [nn.Dropout(dropout), linear] + ([nn.ELU()] if i < len(dims) - 2 else [])
    return nn.Sequential(*mods)


class MANN(nn.Module):
    """MANN: ``forward(x (B, D_in), g (B, D_g), z (B, Z) | None, mode, return_gating) -> y (B, D_out)``
    or ``(y, a (B, K))`` with ``return_gating=True``."""

    def __init__(self, cfg: MANNConfig):
        super().__init__()
        self.cfg = cfg
        self.gating = gating_net(cfg.gating_input_dim, cfg.gating_hidden, cfg.num_experts, cfg.dropout)
        dims = [cfg.input_dim] + [cfg.hidden_dim] * (cfg.num_layers - 1) + [cfg.output_dim]
        self.net = BlendedMLP(cfg.num_experts, dims, cfg.dropout, cfg.style_rank, cfg.style_dim)

    def gating_coefficients(self, g: torch.Tensor) -> torch.Tensor:
        """g (B, D_g) -> softmax expert coefficients a (B, K), each row summing to 1."""
        check_batch(g, self.cfg.gating_input_dim, "g")
        return torch.softmax(self.gating(g), dim=-1)  # (B, K)

    def forward(
        self,
        x: torch.Tensor,
        g: torch.Tensor,
        z: torch.Tensor | None = None,
        mode: str = "outputs",
        return_gating: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        B = check_batch(x, self.cfg.input_dim)
        if g.shape[0] != B:
            raise ShapeError(f"g: expected ({B}, {self.cfg.gating_input_dim}), got {tuple(g.shape)}")
        a = self.gating_coefficients(g)  # (B, K)
        y = self.net(x, a, z, mode)  # (B, D_out)
        return (y, a) if return_gating else y
