"""Cover's function-counting theorem: how many labelings a hyperplane can realise (Chapter 1).

C(s, n) counts the labelings of s points in general position in R^n that a
homogeneous hyperplane (through the origin) separates. An affine classifier in
R^d is a homogeneous one in R^(d+1), so use dim = d + 1 for it. Counts are exact
Python integers and fractions; sampled points are float64, and separability is
decided exactly by perceptron.is_linearly_separable (a linear program).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import torch

from .perceptron import is_linearly_separable
from .runtime import generator
from .validation import as_tensor, check_finite, check_float, check_int

#: Largest number of points count_separable_dichotomies enumerates (2**13 LPs, ~10 s).
MAX_BRUTE_FORCE_POINTS = 14


def cover_count(num_points: int, dim: int) -> int:
    """C(s, n) = 2 sum_{i<n} binom(s-1, i), exactly; equals 2^s when s <= n (Chapter 1)."""
    num_points = check_int("num_points", num_points, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    return 2 * sum(math.comb(num_points - 1, i) for i in range(dim))


@functools.lru_cache(maxsize=None)
def _cover_recursion(num_points: int, dim: int) -> int:
    if num_points == 1 or dim == 1:
        return 2
    # Adding a point either keeps a labeling's side free (C(s, n)) or, when the
    # hyperplane can pass through it, doubles it (C(s, n-1)).
    return _cover_recursion(num_points - 1, dim) + _cover_recursion(num_points - 1, dim - 1)


def cover_count_recursive(num_points: int, dim: int) -> int:
    """C(s, n) from Cover's recursion C(s+1, n) = C(s, n) + C(s, n-1), C(1, n) = C(s, 1) = 2 (Chapter 1)."""
    num_points = check_int("num_points", num_points, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    # Fill the memo table bottom-up first, so each call below recurses one
    # level only: no recursion-limit trouble for s in the hundreds or more.
    for smaller in range(1, num_points):
        for d in range(max(1, dim - (num_points - smaller)), dim + 1):
            _cover_recursion(smaller, d)
    return _cover_recursion(num_points, dim)


def separable_fraction(num_points: int, dim: int) -> float:
    """Fraction C(s, n) / 2^s of all labelings that are separable, computed exactly (Chapter 1).

    It is exactly 1/2 at s = 2n; past that the fraction (not the count) falls to 0.
    """
    return float(Fraction(cover_count(num_points, dim), 2**int(num_points)))


def separable_fraction_curve(num_points_seq, dim: int) -> np.ndarray:
    """separable_fraction for each entry of a list, array or tensor of point counts (Chapter 1)."""
    if isinstance(num_points_seq, (int, np.integer)) and not isinstance(num_points_seq, bool):
        num_points_seq = [num_points_seq]
    counts = as_tensor("num_points_seq", num_points_seq).reshape(-1)
    if counts.is_floating_point() and not torch.all(counts == counts.round()):
        raise TypeError("num_points_seq must hold integers")
    dim = check_int("dim", dim, minimum=1)
    for count in counts.tolist():
        check_int("num_points_seq", int(count), minimum=1)
    return np.array([separable_fraction(int(c), dim) for c in counts.tolist()], dtype=np.float64)


def monte_carlo_separable_fraction(num_points: int, dim: int, *, trials: int = 200,
                                   seed: int = 0) -> float:
    """Fraction of random ±1 labelings of Gaussian points that a homogeneous hyperplane separates (Chapter 1).

    Each trial draws fresh N(0, I) points and labels and runs one exact LP.
    """
    num_points = check_int("num_points", num_points, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    trials = check_int("trials", trials, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    rng = generator(seed)
    X = torch.randn(trials, num_points, dim, generator=rng, dtype=torch.float64)
    y = (2 * torch.randint(0, 2, (trials, num_points), generator=rng) - 1).to(torch.float64)
    # One LP per trial: the loop is over independent experiments, not points.
    separable = [is_linearly_separable(X[t], y[t]) for t in range(trials)]
    return float(np.mean(separable))


def count_separable_dichotomies(X) -> int:
    """Brute-force count of the labelings of X's rows a homogeneous hyperplane separates (Chapter 1).

    For points in general position the count equals cover_count(s, n); s <= 14.
    """
    X = as_tensor("X", X, ndim=2)
    num_points = len(X)
    if not 1 <= num_points <= MAX_BRUTE_FORCE_POINTS:
        raise ValueError(f"X must have between 1 and {MAX_BRUTE_FORCE_POINTS} rows "
                         f"(2^s labelings are enumerated), got {num_points}")
    X = check_finite("X", X.detach().cpu().to(torch.float64))
    # A homogeneous separator w for y gives -w for -y, so fix the first label
    # to +1, test half of the labelings and double the count.
    codes = np.arange(2 ** (num_points - 1))[:, None]
    bits = (codes >> np.arange(num_points - 2, -1, -1)) & 1 if num_points > 1 else codes[:, :0]
    labelings = torch.from_numpy(np.hstack([np.ones((len(codes), 1)), 2.0 * bits - 1]))
    return 2 * sum(is_linearly_separable(X, labels) for labels in labelings)


def smallest_unlikely(dim: int, threshold: float = 0.01) -> int:
    """Smallest number of points s whose separable fraction C(s, dim)/2^s is below threshold (Chapter 1)."""
    dim = check_int("dim", dim, minimum=1)
    threshold = check_float("threshold", threshold, low=1e-12, high=1.0)
    bound = Fraction(threshold)
    num_points = dim
    # The fraction is 1 up to s = dim and strictly decreasing after it.
    while Fraction(cover_count(num_points, dim), 2**num_points) >= bound:
        num_points += 1
    return num_points
