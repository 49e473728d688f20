"""Tests of dlbook.initialization (Chapter 4)."""
import math

import pytest
import torch
import torch.nn.functional as F

from dlbook import initialization as init
from dlbook import nets


@pytest.mark.parametrize("scheme,reference", [
    ("he", lambda w: torch.nn.init.kaiming_normal_(w, nonlinearity="relu")),
    ("xavier", torch.nn.init.xavier_normal_),
    ("torch", lambda w: torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))),
])
def test_variances_match_torch_init(scheme, reference):
    ours = init.init_weight(700, 300, scheme, seed=1, dtype=torch.float64)   # fan_in 700, fan_out 300
    theirs = reference(torch.empty(300, 700, dtype=torch.float64))           # nn.Linear layout (out, in)
    assert ours.shape == theirs.shape == (300, 700)
    expected = init.weight_variance(700, 300, scheme)
    assert abs(ours.var().item() / expected - 1) < 0.02
    assert abs(theirs.var().item() / expected - 1) < 0.02


def test_weight_variance_formulas():
    assert init.weight_variance(100, 50, "lecun") == pytest.approx(1 / 100)
    assert init.weight_variance(100, 50, "xavier") == pytest.approx(2 / 150)
    assert init.weight_variance(100, 50, "he") == pytest.approx(2 / 100)
    assert init.weight_variance(100, 50, "torch") == pytest.approx(1 / 300)
    assert init.weight_variance(100, 50, "orthogonal") == pytest.approx(1 / 100)


def test_nn_linear_default_has_variance_one_over_three_fan_in():
    layer = torch.nn.Linear(1000, 1000)
    assert abs(layer.weight.var().item() * 3 * 1000 - 1) < 0.02


@pytest.mark.parametrize("shape", [(64, 64), (80, 30), (30, 80)])
def test_orthogonal_has_orthonormal_rows_or_columns(shape):
    fan_out, fan_in = shape
    w = init.init_weight(fan_in, fan_out, "orthogonal", seed=2, dtype=torch.float64)
    assert w.shape == shape
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    torch.testing.assert_close(gram, torch.eye(min(shape), dtype=torch.float64), rtol=0, atol=1e-12)


def test_orthogonal_products_keep_singular_values_and_gaussian_ones_spread():
    sv = init.end_to_end_singular_values(30, 64, "orthogonal")
    assert (sv - 1).abs().max() < 1e-10
    spread = init.end_to_end_singular_values(30, 64, "lecun")
    assert spread.max() / spread.min() > 1e6


def test_propagation_ratio_follows_the_recursion():
    he = init.propagate(30, 256, "he", "relu", num_inputs=256)
    xavier = init.propagate(30, 256, "xavier", "relu", num_inputs=256)
    assert abs(init.ratio_per_layer(he) - 1.0) < 0.05
    assert abs(init.ratio_per_layer(xavier) - 0.5) < 0.05
    tanh = init.propagate(20, 256, "lecun", "tanh", num_inputs=256)
    predicted = init.predicted_second_moments(20, "lecun", "tanh", 256)
    assert ((tanh / predicted).log().abs().max()) < math.log(1.3)


def test_predicted_moments_closed_forms():
    relu = init.predicted_second_moments(5, "xavier", "relu", 10)
    torch.testing.assert_close(relu, torch.tensor([1, .5, .25, .125, .0625], dtype=torch.float64))
    linear = init.predicted_second_moments(3, "he", "linear", 10, input_second_moment=0.5)
    torch.testing.assert_close(linear, torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64))
    # tanh: for tiny q, E[tanh(z)^2] ≈ q, so LeCun keeps it nearly constant.
    tiny = init.predicted_second_moments(2, "lecun", "tanh", 10, input_second_moment=1e-6)
    assert abs(tiny[1] / tiny[0] - 1) < 1e-5


def test_depth_prefix_is_consistent():
    a = init.propagate(10, 32, "he", "relu", num_inputs=64, seed=4)
    b = init.propagate(20, 32, "he", "relu", num_inputs=64, seed=4)
    torch.testing.assert_close(a, b[:10])


