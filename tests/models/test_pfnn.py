"""PFNN: cyclic Catmull-Rom, the two exact forms against an explicit per-sample loop, the runtime modes."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from motioncore.errors import ShapeError
from motioncore.families.pfnn.model import (
    PFNN,
    PFNNConfig,
    catmull_rom_dense,
    catmull_rom_weights,
)
from motioncore.families.pfnn.model_runtime import PFNNRuntime, runtime_error

D_IN, D_HID, D_OUT = 7, 6, 5


def tiny(dtype: torch.dtype = torch.float64, seed: int = 0, **kw) -> PFNN:
    torch.manual_seed(seed)
    model = PFNN(PFNNConfig(D_IN, D_OUT, hidden_dim=D_HID, **kw)).to(dtype)
    with torch.no_grad():  # non-zero biases so that bias blending is tested too
        for layer in model.net.layers:
            layer.bias.normal_()
    return model.eval()


def explicit(model: PFNN, x: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    """Slow reference: per sample, W = sum_i w_i W_{k_i} and b likewise in a python loop, then W h + b."""
    idx, w = catmull_rom_weights(phase, model.cfg.control_points)
    rows = []
    for s in range(x.shape[0]):
        h = x[s]
        for n, layer in enumerate(model.net.layers):
            W = sum(w[s, i] * layer.weight[idx[s, i]] for i in range(4))
            b = sum(w[s, i] * layer.bias[idx[s, i]] for i in range(4))
            h = W @ h + b
            h = F.elu(h) if n < len(model.net.layers) - 1 else h
        rows.append(h)
    return torch.stack(rows)


# --- config ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"input_dim": 0}, "input_dim"),
        ({"hidden_dim": -3}, "hidden_dim"),
        ({"num_layers": 0}, "num_layers"),
        ({"dropout": 1.0}, "dropout"),
        ({"control_points": 3}, "control_points"),
        ({"style_rank": 4}, "style_rank"),
    ],
)
def test_config_rejects_bad_fields(kw: dict, field: str) -> None:
    args = {"input_dim": 4, "output_dim": 3} | kw
    with pytest.raises(ValueError, match=field):
        PFNNConfig(**args)


def test_forward_rejects_bad_shapes() -> None:
    model = tiny()
    with pytest.raises(ShapeError, match="x"):
        model(torch.zeros(2, D_IN + 1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ShapeError, match="phase"):
        model(torch.zeros(2, D_IN, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="mode"):
        model(torch.zeros(2, D_IN, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), mode="bogus")


# --- Catmull-Rom -----------------------------------------------------------------------------------------


def test_catmull_rom_sums_to_one_and_known_midpoint() -> None:
    phase = torch.linspace(-2.0, 3.0, 1001, dtype=torch.float64)
    dense = catmull_rom_dense(phase)
    torch.testing.assert_close(dense.sum(1), torch.ones(1001, dtype=torch.float64), rtol=0, atol=1e-12)
    idx, w = catmull_rom_weights(torch.tensor([0.125], dtype=torch.float64))  # mu = 0.5 between points 0 and 1
    assert idx.tolist() == [[3, 0, 1, 2]]
    torch.testing.assert_close(w, torch.tensor([[-0.0625, 0.5625, 0.5625, -0.0625]], dtype=torch.float64))


def test_catmull_rom_is_periodic() -> None:
    phase = torch.rand(200, dtype=torch.float64)
    ref = catmull_rom_dense(phase)
    for shift in (1.0, -1.0, 3.0):
        torch.testing.assert_close(catmull_rom_dense(phase + shift), ref, rtol=0, atol=1e-12)


def test_catmull_rom_interpolates_control_points() -> None:
    phase = torch.arange(4, dtype=torch.float64) / 4
    assert torch.equal(catmull_rom_dense(phase), torch.eye(4, dtype=torch.float64))


def test_catmull_rom_is_c1_across_segment_boundaries() -> None:
    h = 1e-6
    for k in range(5):  # k = 4 is the wrap-around from the last segment to the first
        p = torch.tensor([k / 4], dtype=torch.float64)
        left, mid, right = catmull_rom_dense(p - h), catmull_rom_dense(p), catmull_rom_dense(p + h)
        torch.testing.assert_close(left, mid, rtol=0, atol=1e-5)  # C0
        torch.testing.assert_close((mid - left) / h, (right - mid) / h, rtol=0, atol=1e-4)  # C1
        assert (right - mid).abs().max() / h > 0.1  # the slope is not trivially zero


# --- the two exact forms -------------------------------------------------------------------------------


def test_forms_agree_with_each_other_and_the_explicit_sum() -> None:
    model = tiny()
    x = torch.randn(11, D_IN, dtype=torch.float64)
    phase = torch.cat([torch.rand(7, dtype=torch.float64), torch.tensor([0.0, 0.25, 0.999, 1.6], dtype=torch.float64)])
    ref = explicit(model, x, phase)
    for mode in ("weights", "outputs"):
        torch.testing.assert_close(model(x, phase, mode=mode), ref, rtol=0, atol=1e-10)


def test_phase_at_control_point_is_a_plain_mlp() -> None:
    model = tiny()
    x = torch.randn(4, D_IN, dtype=torch.float64)
    for k in range(4):
        mlp = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HID), torch.nn.ELU(), torch.nn.Linear(D_HID, D_HID),
                                  torch.nn.ELU(), torch.nn.Linear(D_HID, D_OUT)).double()
        with torch.no_grad():
            for lin, layer in zip(mlp[::2], model.net.layers, strict=True):
                lin.weight.copy_(layer.weight[k])
                lin.bias.copy_(layer.bias[k])
        phase = torch.full((4,), k / 4, dtype=torch.float64)
        torch.testing.assert_close(model(x, phase), mlp(x), rtol=0, atol=1e-12)


def test_dropout_only_in_training() -> None:
    model = tiny()
    x, phase = torch.randn(16, D_IN, dtype=torch.float64), torch.rand(16, dtype=torch.float64)
    assert torch.equal(model(x, phase), model(x, phase))
    torch.testing.assert_close(model(x, phase), explicit(model, x, phase), rtol=0, atol=1e-10)
    model.train()
    torch.manual_seed(1)
    assert not torch.allclose(model(x, phase), model(x, phase))


def test_gradient_reaches_all_control_points() -> None:
    model = tiny()
    x = torch.randn(3, D_IN, dtype=torch.float64)
    phase = torch.full((3,), 0.3, dtype=torch.float64)  # one phase, mu = 0.2: all four weights non-zero
    model(x, phase).square().sum().backward()
    for layer in model.net.layers:
        assert all(layer.weight.grad[k].abs().sum() > 0 for k in range(4))
        assert all(layer.bias.grad[k].abs().sum() > 0 for k in range(4))


# --- runtime --------------------------------------------------------------------------------------------


def test_runtime_cubic_is_exact_and_the_others_are_close() -> None:
    torch.manual_seed(0)
    model = PFNN(PFNNConfig(24, 16, hidden_dim=32)).eval()
    x, phase = torch.randn(64, 24), torch.rand(64)
    errors = {mode: runtime_error(model, mode, x, phase) for mode in ("constant", "linear", "cubic")}
    assert errors["cubic"] < 1e-6
    for mode in ("constant", "linear"):
        assert math.isfinite(errors[mode]) and errors["cubic"] < errors[mode] < 1.0


@pytest.mark.parametrize("mode, num_sets", [("constant", 50), ("linear", 10), ("cubic", 4)])
def test_runtime_exact_on_stored_phases(mode: str, num_sets: int) -> None:
    model = tiny()
    phase = torch.arange(num_sets, dtype=torch.float64) / num_sets
    x = torch.randn(num_sets, D_IN, dtype=torch.float64)
    runtime = PFNNRuntime.from_model(model, mode)
    torch.testing.assert_close(runtime(x, phase), model(x, phase), rtol=0, atol=1e-10)


@pytest.mark.parametrize("mode", ["constant", "linear", "cubic"])
def test_runtime_batch_one_fast_path_matches_batched(mode: str) -> None:
    model = tiny()
    runtime = PFNNRuntime.from_model(model, mode)
    x, phase = torch.randn(9, D_IN, dtype=torch.float64), torch.rand(9, dtype=torch.float64)
    batched = runtime(x, phase)
    for s in range(9):
        sets_f, w_f = runtime.terms_float(float(phase[s]))
        sets_t, w_t = runtime.terms(phase[s : s + 1])
        assert sets_f == sets_t[0].tolist()
        torch.testing.assert_close(torch.tensor(w_f, dtype=torch.float64), w_t[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(runtime(x[s], float(phase[s])), batched[s], rtol=0, atol=1e-12)


def test_runtime_rejects_bad_mode_and_is_grad_free() -> None:
    model = tiny()
    with pytest.raises(ValueError, match="mode"):
        PFNNRuntime.from_model(model, "quadratic")
    y = PFNNRuntime.from_model(model, "constant")(torch.randn(2, D_IN, dtype=torch.float64), 0.4)
    assert y.shape == (2, D_OUT) and not y.requires_grad


def _phases(kind: str, n: int, gen: torch.Generator) -> torch.Tensor:
    """(n,) phases in cycles: spread over the whole cycle (a crowd), bunched on 3 stored sets of the constant
    mode, or on the set boundaries and the wrap (k / 50, k / 10, 1 - 1e-12, 0, exact halves)."""
    if kind == "spread":
        return torch.rand(n, generator=gen, dtype=torch.float64)
    if kind == "bunched":
        return torch.tensor([0.1, 0.52, 0.96], dtype=torch.float64)[torch.randint(0, 3, (n,), generator=gen)]
    edges = torch.cat([torch.arange(50) / 50, torch.arange(10) / 10 + 0.05, torch.tensor([1 - 1e-12, 0.0, 0.01, 0.99])])
    return edges.to(torch.float64)[torch.randint(0, len(edges), (n,), generator=gen)]


@pytest.mark.parametrize("style", [False, True])
@pytest.mark.parametrize("kind", ["spread", "bunched", "edges"])
@pytest.mark.parametrize("mode", ["constant", "linear", "cubic"])
def test_runtime_batched_matches_the_row_by_row_reference(mode: str, kind: str, style: bool, monkeypatch) -> None:
    """The batched paths (rows sorted into runs per stored set; constant batches touching many sets on the
    control points) against the same runtime called one row at a time (python floats, no grouping)."""
    gen = torch.Generator().manual_seed(1)
    model = tiny(**({"style_rank": 2, "style_dim": 3} if style else {}))
    z = torch.randn(1, 3, dtype=torch.float64, generator=gen) if style else None
    runtime = PFNNRuntime.from_model(model, mode, z)
    used = []
    monkeypatch.setattr(runtime, "_run_points", lambda *a, f=runtime._run_points: used.append(1) or f(*a))
    x, phase = torch.randn(200, D_IN, dtype=torch.float64, generator=gen), _phases(kind, 200, gen)
    reference = torch.stack([runtime(x[s], float(phase[s])) for s in range(200)])
    torch.testing.assert_close(runtime(x, phase), reference, rtol=0, atol=1e-10)
    assert bool(used) == (mode == "constant" and kind != "bunched")  # both constant paths are exercised
    x32 = x.float()
    runtime32 = PFNNRuntime.from_model(model.float(), mode, None if z is None else z.float())
    reference32 = torch.stack([runtime32(x32[s], float(phase[s])) for s in range(200)])
    torch.testing.assert_close(runtime32(x32, phase), reference32, rtol=1e-5, atol=1e-5)
