"""Tests of dlbook.approximation: staircase, random features, Lebesgue form, sawtooth, parity."""
import math

import numpy as np
import pytest
import torch
from torch import nn

from dlbook import approximation as ap
from dlbook import data


def sine(x):
    return torch.sin(3 * x)


def test_staircase_is_a_weighted_average_of_samples():
    x = torch.linspace(-math.pi, math.pi, 777, dtype=torch.float64)
    for num_units, sharpness in [(1, 2.0), (5, 0.5), (16, 4.0), (40, 50.0)]:
        weights = ap.staircase_weights(x, num_units, sharpness, -math.pi, math.pi)
        assert weights.shape == (777, num_units + 1)
        assert weights.min() >= 0 and torch.allclose(weights.sum(dim=1), torch.ones(777, dtype=torch.float64))
        samples, _ = ap.staircase_knots(num_units, -math.pi, math.pi)
        net = ap.sigmoid_staircase(sine, num_units, sharpness, -math.pi, math.pi)
        assert isinstance(net[1], nn.Sigmoid) and net[0].out_features == num_units
        assert torch.allclose(ap.curve(net, x), weights @ sine(samples), atol=1e-12)


def test_staircase_error_bound_holds_and_steep_limit_is_half_spacing():
    x = torch.linspace(-1, 2, 3001, dtype=torch.float64)
    for sharpness in (0.3, 3.0, 300.0):
        net = ap.sigmoid_staircase(sine, 12, sharpness, -1.0, 2.0)
        error = (ap.curve(net, x) - sine(x)).abs()
        assert torch.all(error <= ap.staircase_error_bound(x, 3.0, 12, sharpness, -1.0, 2.0) + 1e-12)
    steep = ap.staircase_error_bound(x, 1.0, 12, 1e4, -1.0, 2.0)
    assert steep.max().item() == pytest.approx(3.0 / 24, rel=1e-3)  # L h / 2 with h = 3 / 12


def test_staircase_steps_become_a_nearest_sample_function():
    net = ap.sigmoid_staircase(lambda x: x**2, 4, 1e6, 0.0, 1.0)
    x = torch.tensor([0.05, 0.2, 0.3, 0.45, 0.7, 0.99], dtype=torch.float64)
    nearest = (torch.round(x * 4) / 4) ** 2
    assert torch.allclose(ap.curve(net, x), nearest, atol=1e-12)


def test_random_features_polynomial_activation_plateaus():
    x = torch.linspace(-math.pi, math.pi, 1001, dtype=torch.float64)
    assert torch.linalg.matrix_rank(ap.ridge_features(x, 50, "square")).item() == 3
    errors = {(act, m): (ap.random_feature_fit(x, sine(x), m, act, seed=1) - sine(x)).abs().max().item()
              for act in ("sigmoid", "tanh", "square") for m in (4, 64)}
    assert errors["sigmoid", 64] < errors["sigmoid", 4] / 10
    assert errors["tanh", 64] < errors["tanh", 4] / 10
    assert errors["square", 64] == pytest.approx(errors["square", 4], abs=1e-8)
    assert ap.ridge_features(x, 3, seed=5).shape == (1001, 3)
    assert torch.equal(ap.ridge_features(x, 3, seed=5), ap.ridge_features(x, 3, seed=5))


def test_lebesgue_form_matches_numpy_interpolation():
    rng = np.random.default_rng(0)
    knots = np.sort(rng.uniform(-2, 3, size=12))
    values = rng.normal(size=12)
    form = ap.lebesgue_form(torch.tensor(knots), torch.tensor(values))
    assert len(form.coefficients) == len(form.breakpoints) == 10
    x = np.linspace(knots[0], knots[-1], 2000)
    g = form.slope * x + form.intercept + (form.coefficients.numpy()[None]
                                           * np.maximum(x[:, None] - form.breakpoints.numpy()[None], 0)).sum(1)
    assert np.abs(g - np.interp(x, knots, values)).max() < 1e-12
    net = ap.relu_interpolant(torch.tensor(knots), torch.tensor(values))
    assert np.abs(ap.curve(net, torch.tensor(x)).numpy() - np.interp(x, knots, values)).max() < 1e-12
    assert net[0].out_features == 11


