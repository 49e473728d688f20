"""Checks for the exercises of chapter 1 (01_neurons): perceptron, Cover, Hopfield.

Every expected value is computed here, by a few lines of independent code
(exact integers and fractions where possible, an LP for separability), not by
calling the chapter's library modules, so that a bug there cannot make a
wrong answer pass.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import torch

from ..core import (
    Mismatch,
    as_array,
    as_bool,
    as_float,
    as_int,
    describe,
    exercise,
    expect,
    expect_close,
    expect_equal,
)

# ---------------------------------------------------------------------------
# Exercise 1.1: the perceptron
# ---------------------------------------------------------------------------


def _reference_perceptron(X: np.ndarray, y: np.ndarray, max_epochs: int):
    """Rosenblatt's rule from w = 0, b = 0, lr 1, sweeping the points in order."""
    w = np.zeros(X.shape[1])
    b = 0.0
    num_updates = 0
    for _ in range(max_epochs):
        mistakes = 0
        for x_i, y_i in zip(X, y):
            if y_i * (x_i @ w + b) <= 0:  # sgn(0) = 0 counts as a mistake
                w += y_i * x_i
                b += y_i
                num_updates += 1
                mistakes += 1
        if mistakes == 0:
            return w, b, num_updates, True
    return w, b, num_updates, False


def _separable_set(seed: int, num_points: int, dim: int, margin: float):
    """Points on a 0.25 grid at least ``margin`` from a random affine separator.

    Coordinates are multiples of 1/4, so every w and b the perceptron reaches
    are too and every y·(w·x + b) is computed exactly in float32 as well as in
    float64: the number of updates cannot depend on rounding or summation order.
    Returns X, y and the generating separator (w, b).
    """
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=dim)
    w_true /= np.linalg.norm(w_true)
    b_true = float(2.0 * rng.normal())
    X, y = [], []
    while len(X) < num_points:
        x = np.round(rng.normal(size=dim) * 8) / 4  # N(0, 2²) rounded to the 0.25 grid
        score = x @ w_true + b_true
        if abs(score) >= margin:
            X.append(x)
            y.append(1.0 if score > 0 else -1.0)
    return np.array(X), np.array(y), w_true, b_true


def _novikoff_bound(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> float:
    """(R/γ)² on the augmented inputs (x, 1) for the separator (w, b)."""
    X_aug = np.hstack([X, np.ones((len(X), 1))])
    w_aug = np.append(w, b)
    radius = np.linalg.norm(X_aug, axis=1).max()
    gamma = (y * (X_aug @ w_aug)).min() / np.linalg.norm(w_aug)
    return float((radius / gamma) ** 2)


def _perceptron_cases():
    """(label, X, y, max_epochs, separator or None) for every case of exercise 1.1."""
    cases = []
    for name, seed, n, d, margin in [("A", 11, 40, 2, 0.05), ("B", 16, 40, 2, 0.05),
                                     ("C", 11, 60, 5, 0.05), ("D", 14, 60, 5, 0.05)]:
        X, y, w, b = _separable_set(seed, n, d, margin)
        cases.append((f"separable data set {name} ({n} points in R^{d})", X, y, 1000, (w, b)))
    # Separable, but only by a line that misses the origin: (1,1) is -1, (3,3) is +1.
    grid = np.array([(i, j) for i in range(1, 6) for j in range(1, 6)], dtype=float)
    cases.append(("the 5x5 grid labelled by x1 + x2 > 5.5 (needs the bias)", grid,
                  np.where(grid.sum(1) > 5.5, 1.0, -1.0), 1000, (np.array([1.0, 1.0]), -5.5)))
    cases.append(("a single point x = (2, -1) with y = +1", np.array([[2.0, -1.0]]),
                  np.array([1.0]), 10, (np.array([2.0, -1.0]) / math.sqrt(5), 0.0)))
    X, y, w, b = _separable_set(21, 12, 3, 0.2)
    keep = y > 0  # every label +1
    cases.append(("12 points in R^3 all labelled +1", X[keep], y[keep], 1000, (w, b)))
    xor_X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float)
    cases.append(("XOR (not separable)", xor_X, np.array([-1.0, 1.0, 1.0, -1.0]), 100, None))
    return cases


def _unpack_perceptron(out, dim: int):
    if not isinstance(out, (tuple, list)) or len(out) != 4:
        raise Mismatch("a tuple (w, b, num_updates, converged)", describe(out))
    w = as_array(out[0], (dim,), f"w as a vector of length {dim}")
    b = as_float(out[1], "b as a single number")
    num_updates = as_int(out[2], "num_updates as an integer")
    converged = as_bool(out[3], "converged as True or False")
    return w, b, num_updates, converged


@exercise("1.1", title="The perceptron learning rule", function="perceptron",
          hint="keep w and b as running sums; a point is a mistake when y (w.x + b) <= 0, so at "
               "w = 0 every point is one. Count the updates and stop after a full sweep without "
               "a mistake.")
