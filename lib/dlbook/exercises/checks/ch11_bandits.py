"""Checks for the exercises of chapter 11 (11_bandits): the KL-UCB index, the exact regret of
explore-then-commit on Bernoulli arms, the exploration length that minimises ETC's bound, and the
probability that each arm has the largest mean under Beta posteriors.

Every expected value comes from independent code here: bisection and root finding written in this
file, SciPy's Brent method and Gauss-Legendre quadrature, brute force over every exploration length, and
a simulation of explore-then-commit with binomial draws. Nothing calls dlbook.bandits, so a bug
there cannot make a wrong answer pass. The student's functions receive and return plain values only
(numbers and NumPy arrays).
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy import optimize, special

from ..core import CaseFailure, as_array, as_float, as_int, exercise, expect, expect_close, expect_equal

# ---------------------------------------------------------------------------
# Exercise 11.1: the KL-UCB index
# ---------------------------------------------------------------------------


def _kl(p, q):
    """KL(Bernoulli(p) || Bernoulli(q)) for arrays, 0 log 0 = 0, q strictly inside (0, 1)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(p > 0, p * np.log(p / q), 0.0)
        second = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return first + second


def _kl_ucb_by_brent(mean: float, count: float, budget: float) -> float:
    """The largest q in [mean, 1] with count KL(mean || q) <= budget, by Brent's method on one entry."""
    if mean >= 1 or budget <= 0:
        return float(mean)
    top = 1 - 1e-15
    if count * _kl(mean, top) <= budget:
        return 1.0
    return optimize.brentq(lambda q: count * _kl(mean, q) - budget, mean, top, xtol=1e-14, rtol=1e-14)


def _kl_ucb_by_bisection(means, counts, budget):
    """The same for many entries: 80 halvings of [mean, 1] (the excess is increasing in q)."""
    low, high = means.astype(float).copy(), np.ones_like(means, dtype=float)
    for _ in range(80):
        middle = (low + high) / 2
        inside = counts * _kl(means, np.minimum(middle, 1 - 1e-15)) <= budget
        low, high = np.where(inside, middle, low), np.where(inside, high, middle)
    return low


#: How many times the CPU time of the check's own vectorised bisection an answer may take on 50,000 arms.
_LOOP_FACTOR = 8


def _kl_ucb_cases():
    rng = np.random.default_rng(110)
    n = 12
    random_means = rng.random(n)
    random_counts = rng.integers(1, 500, size=n).astype(float)
    return [
        ("twelve random arms, budget log(1000)", random_means, random_counts, math.log(1000)),
        ("means 0 and 1 among others, budget log(50)", np.array([0.0, 1.0, 0.5, 0.999]),
         np.array([3.0, 7.0, 10.0, 2.0]), math.log(50)),
        ("budget 0: the index is the mean itself", np.array([0.2, 0.7]), np.array([5.0, 8.0]), 0.0),
        ("one pull and a large budget: the index is (almost) 1", np.array([0.0, 1.0, 0.3]),
         np.array([1.0, 1.0, 1.0]), 40.0),
        ("many pulls: a narrow index just above each mean", np.array([0.1, 0.5, 0.9]),
         np.array([10**5, 10**6, 10**7], dtype=float), math.log(10**6)),
    ]


@exercise("11.1", title="The KL-UCB index", function="kl_ucb_index", kind="extend", difficulty=2, minutes=40,
          blocked=("dlbook.bandits.bernoulli_kl", "dlbook.bandits.lai_robbins_constant"),
          hint="the excess count * KL(mean || q) - budget increases with q on [mean, 1]: bisect every entry "
               "at once, with arrays of lower and upper ends, for about 50 halvings.")
