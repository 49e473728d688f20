"""Hyperparameter search: grid vs random search, successive halving, Bayesian optimisation (Chapter 15).

Random search beats a grid of the same budget when some hyperparameters barely matter
(Bergstra and Bengio): a grid of k x k points tries only k values of each one, random
search k² values. Successive halving spends a small resource (epochs) on many
configurations and repeatedly keeps the best 1/η at η times the resource. Bayesian
optimisation fits a Gaussian process to the values seen so far and evaluates next where
the expected improvement is largest. Every search here maximises a score.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, NamedTuple

import numpy as np
from scipy import stats

from .validation import as_tensor, check_float, check_int, check_interval, describe


def low_effective_dimension_objective(important, unimportant, importance_ratio: float = 0.02):
    """A score on [0, 1]² peaked in ``important`` and nearly flat in ``unimportant`` (Chapter 15).

    f = exp(-((x₁ - 0.37) / 0.08)²) + ratio · exp(-((x₂ - 0.61) / 0.3)²): the second
    hyperparameter changes the score by at most ``importance_ratio``. The maximum is
    1 + ratio at (0.37, 0.61). Works elementwise on floats and NumPy arrays.
    """
    ratio = check_float("importance_ratio", importance_ratio, low=0.0)
    x1, x2 = np.asarray(important, dtype=np.float64), np.asarray(unimportant, dtype=np.float64)
    return np.exp(-(((x1 - 0.37) / 0.08) ** 2)) + ratio * np.exp(-(((x2 - 0.61) / 0.3) ** 2))


def grid_points(budget: int, *, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """The k x k grid (k = floor(sqrt(budget))) of cell centres in [low, high]², via ParameterGrid (Chapter 15).

    Shape (k², 2): a grid spends its budget on only k distinct values per coordinate.
    """
    from sklearn.model_selection import ParameterGrid

    budget = check_int("budget", budget, minimum=1)
    low, high = check_interval(low, high)
    k = math.isqrt(budget)
    values = low + (np.arange(k) + 0.5) / k * (high - low)
    grid = ParameterGrid({"x1": values, "x2": values})
    return np.array([[point["x1"], point["x2"]] for point in grid])


def random_points(budget: int, *, seed: int = 0, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``budget`` points drawn uniformly from [low, high]², via ParameterSampler (Chapter 15). Shape (budget, 2)."""
    from sklearn.model_selection import ParameterSampler

    budget = check_int("budget", budget, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    low, high = check_interval(low, high)
    space = {"x1": stats.uniform(low, high - low), "x2": stats.uniform(low, high - low)}
    return np.array([[p["x1"], p["x2"]] for p in ParameterSampler(space, budget, random_state=seed)])


def best_so_far(scores) -> np.ndarray:
    """The running maximum of a sequence of scores (the search's best after each evaluation) (Chapter 15)."""
    scores = np.asarray(as_tensor("scores", scores, ndim=1, floating=True).double().cpu())
    if len(scores) == 0:
        raise ValueError("scores must not be empty")
    return np.maximum.accumulate(scores)


# ---------------------------------------------------------------------------
# Successive halving
# ---------------------------------------------------------------------------

class HalvingRound(NamedTuple):
    resource: int               # the resource (e.g. epochs) each survivor got in this round
    survivors: list[int]        # the configurations evaluated in this round
    scores: list[float]         # their scores, in the same order


class HalvingResult(NamedTuple):
    best: int                   # the configuration left at the end
    rounds: list[HalvingRound]
    cost: int                   # Σ over rounds of survivors × resource


def successive_halving(score: Callable[[int, int], float], num_configs: int, *, min_resource: int = 1,
                       eta: int = 3, max_resource: int | None = None) -> HalvingResult:
    """Successive halving over configurations 0..num_configs-1: evaluate all at min_resource, keep the best
    ⌈n/η⌉ at η times the resource, until one is left (Chapter 15).

    ``score(config, resource)`` returns a score to maximise (e.g. validation accuracy
    after ``resource`` epochs, looked up in a precomputed table). The resource is capped
    at ``max_resource``; ties keep the lower index.
    """
    if not callable(score):
        raise TypeError(f"score must be a callable score(config, resource), got {describe(score)}")
    num_configs = check_int("num_configs", num_configs, minimum=1)
    min_resource = check_int("min_resource", min_resource, minimum=1)
    eta = check_int("eta", eta, minimum=2)
    if max_resource is not None:
        max_resource = check_int("max_resource", max_resource, minimum=min_resource)
    survivors, resource, rounds = list(range(num_configs)), min_resource, []
    while True:
        scores = [float(score(config, resource)) for config in survivors]
        rounds.append(HalvingRound(resource, survivors, scores))
        if len(survivors) == 1:
            break
        order = sorted(range(len(survivors)), key=lambda i: (-scores[i], survivors[i]))
        survivors = sorted(survivors[i] for i in order[:math.ceil(len(survivors) / eta)])
        resource *= eta
        if max_resource is not None:
            resource = min(resource, max_resource)
    return HalvingResult(survivors[0], rounds, sum(r.resource * len(r.survivors) for r in rounds))


# ---------------------------------------------------------------------------
# Bayesian optimisation with a Gaussian process and expected improvement
# ---------------------------------------------------------------------------

def expected_improvement(mean, std, best: float, xi: float = 0.0) -> np.ndarray:
    """E[max(f - best - ξ, 0)] for f ~ N(mean, std²): (μ - best - ξ)Φ(z) + σφ(z), z = (μ - best - ξ)/σ
    (Chapter 15)."""
    mean = np.asarray(as_tensor("mean", mean, floating=True).double().cpu())
    std = np.asarray(as_tensor("std", std, floating=True).double().cpu())
    if mean.shape != std.shape:
        raise ValueError(f"mean and std must have the same shape, got {mean.shape} and {std.shape}")
    if (std < 0).any():
        raise ValueError("std must be nonnegative")
    best, xi = check_float("best", best), check_float("xi", xi, low=0.0)
    gain = mean - best - xi
    safe = np.where(std > 0, std, 1.0)
    z = gain / safe
    return np.where(std > 0, gain * stats.norm.cdf(z) + std * stats.norm.pdf(z), np.maximum(gain, 0.0))


class SearchTrace(NamedTuple):
    points: np.ndarray   # (budget, dim), in the order evaluated
    scores: np.ndarray   # (budget,)


def bayesian_optimization(objective: Callable[[np.ndarray], float], bounds, budget: int, *,
                          num_initial: int = 5, num_candidates: int = 2000, seed: int = 0) -> SearchTrace:
    """Maximise ``objective`` over a box: ``num_initial`` uniform points, then each next point maximises the
    expected improvement of a Gaussian-process fit (Matérn 5/2 kernel) over random candidates (Chapter 15).

    ``bounds`` has shape (dim, 2). The candidates and the initial points come from ``seed``.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    if not callable(objective):
        raise TypeError(f"objective must be a callable of one point, got {describe(objective)}")
    bounds = np.asarray(as_tensor("bounds", bounds, shape=(None, 2)).double().cpu())
    if not (bounds[:, 0] < bounds[:, 1]).all():
        raise ValueError("bounds must have low < high in every row")
    budget = check_int("budget", budget, minimum=1)
    num_initial = check_int("num_initial", num_initial, minimum=1, maximum=budget)
    num_candidates = check_int("num_candidates", num_candidates, minimum=1)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    low, width = bounds[:, 0], bounds[:, 1] - bounds[:, 0]

    points = list(low + width * rng.random((num_initial, len(bounds))))
    scores = [float(objective(p)) for p in points]
    noise = WhiteKernel(1e-6, noise_level_bounds=(1e-10, 1e-1))
    kernel = ConstantKernel(1.0) * Matern(length_scale=0.2 * width, nu=2.5) + noise
    while len(points) < budget:
        with warnings.catch_warnings():  # a noise level at its lower bound is expected for a noiseless objective
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(np.array(points), scores)
        candidates = low + width * rng.random((num_candidates, len(bounds)))
        mean, std = gp.predict(candidates, return_std=True)
        chosen = candidates[np.argmax(expected_improvement(mean, std, max(scores)))]
        points.append(chosen)
        scores.append(float(objective(chosen)))
    return SearchTrace(np.array(points), np.array(scores))
