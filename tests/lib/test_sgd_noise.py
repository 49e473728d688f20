"""Tests of dlbook.sgd_noise: Lyapunov solution, closed form, simulated chains, minibatch SGD."""
import math

import pytest
import torch

from dlbook import quadratics, sgd_noise

H2 = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
C2 = torch.tensor([[1.0, 0.5], [0.5, 2.0]], dtype=torch.float64)


def test_lyapunov_solution_satisfies_equation():
    lr = 0.1
    sigma = sgd_noise.stationary_covariance(H2, C2, lr)
    A = torch.eye(2, dtype=torch.float64) - lr * H2
    assert torch.allclose(sigma, A @ sigma @ A.T + lr ** 2 * C2, atol=1e-15)
    assert torch.allclose(sigma, sigma.T)


def test_diagonal_closed_form_matches_lyapunov_and_small_lr_limit():
    lam = torch.tensor([10.0, 1.0, 0.1], dtype=torch.float64)
    c = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    closed = sgd_noise.diagonal_stationary_variance(lam, c, 0.05)
    assert torch.allclose(closed, sgd_noise.stationary_covariance(torch.diag(lam), torch.diag(c), 0.05).diagonal())
    tiny = sgd_noise.diagonal_stationary_variance(lam, c, 1e-6)
    assert torch.allclose(tiny, 1e-6 * c / (2 * lam), rtol=1e-5)


def test_simulated_chains_match_lyapunov_nondiagonal():
    stats = sgd_noise.simulate_quadratic_sgd(H2, C2, 0.1, steps=1500, num_chains=1000, window=1000, seed=1)
    predicted = sgd_noise.stationary_covariance(H2, C2, 0.1)
    assert torch.allclose(stats.covariance.diagonal(), predicted.diagonal(), rtol=0.05)
    assert abs(stats.covariance[0, 1] - predicted[0, 1]) < 0.1 * predicted.diagonal().min()


def test_simulated_chains_forget_start():
    stats = sgd_noise.simulate_quadratic_sgd(torch.eye(2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64),
                                             0.5, steps=60, num_chains=2, window=1, start=[1.0, -2.0])
    assert torch.allclose(stats.final, torch.tensor([[0.5 ** 60, -2 * 0.5 ** 60]] * 2, dtype=torch.float64))


def test_autocorrelation_time():
    assert sgd_noise.autocorrelation_time(0.01, 0.05) == pytest.approx(-1 / math.log(1 - 5e-4))
    assert sgd_noise.autocorrelation_time(0.01, 0.05) == pytest.approx(2000, rel=1e-3)


def test_minibatch_noise_covariance_is_the_per_sample_covariance_over_b():
    problem = quadratics.least_squares_problem(256, (2.0, 0.5), seed=3)
    assert torch.allclose(sgd_noise.minibatch_noise_covariance(problem, 4), problem.gradient_covariance / 4)


def test_minibatch_sgd_matches_exact_prediction():
    problem = quadratics.least_squares_problem(512, (4.0, 1.0, 0.25), noise=1.0, seed=0)
    spread = sgd_noise.minibatch_sgd_spread(problem, 0.2, 4, steps=1500, num_chains=200, window=1000, seed=2).covariance
    exact = quadratics.sgd_stationary_covariance(problem, 0.2, 4)
    additive = sgd_noise.stationary_covariance(problem.hessian, sgd_noise.minibatch_noise_covariance(problem, 4), 0.2)
    assert torch.allclose(spread.diagonal(), exact.diagonal(), rtol=0.06)
    assert torch.all(exact.diagonal() > 1.15 * additive.diagonal())


def test_noise_model():
    lam = torch.tensor([4.0, 1.0])
    assert sgd_noise.noise_model(lam, "isotropic", 2.0).tolist() == [2.0, 2.0]
    assert sgd_noise.noise_model(lam, "curvature", 2.0).tolist() == [2.0, 0.5]
    assert sgd_noise.noise_model(lam, "shifted", 2.0).tolist() == [2.0, 0.125]
    # c ∝ λ(2 - ηλ) makes every stationary variance the same, at any step size.
    curvatures = torch.tensor([10.0, 1.0, 0.1, 0.05], dtype=torch.float64)
    for lr in (0.01, 0.05, 0.15):
        round_noise = sgd_noise.noise_model(curvatures, "round", lr=lr)
        variances = sgd_noise.diagonal_stationary_variance(curvatures, round_noise, lr)
        assert torch.allclose(variances, variances[0].expand(4), rtol=1e-12)
    curvature_noise = sgd_noise.noise_model(curvatures, "curvature")
    variances = sgd_noise.diagonal_stationary_variance(curvatures, curvature_noise, 0.05)
    assert variances.max() / variances.min() == pytest.approx((2 - 0.05 * 0.05) / (2 - 0.05 * 10))


def test_drifting_minimum_lags_by_drift_over_lr_curvature():
    lam, c, lr, v = 2.0, 1.0, 0.05, 0.01
    stats = sgd_noise.simulate_quadratic_sgd(torch.tensor([[lam]]).double(), torch.tensor([[c]]).double(), lr,
                                             steps=600, num_chains=2000, window=300, drift=[v], seed=3)
    assert stats.mean.item() == pytest.approx(-v / (lr * lam), rel=0.03)
    assert stats.covariance.item() == pytest.approx(lr * c / (lam * (2 - lr * lam)), rel=0.06)


