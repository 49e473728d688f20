"""Checks of chapter 4's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlbook import initialization, normalization, regularization
from dlbook.exercises.checks import ch04_training as checks

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ["4.1", "4.2", "4.3", "4.4", "4.5"]


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules and of the notebook)
# ---------------------------------------------------------------------------

def inverted_dropout(x, drop_prob, seed):
    keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed)) >= drop_prob
    return x * keep / (1 - drop_prob) if drop_prob < 1 else torch.zeros_like(x)


def stable_weight_variance(fan_in, negative_slope, drop_prob):
    return 2 * (1 - drop_prob) / ((1 + negative_slope ** 2) * fan_in)


def fold_batch_norm(W, b, gamma, beta, running_mean, running_var, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return W * scale[:, None], (b - running_mean) * scale + beta


def dropout_ridge_weights(X, y, keep_prob):
    gram = X.T @ X
    return torch.linalg.solve(gram + (1 - keep_prob) / keep_prob * torch.diag(torch.diagonal(gram)), X.T @ y)


def gd_weights(X, y, lr, steps, weight_decay):
    lam, Q = torch.linalg.eigh(X.T @ X / len(X))
    curvature = lam + weight_decay
    c = Q.T @ (X.T @ y) / len(X)
    flat = curvature.abs() < 1e-12  # (1 - (1 - ηκ)^t)/κ → η t as κ → 0
    factor = torch.where(flat, lr * steps * torch.ones_like(curvature),
                         (1 - (1 - lr * curvature) ** steps) / torch.where(flat, 1.0, curvature))
    return Q @ (factor * c)


REFERENCES = {"4.1": inverted_dropout, "4.2": stable_weight_variance, "4.3": fold_batch_norm,
              "4.4": dropout_ridge_weights, "4.5": gd_weights}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _mask(x, drop_prob, seed):
    return torch.rand(x.shape, generator=torch.Generator().manual_seed(seed)) >= drop_prob


def _gd_loop(X, y, lr, steps, weight_decay):
    X, y = X.numpy(), y.numpy()  # NumPy: the fastest plain loop, and still far too slow
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        w = w - lr * (X.T @ (X @ w - y) / len(X) + weight_decay * w)
    return torch.tensor(w)


def _gd_towards_least_squares(X, y, lr, steps, weight_decay):
    lam, Q = torch.linalg.eigh(X.T @ X / len(X))
    least_squares = Q.T @ (X.T @ y) / len(X) / lam
    return Q @ ((1 - (1 - lr * (lam + weight_decay)) ** steps) * least_squares)


def _gd_through_logarithms(X, y, lr, steps, weight_decay):
    lam, Q = torch.linalg.eigh(X.T @ X / len(X))
    curvature = lam + weight_decay
    decay = torch.exp(steps * torch.log(1 - lr * curvature))
    return Q @ ((1 - decay) / curvature * (Q.T @ (X.T @ y) / len(X)))


def _fold_in_place(W, b, gamma, beta, running_mean, running_var, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return W.mul_(scale[:, None]), (b - running_mean) * scale + beta


def _diagonal_ridge(X, y, keep_prob, convention):
    gram = X.T @ X
    if convention == "classical":
        return torch.linalg.solve(keep_prob * gram + (1 - keep_prob) * torch.diag(torch.diagonal(gram)), X.T @ y)
    mu = (1 - keep_prob) / keep_prob * torch.trace(gram) / len(gram)
    return torch.linalg.solve(gram + mu * torch.eye(len(gram), dtype=gram.dtype), X.T @ y)


WRONG = {
    "4.1": {
        "no rescaling of the survivors": lambda x, p, s: x * _mask(x, p, s),
        "drop_prob read as the keep probability": lambda x, p, s: x * ~_mask(x, p, s) / max(p, 1e-9),
        "the global random stream (F.dropout)": lambda x, p, s: F.dropout(x, p, training=True),
        "divides by zero at drop_prob = 1": lambda x, p, s: x * _mask(x, p, s) / (1 - p),
        "the package's dropout": lambda x, p, s: regularization.dropout(x, p, seed=s),
    },
    "4.2": {
        "forgets the dropout mask": lambda n, a, p: 2 / ((1 + a ** 2) * n),
        "the slope enters as 1 + a": lambda n, a, p: 2 * (1 - p) / ((1 + a) * n),
        "dropout factor upside down": lambda n, a, p: 2 / ((1 + a ** 2) * (1 - p) * n),
        "He's variance, whatever the slope": lambda n, a, p: initialization.weight_variance(n, n, "he"),
    },
    "4.3": {
        "eps outside the square root": lambda W, b, g, be, m, v, eps: (
            W * (g / (v.sqrt() + eps))[:, None], (b - m) * g / (v.sqrt() + eps) + be),
        "bias not rescaled": lambda W, b, g, be, m, v, eps: (W * (g / (v + eps).sqrt())[:, None], b - m + be),
        "scales the columns of W": lambda W, b, g, be, m, v, eps: (
            W * (g / (v + eps).sqrt())[None, :], (b - m) * g / (v + eps).sqrt() + be),
        "modifies W in place": _fold_in_place,
        "the package's batch norm": lambda W, b, g, be, m, v, eps: (
            W * (g / (v + eps).sqrt())[:, None],
            normalization.batch_norm(b[None], g, be, m, v, training=False, eps=eps)[0][0]),
    },
    "4.4": {
        "classical dropout, no rescaling": lambda X, y, q: _diagonal_ridge(X, y, q, "classical"),
        "one penalty for every weight": lambda X, y, q: _diagonal_ridge(X, y, q, "uniform"),
        "least squares, ignoring dropout": lambda X, y, q: torch.linalg.lstsq(X, y[:, None]).solution[:, 0],
        "the package's ridge": lambda X, y, q: regularization.ridge_solution(X, y, (1 - q) / q),
    },
    "4.5": {
        "a plain loop over the steps": _gd_loop,
        "ignores the weight decay": lambda X, y, lr, t, mu: gd_weights(X, y, lr, t, 0.0),
        "shrinks towards least squares, not ridge": _gd_towards_least_squares,
        "powers through logarithms (negative bases)": _gd_through_logarithms,
        "the package's closed form": lambda X, y, lr, t, mu: regularization.early_stopped_solution(X, y, lr, t),
    },
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string",
                      "returns a 3x3 tensor", "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_matrix_power_reference_equals_the_loop():
    X, y, lr = checks._gd_case(3, 12, 4, 1.5, 0.05)
    for steps in (0, 1, 7, 300):
        np.testing.assert_allclose(checks._gd_matrix_power(X, y, lr, steps, 0.05),
                                   checks._gd_loop(X, y, lr, steps, 0.05), rtol=0, atol=1e-12)


def test_the_reference_closed_form_reaches_ridge_after_many_steps():
    X, y, lr = checks._gd_case(4, 8, 20, 0.7, 1e-2)  # more features than examples
    ridge = np.linalg.solve(X.T @ X / len(X) + 1e-2 * np.eye(20), X.T @ y / len(X))
    got = gd_weights(torch.tensor(X), torch.tensor(y), lr, 10**9, 1e-2).numpy()
    np.testing.assert_allclose(got, ridge, rtol=1e-8, atol=1e-10)


def test_masked_copies_measure_the_dropout_ridge_solution():
    X, y = checks._regression_case(0, 40, 5)
    measured = checks._fit_on_masked_copies(X, y, 0.6, seed=1)
    exact = dropout_ridge_weights(torch.tensor(X), torch.tensor(y), 0.6).numpy()
    assert np.linalg.norm(measured - exact) / np.linalg.norm(exact) < 0.02


@pytest.mark.parametrize("slope, drop_prob, expected", [(0.0, 0.0, 0.5), (1.0, 0.0, 1.0), (0.5, 0.5, 1.25)])
def test_simulated_second_moment_of_the_activation(slope, drop_prob, expected):
    # E[leaky(z)²] = (1 + a²)/2 for z ~ N(0, 1); inverted dropout multiplies it by 1/(1 - p).
    assert checks._measured_second_moment(slope, drop_prob, seed=0) == pytest.approx(expected, rel=0.01)
