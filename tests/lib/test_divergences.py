"""Tests of dlbook.divergences: TV, KL, JS, W1 and MMD against closed forms, SciPy and PyTorch."""
import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.spatial.distance import jensenshannon

from dlbook import divergences


def _random_distribution(n, seed, zeros=0):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    p[:zeros] = 0.0
    return torch.tensor(p / p.sum())


def test_discrete_divergences_match_scipy_and_torch():
    for seed in range(5):
        p, q = _random_distribution(12, seed), _random_distribution(12, 100 + seed)
        kl_torch = torch.nn.functional.kl_div(q.log(), p, reduction="sum")
        assert divergences.kl_divergence(p, q).item() == pytest.approx(kl_torch.item(), rel=1e-12)
        assert divergences.kl_divergence(p, q).item() == pytest.approx(stats.entropy(p, q), rel=1e-12)
        assert divergences.js_divergence(p, q).item() == pytest.approx(jensenshannon(p, q) ** 2, rel=1e-10)
        assert divergences.total_variation(p, q).item() == pytest.approx(0.5 * (p - q).abs().sum().item())
        # JS is symmetric and bounded by log 2; TV by 1
        assert divergences.js_divergence(q, p).item() == pytest.approx(divergences.js_divergence(p, q).item())
        assert 0 < divergences.js_divergence(p, q).item() < math.log(2)


def test_zero_masses_and_disjoint_supports():
    p = torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64)
    q = torch.tensor([0.0, 0.0, 0.25, 0.75], dtype=torch.float64)
    assert divergences.total_variation(p, q).item() == pytest.approx(1.0)
    assert divergences.js_divergence(p, q).item() == pytest.approx(math.log(2), abs=1e-15)
    assert divergences.kl_divergence(p, q).item() == math.inf
    # mass of Q where P has none costs KL(P || Q) nothing
    r = torch.tensor([0.5, 0.25, 0.25, 0.0], dtype=torch.float64)
    assert math.isfinite(divergences.kl_divergence(p, r).item())
    assert divergences.kl_divergence(p, p).item() == 0.0 and divergences.js_divergence(p, p).item() == 0.0


def test_batched_distributions_give_one_value_each():
    P = torch.stack([_random_distribution(5, s) for s in range(3)])
    Q = torch.stack([_random_distribution(5, 10 + s) for s in range(3)])
    batched = divergences.js_divergence(P, Q)
    assert batched.shape == (3,)
    assert torch.allclose(batched, torch.stack([divergences.js_divergence(p, q) for p, q in zip(P, Q)]))


@pytest.mark.parametrize("theta", [0.0, 0.4, -1.3, 3.0])
def test_shifted_normal_divergences_against_quadrature(theta):
    result = divergences.shifted_normal_divergences(theta)
    p, q = stats.norm(0, 1), stats.norm(theta, 1)
    tv, _ = integrate.quad(lambda x: 0.5 * abs(p.pdf(x) - q.pdf(x)), -30, 30, points=[theta / 2], limit=200)
    kl, _ = integrate.quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), -30, 30, limit=200)
    assert result.tv == pytest.approx(tv, abs=1e-10)
    assert result.kl == pytest.approx(kl, abs=1e-10) and result.kl == pytest.approx(theta**2 / 2)
    assert result.w1 == abs(theta)
    # JS on a fine grid, as discrete distributions
    x = torch.linspace(-15 + min(theta, 0), 15 + max(theta, 0), 200_001, dtype=torch.float64)
    dx = (x[1] - x[0]).item()
    grid_p = torch.tensor(p.pdf(x.numpy())) * dx
    grid_q = torch.tensor(q.pdf(x.numpy())) * dx
    grid_js = divergences.js_divergence(grid_p / grid_p.sum(), grid_q / grid_q.sum()).item()
    assert result.js == pytest.approx(grid_js, abs=1e-9)


