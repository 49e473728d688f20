"""Checks of chapter 13's exercises: references pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

import dlbook.exercises.checks.ch13_robustness as checks
from dlbook import attribution, certification, linear_robustness
from dlbook.exercises import run_check

from exercise_contract import bad_types

IDS = ("13.1", "13.2", "13.3", "13.4")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def _pairwise(W, b, X, y):
    differences = W[y][:, None, :] - W[None, :, :]                     # (N, K, d)
    scores = X @ W.T + b
    margins = np.take_along_axis(scores, y[:, None], axis=1) - scores
    return differences, margins


def l1_worst_case_margins(W, b, X, y, eps):
    differences, margins = _pairwise(W, b, np.asarray(X, float), np.asarray(y, int))
    margins = margins - eps * np.abs(differences).max(axis=2)
    margins[np.arange(len(X)), y] = np.inf
    return margins.min(axis=1)


def l1_by_loop(W, b, X, y, eps):
    """Row by row, class by class."""
    out = []
    for x, label in zip(X, y):
        best = math.inf
        for j in range(len(W)):
            if j != label:
                w = W[label] - W[j]
                best = min(best, w @ x + b[label] - b[j] - eps * np.max(np.abs(w)))
        out.append(best)
    return np.array(out)


def averaging_accuracy(eta, d, eps):
    return norm.cdf(eta * math.sqrt(d)), norm.cdf((eta - eps) * math.sqrt(d))


def averaging_accuracy_erf(eta, d, eps):
    phi = lambda t: 0.5 * (1 + math.erf(t / math.sqrt(2)))   # noqa: E731
    return phi(eta * math.sqrt(d)), phi((eta - eps) * math.sqrt(d))


def interval_bounds(layers, lower, upper):
    for index, (W, b) in enumerate(layers):
        positive, negative = np.maximum(W, 0), np.maximum(-W, 0)
        lower, upper = positive @ lower - negative @ upper + b, positive @ upper - negative @ lower + b
        if index < len(layers) - 1:
            lower, upper = np.maximum(lower, 0), np.maximum(upper, 0)
    return lower, upper


def shapley_from_table(values):
    values = np.asarray(values, float)
    d = int(round(math.log2(len(values))))
    masks = np.arange(len(values))
    sizes = np.array([bin(m).count("1") for m in masks])
    weights = np.array([math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d) if s < d else 0.0
                        for s in sizes])
    phi = np.zeros(d)
    for i in range(d):
        without = masks[(masks >> i & 1) == 0]
        phi[i] = np.sum(weights[without] * (values[without | (1 << i)] - values[without]))
    return phi


REFERENCES = {
    "13.1": [l1_worst_case_margins, l1_by_loop],
    "13.2": [averaging_accuracy, averaging_accuracy_erf],
    "13.3": interval_bounds,
    "13.4": shapley_from_table,
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _l1_with_norm(order):
    def answer(W, b, X, y, eps):
        differences, margins = _pairwise(W, b, X, y)
        margins = margins - eps * np.linalg.norm(differences, ord=order, axis=2)
        margins[np.arange(len(X)), y] = np.inf
        return margins.min(axis=1)
    return answer


def _l1_own_row_only(W, b, X, y, eps):
    """Subtracts eps max |w_y| instead of using the differences."""
    _, margins = _pairwise(W, b, X, y)
    margins = margins - eps * np.abs(W[y]).max(axis=1)[:, None]
    margins[np.arange(len(X)), y] = np.inf
    return margins.min(axis=1)


def _ibp_without_sign_split(layers, lower, upper):
    for index, (W, b) in enumerate(layers):
        lower, upper = W @ lower + b, W @ upper + b
        if index < len(layers) - 1:
            lower, upper = np.maximum(lower, 0), np.maximum(upper, 0)
    return np.minimum(lower, upper), np.maximum(lower, upper)


def _ibp_without_relu(layers, lower, upper):
    for W, b in layers:
        positive, negative = np.maximum(W, 0), np.maximum(-W, 0)
        lower, upper = positive @ lower - negative @ upper + b, positive @ upper - negative @ lower + b
    return lower, upper


def _banzhaf(values):
    values = np.asarray(values, float)
    d = int(round(math.log2(len(values))))
    masks = np.arange(len(values))
    return np.array([np.mean(values[masks[(masks >> i & 1) == 0] | (1 << i)] - values[masks[(masks >> i & 1) == 0]])
                     for i in range(d)])


def _leave_one_out(values):
    values = np.asarray(values, float)
    d = int(round(math.log2(len(values))))
    full = len(values) - 1
    return np.array([values[full] - values[full & ~(1 << i)] for i in range(d)])


WRONG = {
    "13.1": {
        "the l-infinity formula (l1 norm of the difference)": _l1_with_norm(1),
        "the l2 norm of the difference": _l1_with_norm(2),
        "the largest weight of the true class only": _l1_own_row_only,
        "the library shortcut": lambda W, b, X, y, eps: linear_robustness.worst_case_margins(W, b, X, y, eps),
    },
    "13.2": {
        "the attack ignored": lambda eta, d, eps: (norm.cdf(eta * math.sqrt(d)),) * 2,
        "the attack counted twice": lambda eta, d, eps: (norm.cdf(eta * math.sqrt(d)),
                                                         norm.cdf((eta - 2 * eps) * math.sqrt(d))),
        "d instead of sqrt(d)": lambda eta, d, eps: (norm.cdf(eta * d), norm.cdf((eta - eps) * d)),
        "the library shortcut": lambda eta, d, eps: linear_robustness.gaussian_model_accuracy(
            np.ones(d) / d, np.full(d, eta), 1.0, eps),
    },
    "13.3": {
        "no split into positive and negative weights": _ibp_without_sign_split,
        "no ReLU between the layers": _ibp_without_relu,
        "the library shortcut": lambda layers, lower, upper: certification.interval_step(
            layers[0][0], layers[0][1], lower, upper),
    },
    "13.4": {
        "Banzhaf values (every coalition weighted equally)": _banzhaf,
        "leave-one-out contributions": _leave_one_out,
        "the library shortcut": lambda values: attribution.shapley_values(lambda Z: Z.sum(1), np.zeros(2),
                                                                          np.zeros(2)),
    },
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")




def test_expected_values_are_right():
    rng = np.random.default_rng(0)
    values = rng.normal(size=16)
    assert np.allclose(checks._shapley_by_orders(values, 4), shapley_from_table(values), atol=1e-12)
    W, b, X = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=(6, 4))
    y = (X @ W.T + b).argmax(axis=1)
    assert np.allclose(checks._l1_margins_by_vertices(W, b, X, y, 0.3), l1_by_loop(W, b, X, y, 0.3), atol=1e-12)
    clean, attacked = checks._simulated_accuracies(0.3, 100, 0.6, 40_000, seed=0)
    assert abs(clean - norm.cdf(3)) < 0.002 and abs(attacked - norm.cdf(-3)) < 0.002


@pytest.mark.slow
def test_references_pass_on_their_own():
    for eid, references in REFERENCES.items():
        for reference in references if isinstance(references, list) else [references]:
            assert run_check(eid, reference).passed, eid
