"""Tests of dlbook.convergence: predicted and measured rates, Reddi's example."""
import math

import pytest
import torch

from dlbook import convergence, optim, quadratics


@pytest.fixture(scope="module")
def bowl():
    return quadratics.quadratic(quadratics.spread_eigenvalues(20, 50.0), seed=3)


@pytest.fixture(scope="module")
def start():
    return torch.randn(20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_measured_contraction_matches_theory_at_the_optimal_step():
    eigenvalues = torch.tensor([0.1, 0.3, 0.5, 1.0], dtype=torch.float64)
    problem = quadratics.quadratic(eigenvalues, seed=1)
    lr = convergence.optimal_step(0.1, 1.0)
    run = quadratics.gradient_descent(problem.A, torch.ones(4, dtype=torch.float64), lr, 300)
    measured = convergence.contraction_factor(run.iterates.norm(dim=1), start=100)
    assert abs(measured - convergence.optimal_rate(10.0)) < 1e-6
    assert abs(convergence.gd_rate(eigenvalues, lr) - 9 / 11) < 1e-15
    assert abs(convergence.gd_rate(eigenvalues, 1.0) - 0.9) < 1e-15


def test_contraction_factor_of_a_geometric_sequence():
    values = 3.0 * 0.7 ** torch.arange(20, dtype=torch.float64)
    assert abs(convergence.contraction_factor(values) - 0.7) < 1e-14
    assert abs(convergence.contraction_factor(values, start=5, end=9) - 0.7) < 1e-14


def test_momentum_beats_gd_by_about_sqrt_kappa(bowl, start):
    mu, L = bowl.eigenvalues.min().item(), bowl.eigenvalues.max().item()
    hb_lr, hb_beta = convergence.heavy_ball_parameters(mu, L)
    nag_lr, nag_beta = convergence.nesterov_parameters(mu, L)
    assert abs(hb_beta - ((math.sqrt(50) - 1) / (math.sqrt(50) + 1)) ** 2) < 1e-15 and nag_lr == 1 / L
    steps = {}
    for name, make in {"gd": lambda p: optim.SGD(p, lr=1 / L),
                       "hb": lambda p: optim.SGD(p, lr=hb_lr, momentum=hb_beta),
                       "nag": lambda p: optim.SGD(p, lr=nag_lr, momentum=nag_beta, nesterov=True)}.items():
        steps[name] = convergence.steps_to_reach(quadratics.run_on_quadratic(bowl.A, start, make, 800).losses, 1e-8)
    assert steps["hb"] * 3 < steps["gd"] and steps["nag"] * 3 < steps["gd"], steps


def test_steps_to_reach():
    losses = torch.tensor([1.0, 0.5, 0.1, 0.01], dtype=torch.float64)
    assert convergence.steps_to_reach(losses, 0.1) == 2
    assert convergence.steps_to_reach(losses, 1e-3) is None


def test_reddi_adam_goes_to_the_worst_point_amsgrad_to_the_best():
    adam = convergence.reddi_counterexample("adam", steps=3000)
    amsgrad = convergence.reddi_counterexample("amsgrad", steps=3000)
    assert adam.shape == (3001,) and adam[0] == 0.0
    assert adam[-1] > 0.9 and amsgrad[-1] < -0.9
    assert adam.abs().max() <= 1.0 and amsgrad.abs().max() <= 1.0  # projected onto [-1, 1]
    assert [convergence.reddi_gradient(t, 3.0) for t in (1, 2, 3, 4)] == [3.0, -1.0, -1.0, 3.0]


# --- bad inputs -----------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="L"):
        convergence.optimal_step(1.0, 0.5)
    with pytest.raises(ValueError, match="end"):
        convergence.contraction_factor(torch.ones(3), start=2)
    with pytest.raises(ValueError, match="method"):
        convergence.reddi_counterexample("sgd")
    with pytest.raises(ValueError, match="C"):
        convergence.reddi_counterexample("adam", C=1.5)
