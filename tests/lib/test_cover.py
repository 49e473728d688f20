"""Tests of dlbook.cover: Cover's function-counting theorem."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from dlbook import cover


def test_cover_count_spot_values():
    assert cover.cover_count(3, 2) == 6
    assert cover.cover_count(4, 2) == 8
    assert cover.cover_count(5, 3) == 22
    assert cover.cover_count(4, 3) == 14      # 4 points in the plane, affine: all but XOR and XNOR
    assert cover.cover_count(1, 5) == 2
    assert isinstance(cover.cover_count(200, 100), int)


def test_closed_form_equals_recursion():
    for s in range(1, 31):
        for n in range(1, 31):
            assert cover.cover_count(s, n) == cover.cover_count_recursive(s, n), (s, n)


def test_recursion_handles_hundreds_without_recursion_errors():
    assert cover.cover_count_recursive(400, 300) == cover.cover_count(400, 300)
    assert cover.cover_count_recursive(3, 500) == 8


def test_all_labelings_separable_up_to_dim_and_exactly_half_at_twice_dim():
    for n in range(1, 40):
        assert cover.cover_count(n, n) == 2**n
        assert cover.cover_count(2 * n, n) == 2 ** (2 * n - 1)
        assert cover.separable_fraction(2 * n, n) == 0.5
    # Errata E2: past s = 2n the fraction falls towards 0 but the count keeps growing.
    counts = [cover.cover_count(s, 5) for s in range(10, 40)]
    assert all(a < b for a, b in zip(counts, counts[1:]))
    assert cover.separable_fraction(39, 5) < 1e-4


def test_separable_fraction_values():
    expected = {(15, 10): 0.9102, (20, 10): 0.5, (25, 10): 0.1537, (30, 10): 0.0307,
                (37, 25): 0.9856, (75, 25): 0.0017}
    for (s, n), value in expected.items():
        assert cover.separable_fraction(s, n) == pytest.approx(value, abs=6e-5)
    assert cover.separable_fraction(8, 5) == float(Fraction(cover.cover_count(8, 5), 256))


def test_separable_fraction_curve_accepts_lists_arrays_and_tensors():
    expected = np.array([cover.separable_fraction(s, 10) for s in (15, 20, 25, 30)])
    for seq in ([15, 20, 25, 30], np.array([15, 20, 25, 30]), torch.tensor([15, 20, 25, 30])):
        curve = cover.separable_fraction_curve(seq, 10)
        assert isinstance(curve, np.ndarray) and curve.dtype == np.float64
        assert np.array_equal(curve, expected)
    assert cover.separable_fraction_curve(np.arange(1, 5), 2).tolist() == [1.0, 1.0, 0.75, 0.5]


@pytest.mark.parametrize("function", [cover.cover_count, cover.cover_count_recursive,
                                      cover.separable_fraction])
@pytest.mark.parametrize("args, error, name", [
    ((0, 2), ValueError, "num_points"),
    ((2.0, 2), TypeError, "num_points"),
    ((3, 0), ValueError, "dim"),
    ((3, "2"), TypeError, "dim"),
])
def test_counting_functions_reject_bad_arguments(function, args, error, name):
    with pytest.raises(error, match=name):
        function(*args)


@pytest.mark.parametrize("args, error, name", [
    (([1, 0], 2), ValueError, "num_points_seq"),
    (([1.5, 2], 2), TypeError, "num_points_seq"),
    (("abc", 2), TypeError, "num_points_seq"),
    (([1, 2], 0), ValueError, "dim"),
])
def test_separable_fraction_curve_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        cover.separable_fraction_curve(*args)


@pytest.mark.parametrize("num_points, dim, expected", [(6, 2, 12), (6, 3, 32), (8, 3, 58), (5, 1, 2)])
def test_brute_force_count_equals_cover(num_points, dim, expected):
    rng = torch.Generator().manual_seed(num_points * 10 + dim)
    X = torch.randn(num_points, dim, generator=rng, dtype=torch.float64)
    assert cover.count_separable_dichotomies(X) == expected == cover.cover_count(num_points, dim)


def test_brute_force_count_sees_degenerate_points():
    # Two copies of one point can never get opposite labels: 2 of 4 labelings.
    assert cover.count_separable_dichotomies(torch.tensor([[1.0, 2.0], [1.0, 2.0]])) == 2
    assert cover.count_separable_dichotomies(torch.tensor([[1.0, 2.0]])) == 2


@pytest.mark.parametrize("X, error", [
    (torch.randn(15, 2), ValueError),
    (torch.randn(3), ValueError),
    (torch.full((3, 2), float("nan")), ValueError),
    ("points", TypeError),
])
def test_count_separable_dichotomies_rejects_bad_arguments(X, error):
    with pytest.raises(error, match="X"):
        cover.count_separable_dichotomies(X)


@pytest.mark.parametrize("num_points, dim", [(8, 5), (10, 5), (12, 5), (4, 2), (20, 5)])
def test_monte_carlo_agrees_with_the_exact_fraction(num_points, dim):
    trials = 200
    exact = cover.separable_fraction(num_points, dim)
    estimate = cover.monte_carlo_separable_fraction(num_points, dim, trials=trials, seed=1)
    # 4 sigma, not 3: a curve tests many values of s at once.
    assert abs(estimate - exact) <= 4 * math.sqrt(exact * (1 - exact) / trials) + 0.01


def test_monte_carlo_is_seeded():
    first = cover.monte_carlo_separable_fraction(10, 5, trials=50, seed=3)
    assert first == cover.monte_carlo_separable_fraction(10, 5, trials=50, seed=3)
    assert cover.monte_carlo_separable_fraction(3, 5, trials=20) == 1.0


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_points": 0}, ValueError, "num_points"),
    ({"dim": -1}, ValueError, "dim"),
    ({"trials": 0}, ValueError, "trials"),
    ({"trials": 2.5}, TypeError, "trials"),
    ({"seed": -1}, ValueError, "seed"),
])
def test_monte_carlo_rejects_bad_arguments(kwargs, error, name):
    arguments = {"num_points": 5, "dim": 2, **kwargs}
    with pytest.raises(error, match=name):
        cover.monte_carlo_separable_fraction(arguments.pop("num_points"), arguments.pop("dim"),
                                             **arguments)


def test_smallest_unlikely():
    assert cover.smallest_unlikely(10) == 34
    assert cover.separable_fraction(34, 10) == pytest.approx(0.00677, abs=5e-6)
    assert cover.separable_fraction(33, 10) == pytest.approx(0.01003, abs=5e-6)
    assert cover.smallest_unlikely(3, threshold=0.5) == 7          # exactly 1/2 at s = 6 is not below
    assert cover.smallest_unlikely(4, threshold=1.0) == 5


@pytest.mark.parametrize("args, error, name", [
    ((0,), ValueError, "dim"),
    ((10, 0.0), ValueError, "threshold"),
    ((10, 1.5), ValueError, "threshold"),
    ((10, "small"), TypeError, "threshold"),
])
def test_smallest_unlikely_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        cover.smallest_unlikely(*args)
