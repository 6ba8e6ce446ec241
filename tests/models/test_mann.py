"""MANN: gating, both exact forms against an explicit per-sample blend, K = 1 as a plain MLP."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from motioncore.errors import ShapeError
from motioncore.families.mann.model import MANN, MANNConfig

D_IN, D_HID, D_OUT, D_G = 9, 6, 5, 4


def tiny(num_experts: int = 3, seed: int = 0) -> MANN:
    torch.manual_seed(seed)
    model = MANN(MANNConfig(D_IN, D_OUT, D_G, hidden_dim=D_HID, gating_hidden=8, num_experts=num_experts)).double()
    with torch.no_grad():  # non-zero biases so that bias blending is tested too
        for layer in model.net.layers:
            layer.bias.normal_()
    return model.eval()


def explicit(model: MANN, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Slow reference: per sample, W = sum_k a_k W_k and b = sum_k a_k b_k in a python loop."""
    rows = []
    for s in range(x.shape[0]):
        h = x[s]
        for n, layer in enumerate(model.net.layers):
            W = sum(a[s, k] * layer.weight[k] for k in range(a.shape[1]))
            b = sum(a[s, k] * layer.bias[k] for k in range(a.shape[1]))
            h = W @ h + b
            h = F.elu(h) if n < len(model.net.layers) - 1 else h
        rows.append(h)
    return torch.stack(rows)


@pytest.mark.parametrize("field", ["gating_input_dim", "num_experts", "gating_hidden", "dropout", "style_dim"])
def test_config_rejects_bad_fields(field: str) -> None:
    args = {"input_dim": 4, "output_dim": 3, "gating_input_dim": 2} | {field: -1}
    with pytest.raises(ValueError, match=field):
        MANNConfig(**args)


def test_gating_is_a_distribution_and_is_returned() -> None:
    model = tiny()
    x, g = torch.randn(10, D_IN, dtype=torch.float64), 3 * torch.randn(10, D_G, dtype=torch.float64)
    y, a = model(x, g, return_gating=True)
    assert a.shape == (10, 3) and y.shape == (10, D_OUT)
    assert (a >= 0).all()
    torch.testing.assert_close(a.sum(1), torch.ones(10, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(a, model.gating_coefficients(g), rtol=0, atol=0)
    assert a.std(0).max() > 1e-3  # coefficients depend on g


def test_forms_agree_with_explicit_blend() -> None:
    model = tiny()
    x, g = torch.randn(12, D_IN, dtype=torch.float64), torch.randn(12, D_G, dtype=torch.float64)
    ref = explicit(model, x, model.gating_coefficients(g))
    for mode in ("weights", "outputs"):
        torch.testing.assert_close(model(x, g, mode=mode), ref, rtol=0, atol=1e-10)


def test_single_expert_is_a_plain_mlp() -> None:
    model = tiny(num_experts=1)
    mlp = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HID), torch.nn.ELU(), torch.nn.Linear(D_HID, D_HID),
                              torch.nn.ELU(), torch.nn.Linear(D_HID, D_OUT)).double()
    with torch.no_grad():
        for lin, layer in zip(mlp[::2], model.net.layers, strict=True):
            lin.weight.copy_(layer.weight[0])
            lin.bias.copy_(layer.bias[0])
    x, g = torch.randn(8, D_IN, dtype=torch.float64), torch.randn(8, D_G, dtype=torch.float64)
    for mode in ("weights", "outputs"):
        torch.testing.assert_close(model(x, g, mode=mode), mlp(x), rtol=0, atol=1e-12)


def test_gradients_reach_the_gating_net() -> None:
    model = tiny()
    x, g = torch.randn(6, D_IN, dtype=torch.float64), torch.randn(6, D_G, dtype=torch.float64)
    model(x, g).square().sum().backward()
    for name, param in model.gating.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    for layer in model.net.layers:
        assert all(layer.weight.grad[k].abs().sum() > 0 for k in range(3))


def test_dropout_only_in_training() -> None:
    model = tiny()
    x, g = torch.randn(16, D_IN, dtype=torch.float64), torch.randn(16, D_G, dtype=torch.float64)
    assert torch.equal(model(x, g), model(x, g))
    model.train()
    torch.manual_seed(1)
    assert not torch.allclose(model(x, g), model(x, g))


def test_rejects_bad_shapes() -> None:
    model = tiny()
    x = torch.randn(2, D_IN, dtype=torch.float64)
    with pytest.raises(ShapeError, match="g"):
        model(x, torch.randn(2, D_G + 1, dtype=torch.float64))
    with pytest.raises(ShapeError, match="g"):
        model(x, torch.randn(3, D_G, dtype=torch.float64))
    with pytest.raises(ShapeError, match="x"):
        model(torch.randn(2, D_IN - 1, dtype=torch.float64), torch.randn(2, D_G, dtype=torch.float64))