def check_kl_ucb_index(kl_ucb_index, cases):
    """means, counts: float64 arrays of one length; budget: a number; answer: an array of that length."""
    for label, means, counts, budget in _kl_ucb_cases():
        expected = np.array([_kl_ucb_by_brent(m, c, budget) for m, c in zip(means, counts)])
        with cases.case(f"kl_ucb_index(means, counts, budget) with {label}"):
            got = as_array(kl_ucb_index(means.copy(), counts.copy(), budget), means.shape,
                           f"an array of {len(means)} indices")
            worst = int(np.argmax(np.abs(got - expected)))
            expect(np.abs(got - expected).max() <= 1e-6,
                   f"indices within 1e-6 of {np.array2string(expected, precision=7)}; entry {worst} "
                   f"(mean {means[worst]:g}, count {counts[worst]:g}) is {expected[worst]:.8f}",
                   f"{got[worst]:.8f}")
    rng = np.random.default_rng(111)
    means, counts = rng.random(50_000), rng.integers(1, 10_000, size=50_000).astype(float)
    # The time allowed is a multiple of the CPU time of the bisection above, measured on the spot: a loop
    # over the arms costs 14 (plain floats) to 27 (a root finder per arm) times as much on any machine, and
    # CPU time, unlike wall-clock time, does not grow when other processes share the cores.
    reference = math.inf
    for _ in range(2):
        start = time.process_time()
        expected = _kl_ucb_by_bisection(means, counts, math.log(10**5))
        reference = min(reference, time.process_time() - start)
    allowed = _LOOP_FACTOR * reference
    with cases.case("kl_ucb_index on 50,000 arms at once"):
        start = time.process_time()
        answer = kl_ucb_index(means.copy(), counts.copy(), math.log(10**5))
        used = time.process_time() - start
        if used > allowed:
            raise CaseFailure(f"took {used:.2f} s of CPU time, more than the {allowed:.2f} s allowed "
                              f"({_LOOP_FACTOR} times a vectorised bisection's); the task asks for array "
                              "operations, not a loop over the arms")
    with cases.case("the indices of those 50,000 arms"):
        got = as_array(answer, means.shape, "an array of 50000 indices")
        expect(np.abs(got - expected).max() <= 1e-6, "every index within 1e-6 of the check's bisection",
               f"a largest difference of {np.abs(got - expected).max():.3g}")


# ---------------------------------------------------------------------------
# Exercise 11.2: the expected regret of ETC on Bernoulli arms
# ---------------------------------------------------------------------------


def _etc_simulated(means, explore, horizon, num_runs, seed):
    """Mean and standard error of ETC's pseudo-regret over simulated runs: binomial sums, random ties."""
    rng = np.random.default_rng(seed)
    means = np.asarray(means, dtype=float)
    sums = rng.binomial(explore, means, size=(num_runs, len(means)))
    tied = sums == sums.max(axis=1, keepdims=True)
    chosen = np.argmax(tied * rng.random(sums.shape), axis=1)
    gaps = means.max() - means
    regret = explore * gaps.sum() + (horizon - explore * len(means)) * gaps[chosen]
    return regret.mean(), regret.std(ddof=1) / math.sqrt(num_runs)


_ETC_CASES = [
    ("means (0.6, 0.4), m = 5, T = 1000 (ties are frequent)", (0.6, 0.4), 5, 1000),
    ("means (0.3, 0.7), m = 20, T = 5000 (the better arm second)", (0.3, 0.7), 20, 5000),
    ("means (0.9, 0.8, 0.7), m = 15, T = 3000", (0.9, 0.8, 0.7), 15, 3000),
    ("means (0.5, 0.5): no gap, no regret", (0.5, 0.5), 10, 100),
    ("means (0.2, 0.25, 0.25, 0.1), m = 1, T = 10 (one pull each)", (0.2, 0.25, 0.25, 0.1), 1, 10),
    ("means (0.55, 0.45, 0.5, 0.3, 0.52), m = 40, T = 20000", (0.55, 0.45, 0.5, 0.3, 0.52), 40, 20000),
    ("means (0.95, 0.05), m = 30, T = 100 (a wrong commitment is all but impossible)", (0.95, 0.05), 30, 100),
]