def test_cauchy_noise_gives_a_cauchy_cloud_whose_width_ignores_the_step():
    """δ = -lr Σ_j (1 - lr λ)^j ξ_j is Cauchy with scale lr γ / (lr λ) = γ / λ: no lr in it."""
    lam, gamma = 2.0, 0.5
    for lr in (0.02, 0.2):
        final = sgd_noise.simulate_quadratic_sgd(torch.tensor([[lam]]).double(), torch.tensor([[gamma ** 2]]).double(),
                                                 lr, steps=int(12 / (lr * lam)), num_chains=20000, window=1,
                                                 noise="cauchy", seed=4).final[:, 0]
        quartiles = torch.quantile(final, torch.tensor([0.25, 0.75], dtype=torch.float64))
        assert (quartiles[1] - quartiles[0]).item() == pytest.approx(2 * gamma / lam, rel=0.05)


def test_quantile_sgd_hovers_around_the_quantile():
    stats = sgd_noise.quantile_sgd(0.9, 0.05, steps=3000, num_chains=500, window=2000, seed=1)
    assert stats.mean.item() == pytest.approx(1.2816, abs=0.01)
    density = math.exp(-1.2816 ** 2 / 2) / math.sqrt(2 * math.pi)
    assert stats.covariance.item() == pytest.approx(0.05 * 0.09 / (density * (2 - 0.05 * density)), rel=0.1)


def test_least_squares_refits_scatter_like_the_gaussian_design_formula():
    refits = sgd_noise.least_squares_refits(40, (2.0, 0.5), noise=1.5, num_datasets=4000, seed=2)
    assert refits.estimates.shape == (4000, 2)
    scatter = ((refits.estimates - refits.theta_true) ** 2).sum(dim=1).mean().item()
    assert scatter == pytest.approx(1.5 ** 2 * (1 / 2.0 + 1 / 0.5) / (40 - 2 - 1), rel=0.06)
    # Each estimate is the exact minimiser of its own sample's loss: refitting one sample agrees.
    again = sgd_noise.least_squares_refits(40, (2.0, 0.5), noise=1.5, num_datasets=4000, seed=2)
    assert torch.equal(again.estimates, refits.estimates)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_same_numbers_on_a_gpu():
    sigma = sgd_noise.stationary_covariance(H2.cuda(), C2.cuda(), 0.1)
    assert sigma.device.type == "cuda" and torch.allclose(sigma.cpu(), sgd_noise.stationary_covariance(H2, C2, 0.1))
    on_gpu = sgd_noise.simulate_quadratic_sgd(H2.cuda(), C2.cuda(), 0.1, steps=50, num_chains=10, window=10, seed=3,
                                              device="cuda")
    on_cpu = sgd_noise.simulate_quadratic_sgd(H2, C2, 0.1, steps=50, num_chains=10, window=10, seed=3)
    assert torch.allclose(on_gpu.final.cpu(), on_cpu.final, atol=1e-12)
    assert torch.allclose(sgd_noise.quantile_sgd(0.9, 0.05, steps=20, window=5, device="cuda").mean.cpu(),
                          sgd_noise.quantile_sgd(0.9, 0.05, steps=20, window=5).mean)


def test_bad_inputs():
    with pytest.raises(ValueError, match="lr"):
        sgd_noise.stationary_covariance(H2, C2, 1.0)
    with pytest.raises(ValueError, match="lr"):
        sgd_noise.stationary_covariance(H2, C2, -0.1)
    with pytest.raises(ValueError, match="H"):
        sgd_noise.stationary_covariance(torch.tensor([[1.0, 2.0], [0.0, 1.0]]), C2, 0.1)
    with pytest.raises(ValueError, match="C"):
        sgd_noise.stationary_covariance(H2, torch.eye(3), 0.1)
    with pytest.raises(ValueError, match="noise_variances"):
        sgd_noise.diagonal_stationary_variance([1.0, 2.0], [1.0], 0.1)
    with pytest.raises(TypeError, match="lr"):
        sgd_noise.diagonal_stationary_variance([1.0], [1.0], "0.1")
    with pytest.raises(ValueError, match="window"):
        sgd_noise.simulate_quadratic_sgd(H2, C2, 0.1, steps=10, window=20)
    with pytest.raises(TypeError, match="problem"):
        sgd_noise.minibatch_sgd_spread(None, 0.1, 4)
    with pytest.raises(ValueError, match="batch_size"):
        sgd_noise.minibatch_noise_covariance(quadratics.least_squares_problem(16, (1.0,)), 0)
    with pytest.raises(ValueError, match="kind"):
        sgd_noise.noise_model([1.0], "white")
    with pytest.raises(ValueError, match="lr"):
        sgd_noise.noise_model([1.0], "round")
    with pytest.raises(TypeError, match="curvatures"):
        sgd_noise.noise_model(torch.tensor([1, 2]), "curvature")
    with pytest.raises(ValueError, match="drift"):
        sgd_noise.simulate_quadratic_sgd(H2, C2, 0.1, steps=10, window=5, drift=[1.0])
    with pytest.raises(ValueError, match="noise"):
        sgd_noise.simulate_quadratic_sgd(H2, C2, 0.1, steps=10, window=5, noise="student")
    with pytest.raises(ValueError, match="H and C"):
        sgd_noise.simulate_quadratic_sgd(H2, torch.eye(3, dtype=torch.float64), 0.1, steps=10, window=5)
    with pytest.raises(ValueError, match="level"):
        sgd_noise.quantile_sgd(1.0, 0.1, steps=10, window=5)
    with pytest.raises(ValueError, match="num_points"):
        sgd_noise.least_squares_refits(3, (1.0, 1.0))
    with pytest.raises(ValueError, match="curvatures"):
        sgd_noise.least_squares_refits(10, (1.0, -1.0))
