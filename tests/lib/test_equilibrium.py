"""Tests of dlbook.equilibrium: the weight-tied rewrite of a layered network, and DEQ iterations."""
import pytest
import torch

from dlbook import equilibrium as E
from dlbook import nets

ACTS = ["relu", "tanh", "sigmoid", "identity"]


def layers_and_inputs(dtype=torch.float64, widths=(4, 8, 6, 5, 3)):
    layers = nets.random_layers(widths, seed=0, dtype=dtype)
    X = torch.randn(50, widths[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    return layers, X


def test_layer_outputs_match_torch_modules():
    layers, X = layers_and_inputs()
    modules = [torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.Sigmoid(), torch.nn.Identity()]
    h, expected = X, []
    for linear, act in zip(nets.from_layers(layers, "identity")[::2], modules):
        h = act(linear(h))
        expected.append(h)
    assert torch.allclose(E.layer_outputs(layers, ACTS, X), torch.cat(expected, dim=1), atol=1e-14)


def test_weight_tied_blocks_are_the_layers():
    layers, _ = layers_and_inputs()
    tied = E.weight_tied(layers)
    assert tied.sizes == (8, 6, 5, 3) and tied.W_z.shape == (22, 22) and tied.W_x.shape == (22, 4)
    assert torch.equal(tied.W_z[8:14, :8], layers[1].W) and torch.equal(tied.W_z[19:, 14:19], layers[3].W)
    assert torch.equal(tied.W_x[:8], layers[0].W) and torch.equal(tied.W_x[8:], torch.zeros(14, 4, dtype=torch.float64))
    assert torch.equal(tied.b, torch.cat([b for _, b in layers]))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_L_iterations_reach_the_stacked_activations_and_stay(dtype, tol):
    layers, X = layers_and_inputs(dtype)
    tied = E.weight_tied(layers)
    states = E.tied_iterates(tied, ACTS, X, 6)
    reference = E.layer_outputs(layers, ACTS, X)
    assert (states[4] - reference).abs().max() < tol
    assert (states[3] - reference).abs().max() > 1e-3          # one iteration too few
    assert torch.equal(states[5], states[4]) and torch.equal(states[6], states[4])
    power = torch.linalg.matrix_power
    assert torch.equal(power(tied.W_z, 4), torch.zeros_like(tied.W_z)) and power(tied.W_z, 3).abs().max() > 0


def test_single_layer_needs_one_iteration():
    layers, X = layers_and_inputs(widths=(4, 3))
    states = E.tied_iterates(E.weight_tied(layers), ["tanh"], X, 2)
    assert torch.allclose(states[1], E.layer_outputs(layers, ["tanh"], X), atol=1e-15)


def test_fixed_point_iteration_regimes():
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(20, 20, generator=gen, dtype=torch.float64)
    c = 0.5 * torch.randn(20, generator=gen, dtype=torch.float64)
    contraction = 0.8 * A / torch.linalg.matrix_norm(A, 2)
    Z = E.fixed_point_iteration(contraction, c, "tanh", 200)
    assert (Z[-1] - Z[-2]).norm() < 1e-12
    assert torch.allclose(Z[-1], torch.tanh(contraction @ Z[-1] + c), atol=1e-12)
    assert E.lyapunov_exponent(contraction, c, "tanh", 300) < 0
    growth = E.fixed_point_iteration(1.5 * torch.eye(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64),
                                     "relu", 60).norm(dim=1)
    assert growth[-1] / growth[-2] == pytest.approx(1.5, rel=1e-9)
    flip = E.fixed_point_iteration(-3 * torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                                   "tanh", 100, z0=torch.tensor([0.5, -0.2], dtype=torch.float64))
    assert torch.allclose(flip[-1], flip[-3], atol=1e-12) and (flip[-1] - flip[-2]).norm() > 1


def test_bad_inputs_raise_clear_errors():
    layers, X = layers_and_inputs()
    with pytest.raises(ValueError, match="one activation per layer"):
        E.layer_outputs(layers, ["relu"], X)
    with pytest.raises(ValueError, match="activations"):
        E.layer_outputs(layers, ["relu", "tanh", "swish", "identity"], X)
    with pytest.raises(ValueError, match="X must have 4 columns"):
        E.tied_iterates(E.weight_tied(layers), ACTS, X[:, :3], 2)
    with pytest.raises(TypeError, match="tied"):
        E.tied_iterates(layers, ACTS, X, 2)
    with pytest.raises(ValueError, match="layers"):
        E.weight_tied([(torch.ones(3, 2), torch.ones(3)), (torch.ones(2, 4), torch.ones(2))])
    with pytest.raises(ValueError, match="W must be a square"):
        E.fixed_point_iteration(torch.ones(2, 3), torch.ones(2))
    with pytest.raises(ValueError, match="c must have 2"):
        E.fixed_point_iteration(torch.eye(2), torch.ones(3))
    with pytest.raises(TypeError, match="W"):
        E.fixed_point_iteration(torch.eye(2, dtype=torch.long), torch.ones(2))
    with pytest.raises(ValueError, match="activation"):
        E.lyapunov_exponent(torch.eye(2), torch.ones(2), "relu")
    with pytest.raises(ValueError, match="pre"):
        E.apply_activations(torch.ones(5), ["relu"], [4])
