"""Tests of dlbook.nets: the one MLP builder and networks as (W, b) lists."""
import math

import pytest
import torch

from dlbook import nets, normalization


def test_widths_layers_and_activations():
    model = nets.mlp((3, 5, 4, 2), activation="tanh")
    linears = nets.linear_layers(model)
    assert [(m.in_features, m.out_features) for m in linears] == [(3, 5), (5, 4), (4, 2)]
    assert [type(m).__name__ for m in model] == ["Linear", "Tanh", "Linear", "Tanh", "Linear"]
    assert model(torch.zeros(7, 3)).shape == (7, 2)
    assert nets.num_parameters(model) == 3 * 5 + 5 + 5 * 4 + 4 + 4 * 2 + 2


def test_seeded_by_a_generator_not_the_global_stream():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = nets.mlp((4, 8, 1), seed=7)
    after = torch.rand(3)
    assert torch.equal(before, after), "building a network must not consume the global random stream"
    b = nets.mlp((4, 8, 1), seed=7)
    c = nets.mlp((4, 8, 1), seed=8)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a[0].weight, c[0].weight)


def test_initialisation_scales():
    fan_in, fan_out = 400, 300
    torch_init = nets.mlp((fan_in, fan_out, 1), init="torch", seed=0, dtype=torch.float64)[0]
    bound = 1 / math.sqrt(fan_in)
    assert torch_init.weight.abs().max() <= bound and torch_init.weight.abs().max() > 0.99 * bound
    assert torch_init.weight.var().item() == pytest.approx(bound**2 / 3, rel=0.02)
    he = nets.mlp((fan_in, fan_out, 1), init="he", seed=0, dtype=torch.float64)[0]
    assert he.weight.var().item() == pytest.approx(2 / fan_in, rel=0.02) and torch.all(he.bias == 0)
    xavier = nets.mlp((fan_in, fan_out, 1), init="xavier", seed=0, dtype=torch.float64)[0]
    assert xavier.weight.var().item() == pytest.approx(2 / (fan_in + fan_out), rel=0.02)
    biased = nets.mlp((fan_in, fan_out, 1), init="he", bias_std=2.0, seed=0, dtype=torch.float64)[0]
    assert biased.bias.std().item() == pytest.approx(2.0, rel=0.15)


def test_residual_norm_and_dropout_layers():
    residual = nets.mlp((3, 6, 6, 6, 2), residual=True, branch_scale=0.5)
    kinds = [type(m).__name__ for m in residual]
    assert kinds == ["Linear", "ReLU", "ResidualBlock", "ResidualBlock", "Linear"]
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    block = residual[2]
    assert torch.allclose(block(x), x + 0.5 * torch.relu(block.linear(x)))
    normed = nets.mlp((3, 6, 2), norm="batch", dropout=0.25)
    assert [type(m).__name__ for m in normed] == ["Linear", "BatchNorm1d", "ReLU", "Dropout", "Linear"]
    assert isinstance(normed[1], normalization.BatchNorm1d) and normed[3].drop_prob == 0.25
    torch.manual_seed(0)
    before = torch.rand(2)
    torch.manual_seed(0)
    normed.train()(torch.ones(8, 3))
    assert torch.equal(torch.rand(2), before), "dropout masks must come from the network's seed"
    layer_normed = nets.mlp((3, 6, 2), norm="layer")
    assert isinstance(layer_normed[1], normalization.LayerNorm)


def test_dtype_and_device():
    model = nets.mlp((2, 3, 1), dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in model.parameters())


def test_layers_round_trip_and_forward():
    params = nets.random_layers((4, 6, 3), seed=2)
    assert nets.layer_widths(params) == [4, 6, 3] and params[0].W.dtype == torch.float64
    model = nets.from_layers(params)
    X = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out, hidden = nets.forward(params, X, return_hidden=True)
    assert torch.allclose(model(X), out) and hidden[0].shape == (5, 6) and (hidden[0] >= 0).all()
    back = nets.to_layers(model)
    assert all(torch.equal(a.W, b.W) and torch.equal(a.b, b.b) for a, b in zip(params, back))
    same = nets.to_layers(nets.mlp((4, 6, 3), seed=2, dtype=torch.float64))
    assert all(torch.equal(a.W, b.W) for a, b in zip(params, same))


@pytest.mark.parametrize("call, error, match", [
    (lambda: nets.mlp(64), TypeError, "widths"),
    (lambda: nets.mlp((64,)), ValueError, "widths"),
    (lambda: nets.mlp((64, 0, 10)), ValueError, r"widths\[1\]"),
    (lambda: nets.mlp((2, 3, 1), activation="gelu"), ValueError, "activation"),
    (lambda: nets.mlp((2, 3, 1), init="orthogonal"), ValueError, "init"),
    (lambda: nets.mlp((2, 3, 1), dropout=1.0), ValueError, "dropout"),
    (lambda: nets.mlp((2, 3, 1), norm="group"), ValueError, "norm"),
    (lambda: nets.mlp((2, 3, 3, 1), residual=True, dropout=0.1), ValueError, "residual"),
    (lambda: nets.mlp((2, 3, 1), dtype=torch.int64), TypeError, "dtype"),
    (lambda: nets.mlp((2, 3, 1), seed=-1), ValueError, "seed"),
    (lambda: nets.check_layers("params", [(torch.zeros(3, 2), torch.zeros(2))]), ValueError, "b has 2"),
    (lambda: nets.check_layers("params", [(torch.zeros(3, 2), torch.zeros(3)),
                                          (torch.zeros(1, 4), torch.zeros(1))]), ValueError, "columns"),
    (lambda: nets.check_layers("params", []), TypeError, "params"),
    (lambda: nets.forward(nets.random_layers((2, 3, 1)), torch.zeros(4, 5, dtype=torch.float64)),
     ValueError, "X must have 2 columns"),
    (lambda: nets.forward(nets.random_layers((2, 3, 1)), torch.zeros(4, 2, dtype=torch.int64)),
     TypeError, "X"),
    (lambda: nets.linear_layers(torch.nn.ReLU()), ValueError, "Linear"),
    (lambda: nets.num_parameters("model"), TypeError, "model"),
])
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_model_with_parameters_is_a_copy_holding_the_given_values():
    model = nets.mlp([3, 4, 2], seed=0)
    params = {name: torch.full_like(p, 0.5) for name, p in model.named_parameters()}
    copy = nets.model_with_parameters(model, params)
    assert all(torch.equal(p, params[name]) for name, p in copy.named_parameters())
    assert not any(torch.equal(p, params[name]) for name, p in model.named_parameters())