def test_init_weight_draws_the_same_numbers_in_every_dtype():
    w64 = init.init_weight(5, 3, "he", seed=9, dtype=torch.float64)
    w32 = init.init_weight(5, 3, "he", seed=9)
    assert w32.dtype == torch.float32 and torch.equal(w32, w64.float())


def test_first_layer_gradient_norm_matches_autograd_and_leaves_grads_alone():
    model = nets.mlp((6, 5, 5, 4), seed=1, dtype=torch.float64)
    X = torch.randn(20, 6, dtype=torch.float64)
    y = torch.randint(0, 4, (20,))
    norm = init.first_layer_gradient_norm(model, X, y)
    grad, = torch.autograd.grad(F.cross_entropy(model(X), y), model[0].weight)
    assert norm == pytest.approx(grad.norm().item(), rel=1e-12)
    assert all(p.grad is None for p in model.parameters())


def test_plain_gradient_vanishes_with_depth_and_a_scaled_residual_one_does_not():
    X = torch.randn(100, 32, generator=torch.Generator().manual_seed(0))
    y = torch.arange(100) % 10

    def norm(depth, residual, scale=1.0):
        model = nets.mlp((32,) + (32,) * depth + (10,), residual=residual, branch_scale=scale, seed=0)
        return init.first_layer_gradient_norm(model, X, y)

    assert norm(20, False) < 1e-4 * norm(2, False)
    assert 0.1 < norm(20, True, 1 / math.sqrt(20)) / norm(2, True, 1 / math.sqrt(2)) < 10


def test_ratio_per_layer():
    assert init.ratio_per_layer([1.0, 0.5, 0.25]) == pytest.approx(0.5)


@pytest.mark.parametrize("call,match", [
    (lambda: init.weight_variance(3, 3, "glorot"), "scheme"),
    (lambda: init.weight_variance(0, 3, "he"), "fan_in"),
    (lambda: init.weight_variance("he", 3, 3), "fan_in"),
    (lambda: init.init_weight(30, 40, "he", dtype=torch.int64), "dtype"),
    (lambda: init.propagate(3, 8, "he", "relu", dtype=torch.int32), "dtype"),
    (lambda: init.end_to_end_singular_values(3, 8, "glorot"), "scheme"),
    (lambda: init.ratio_per_layer(torch.tensor([1, 2])), "moments"),
    (lambda: init.first_layer_gradient_norm(torch.nn.ReLU(), torch.zeros(2, 3), torch.zeros(2)), "model"),
    (lambda: init.first_layer_gradient_norm(nets.mlp((3, 4, 2)), torch.zeros(2, 3), torch.zeros(3, dtype=torch.long)),
     "X and y"),
    (lambda: init.first_layer_gradient_norm(nets.mlp((3, 4, 2)), torch.zeros(2, 5), torch.zeros(2, dtype=torch.long)),
     "X must have 3 columns"),
    (lambda: init.first_layer_gradient_norm(nets.mlp((3, 4, 2)), torch.zeros(2, 3), torch.tensor([0, 2])), "y"),
    (lambda: init.first_layer_gradient_norm(nets.mlp((3, 4, 2)), torch.zeros(2, 3), torch.zeros(2)), "y"),
    (lambda: init.init_weight(3, 3, "he", seed=-1), "seed"),
    (lambda: init.propagate(0, 8, "he", "relu"), "depth"),
    (lambda: init.propagate(3, 8, "he", "gelu"), "activation"),
    (lambda: init.propagate(3, 8.0, "he", "relu"), "width"),
    (lambda: init.predicted_second_moments(3, "he", "relu", 8, input_second_moment=0.0), "input_second_moment"),
    (lambda: init.ratio_per_layer([1.0]), "moments"),
    (lambda: init.ratio_per_layer([1.0, -1.0]), "moments"),
    (lambda: init.init_weight(3, 3, "he", device=3.5), "device"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()