def test_parallel_lines():
    for theta in [0.3, -2.0, 1e-3]:
        result = divergences.parallel_lines(theta, num_points=200)
        assert result.tv == pytest.approx(1.0, abs=1e-12)
        assert result.kl == math.inf
        assert result.js == pytest.approx(math.log(2), abs=1e-10)
        assert result.w1 == pytest.approx(abs(theta), abs=1e-12)
    assert divergences.parallel_lines(0.0, num_points=50) == (0.0, 0.0, 0.0, 0.0)


def test_w1_sorted_assignment_and_scipy_agree():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, generator=gen, dtype=torch.float64)
    y = 0.5 * torch.randn(300, generator=gen, dtype=torch.float64) + 1.0
    sorted_value = divergences.w1_sorted(x, y).item()
    assert divergences.w1_assignment(x[:, None], y[:, None]) == pytest.approx(sorted_value, abs=1e-12)
    assert stats.wasserstein_distance(x.numpy(), y.numpy()) == pytest.approx(sorted_value, abs=1e-10)


def test_w1_assignment_equals_brute_force_in_2d():
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(6, 2, generator=gen, dtype=torch.float64)
    Y = torch.randn(6, 2, generator=gen, dtype=torch.float64) + 0.5
    cost = torch.cdist(X, Y)
    brute = min(sum(cost[i, p[i]].item() for i in range(6)) for p in itertools.permutations(range(6))) / 6
    assert divergences.w1_assignment(X, Y) == pytest.approx(brute, abs=1e-12)


def test_mmd_vectorised_equals_double_sum_and_is_unbiased():
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(25, 2, generator=gen, dtype=torch.float64)
    Y = torch.randn(31, 2, generator=gen, dtype=torch.float64) + torch.tensor([0.5, 0.0], dtype=torch.float64)
    assert divergences.mmd_squared(X, Y, 0.7).item() == pytest.approx(
        divergences.mmd_squared_reference(X, Y, 0.7), abs=1e-12)
    # equal distributions: the estimate averages to 0 (within a few standard errors), and can be negative
    values = torch.stack([divergences.mmd_squared(torch.randn(20, 2, generator=gen, dtype=torch.float64),
                                                  torch.randn(20, 2, generator=gen, dtype=torch.float64), 1.0)
                          for _ in range(400)])
    assert abs(values.mean().item()) < 3 * values.std().item() / 20
    assert (values < 0).any()
    kernel = divergences.gaussian_kernel(X, Y, 0.7)
    assert torch.allclose(kernel, torch.exp(-torch.cdist(X, Y) ** 2 / (2 * 0.7**2)), atol=1e-12)


def test_bad_inputs_name_the_argument():
    p = torch.tensor([0.5, 0.5], dtype=torch.float64)
    with pytest.raises(ValueError, match="q must sum to 1"):
        divergences.kl_divergence(p, torch.tensor([0.5, 0.6], dtype=torch.float64))
    with pytest.raises(ValueError, match="p must hold finite, non-negative"):
        divergences.js_divergence(torch.tensor([1.5, -0.5]), p)
    with pytest.raises(ValueError, match="p and q must have the same shape"):
        divergences.total_variation(p, torch.tensor([0.2, 0.3, 0.5]))
    with pytest.raises(TypeError, match="p must hold floating-point"):
        divergences.total_variation(torch.tensor([1, 0]), p)
    with pytest.raises(ValueError, match="X and Y must have the same shape"):
        divergences.w1_assignment(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        divergences.w1_sorted(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        divergences.mmd_squared(torch.zeros(3, 2), torch.zeros(3, 2), 0.0)
    with pytest.raises(ValueError, match="at least two samples"):
        divergences.mmd_squared(torch.zeros(1, 2), torch.zeros(3, 2), 1.0)
    with pytest.raises(TypeError, match="theta must be a real number"):
        divergences.parallel_lines("1")
    with pytest.raises(ValueError, match="num_points must be >= 1"):
        divergences.parallel_lines(1.0, num_points=0)