def test_tent_map_and_sawtooth_network_agree_exactly():
    x = torch.linspace(0, 1, 4097, dtype=torch.float64)
    assert torch.equal(ap.tent_map(torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])),
                       torch.tensor([0.0, 0.5, 1.0, 0.5, 0.0]))
    for depth in range(1, 9):
        assert torch.equal(ap.curve(ap.sawtooth_network(depth), x), ap.sawtooth(x, depth))
        assert all(isinstance(m, (nn.Linear, nn.ReLU)) for m in ap.sawtooth_network(depth))
        hidden = [m for m in ap.sawtooth_network(depth) if isinstance(m, nn.Linear)][:-1]
        assert all(layer.out_features == 2 for layer in hidden) and len(hidden) == depth
    assert torch.equal(ap.sawtooth(x, 0), x)


def test_sawtooth_preserves_the_uniform_distribution():
    # The tent map preserves Lebesgue measure, so t^L(U) is uniform: mean 1/2, variance 1/12.
    x = (torch.arange(2**16, dtype=torch.float64) + 0.5) / 2**16
    values = ap.sawtooth(x, 5)
    assert values.mean().item() == pytest.approx(0.5, abs=1e-6)
    assert values.var(unbiased=False).item() == pytest.approx(1 / 12, abs=1e-6)


def test_montufar_network_values():
    x = torch.tensor([0.0, 1 / 3, 0.5, 2 / 3, 1.0], dtype=torch.float64)
    expected = torch.tensor([1 / 3, 0.0, 0.0, 0.0, 1 / 3], dtype=torch.float64)
    assert torch.allclose(ap.curve(ap.montufar_network(1), x), expected, atol=1e-15)
    # Depth 2 applies the "V" after one tent.
    assert torch.allclose(ap.curve(ap.montufar_network(2), x),
                          ap.curve(ap.montufar_network(1), ap.tent_map(x)), atol=1e-15)


def test_shallow_fit_errors_are_exact():
    for depth, units in [(3, 5), (4, 8), (4, 16), (5, 12)]:
        fit = ap.shallow_sawtooth_fit(depth, units)
        x = torch.linspace(0, 1, 2**14 + 1, dtype=torch.float64)
        residual = ap.curve(fit.model, x) - ap.sawtooth(x, depth)
        assert residual.abs().max().item() <= fit.sup_error + 1e-12
        assert residual.abs().max().item() >= fit.sup_error - 1e-9   # the dyadic grid holds every breakpoint
        assert fit.mse == pytest.approx((residual**2).mean().item(), rel=1e-3, abs=1e-12)
    assert ap.shallow_sawtooth_fit(4, 16).sup_error < 1e-10
    assert all(ap.shallow_sawtooth_fit(5, m).sup_error >= 0.5 - 1e-9 for m in range(1, 16))
    assert ap.shallow_units_lower_bound(5) == 16


def test_parity_constructions_are_exact_on_all_inputs():
    for n in (1, 2, 3, 6, 11):
        cube = data.hypercube(n, encoding="01", dtype=torch.float64)
        with torch.no_grad():
            out = ap.parity_network(n)(cube)[:, 0]
        assert torch.equal(out, ap.bit_parity(cube).double())
        assert torch.equal(ap.recurrent_parity(cube), ap.bit_parity(cube).double())
        net = ap.parity_network(n)
        assert net[0].out_features == n
    assert ap.bit_parity(torch.tensor([[0, 1, 1], [1, 1, 1]])).tolist() == [0, 1]
    assert ap.parity_network(4, dtype=torch.float32)[0].weight.dtype == torch.float32


def test_parity_cell_is_xor_and_matches_a_manual_relu():
    cell = ap.ParityCell()
    h = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    x = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    assert cell(h, x).tolist() == [0.0, 1.0, 1.0, 0.0]
    a = h + x
    assert torch.equal(cell(h, x), a - 2 * torch.relu(a - 1))
    assert sum(1 for m in cell.modules() if isinstance(m, nn.Linear)) == 2
    bits = torch.tensor([[1, 0, 1, 1], [0, 0, 0, 1]])
    cell32 = ap.ParityCell(dtype=torch.float32)
    assert ap.recurrent_parity(bits, cell32).dtype == torch.float32
    assert ap.recurrent_parity(bits, cell32).tolist() == [1.0, 1.0]


def test_parity_implicants_are_the_odd_minterms():
    for n in range(1, 6):
        terms = ap.parity_implicants(n)
        assert len(terms) == 2 ** (n - 1)
        assert all(None not in t and sum(t) % 2 == 1 for t in terms)