def check_perceptron(perceptron, cases):
    """X is an (N, d) float32 tensor, y holds ±1 as float32; compare with Rosenblatt's rule."""
    for label, X, y, max_epochs, separator in _perceptron_cases():
        _, _, ref_updates, ref_converged = _reference_perceptron(X, y, max_epochs)
        if ref_converged != (separator is not None):
            raise RuntimeError(f"exercise 1.1: the case {label} is wrong")
        with cases.case(f"perceptron(X, y, max_epochs={max_epochs}) on {label}"):
            out = perceptron(torch.tensor(X, dtype=torch.float32),
                             torch.tensor(y, dtype=torch.float32), max_epochs)
            w, b, num_updates, converged = _unpack_perceptron(out, X.shape[1])
            if separator is None:
                expect(not converged, "converged=False (the data are not linearly separable)",
                       f"converged={converged}")
            else:
                expect(converged, "converged=True (the data are linearly separable)",
                       f"converged={converged}")
                scores = y * (X @ w + b)
                worst = int(np.argmin(scores))
                expect(scores[worst] > 0,
                       "every point strictly on its side, y·(w·x + b) > 0",
                       f"y·(w·x + b) = {scores[worst]:.6g} for point {worst} "
                       f"(w = {np.round(w, 4).tolist()}, b = {b:.6g})")
                bound = _novikoff_bound(X, y, *separator)
                expect(num_updates <= bound,
                       f"num_updates <= Novikoff's bound (R/γ)² = {bound:.1f}", str(num_updates))
            expect(num_updates == ref_updates,
                   f"num_updates = {ref_updates} (updates from w = 0, b = 0, sweeping the "
                   "points in order and updating only when y·(w·x + b) <= 0)",
                   str(num_updates))


# ---------------------------------------------------------------------------
# Exercise 1.2: Cover's count
# ---------------------------------------------------------------------------


def _cover(num_points: int, dim: int) -> int:
    """Cover's C(s, n) = 2 Σ_{i<n} binom(s-1, i): exact integer."""
    return 2 * sum(math.comb(num_points - 1, i) for i in range(dim))


@exercise("1.2", title="Cover's function counting theorem", function="cover_count",
          hint="fill a table indexed by (number of points, dimension) row by row from the "
               "recursion; C(1, d) = 2 and C(N, 1) = 2 give its edges.")
def check_cover_count(cover_count, cases):
    """Exact integers on a grid s = 1..20, n = 1..12, headline values first."""
    headline = [(4, 3), (3, 2), (5, 3), (1, 1), (3, 5), (20, 1), (10, 10)]
    grid = [(s, n) for s in range(1, 21) for n in range(1, 13)]
    for s, n in headline + [pair for pair in grid if pair not in headline]:
        expected = _cover(s, n)
        with cases.case(f"cover_count({s}, {n})"):
            got = cover_count(s, n)
            expect_equal(as_int(got, f"the integer {expected}"), expected)


# ---------------------------------------------------------------------------
# Exercise 1.3: one-step flip probability of a Hopfield network
# ---------------------------------------------------------------------------

#: Relative tolerance of exercise 1.3: loose enough for a float32 torch.erfc,
#: tight enough to catch a missing factor (every plausible slip is off by > 5%).
FLIP_RTOL = 1e-4


@exercise("1.3", title="Bit-flip probability of a Hopfield network", function="flip_probability",
          hint="the crosstalk is approximately Gaussian with variance alpha, and a bit flips "
               "when it falls below -1; write that tail probability with the complementary error "
               "function.")
def check_flip_probability(flip_probability, cases):
    """½ erfc(1/√(2α)) at loads from far below to far above capacity."""
    for alpha in [0.138, 0.01, 0.05, 0.105, 0.185, 0.37, 0.61, 1.0]:
        with cases.case(f"flip_probability({alpha})"):
            expected = 0.5 * math.erfc(1.0 / math.sqrt(2.0 * alpha))
            got = as_float(flip_probability(alpha), "a probability (a float)")
            expect_close(got, expected, rtol=FLIP_RTOL)


# ---------------------------------------------------------------------------
# Exercise 1.4: linear separability by linear programming
# ---------------------------------------------------------------------------


def _lp_separable(Z: np.ndarray) -> bool:
    """Is there a w with z_i·w > 0 for every row z_i = y_i x_i? (LP feasibility of z_i·w >= 1)."""
    from scipy.optimize import linprog

    num, dim = Z.shape
    res = linprog(np.zeros(dim), A_ub=-Z, b_ub=-np.ones(num),
                  bounds=[(None, None)] * dim, method="highs")
    if res.status == 0:
        if not np.all(Z @ res.x > 0):  # the LP's tolerance must not decide the case
            raise RuntimeError("the LP's separator does not separate strictly")
        return True
    if res.status == 2:
        return False
    raise RuntimeError(f"linprog failed: {res.message}")


