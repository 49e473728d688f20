"""Tests of dlbook.convergence: quadratics, measured rates, Reddi's example, the SGD noise floor."""
import math

import pytest
import torch

from dlbook import convergence, optim


@pytest.fixture(scope="module")
def bowl():
    return convergence.quadratic(convergence.spread_eigenvalues(20, 50.0), seed=3)


@pytest.fixture(scope="module")
def start():
    return torch.randn(20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_quadratic_has_the_requested_spectrum(bowl):
    eigenvalues = torch.linalg.eigvalsh(bowl.A)
    assert torch.allclose(eigenvalues, torch.sort(bowl.eigenvalues).values, atol=1e-12)
    assert abs(convergence.condition_number(bowl.A) - 50.0) < 1e-9
    assert torch.allclose(bowl.eigenvectors.T @ bowl.eigenvectors, torch.eye(20, dtype=torch.float64), atol=1e-12)
    diagonal = convergence.quadratic([1.0, 4.0], seed=None)
    assert torch.equal(diagonal.A, torch.diag(torch.tensor([1.0, 4.0], dtype=torch.float64)))


def test_spread_eigenvalues_endpoints():
    values = convergence.spread_eigenvalues(5, 100.0, smoothness=2.0)
    assert abs(values[0].item() - 0.02) < 1e-15 and abs(values[-1].item() - 2.0) < 1e-15


def test_gd_matches_the_closed_form_and_optim_sgd(bowl, start):
    lr = 1.2 / bowl.eigenvalues.max().item()
    run = convergence.gradient_descent(bowl.A, start, lr, 40)
    coordinates = run.iterates @ bowl.eigenvectors
    predicted = (1 - lr * bowl.eigenvalues) ** torch.arange(41)[:, None] * coordinates[0]
    assert torch.allclose(coordinates, predicted, atol=1e-12)
    via_optimizer = convergence.run_on_quadratic(bowl.A, start, lambda p: optim.SGD(p, lr=lr), 40)
    assert torch.allclose(run.iterates, via_optimizer.iterates, atol=1e-13)
    assert torch.allclose(run.losses, 0.5 * ((run.iterates @ bowl.A) * run.iterates).sum(1))


def test_threshold_two_over_L_is_exact(bowl, start):
    L = bowl.eigenvalues.max().item()
    below = convergence.gradient_descent(bowl.A, start, 1.98 / L, 300)
    above = convergence.gradient_descent(bowl.A, start, 2.02 / L, 300)
    assert below.losses[-1] < below.losses[0] and not below.diverged
    assert above.losses[-1] > 10 * above.losses[0]


def test_divergent_run_stops_cleanly_without_nan(bowl, start):
    L = bowl.eigenvalues.max().item()
    run = convergence.gradient_descent(bowl.A, start, 3.0 / L, 10_000, blowup=1e6)
    assert run.diverged and len(run.losses) < 100
    assert torch.isfinite(run.losses).all() and run.losses.max() <= 1e6 * run.losses[0]
    assert len(run.iterates) == len(run.losses)
    exploding = convergence.run_on_quadratic(bowl.A, start, lambda p: optim.SGD(p, lr=100.0), 10_000)
    assert exploding.diverged and torch.isfinite(exploding.losses).all()


def test_measured_contraction_matches_theory_at_the_optimal_step():
    eigenvalues = torch.tensor([0.1, 0.3, 0.5, 1.0], dtype=torch.float64)
    problem = convergence.quadratic(eigenvalues, seed=1)
    lr = convergence.optimal_step(0.1, 1.0)
    run = convergence.gradient_descent(problem.A, torch.ones(4, dtype=torch.float64), lr, 300)
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
        steps[name] = convergence.steps_to_reach(convergence.run_on_quadratic(bowl.A, start, make, 800).losses, 1e-8)
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


def test_sgd_noise_floor_matches_the_exact_prediction():
    problem = convergence.least_squares_problem(500, 5, noise=0.5, seed=1)
    for batch_size, lr in ((1, 0.03), (4, 0.03)):
        trace = convergence.sgd_least_squares(problem, batch_size, lr, 900, num_chains=200, seed=2)
        measured = trace[300:].mean().item()
        predicted = convergence.stationary_excess_loss(problem, batch_size, lr)
        assert abs(measured / predicted - 1) < 0.06, (batch_size, measured, predicted)
    assert trace[0].item() < 1e-20  # chains start at the minimiser by default


def test_stationary_excess_loss_scales_like_lr_over_batch_size():
    problem = convergence.least_squares_problem(400, 4, noise=1.0, seed=0)
    small = convergence.stationary_excess_loss(problem, 16, 0.001)
    residual = problem.X @ problem.theta_hat - problem.y
    simple = 0.001 * ((problem.X**2).sum(1) * residual**2).mean().item() / (4 * 16)
    assert abs(small / simple - 1) < 1e-3
    assert abs(convergence.stationary_excess_loss(problem, 16, 0.002) / small - 2) < 0.01
    with pytest.raises(ValueError, match="unstable"):
        convergence.stationary_excess_loss(problem, 1, 1.5)


def test_least_squares_minimiser_is_exact():
    problem = convergence.least_squares_problem(100, 3, seed=4)
    gradient = problem.X.T @ (problem.X @ problem.theta_hat - problem.y) / 100
    assert gradient.abs().max() < 1e-12


# --- bad inputs -----------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors(bowl, start):
    with pytest.raises(ValueError, match="condition_number"):
        convergence.spread_eigenvalues(5, 0.5)
    with pytest.raises(ValueError, match="eigenvalues"):
        convergence.quadratic([1.0, -1.0])
    with pytest.raises(ValueError, match="symmetric"):
        convergence.condition_number(torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="positive definite"):
        convergence.condition_number(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="theta0"):
        convergence.gradient_descent(bowl.A, torch.zeros(3, dtype=torch.float64), 0.1, 10)
    with pytest.raises(ValueError, match="lr"):
        convergence.gradient_descent(bowl.A, start, -0.1, 10)
    with pytest.raises(TypeError, match="steps"):
        convergence.gradient_descent(bowl.A, start, 0.1, 10.5)
    with pytest.raises(TypeError, match="make_optimizer"):
        convergence.run_on_quadratic(bowl.A, start, None, 10)
    with pytest.raises(ValueError, match="L"):
        convergence.optimal_step(1.0, 0.5)
    with pytest.raises(ValueError, match="end"):
        convergence.contraction_factor(torch.ones(3), start=2)
    with pytest.raises(ValueError, match="method"):
        convergence.reddi_counterexample("sgd")
    with pytest.raises(ValueError, match="C"):
        convergence.reddi_counterexample("adam", C=1.5)
    with pytest.raises(TypeError, match="problem"):
        convergence.sgd_least_squares(None, 1, 0.1, 10)
    problem = convergence.least_squares_problem(50, 2)
    with pytest.raises(ValueError, match="batch_size"):
        convergence.sgd_least_squares(problem, 0, 0.1, 10)
    with pytest.raises(ValueError, match="theta0"):
        convergence.sgd_least_squares(problem, 1, 0.1, 10, theta0=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="num_points"):
        convergence.least_squares_problem(3, 10)
