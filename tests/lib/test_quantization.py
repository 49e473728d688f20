"""Tests of dlbook.quantization: the uniform quantizer against torch's fake quantization and the closed
forms, binary weights against a brute-force grid, ternary weights."""
import math

import pytest
import torch

from dlbook import nets, quantization


def _normal(n, seed=0, dtype=torch.float64):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("num_bits", [2, 3, 4, 8])
def test_quantize_uniform_equals_torch_fake_quantize_float32(num_bits):
    w = _normal(20_000, seed=num_bits, dtype=torch.float32)
    scale = quantization.symmetric_scale(w, num_bits)
    low, high = quantization.integer_range(num_bits)
    for s in (scale, 0.5 * scale):  # without and with clipping
        expected = torch.fake_quantize_per_tensor_affine(w, s, 0, low, high)
        assert torch.equal(quantization.quantize_uniform(w, num_bits, s), expected)


@pytest.mark.parametrize("num_bits", [4, 8])
def test_levels_equal_torch_fake_quantize_float64(num_bits):
    """torch multiplies the levels back by the scale in float32, so in float64 compare the levels."""
    w = _normal(20_000, seed=1)
    scale = quantization.symmetric_scale(w, num_bits)
    low, high = quantization.integer_range(num_bits)
    torch_levels = torch.round(torch.fake_quantize_per_tensor_affine(w, scale, 0, low, high) / scale)
    assert torch.equal(quantization.quantization_codes(w, num_bits, scale), torch_levels)


def test_integer_range_and_scale():
    assert quantization.integer_range(2) == (-1, 1)
    assert quantization.integer_range(8) == (-127, 127)
    w = torch.tensor([0.5, -2.54, 1.0], dtype=torch.float64)
    assert quantization.symmetric_scale(w, 8) == pytest.approx(2.54 / 127, rel=1e-15)
    q = quantization.quantize_uniform(w, 8)
    assert q.abs().max().item() == pytest.approx(2.54, rel=1e-15)  # the largest weight is a level
    assert len(torch.unique(quantization.quantize_uniform(_normal(1000), 3))) <= 7


@pytest.mark.parametrize("num_bits", [4, 6, 8])
def test_error_at_most_half_a_step_and_mse_near_step_squared_over_12(num_bits):
    w = _normal(200_000, seed=num_bits)
    scale = quantization.symmetric_scale(w, num_bits)
    error = quantization.quantize_uniform(w, num_bits) - w
    assert error.abs().max().item() <= scale / 2 * (1 + 1e-12)
    ratio = error.pow(2).mean().item() / quantization.uniform_noise_mse(scale)
    # 200,000 nearly uniform errors: the ratio has standard error ~0.005 when the levels are fine.
    assert abs(ratio - 1) < 0.03, ratio


def test_clipping_breaks_the_half_step_bound():
    w = _normal(10_000, seed=3)
    scale = 0.25 * quantization.symmetric_scale(w, 4)
    error = quantization.quantize_uniform(w, 4, scale) - w
    assert error.abs().max().item() > scale


@pytest.mark.parametrize("weighted", [False, True])
def test_binary_scale_beats_every_scale_on_a_grid(weighted):
    w = _normal(500, seed=4)
    d = torch.rand(500, generator=torch.Generator().manual_seed(5), dtype=torch.float64) if weighted else None
    result = quantization.binary_weights(w, d)
    assert torch.equal(result.codes, torch.where(w >= 0, 1.0, -1.0).double())
    weights = torch.ones_like(w) if d is None else d
    if d is None:
        assert result.scale.item() == pytest.approx(w.abs().mean().item(), rel=1e-14)
    grid = torch.linspace(0, 3, 30_001, dtype=torch.float64)
    errors = (weights * (w[None, :] - grid[:, None] * result.codes[None, :]).pow(2)).sum(1)
    best = (weights * (w - result.weights()).pow(2)).sum().item()
    assert best <= errors.min().item() + 1e-6
    # ... and the grid's best scale sits next to the closed form.
    assert abs(grid[errors.argmin()].item() - result.scale.item()) <= 1e-4


def test_ternary_weights():
    w = _normal(10_000, seed=6)
    result = quantization.ternary_weights(w)
    threshold = 0.7 * w.abs().mean()
    assert result.threshold.item() == pytest.approx(threshold.item(), rel=1e-15)
    kept = w.abs() > threshold
    assert result.scale.item() == pytest.approx(w.abs()[kept].mean().item(), rel=1e-14)
    values = torch.unique(result.weights())
    assert len(values) == 3
    assert torch.allclose(values, torch.stack([-result.scale, torch.zeros(()).double(), result.scale]))
    # For Gaussian weights 0.7 E|w| = 0.7 sqrt(2/pi) sigma keeps P(|z| > 0.559) ~ 0.576 of them.
    expected = math.erfc(0.7 * math.sqrt(2 / math.pi) / math.sqrt(2))
    assert abs(kept.double().mean().item() - expected) < 0.02
    # The scale is the least-squares one for these codes.
    codes = result.codes
    assert result.scale.item() == pytest.approx(((w * codes).sum() / codes.pow(2).sum()).item(), rel=1e-13)


def test_quantize_model_quantizes_every_linear_weight():
    model = nets.mlp((5, 8, 3), dtype=torch.float64)
    biases = [m.bias.detach().clone() for m in nets.linear_layers(model)]
    quantization.quantize_model(model, 3)
    for linear, b in zip(nets.linear_layers(model), biases):
        assert len(torch.unique(linear.weight.detach())) <= 7
        assert torch.equal(linear.bias.detach(), b)


def test_bad_inputs():
    w = _normal(10)
    with pytest.raises(ValueError, match="num_bits"):
        quantization.quantize_uniform(w, 1)
    with pytest.raises(TypeError, match="num_bits"):
        quantization.quantize_uniform(w, 4.0)
    with pytest.raises(ValueError, match="scale"):
        quantization.quantize_uniform(w, 4, -0.1)
    with pytest.raises(TypeError, match="w"):
        quantization.quantize_uniform(torch.arange(5), 4)
    with pytest.raises(ValueError, match="w"):
        quantization.symmetric_scale(torch.zeros(3), 4)
    with pytest.raises(ValueError, match="w must be finite"):
        quantization.binary_weights(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="importance"):
        quantization.binary_weights(w, torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="importance"):
        quantization.binary_weights(w, -torch.ones(10, dtype=torch.float64))
    with pytest.raises(ValueError, match="threshold_factor"):
        quantization.ternary_weights(w, -1.0)
    with pytest.raises(ValueError, match="threshold_factor"):
        quantization.ternary_weights(w, 100.0)
    with pytest.raises(TypeError, match="model"):
        quantization.quantize_model(w, 4)