@exercise("11.2", title="Predict the regret of explore-then-commit on Bernoulli arms",
          function="etc_bernoulli_regret", kind="predict", difficulty=3, minutes=45,
          blocked=("dlbook.bandits.explore_then_commit_regret", "dlbook.bandits.etc_expected_regret",
                   "dlbook.bandits.simulate"),
          hint="regret = m * (sum of the gaps) + (T - K m) * sum_k gap_k P(ETC commits to k). Arm k's "
               "exploration total is binomial; k is committed to when its total s is the largest, and "
               "a tie with j other arms at s is won with probability 1/(j + 1).")
def check_etc_bernoulli_regret(etc_bernoulli_regret, cases):
    """means: a tuple of K floats in [0, 1]; explore, horizon: integers; answer: a number."""
    for index, (label, means, explore, horizon) in enumerate(_ETC_CASES):
        measured, se = _etc_simulated(means, explore, horizon, 200_000, seed=1100 + index)
        with cases.case(f"etc_bernoulli_regret({means}, {explore}, {horizon}): {label}"):
            got = as_float(etc_bernoulli_regret(tuple(means), explore, horizon), "the expected regret (a number)")
            expect(abs(got - measured) <= 4 * se + 1e-9 * max(1.0, measured),
                   f"{measured:.3f} ± {4 * se:.3f} (200,000 simulated runs, ± 4 standard errors)", f"{got:.3f}")


# ---------------------------------------------------------------------------
# Exercise 11.3: the exploration length that minimises ETC's bound
# ---------------------------------------------------------------------------


def _etc_bound(m, gap, horizon):
    """m gap + (T - 2m) gap exp(-m gap^2 / 4), elementwise in m (floats)."""
    m = np.asarray(m, dtype=float)
    return m * gap + (horizon - 2 * m) * gap * np.exp(-m * gap**2 / 4)


def _best_length(gap: float, horizon: int) -> int:
    """The smallest integer minimiser of the bound on 0..T//2. The bound is convex there, so the real
    minimiser is the root of its derivative (bisection) and the answer is one of its two neighbours."""
    a = gap**2 / 4
    top = horizon // 2

    def slope(m):  # d/dm of the bound, over gap
        return 1 - math.exp(-a * m) * (2 + (horizon - 2 * m) * a)

    if slope(0) >= 0:
        real = 0.0
    elif slope(top) <= 0:
        real = float(top)
    else:
        low, high = 0.0, float(top)
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if slope(middle) < 0 else (low, middle)
        real = low
    candidates = sorted({max(0, min(top, c)) for c in (math.floor(real), math.ceil(real))})
    values = [_etc_bound(c, gap, horizon) for c in candidates]
    return candidates[int(np.argmin(values))]


_LENGTH_CASES = [(0.1, 10_000), (0.05, 10_000), (0.5, 10_000), (0.2, 1_000_000), (0.3, 50), (0.02, 10_000),
                 (1.0, 7), (0.01, 10**12)]


@exercise("11.3", title="The exploration length that minimises ETC's bound", function="best_exploration_length",
          kind="derive", difficulty=1, minutes=25,
          blocked=("dlbook.bandits.etc_exploration_length", "dlbook.bandits.etc_regret_bound",
                   "dlbook.bandits.etc_tuned_bound"),
          hint="the bound is convex in m on [0, T/2]: find where its derivative changes sign (bisection "
               "works), then compare the bound at the two whole numbers around that point.")