def _gaussian_points(seed: int, num_points: int, dim: int) -> np.ndarray:
    """Standard Gaussian points, rounded to float32 (what the student receives)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(num_points, dim)).astype(np.float32).astype(np.float64)


def _separability_cases():
    """Hand-made cases (tiny margins, XOR, duplicates) as (label, X, y, expected)."""
    delta = 1e-3
    cases = [
        ("two points at angle 1e-3 with opposite labels (separable, tiny margin)",
         [[1.0, 0.0], [1.0, -delta]], [1.0, -1.0], True),
        ("XOR on the corners of a square centred at 0",
         [[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]], [1.0, 1.0, -1.0, -1.0], False),
        ("XOR with a constant third coordinate (x1, x2, 1)",
         [[0, 0, 1], [0, 1, 1], [1, 0, 1], [1, 1, 1]], [-1.0, 1.0, 1.0, -1.0], False),
        ("AND with a constant third coordinate (x1, x2, 1)",
         [[0, 0, 1], [0, 1, 1], [1, 0, 1], [1, 1, 1]], [-1.0, -1.0, -1.0, 1.0], True),
        ("three nearly collinear points in R^3 (separable, tiny margin)",
         [[1.0, 0.0, 0.0], [1.0, -delta, 0.0], [0.0, 0.0, 1.0]], [1.0, -1.0, 1.0], True),
        ("three points, one wedged between two of the other label (not separable)",
         [[1.0, 0.0], [1.0, -delta], [1.0, delta]], [1.0, -1.0, -1.0], False),
        ("the same point twice with opposite labels",
         [[1.0, 2.0], [1.0, 2.0]], [1.0, -1.0], False),
        ("a single point", [[0.5, -2.0, 1.0]], [-1.0], True),
    ]
    out = []
    for label, X, y, expected in cases:
        X = np.asarray(X, dtype=np.float32).astype(np.float64)
        y = np.asarray(y, dtype=np.float64)
        out.append((label, X, y, expected))
    return out


@exercise("1.4", title="Linear separability by linear programming", function="is_separable",
          hint="strict separability can be rescaled into linear inequalities with margin 1; "
               "whether such inequalities have a solution is a linear program with a zero "
               "objective.")
def check_is_separable(is_separable, cases):
    """Hand-made hard cases, then all 2^s labelings of Gaussian point sets vs Cover's count."""
    for label, X, y, expected in _separability_cases():
        if _lp_separable(y[:, None] * X) != expected:
            raise RuntimeError(f"exercise 1.4: the case {label} is wrong")
        with cases.case(f"is_separable(X, y) on {label}"):
            got = is_separable(torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
            expect_equal(as_bool(got, f"{expected} (a bool)"), expected)
    for name, seed, s, n in [("P", 3, 5, 2), ("Q", 4, 6, 3), ("R", 5, 7, 3)]:
        X = _gaussian_points(seed, s, n)
        count = _cover(s, n)
        truth = {signs: _lp_separable(np.array(signs)[:, None] * X)
                 for signs in itertools.product([1.0, -1.0], repeat=s)}
        if sum(truth.values()) != count:  # the check must agree with Cover's theorem
            raise RuntimeError(f"exercise 1.4: point set {name} is not in general position")
        with cases.case(f"is_separable(X, y) on point set {name} ({s} Gaussian points in R^{n}; "
                        f"Cover: {count} of {2 ** s} labelings are separable)"):
            got_count = 0
            for signs, expected in truth.items():
                got = is_separable(torch.tensor(X, dtype=torch.float32),
                                   torch.tensor(signs, dtype=torch.float32))
                got = as_bool(got, f"{expected} (a bool) for labels {list(map(int, signs))}")
                if got != expected:
                    raise Mismatch(f"{expected} for labels y = {list(map(int, signs))}", str(got))
                got_count += got
            expect_equal(got_count, count)


# ---------------------------------------------------------------------------
# Exercise 1.5: when do separable labelings become rare?
# ---------------------------------------------------------------------------


def _smallest_unlikely(dim: int, threshold: float) -> int:
    """Smallest s with C(s, dim) / 2^s < threshold, in exact rational arithmetic."""
    threshold = Fraction(threshold)
    s = 1
    while not Fraction(_cover(s, dim), 2 ** s) < threshold:
        s += 1
    return s


@exercise("1.5", title="When separable labelings become rare", function="smallest_unlikely",
          hint="walk N upwards from 1 and compare Cover's fraction with the threshold in exact "
               "arithmetic; mind 'fewer than'.")
def check_smallest_unlikely(smallest_unlikely, cases):
    """Exact answers, including thresholds the fraction hits exactly (C(2n, n) / 2^(2n) = 1/2)."""
    for dim, threshold in [(10, 0.01), (2, 0.5), (1, 0.25), (3, 0.5), (5, 0.1), (20, 0.001),
                           (1, 0.01), (4, 0.9)]:
        expected = _smallest_unlikely(dim, threshold)
        with cases.case(f"smallest_unlikely({dim}, {threshold})"):
            got = smallest_unlikely(dim, threshold)
            expect_equal(as_int(got, f"the integer {expected}"), expected)
