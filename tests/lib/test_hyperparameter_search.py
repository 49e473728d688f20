"""Tests of dlbook.hyperparameter_search: grid and random points, successive halving on tables with known
answers, expected improvement against numerical integration, and a short Bayesian optimisation."""
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from dlbook import hyperparameter_search as search


def test_objective_maximum_and_importance():
    f = search.low_effective_dimension_objective
    assert f(0.37, 0.61, 0.02) == pytest.approx(1.02, abs=1e-15)
    x2 = np.linspace(0, 1, 101)
    assert np.ptp(f(0.37, x2, 0.02)) <= 0.02 + 1e-15
    assert np.ptp(f(np.linspace(0, 1, 101), 0.61, 0.02)) > 0.99


def test_grid_and_random_points():
    grid = search.grid_points(10)  # k = 3
    assert grid.shape == (9, 2)
    assert len(np.unique(grid[:, 0])) == 3 and len(np.unique(grid[:, 1])) == 3
    assert np.allclose(np.unique(grid[:, 0]), [1 / 6, 1 / 2, 5 / 6], atol=1e-15)
    points = search.random_points(50, seed=1, low=-1.0, high=2.0)
    assert points.shape == (50, 2) and len(np.unique(points[:, 0])) == 50
    assert points.min() >= -1.0 and points.max() <= 2.0
    assert np.array_equal(points, search.random_points(50, seed=1, low=-1.0, high=2.0))


def test_random_beats_grid_on_average_when_one_hyperparameter_barely_matters():
    """Averaged over many seeds of a shifted objective; the grid sees only k distinct important values."""
    budget, wins = 16, []
    for seed in range(100):
        shift = np.random.default_rng(seed).uniform(-0.3, 0.3)
        f = lambda p: search.low_effective_dimension_objective(p[:, 0] + shift, p[:, 1])  # noqa: E731
        wins.append(f(search.random_points(budget, seed=seed)).max() - f(search.grid_points(budget)).max())
    assert np.mean(wins) > 0.1


def test_best_so_far():
    assert np.array_equal(search.best_so_far([0.1, 0.5, 0.2, 0.7]), [0.1, 0.5, 0.5, 0.7])


def test_successive_halving_schedule_and_cost():
    table = np.random.default_rng(0).random(9)
    calls = []

    def score(config, resource):
        calls.append((config, resource))
        return table[config]

    result = search.successive_halving(score, 9, min_resource=1, eta=3)
    assert [(r.resource, len(r.survivors)) for r in result.rounds] == [(1, 9), (3, 3), (9, 1)]
    assert result.cost == 27 == sum(resource for _, resource in calls)
    assert result.best == int(np.argmax(table))
    assert result.rounds[1].survivors == sorted(np.argsort(-table)[:3].tolist())


def test_successive_halving_can_drop_a_late_bloomer():
    """A configuration that is worst early but best at the full resource is lost: the method's known risk."""
    def score(config, resource):
        return (1.0 if resource >= 9 else 0.0) if config == 0 else 0.5 + 0.01 * config

    result = search.successive_halving(score, 9, eta=3)
    exhaustive = max(range(9), key=lambda c: score(c, 9))
    assert exhaustive == 0 and result.best != 0
    capped = search.successive_halving(lambda c, r: -abs(c - 7) + 0 * r, 16, eta=2, max_resource=4)
    assert capped.best == 7 and max(r.resource for r in capped.rounds) == 4


@pytest.mark.parametrize("mean, std, best", [(0.3, 0.2, 0.5), (1.0, 0.5, 0.2), (-2.0, 1.5, 0.0)])
def test_expected_improvement_equals_numerical_integration(mean, std, best):
    got = search.expected_improvement(np.array([mean]), np.array([std]), best)[0]
    integral, _ = integrate.quad(lambda f: (f - best) * stats.norm.pdf(f, mean, std), best, np.inf,
                                 epsabs=1e-13, epsrel=1e-13)
    assert abs(got - integral) < 1e-10
    assert search.expected_improvement(np.array([mean]), np.array([0.0]), best)[0] == max(mean - best, 0.0)


def test_bayesian_optimization_finds_the_peak_of_a_smooth_function():
    def objective(point):
        return -float(((point - np.array([0.3, -0.2])) ** 2).sum())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = search.bayesian_optimization(objective, [[-1.0, 1.0], [-1.0, 1.0]], 12, num_initial=4, seed=0)
    assert trace.points.shape == (12, 2) and trace.scores.shape == (12,)
    assert trace.scores.max() > -1e-3
    # The first num_initial points are the seeded uniform draws.
    rng = np.random.default_rng(0)
    assert np.allclose(trace.points[:4], -1 + 2 * rng.random((4, 2)), atol=0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="budget"):
        search.grid_points(0)
    with pytest.raises(ValueError, match="low"):
        search.random_points(5, low=1.0, high=0.0)
    with pytest.raises(ValueError, match="importance_ratio"):
        search.low_effective_dimension_objective(0.1, 0.1, -1.0)
    with pytest.raises(TypeError, match="score"):
        search.successive_halving(None, 9)
    with pytest.raises(ValueError, match="eta"):
        search.successive_halving(lambda c, r: 0.0, 9, eta=1)
    with pytest.raises(ValueError, match="max_resource"):
        search.successive_halving(lambda c, r: 0.0, 9, min_resource=3, max_resource=2)
    with pytest.raises(ValueError, match="std"):
        search.expected_improvement(np.zeros(2), -np.ones(2), 0.0)
    with pytest.raises(ValueError, match="same shape"):
        search.expected_improvement(np.zeros(2), np.ones(3), 0.0)
    with pytest.raises(ValueError, match="bounds"):
        search.bayesian_optimization(lambda p: 0.0, [[1.0, 0.0]], 5)
    with pytest.raises(ValueError, match="num_initial"):
        search.bayesian_optimization(lambda p: 0.0, [[0.0, 1.0]], 3, num_initial=5)
    with pytest.raises(ValueError, match="scores"):
        search.best_so_far([])
