"""Learnet: factorised one-shot layer against an explicit W(z), zero-init adapters inside PFNN and MANN,
the style encoder's batch independence and gradient flow."""
from __future__ import annotations

import pytest
import torch

from motioncore.errors import ShapeError
from motioncore.families.mann.model import MANN, MANNConfig
from motioncore.families.pfnn.model import PFNN, PFNNConfig
from motioncore.families.pfnn.model_runtime import PFNNRuntime
from motioncore.families.style.model_layers import FactorizedLinear, StyleEncoder, StyleEncoderConfig

D_IN, D_OUT, RANK, Z = 7, 5, 3, 4


def perturb_f(module: torch.nn.Module) -> None:
    """Give every adapter's zero-initialised last layer random values (as after some training)."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if ".f.2." in name or name.startswith("f.2."):
                param.normal_()


def without_adapters(state: dict) -> dict:
    return {k: v for k, v in state.items() if "adapters" not in k}


def test_factorized_linear_matches_explicit_weight() -> None:
    torch.manual_seed(0)
    layer = FactorizedLinear(D_IN, D_OUT, RANK, Z).double()
    perturb_f(layer.adapter)
    x, z = torch.randn(6, D_IN, dtype=torch.float64), torch.randn(6, Z, dtype=torch.float64)
    ad = layer.adapter
    rows = []
    for s in range(6):  # W(z) = W0 + M1 diag(f(z)) M2, built per sample
        W = layer.base.weight + ad.m1 @ torch.diag(ad.f(z[s : s + 1])[0]) @ ad.m2
        rows.append(W @ x[s] + layer.base.bias)
    ref = torch.stack(rows)
    torch.testing.assert_close(layer(x, z), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.einsum("boi,bi->bo", layer.weight(z), x) + layer.base.bias, ref, rtol=0, atol=1e-12)
    assert (layer(x, z) - layer(x)).abs().max() > 1e-3  # the adapter does something once f is non-zero


def test_untrained_adapter_is_the_base_layer() -> None:
    torch.manual_seed(0)
    layer = FactorizedLinear(D_IN, D_OUT, RANK, Z)
    x, z = torch.randn(6, D_IN), torch.randn(6, Z)
    assert torch.equal(layer(x, z), layer.base(x))
    assert torch.equal(layer(x), layer.base(x))


def style_models(seed: int = 0) -> tuple[PFNN, PFNN, MANN, MANN]:
    """(PFNN with style, PFNN without, MANN with, MANN without), base weights shared."""
    torch.manual_seed(seed)
    p_on = PFNN(PFNNConfig(D_IN, D_OUT, hidden_dim=6, style_rank=RANK, style_dim=Z)).double().eval()
    p_off = PFNN(PFNNConfig(D_IN, D_OUT, hidden_dim=6)).double().eval()
    p_off.load_state_dict(without_adapters(p_on.state_dict()))
    m_on = MANN(MANNConfig(D_IN, D_OUT, 3, hidden_dim=6, num_experts=3, style_rank=RANK, style_dim=Z)).double().eval()
    m_off = MANN(MANNConfig(D_IN, D_OUT, 3, hidden_dim=6, num_experts=3)).double().eval()
    m_off.load_state_dict(without_adapters(m_on.state_dict()))
    return p_on, p_off, m_on, m_off


@pytest.mark.parametrize("mode", ["weights", "outputs"])
def test_style_off_or_untrained_equals_plain_model(mode: str) -> None:
    p_on, p_off, m_on, m_off = style_models()
    x, phase, g = torch.randn(5, D_IN, dtype=torch.float64), torch.rand(5, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    z = torch.randn(5, Z, dtype=torch.float64)
    plain_p, plain_m = p_off(x, phase, mode=mode), m_off(x, g, mode=mode)
    assert torch.equal(p_on(x, phase, mode=mode), plain_p)  # z=None
    assert torch.equal(m_on(x, g, mode=mode), plain_m)
    assert torch.equal(p_on(x, phase, z, mode=mode), plain_p)  # zero-initialised f
    assert torch.equal(m_on(x, g, z, mode=mode), plain_m)
    perturb_f(p_on)
    perturb_f(m_on)
    assert torch.equal(p_on(x, phase, mode=mode), plain_p)  # z=None still ignores the adapters
    assert (p_on(x, phase, z, mode=mode) - plain_p).abs().max() > 1e-3
    assert (m_on(x, g, z, mode=mode) - plain_m).abs().max() > 1e-3
    with pytest.raises(ValueError, match="z"):
        p_off(x, phase, z)


def test_style_adapter_matches_explicit_weight_inside_pfnn() -> None:
    p_on, _, _, _ = style_models()
    perturb_f(p_on)
    x, phase, z = torch.randn(4, D_IN, dtype=torch.float64), torch.rand(4, dtype=torch.float64), torch.randn(4, Z, dtype=torch.float64)
    coeff = p_on.phase_coefficients(phase)
    rows = []
    for s in range(4):
        h = x[s]
        for n, (layer, ad) in enumerate(zip(p_on.net.layers, p_on.net.adapters, strict=True)):
            W = sum(coeff[s, k] * layer.weight[k] for k in range(4)) + ad.m1 @ torch.diag(ad.f(z[s : s + 1])[0]) @ ad.m2
            h = W @ h + coeff[s] @ layer.bias
            h = torch.nn.functional.elu(h) if n < 2 else h
        rows.append(h)
    torch.testing.assert_close(p_on(x, phase, z), torch.stack(rows), rtol=0, atol=1e-10)
    runtime = PFNNRuntime.from_model(p_on, "cubic", z[:1])  # style baked into the stored sets
    torch.testing.assert_close(runtime(x[:1], phase[:1]), torch.stack(rows[:1]), rtol=0, atol=1e-10)


def test_encoder_is_batch_independent_and_length_agnostic() -> None:
    torch.manual_seed(0)
    enc = StyleEncoder(StyleEncoderConfig(D_IN, z_dim=Z, channels=8)).double().eval()
    clips = [torch.randn(T, D_IN, dtype=torch.float64) for T in (1, 4, 13, 30)]
    alone = torch.cat([enc(c[None]) for c in clips])  # (4, Z)
    assert alone.shape == (4, Z) and torch.isfinite(alone).all()
    same_len = torch.randn(3, 13, D_IN, dtype=torch.float64)
    torch.testing.assert_close(enc(torch.cat([same_len, clips[2][None]]))[-1], alone[2], rtol=0, atol=1e-12)
    padded = torch.zeros(4, 30, D_IN, dtype=torch.float64)  # (B, T_max, D), zero padded
    for s, c in enumerate(clips):
        padded[s, : len(c)] = c
    lengths = torch.tensor([len(c) for c in clips])
    torch.testing.assert_close(enc(padded, lengths), alone, rtol=0, atol=1e-12)
    padded[0, 1:] = 99.0  # garbage past a clip's length changes nothing
    torch.testing.assert_close(enc(padded, lengths)[0], alone[0], rtol=0, atol=1e-12)
    with pytest.raises(ShapeError, match="clip"):
        enc(torch.zeros(1, 0, D_IN, dtype=torch.float64))
    with pytest.raises(ShapeError, match="lengths"):
        enc(padded, torch.tensor([1, 2, 3, 31]))


def test_gradients_reach_adapters_and_encoder() -> None:
    torch.manual_seed(0)
    enc = StyleEncoder(StyleEncoderConfig(D_IN, z_dim=Z, channels=8))
    model = PFNN(PFNNConfig(D_IN, D_OUT, hidden_dim=6, style_rank=RANK, style_dim=Z))
    params = list(enc.parameters()) + list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x, phase, clip = torch.randn(8, D_IN), torch.rand(8), torch.randn(8, 20, D_IN)
    for step in range(2):  # step 0: f(z) = 0, so only f's last layer gets a gradient; step 1: everything
        opt.zero_grad()
        model(x, phase, enc(clip)).square().mean().backward()
        ad = model.net.adapters[0]
        assert ad.f[2].weight.grad.abs().sum() > 0
        if step == 0:
            assert ad.m1.grad.abs().sum() == 0
            opt.step()
    for name, param in list(model.net.adapters.named_parameters()) + list(enc.named_parameters()):
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_style_config_validation() -> None:
    with pytest.raises(ValueError, match="style_rank"):
        PFNNConfig(4, 3, style_rank=2)
    with pytest.raises(ValueError, match="style_rank"):
        MANNConfig(4, 3, 2, style_dim=2)
    with pytest.raises(ValueError, match="kernel_size"):
        StyleEncoderConfig(4, kernel_size=4)
    with pytest.raises(ValueError, match="rank"):
        FactorizedLinear(4, 3, 0, 2)