def check_best_exploration_length(best_exploration_length, cases):
    """gap: a positive number; horizon: an integer >= 2; answer: an integer in 0..horizon // 2."""
    for gap, horizon in _LENGTH_CASES:
        expected = _best_length(gap, horizon)
        if horizon <= 10**6:  # brute force where it is affordable, as a second opinion
            everything = _etc_bound(np.arange(horizon // 2 + 1), gap, horizon)
            assert int(np.argmin(everything)) == expected, (gap, horizon)
        big = horizon > 10**9
        kwargs = dict(time_limit=0.5, why="trying every m is too slow here; use the shape of the bound") if big else {}
        with cases.case(f"best_exploration_length({gap}, {horizon})", **kwargs):
            got = as_int(best_exploration_length(gap, horizon), "an exploration length (an integer)")
        with cases.case(f"the length for gap {gap} and horizon {horizon}"):
            expect_equal(got, expected)


# ---------------------------------------------------------------------------
# Exercise 11.4: the probability that each arm has the largest mean
# ---------------------------------------------------------------------------


def _probability_best(alpha, beta, panels: int = 64, order: int = 24):
    """P(theta_k is the largest) for independent Beta(alpha_k, beta_k) (every parameter >= 1): the
    integral of pdf_k(x) prod_{j != k} cdf_j(x), by Gauss-Legendre panels over the range where
    theta_k has all but 1e-15 of its mass, so that a narrow posterior cannot be stepped over."""
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    nodes, weights = np.polynomial.legendre.leggauss(order)
    result = []
    for k in range(len(alpha)):
        low, high = special.betaincinv(alpha[k], beta[k], 1e-15), special.betaincinv(alpha[k], beta[k], 1 - 1e-15)
        edges = np.linspace(low, high, panels + 1)
        half = (edges[1:] - edges[:-1])[:, None] / 2
        x = ((edges[1:] + edges[:-1])[:, None] / 2 + half * nodes[None, :]).ravel()  # (panels * order,)
        log_pdf = special.xlogy(alpha[k] - 1, x) + special.xlog1py(beta[k] - 1, -x) - special.betaln(alpha[k], beta[k])
        others = np.prod([special.betainc(alpha[j], beta[j], x) for j in range(len(alpha)) if j != k], axis=0)
        result.append(float((np.exp(log_pdf) * others * (half * weights[None, :]).ravel()).sum()))
    return np.array(result)


def _posterior_cases():
    rng = np.random.default_rng(114)
    successes = rng.integers(0, 60, size=8)
    failures = rng.integers(0, 60, size=8)
    return [
        ("two uniform priors", [1.0, 1.0], [1.0, 1.0]),
        ("three posteriors after a few pulls", [4.0, 7.0, 2.0], [4.0, 7.0, 2.0]),
        ("a clear leader", [30.0, 10.0, 12.0], [10.0, 30.0, 28.0]),
        ("two identical arms and a weaker one", [20.0, 20.0, 15.0], [10.0, 10.0, 15.0]),
        ("narrow posteriors after hundreds of pulls", [301.0, 280.0, 150.0, 295.0], [101.0, 120.0, 50.0, 105.0]),
        ("eight arms after random pulls", list(1.0 + successes), list(1.0 + failures)),
    ]


@exercise("11.4", title="The probability that each arm is best", function="probability_best", kind="derive",
          difficulty=2, minutes=35, blocked=("dlbook.bandits.ThompsonSampling",),
          hint="theta_k is the largest when every other theta_j is below it: integrate the density of "
               "theta_k times the product of the other arms' distribution functions over [0, 1].")
def check_probability_best(probability_best, cases):
    """alpha, beta: float64 arrays of one length K (entries >= 1); answer: an array of K probabilities."""
    for label, alpha, beta in _posterior_cases():
        alpha, beta = np.array(alpha), np.array(beta)
        expected = _probability_best(alpha, beta)
        with cases.case(f"probability_best(alpha, beta) for {label}: alpha {alpha.tolist()}, beta {beta.tolist()}"):
            got = as_array(probability_best(alpha.copy(), beta.copy()), alpha.shape, f"an array of {len(alpha)} "
                           "probabilities")
            worst = int(np.argmax(np.abs(got - expected)))
            expect(np.abs(got - expected).max() <= 1e-6,
                   f"probabilities within 1e-6 of {np.array2string(expected, precision=7)}",
                   f"{np.array2string(got, precision=7)} (arm {worst} off by {abs(got[worst] - expected[worst]):.2g})")
        with cases.case(f"the probabilities for {label} add up to 1"):
            expect_close(float(np.sum(got)), 1.0, rtol=0, atol=1e-6)
