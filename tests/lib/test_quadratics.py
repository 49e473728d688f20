"""Tests of dlbook.quadratics: quadratics, least squares, the GD loop, minibatch SGD and its noise floor."""
import pytest
import torch

from dlbook import optim, quadratics


@pytest.fixture(scope="module")
def bowl():
    return quadratics.quadratic(quadratics.spread_eigenvalues(20, 50.0), seed=3)


@pytest.fixture(scope="module")
def start():
    return torch.randn(20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_quadratic_has_the_requested_spectrum(bowl):
    eigenvalues = torch.linalg.eigvalsh(bowl.A)
    assert torch.allclose(eigenvalues, torch.sort(bowl.eigenvalues).values, atol=1e-12)
    assert abs(quadratics.condition_number(bowl.A) - 50.0) < 1e-9
    assert torch.allclose(bowl.eigenvectors.T @ bowl.eigenvectors, torch.eye(20, dtype=torch.float64), atol=1e-12)
    diagonal = quadratics.quadratic([1.0, 4.0], seed=None)
    assert torch.equal(diagonal.A, torch.diag(torch.tensor([1.0, 4.0], dtype=torch.float64)))


def test_spread_eigenvalues_endpoints():
    values = quadratics.spread_eigenvalues(5, 100.0, smoothness=2.0)
    assert abs(values[0].item() - 0.02) < 1e-15 and abs(values[-1].item() - 2.0) < 1e-15


def test_gd_matches_the_closed_form_and_optim_sgd(bowl, start):
    lr = 1.2 / bowl.eigenvalues.max().item()
    run = quadratics.gradient_descent(bowl.A, start, lr, 40)
    coordinates = run.iterates @ bowl.eigenvectors
    predicted = (1 - lr * bowl.eigenvalues) ** torch.arange(41)[:, None] * coordinates[0]
    assert torch.allclose(coordinates, predicted, atol=1e-12)
    via_optimizer = quadratics.run_on_quadratic(bowl.A, start, lambda p: optim.SGD(p, lr=lr), 40)
    assert torch.allclose(run.iterates, via_optimizer.iterates, atol=1e-13)
    assert torch.allclose(run.losses, 0.5 * ((run.iterates @ bowl.A) * run.iterates).sum(1))


def test_threshold_two_over_L_is_exact(bowl, start):
    L = bowl.eigenvalues.max().item()
    below = quadratics.gradient_descent(bowl.A, start, 1.98 / L, 300)
    above = quadratics.gradient_descent(bowl.A, start, 2.02 / L, 300)
    assert below.losses[-1] < below.losses[0] and not below.diverged
    assert above.losses[-1] > 10 * above.losses[0]


def test_divergent_run_stops_cleanly_without_nan(bowl, start):
    L = bowl.eigenvalues.max().item()
    run = quadratics.gradient_descent(bowl.A, start, 3.0 / L, 10_000, blowup=1e6)
    assert run.diverged and len(run.losses) < 100
    assert torch.isfinite(run.losses).all() and run.losses.max() <= 1e6 * run.losses[0]
    assert len(run.iterates) == len(run.losses)
    exploding = quadratics.run_on_quadratic(bowl.A, start, lambda p: optim.SGD(p, lr=100.0), 10_000)
    assert exploding.diverged and torch.isfinite(exploding.losses).all()


def _excess(problem, lr, batch_size):
    """The exact stationary excess loss ½ tr(H S)."""
    return 0.5 * torch.trace(problem.hessian @ quadratics.sgd_stationary_covariance(problem, lr, batch_size)).item()


def test_sgd_noise_floor_matches_the_exact_prediction():
    problem = quadratics.least_squares_problem(500, (1.0,) * 5, noise=0.5, seed=1)
    for batch_size, lr in ((1, 0.03), (4, 0.03)):
        offsets = quadratics.sgd_offsets(problem, lr, batch_size, 900, num_chains=200, seed=2)
        trace = problem.excess_loss(problem.theta_star + offsets).mean(dim=1)
        measured = trace[300:].mean().item()
        assert abs(measured / _excess(problem, lr, batch_size) - 1) < 0.06, (batch_size, measured)
    assert trace[0].item() < 1e-20  # chains start at the minimiser by default


def test_sgd_spread_matches_the_exact_covariance_with_state_dependent_noise():
    problem = quadratics.least_squares_problem(512, (4.0, 1.0, 0.25), noise=1.0, seed=0)
    offsets = quadratics.sgd_offsets(problem, 0.2, 4, 1500, num_chains=200, seed=2)[-1000:].reshape(-1, 3)
    exact = quadratics.sgd_stationary_covariance(problem, 0.2, 4)
    assert torch.allclose((offsets.T @ offsets / len(offsets)).diagonal(), exact.diagonal(), rtol=0.06)


def test_stationary_excess_loss_scales_like_lr_over_batch_size():
    problem = quadratics.least_squares_problem(400, (1.0,) * 4, noise=1.0, seed=0)
    small = _excess(problem, 0.001, 16)
    residual = problem.X @ problem.theta_star - problem.y
    simple = 0.001 * ((problem.X**2).sum(1) * residual**2).mean().item() / (4 * 16)
    assert abs(small / simple - 1) < 1e-3
    assert abs(_excess(problem, 0.002, 16) / small - 2) < 0.01
    with pytest.raises(ValueError, match="unstable"):
        quadratics.sgd_stationary_covariance(problem, 1.5, 1)


def test_least_squares_minimiser_is_exact():
    problem = quadratics.least_squares_problem(100, (2.0, 1.0, 0.5), seed=4)
    gradient = problem.X.T @ (problem.X @ problem.theta_star - problem.y) / 100
    assert gradient.abs().max() < 1e-12
    assert torch.allclose(problem.hessian, problem.X.T @ problem.X / 100)
    assert problem.excess_loss(problem.theta_star).item() == 0.0
    direct = 0.5 * ((problem.X @ torch.ones(3, dtype=torch.float64) - problem.y) ** 2).mean() - problem.loss_min
    assert abs(problem.excess_loss(torch.ones(3, dtype=torch.float64)).item() - direct.item()) < 1e-12


def test_least_squares_gd_follows_the_eigen_shrinkage_and_b_term():
    problem = quadratics.least_squares_problem(60, (3.0, 1.0, 0.1), noise=0.3, seed=2)
    eigenvalues, Q = torch.linalg.eigh(problem.hessian)
    run = quadratics.least_squares_gd(problem, 0.3, 25)
    shrink = 1 - (1 - 0.3 * eigenvalues) ** 25
    assert torch.allclose(run.iterates[-1], Q @ (shrink * (Q.T @ problem.theta_star)), atol=1e-12)
    assert torch.allclose(run.losses, problem.excess_loss(run.iterates))
    assert not run.diverged


def test_bad_inputs_raise_clear_errors(bowl, start):
    with pytest.raises(ValueError, match="condition_number"):
        quadratics.spread_eigenvalues(5, 0.5)
    with pytest.raises(ValueError, match="eigenvalues"):
        quadratics.quadratic([1.0, -1.0])
    with pytest.raises(ValueError, match="symmetric"):
        quadratics.condition_number(torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="square"):
        quadratics.condition_number(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="positive definite"):
        quadratics.condition_number(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="theta0"):
        quadratics.gradient_descent(bowl.A, torch.zeros(3, dtype=torch.float64), 0.1, 10)
    with pytest.raises(ValueError, match="b must have 20"):
        quadratics.gradient_descent(bowl.A, start, 0.1, 10, b=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="lr"):
        quadratics.gradient_descent(bowl.A, start, -0.1, 10)
    with pytest.raises(TypeError, match="steps"):
        quadratics.gradient_descent(bowl.A, start, 0.1, 10.5)
    with pytest.raises(TypeError, match="make_optimizer"):
        quadratics.run_on_quadratic(bowl.A, start, None, 10)
    with pytest.raises(TypeError, match="problem"):
        quadratics.sgd_offsets(None, 0.1, 1, 10)
    problem = quadratics.least_squares_problem(50, (1.0, 1.0))
    with pytest.raises(ValueError, match="batch_size"):
        quadratics.sgd_offsets(problem, 0.1, 0, 10)
    with pytest.raises(ValueError, match="theta0"):
        quadratics.sgd_offsets(problem, 0.1, 1, 10, theta0=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="num_points"):
        quadratics.least_squares_problem(3, (1.0,) * 10)
    with pytest.raises(ValueError, match="curvatures"):
        quadratics.least_squares_problem(30, (1.0, -1.0))
    with pytest.raises(TypeError, match="X"):
        quadratics.least_squares(torch.ones(5, 2, dtype=torch.int64), torch.ones(5))
    with pytest.raises(ValueError, match="same number of rows"):
        quadratics.least_squares(torch.ones(5, 2), torch.ones(4))
    with pytest.raises(ValueError, match="theta must end"):
        quadratics.quadratic_loss(bowl.A, torch.zeros(7, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="theta"):
        quadratics.quadratic_loss(bowl.A, torch.zeros(20, dtype=torch.int64))
    with pytest.raises(ValueError, match="b must have shape"):
        quadratics.quadratic_loss(bowl.A, start, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="square"):
        quadratics.quadratic_loss(torch.ones(2, 3, dtype=torch.float64), start)
    with pytest.raises(ValueError, match="theta must end"):
        problem.excess_loss(torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="theta0"):
        quadratics.sgd_offsets(problem, 0.1, 1, 10, theta0=torch.zeros(2, dtype=torch.int64))


def _brute_force_average_excess(problem, lr, batch_size, num_steps=None, decay=None, lags=4000):
    """½ tr(H Cov) of an average of stationary iterates, summing E[δ_j δ_kᵀ] = A^|j-k| S lag by lag."""
    S = quadratics.sgd_stationary_covariance(problem, lr, batch_size)
    A = torch.eye(len(S), dtype=torch.float64) - lr * problem.hessian
    if num_steps is not None:  # weights 1/T on T consecutive iterates
        weights = torch.full((num_steps,), 1.0 / num_steps, dtype=torch.float64)
    else:  # (1 - decay) decay^k on the iterate k steps back
        weights = (1 - decay) * decay ** torch.arange(lags, dtype=torch.float64)
    total = torch.zeros_like(S)
    power = torch.eye(len(S), dtype=torch.float64)
    for lag in range(len(weights)):
        pair_weight = (weights[lag:] * weights[:len(weights) - lag]).sum()  # Σ_k w_k w_{k+lag}
        term = power @ S
        total += pair_weight * (term if lag == 0 else term + term.T)
        power = power @ A
    return 0.5 * torch.trace(problem.hessian @ total).item()


def test_averaged_excess_losses_match_a_lag_by_lag_sum():
    problem = quadratics.least_squares_problem(300, (2.0, 1.0, 0.5), noise=1.0, seed=3)
    floor = _excess(problem, 0.05, 2)
    assert abs(quadratics.polyak_average_excess_loss(problem, 0.05, 2, 1) - floor) < 1e-14
    assert abs(quadratics.ema_excess_loss(problem, 0.05, 2, 0.0) - floor) < 1e-14
    for T in (5, 60):
        exact = quadratics.polyak_average_excess_loss(problem, 0.05, 2, T)
        assert abs(exact / _brute_force_average_excess(problem, 0.05, 2, num_steps=T) - 1) < 1e-10
    exact = quadratics.ema_excess_loss(problem, 0.05, 2, 0.9)
    assert abs(exact / _brute_force_average_excess(problem, 0.05, 2, decay=0.9, lags=600) - 1) < 1e-10


def test_polyak_average_tends_to_the_statistical_rate_and_matches_simulation():
    problem = quadratics.least_squares_problem(400, (2.0, 1.0, 0.5), noise=1.0, seed=1)
    statistical = torch.trace(torch.linalg.solve(problem.hessian, problem.gradient_covariance)).item() / 2
    # T (excess) -> tr(H^-1 C) / (2B) as T grows, up to O(lr) corrections.
    assert abs(20_000 * quadratics.polyak_average_excess_loss(problem, 0.005, 1, 20_000) / statistical - 1) < 0.02
    offsets = quadratics.sgd_offsets(problem, 0.05, 1, 1400, num_chains=300, seed=0)[200:]
    averages = optim.polyak_ruppert_average(offsets)
    measured = problem.excess_loss(problem.theta_star + averages[-1]).mean().item()
    assert abs(measured / quadratics.polyak_average_excess_loss(problem, 0.05, 1, len(offsets)) - 1) < 0.15
    ema = problem.excess_loss(problem.theta_star + optim.exponential_moving_average(offsets, 0.95)).mean(1)
    assert abs(ema[200:].mean().item() / quadratics.ema_excess_loss(problem, 0.05, 1, 0.95) - 1) < 0.08
    with pytest.raises(ValueError, match="num_steps"):
        quadratics.polyak_average_excess_loss(problem, 0.05, 1, 0)
    with pytest.raises(ValueError, match="decay"):
        quadratics.ema_excess_loss(problem, 0.05, 1, 1.0)