@pytest.mark.parametrize("call, error, match", [
    (lambda: ap.sigmoid_staircase(3.0, 4, 1.0, 0.0, 1.0), TypeError, "target"),
    (lambda: ap.sigmoid_staircase(sine, 0, 1.0, 0.0, 1.0), ValueError, "num_units"),
    (lambda: ap.sigmoid_staircase(sine, 4, 0.0, 0.0, 1.0), ValueError, "sharpness"),
    (lambda: ap.sigmoid_staircase(sine, 4, 1.0, 1.0, 0.0), ValueError, "low"),
    (lambda: ap.sigmoid_staircase(lambda x: x[:2], 4, 1.0, 0.0, 1.0), ValueError, "target"),
    (lambda: ap.staircase_error_bound(torch.zeros(3), -1.0, 4, 1.0, 0.0, 1.0), ValueError, "lipschitz"),
    (lambda: ap.ridge_features(torch.zeros(3), 4, "cosine"), ValueError, "activation"),
    (lambda: ap.random_feature_fit(torch.zeros(3), torch.zeros(4), 2), ValueError, "y"),
    (lambda: ap.lebesgue_form(torch.tensor([0.0, 0.0, 1.0]), torch.zeros(3)), ValueError, "knots"),
    (lambda: ap.lebesgue_form(torch.tensor([0.0]), torch.zeros(1)), ValueError, "knots"),
    (lambda: ap.lebesgue_form(torch.zeros(2, 2), torch.zeros(2)), ValueError, "knots"),
    (lambda: ap.sawtooth(torch.zeros(3), -1), ValueError, "depth"),
    (lambda: ap.sawtooth_network(0), ValueError, "depth"),
    (lambda: ap.sawtooth_network(2, dtype=torch.int64), TypeError, "dtype"),
    (lambda: ap.shallow_sawtooth_fit(3, 0), ValueError, "num_units"),
    (lambda: ap.parity_network("3"), TypeError, "num_bits"),
    (lambda: ap.parity_network(3, dtype=torch.int64), TypeError, "dtype"),
    (lambda: ap.parity_network(3, device="gpu0"), TypeError, "device"),
    (lambda: ap.bit_parity(torch.tensor([[0.0, 2.0]])), ValueError, "only 0 or 1"),
    (lambda: ap.bit_parity(torch.tensor([0, 1])), ValueError, "X"),
    (lambda: ap.recurrent_parity(torch.tensor([[0.5, 1.0]])), ValueError, "only 0 or 1"),
    (lambda: ap.relu_interpolant(torch.tensor([0.0, 1.0]), torch.zeros(2), dtype=torch.int32), TypeError, "dtype"),
    (lambda: ap.lebesgue_form(torch.tensor([0, 1, 2]), torch.zeros(3)), TypeError, "knots"),
    (lambda: ap.lebesgue_form(torch.tensor([0.0, 1.0, 2.0]), torch.zeros(4)), ValueError, "same length"),
    (lambda: ap.tent_map(torch.tensor([0, 1])), TypeError, "x"),
    (lambda: ap.curve(ap.parity_network(3), torch.zeros(3)), ValueError, "one input"),
    (lambda: ap.curve(nn.Sequential(nn.ReLU()), torch.zeros(3)), ValueError, "Linear"),
    (lambda: ap.curve(ap.sawtooth_network(2), torch.zeros(3, 1)), ValueError, "x"),
    (lambda: ap.staircase_knots(4, 0.0, float("inf")), ValueError, "high"),
    (lambda: ap.recurrent_parity(torch.zeros(4)), ValueError, "X"),
    (lambda: ap.recurrent_parity(torch.zeros(4, 2), cell=nn.ReLU()), TypeError, "cell"),
    (lambda: ap.curve("net", torch.zeros(3)), TypeError, "model"),
    (lambda: ap.ParityCell()(torch.zeros(3), torch.zeros(4)), ValueError, "same shape"),
    (lambda: ap.ParityCell()(torch.zeros(3, dtype=torch.int64), torch.zeros(3)), TypeError, "h"),
    (lambda: ap.ParityCell(dtype=torch.int64), TypeError, "dtype"),
    (lambda: ap.parity_implicants(11), ValueError, "num_bits"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_constructions_on_cuda():
    cube = data.hypercube(8, encoding="01", dtype=torch.float64, device="cuda")
    with torch.no_grad():
        assert torch.equal(ap.parity_network(8, device="cuda")(cube)[:, 0], ap.bit_parity(cube).double())
    x = torch.linspace(0, 1, 1025, dtype=torch.float64, device="cuda")
    assert torch.equal(ap.curve(ap.sawtooth_network(6, device="cuda"), x), ap.sawtooth(x, 6))
