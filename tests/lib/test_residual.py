"""Tests of dlbook.residual: plain and residual MLPs and their first-layer gradients."""
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dlbook import residual


def test_zero_residual_block_is_the_identity():
    block = residual.ResidualBlock(16, branch_scale=0.3, dtype=torch.float64)
    with torch.no_grad():
        block.linear.weight.zero_(); block.linear.bias.zero_()
    x = torch.randn(5, 16, dtype=torch.float64)
    assert torch.equal(block(x), x)


def test_residual_block_formula():
    block = residual.ResidualBlock(8, branch_scale=0.5, dtype=torch.float64)
    x = torch.randn(3, 8, dtype=torch.float64)
    expected = x + 0.5 * torch.relu(x @ block.linear.weight.T + block.linear.bias)
    assert torch.allclose(block(x), expected, atol=1e-15)


def test_mlp_shapes_seed_and_global_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    plain = residual.mlp(64, 32, 4, 10, seed=7)
    assert torch.equal(torch.rand(1), before)   # the caller's random stream is untouched
    again = residual.mlp(64, 32, 4, 10, seed=7)
    assert torch.equal(plain[0].weight, again[0].weight)
    assert sum(isinstance(m, nn.Linear) for m in plain) == 5
    res = residual.mlp(64, 32, 4, 10, residual=True, seed=7)
    assert sum(isinstance(m, residual.ResidualBlock) for m in res) == 3
    assert res(torch.zeros(2, 64)).shape == (2, 10)


def test_gradient_norm_matches_autograd():
    model = residual.mlp(6, 5, 3, 4, seed=1, dtype=torch.float64)
    X = torch.randn(20, 6, dtype=torch.float64)
    y = torch.randint(0, 4, (20,))
    norm = residual.first_layer_gradient_norm(model, X, y)
    grad, = torch.autograd.grad(F.cross_entropy(model(X), y), model[0].weight)
    assert norm == pytest.approx(grad.norm().item(), rel=1e-12)
    assert model[0].weight.grad is None or model[0].weight.grad.abs().max() == 0


def test_plain_gradient_vanishes_and_scaled_residual_does_not():
    X = torch.randn(100, 32, generator=torch.Generator().manual_seed(0))
    y = torch.arange(100) % 10
    plain = [residual.first_layer_gradient_norm(residual.mlp(32, 32, d, 10, seed=0), X, y) for d in (2, 20)]
    scaled = [residual.first_layer_gradient_norm(
        residual.mlp(32, 32, d, 10, residual=True, branch_scale=1 / math.sqrt(d), seed=0), X, y) for d in (2, 20)]
    assert plain[1] < 1e-4 * plain[0]
    assert 0.1 < scaled[1] / scaled[0] < 10


@pytest.mark.parametrize("call, error, match", [
    (lambda: residual.ResidualBlock(0), ValueError, "width"),
    (lambda: residual.ResidualBlock(3, branch_scale="1"), TypeError, "branch_scale"),
    (lambda: residual.mlp(4, 4, 0, 2), ValueError, "depth"),
    (lambda: residual.mlp(4, 4, 2, 2, residual=1), TypeError, "residual"),
    (lambda: residual.first_layer_gradient_norm(nn.ReLU(), torch.zeros(2, 3), torch.zeros(2)), TypeError, "model"),
    (lambda: residual.first_layer_gradient_norm(residual.mlp(3, 4, 2, 2), torch.zeros(2, 3), torch.zeros(3)),
     ValueError, "X and y"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
