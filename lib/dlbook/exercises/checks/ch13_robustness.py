"""Checks for the exercises of chapter 13 (13_robustness): exact l1-robust margins of a linear model,
the accuracy of the averaging classifier in the Tsipras model under attack, interval bound
propagation, and Shapley values from a table of coalition values.

Every expected value comes from independent code here: the vertices of the l1 ball searched one by
one, a simulation of the Gaussian model with NumPy, sampling and a centre-radius form of the interval
bounds, and exact fractions averaged over every order of the players. Nothing calls the chapter's
modules, so a bug there cannot make a wrong answer pass. The student's functions receive and return
plain values only (numbers and NumPy arrays).
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ..core import as_array, as_float, describe, exercise, expect

# ---------------------------------------------------------------------------
# Exercise 13.1: exact robustness of a linear classifier against l1 perturbations
# ---------------------------------------------------------------------------


def _l1_margins_by_vertices(W, b, X, y, eps):
    """min over the 2d vertices +-eps e_k of the l1 ball and over j != y of z_y - z_j: a linear function
    on a polytope takes its minimum at a vertex."""
    d = X.shape[1]
    vertices = np.concatenate([eps * np.eye(d), -eps * np.eye(d)])          # (2d, d)
    scores = (X[:, None, :] + vertices[None]) @ W.T + b                      # (N, 2d, K)
    true = np.take_along_axis(scores, y[:, None, None].repeat(2 * d, axis=1), axis=2)[..., 0]
    others = scores.copy()
    others[np.arange(len(X)), :, y] = -np.inf
    return (true - others.max(axis=2)).min(axis=1)


def _l1_cases():
    rng = np.random.default_rng(131)
    cases = []
    for label, N, d, K, eps in [("10 points, d = 5, 3 classes, eps = 0.3", 10, 5, 3, 0.3),
                                ("40 points, d = 64, 10 classes, eps = 0.5", 40, 64, 10, 0.5),
                                ("two classes, eps = 1", 15, 4, 2, 1.0),
                                ("eps = 0: the plain margins", 12, 6, 4, 0.0),
                                ("labels that are not the predictions (negative margins)", 20, 3, 5, 0.2)]:
        W, b, X = rng.normal(size=(K, d)), rng.normal(size=K), rng.normal(size=(N, d))
        y = rng.integers(0, K, size=N) if "not the predictions" in label else (X @ W.T + b).argmax(axis=1)
        cases.append((label, W, b, X, y, eps))
    return cases


@exercise("13.1", title="Exact robustness against l1 perturbations", function="l1_worst_case_margins",
          kind="extend", difficulty=1, minutes=20,
          blocked=("dlbook.linear_robustness.worst_case_margins", "dlbook.linear_robustness.robust_accuracy"),
          hint="the dual norm of l1 is l-infinity: the adversary spends the whole budget on the one pixel "
               "where w_y - w_j is largest in size")
def check_l1_worst_case_margins(l1_worst_case_margins, cases):
    """W (K, d), b (K,), X (N, d), y (N,) int, eps: a number; answer: an array of N margins."""
    for label, W, b, X, y, eps in _l1_cases():
        expected = _l1_margins_by_vertices(W, b, X, y, eps)
        with cases.case(f"l1_worst_case_margins(W, b, X, y, eps) with {label}"):
            got = as_array(l1_worst_case_margins(W.copy(), b.copy(), X.copy(), y.copy(), eps), (len(X),))
            worst = int(np.argmax(np.abs(got - expected)))
            expect(np.allclose(got, expected, atol=1e-9), f"margin {expected[worst]:.6f} for row {worst}",
                   f"{got[worst]:.6f}")


# ---------------------------------------------------------------------------
# Exercise 13.2: predict the accuracy of the averaging classifier under attack
# ---------------------------------------------------------------------------


def _simulated_accuracies(eta, d, eps, num_points, seed):
    """The averaging classifier sign(mean of the weak features) on simulated data, clean and after
    the worst l-infinity attack (every weak feature moved by -eps y)."""
    rng = np.random.default_rng(seed)
    y = rng.choice([-1.0, 1.0], size=num_points)
    X = eta * y[:, None] + rng.normal(size=(num_points, d))
    clean = np.mean(y * X.mean(axis=1) > 0)
    attacked = np.mean(y * (X - eps * y[:, None]).mean(axis=1) > 0)
    return clean, attacked


@exercise("13.2", title="The Tsipras model under attack", function="averaging_accuracy",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.linear_robustness.gaussian_model_accuracy",),
          hint="the margin y w^T x of w = (1/d, ..., 1/d) is normal with mean eta and variance 1/d; the "
               "worst attack lowers every weak feature's mean by eps")
def check_averaging_accuracy(averaging_accuracy, cases):
    """eta, d, eps: numbers; answer: (clean accuracy, accuracy under the worst attack of size eps)."""
    settings = [(0.3, 100, 0.6, "eta = 3/sqrt(d), d = 100, eps = 2 eta"),
                (0.2, 50, 0.1, "eta = 0.2, d = 50, eps = eta/2"),
                (0.1, 400, 0.05, "eta = 0.1, d = 400, eps = 0.05"),
                (0.5, 4, 0.0, "no attack, d = 4"),
                (0.05, 900, 0.2, "eps larger than 2 eta")]
    for index, (eta, d, eps, label) in enumerate(settings):
        num_points = 40_000
        measured = _simulated_accuracies(eta, d, eps, num_points, seed=1300 + index)
        with cases.case(f"averaging_accuracy({eta}, {d}, {eps}) ({label}) against a simulation of "
                        f"{num_points} points"):
            answer = averaging_accuracy(eta, d, eps)
            expect(isinstance(answer, (tuple, list)) and len(answer) == 2, "a pair (clean, attacked)",
                   describe(answer))
            for name, got, simulated in zip(("clean", "attacked"), answer, measured):
                got = as_float(got, f"the {name} accuracy as a number")
                margin = 4 * math.sqrt(max(simulated * (1 - simulated), 1e-4) / num_points) + 1e-3
                expect(abs(got - simulated) <= margin,
                       f"a {name} accuracy within {margin:.4f} of the simulated {simulated:.4f}", f"{got:.4f}")


# ---------------------------------------------------------------------------
# Exercise 13.3: interval bound propagation
# ---------------------------------------------------------------------------


def _forward(layers, X):
    for index, (W, b) in enumerate(layers):
        X = X @ W.T + b
        if index < len(layers) - 1:
            X = np.maximum(X, 0)
    return X


def _interval_by_centre_and_radius(layers, lower, upper):
    """The same bounds in centre-radius form: W c + b +- |W| r."""
    for index, (W, b) in enumerate(layers):
        centre, radius = (lower + upper) / 2, (upper - lower) / 2
        centre, radius = W @ centre + b, np.abs(W) @ radius
        lower, upper = centre - radius, centre + radius
        if index < len(layers) - 1:
            lower, upper = np.maximum(lower, 0), np.maximum(upper, 0)
    return lower, upper


def _ibp_cases():
    rng = np.random.default_rng(133)
    cases = []
    for label, widths, eps in [("a 2-8-8-2 network, eps = 0.3", (2, 8, 8, 2), 0.3),
                               ("one affine layer 4 -> 3 (the bounds are attained)", (4, 3), 0.5),
                               ("a 5-16-16-3 network, eps = 0.05", (5, 16, 16, 3), 0.05),
                               ("a deep 3-6-6-6-6-2 network, eps = 0.2", (3, 6, 6, 6, 6, 2), 0.2),
                               ("eps = 0: the bounds are the output", (4, 7, 2), 0.0)]:
        layers = [(rng.normal(size=(m, n)) / math.sqrt(n), rng.normal(size=m) * 0.3)
                  for n, m in zip(widths[:-1], widths[1:])]
        x = rng.normal(size=widths[0])
        cases.append((label, layers, x - eps, x + eps))
    return cases


@exercise("13.3", title="Interval bound propagation", function="interval_bounds", kind="transcribe",
          difficulty=1, minutes=20,
          blocked=("dlbook.certification.interval_bounds", "dlbook.certification.interval_step",
                   "dlbook.certification.interval_margin", "dlbook.certification.certified"),
          hint="split each W into its positive and negative parts; after every layer but the last, "
               "apply the ReLU to both bounds")
def check_interval_bounds(interval_bounds, cases):
    """layers: a list of (W, b) arrays, ReLU after all but the last; lower, upper: input box.
    Answer: (lower, upper) of the output."""
    rng = np.random.default_rng(1333)
    for label, layers, lower, upper in _ibp_cases():
        exp_lower, exp_upper = _interval_by_centre_and_radius(layers, lower, upper)
        K = len(exp_lower)
        with cases.case(f"interval_bounds(layers, lower, upper) for {label}"):
            answer = interval_bounds([(W.copy(), b.copy()) for W, b in layers], lower.copy(), upper.copy())
            expect(isinstance(answer, (tuple, list)) and len(answer) == 2, "a pair (lower, upper)",
                   describe(answer))
            got_lower, got_upper = as_array(answer[0], (K,)), as_array(answer[1], (K,))
            samples = lower + (upper - lower) * rng.random((10_000, len(lower)))
            outputs = _forward(layers, samples)
            outside = np.sum((outputs < got_lower - 1e-12) | (outputs > got_upper + 1e-12))
            expect(outside == 0, "bounds that contain all 10,000 sampled outputs",
                   f"{outside} sampled outputs outside them")
            worst = int(np.argmax(np.abs(got_lower - exp_lower) + np.abs(got_upper - exp_upper)))
            expect(np.allclose(got_lower, exp_lower, atol=1e-10) and np.allclose(got_upper, exp_upper, atol=1e-10),
                   f"output {worst} in [{exp_lower[worst]:.6f}, {exp_upper[worst]:.6f}]",
                   f"[{got_lower[worst]:.6f}, {got_upper[worst]:.6f}]")


# ---------------------------------------------------------------------------
# Exercise 13.4: Shapley values from a table of coalition values
# ---------------------------------------------------------------------------


def _shapley_by_orders(values, d):
    """Exact fractions: the marginal contribution of each player averaged over all d! orders."""
    total = [Fraction(0)] * d
    for order in itertools.permutations(range(d)):
        mask = 0
        for player in order:
            total[player] += Fraction(values[mask | (1 << player)]) - Fraction(values[mask])
            mask |= 1 << player
    return np.array([float(t / math.factorial(d)) for t in total])


def _shapley_cases():
    rng = np.random.default_rng(134)
    additive = np.array([sum(c for i, c in enumerate([1.0, -2.0, 0.5, 3.0]) if mask >> i & 1) for mask in range(16)])
    unanimity = np.array([1.0 if mask & 0b01101 == 0b01101 else 0.0 for mask in range(32)])
    rounded = np.round(rng.normal(size=64), 3)
    rounded[0] = 0.0
    return [("an additive game of 4 players (phi = each player's own value)", additive, 4),
            ("the unanimity game of players {0, 2, 3} among 5", unanimity, 5),
            ("a random game of 6 players", rounded, 6),
            ("one player", np.array([0.25, 1.5]), 1),
            ("a random game of 3 players with v(empty) = 2", np.round(rng.normal(size=8), 3) + np.eye(8)[0] * 2, 3)]


@exercise("13.4", title="Shapley values from a table", function="shapley_from_table", kind="derive",
          difficulty=2, minutes=30,
          blocked=("dlbook.attribution.shapley_values", "dlbook.attribution.shapley_sampling"),
          hint="for each player i and each coalition S without i, weight v(S + i) - v(S) by "
               "|S|! (d - |S| - 1)! / d!")
def check_shapley_from_table(shapley_from_table, cases):
    """values: an array of length 2^d, values[mask] = v(S) with player i in S when bit i of mask is set.
    Answer: the d Shapley values."""
    for label, values, d in _shapley_cases():
        expected = _shapley_by_orders(values, d)
        with cases.case(f"shapley_from_table(values) for {label}"):
            got = as_array(shapley_from_table(values.copy()), (d,))
            worst = int(np.argmax(np.abs(got - expected)))
            expect(np.allclose(got, expected, atol=1e-10), f"phi_{worst} = {expected[worst]:.6f}",
                   f"{got[worst]:.6f}")
