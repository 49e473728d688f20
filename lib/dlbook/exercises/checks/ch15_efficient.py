"""Checks for the exercises of chapter 15 (15_efficient): the variance of randomized response when the
answers are fixed, per-channel quantization, gradient descent with stale gradients, and the exact MAML
meta-gradient of quadratic tasks.

Expected values come from independent code: a NumPy simulation of the coin flips, a NumPy quantizer, a
plain NumPy loop over delayed steps, and the closed form of the adapted parameters of a quadratic, written
with NumPy matrix powers. Nothing calls dlbook.privacy, dlbook.quantization, dlbook.quadratics or
dlbook.meta_learning, so a bug there cannot make a wrong answer pass. The student's functions receive
numbers and float64 tensors only.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..core import as_array, as_float, exercise, expect


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _expect_close_array(name: str, got: np.ndarray, expected: np.ndarray, atol: float) -> None:
    """Largest absolute error below atol; the message shows the worst entry."""
    error = np.abs(got - expected)
    worst = np.unravel_index(np.argmax(error), error.shape)
    expect(error.max() <= atol, f"{name} within {atol:g}; at index {tuple(int(i) for i in worst)} "
                                f"{expected[worst]:.10g}", f"{got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 15.1: randomized response with fixed answers (predict)
# ---------------------------------------------------------------------------

def _simulated_fixed_variance(epsilon: float, num_respondents: int, share: float, seed: int,
                              repeats: int = 20_000) -> float:
    """Variance of the unbiased estimate over repeated coin flips, the true answers held fixed."""
    p = 1.0 / (1.0 + math.exp(-epsilon))
    yes = round(share * num_respondents)
    flips = _rng(seed).random((repeats, num_respondents)) >= p          # True where the answer is negated
    answers = np.arange(num_respondents) < yes
    reported_share = (answers[None, :] != flips).mean(axis=1)
    estimates = (reported_share - (1 - p)) / (2 * p - 1)
    return float(estimates.var())


@exercise("15.1", title="Randomized response with fixed answers", function="fixed_answers_variance",
          kind="predict", difficulty=2, minutes=20,
          blocked=("dlbook.privacy.estimate_variance", "dlbook.privacy.estimate_proportion",
                   "dlbook.privacy.randomized_response", "dlbook.privacy.truth_probability"),
          hint="with the answers fixed, only the coins are random: each report is its own answer flipped with "
               "probability 1 - p, independently. Write the variance of the share of yes reports as a sum of "
               "n Bernoulli variances, each p(1 - p), and divide by (2p - 1)^2.")
def check_fixed_answers_variance(fixed_answers_variance, cases):
    """Predictions against the variance measured here over 20,000 simulated surveys, within 6 %."""
    for epsilon, n, share, seed in ((1.0, 200, 0.3, 1), (0.5, 500, 0.5, 2), (2.0, 100, 0.1, 3), (4.0, 400, 0.9, 4),
                                    (0.25, 300, 0.0, 5)):
        with cases.case(f"fixed_answers_variance({epsilon}, {n}) (answers with a share {share} of yes)"):
            got = as_float(fixed_answers_variance(epsilon, n))
            measured = _simulated_fixed_variance(epsilon, n, share, seed)
            expect(got > 0 and abs(got / measured - 1) <= 0.06, f"a variance within 6 % of the measured {measured:.5g}",
                   f"{got:.5g}")


# ---------------------------------------------------------------------------
# Exercise 15.2: per-channel quantization (extend)
# ---------------------------------------------------------------------------

def _per_channel_expected(W: np.ndarray, num_bits: int) -> np.ndarray:
    top = 2 ** (num_bits - 1) - 1
    largest = np.abs(W).max(axis=1, keepdims=True)
    step = np.where(largest > 0, largest / top, 1.0)
    return np.clip(np.round(W / step), -top, top) * step


def _per_channel_cases():
    cases = []
    gen = _rng(152)
    W = gen.standard_normal((16, 64)) * np.exp(gen.uniform(-3, 1, (16, 1)))   # rows of very different scales
    cases.append(("16 x 64, rows of different scales, 4 bits", W, 4))
    cases.append(("the same matrix at 8 bits", W, 8))
    cases.append(("the same matrix at 2 bits", W, 2))
    single = gen.standard_normal((1, 7))
    cases.append(("a single row, 3 bits", single, 3))
    with_zero = gen.standard_normal((5, 10))
    with_zero[2] = 0.0
    cases.append(("5 x 10 with an all-zero row, 4 bits", with_zero, 4))
    outlier = gen.standard_normal((8, 32)) * 0.01
    outlier[0, 0] = 50.0
    cases.append(("8 x 32 with one outlier weight, 6 bits", outlier, 6))
    return cases


@exercise("15.2", title="Per-channel quantization", function="quantize_per_channel", kind="extend",
          difficulty=2, minutes=25,
          blocked=("dlbook.quantization.quantize_uniform", "dlbook.quantization.quantization_codes",
                   "dlbook.quantization.symmetric_scale", "dlbook.quantization.quantize_model"),
          hint="compute the largest |w| of each row with W.abs().amax(dim=1, keepdim=True), divide by 2^(b-1) - 1 "
               "for the steps (use a step of 1 for an all-zero row), then round, clamp and multiply back, "
               "all broadcast over the rows.")
def check_quantize_per_channel(quantize_per_channel, cases):
    """Against a NumPy quantizer with one step per row, to 1e-12 of each row's step."""
    for label, W, bits in _per_channel_cases():
        with cases.case(f"quantize_per_channel(W, {bits}) for {label}"):
            got = as_array(quantize_per_channel(torch.tensor(W), bits), W.shape, f"a tensor of shape {W.shape}")
            expected = _per_channel_expected(W, bits)
            steps = np.abs(W).max(axis=1, keepdims=True) / (2 ** (bits - 1) - 1)
            error = np.abs(got - expected) / np.where(steps > 0, steps, 1.0)
            worst = np.unravel_index(np.argmax(error), error.shape)
            expect(error.max() <= 1e-9, f"at index {tuple(int(i) for i in worst)} {expected[worst]:.10g}",
                   f"{got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 15.3: gradient descent with stale gradients (extend)
# ---------------------------------------------------------------------------

def _delayed_expected(A, b, x0, lr, delay, num_steps):
    iterates = [x0.copy()]
    for t in range(num_steps):
        stale = iterates[max(t - delay, 0)]
        iterates.append(iterates[t] - lr * (A @ stale - b))
    return np.array(iterates)


def _delayed_cases():
    gen = _rng(153)
    M = gen.standard_normal((4, 4))
    A = M @ M.T / 4 + 0.1 * np.eye(4)
    b, x0 = gen.standard_normal(4), gen.standard_normal(4)
    top = float(np.linalg.eigvalsh(A).max())
    return [("no delay (gradient descent)", A, b, x0, 0.5 / top, 0, 20),
            ("delay 1", A, b, x0, 0.5 / top, 1, 20),
            ("delay 3", A, b, x0, 0.3 / top, 3, 30),
            ("delay 5 with a step that is stable without delay", A, b, x0, 1.0 / top, 5, 25),
            ("a delay longer than the run", A, b, x0, 0.2 / top, 10, 6),
            ("a scalar problem, delay 2", np.array([[2.0]]), np.array([1.0]), np.array([3.0]), 0.4, 2, 15)]


@exercise("15.3", title="Gradient descent with stale gradients", function="delayed_gradient_descent",
          kind="extend", difficulty=2, minutes=25, blocked=("dlbook.quadratics.gradient_descent",),
          hint="keep the list of all iterates; step t uses the gradient A x - b at iterate max(t - delay, 0), "
               "applied to the current iterate x_t.")
def check_delayed_gradient_descent(delayed_gradient_descent, cases):
    """Against a NumPy loop over the delayed steps, to 1e-9 relative to the largest iterate."""
    for label, A, b, x0, lr, delay, num_steps in _delayed_cases():
        with cases.case(f"delayed_gradient_descent(...) with {label}, lr = {lr:.4g}, {num_steps} steps"):
            got = as_array(delayed_gradient_descent(torch.tensor(A), torch.tensor(b), torch.tensor(x0), lr, delay,
                                                    num_steps),
                           (num_steps + 1, len(x0)), f"iterates of shape ({num_steps + 1}, {len(x0)})")
            expected = _delayed_expected(A, b, x0, lr, delay, num_steps)
            _expect_close_array("the iterates", got, expected, 1e-9 * max(1.0, np.abs(expected).max()))


# ---------------------------------------------------------------------------
# Exercise 15.4: the exact MAML meta-gradient of quadratic tasks (derive)
# ---------------------------------------------------------------------------

def _maml_expected(theta, centers, curvatures, alpha, steps):
    total = np.zeros_like(theta)
    for c, A in zip(centers, curvatures):
        J = np.linalg.matrix_power(np.eye(len(theta)) - alpha * A, steps)     # d theta' / d theta
        adapted = c + J @ (theta - c)
        total += J.T @ (A @ (adapted - c))
    return total / len(centers)


def _maml_cases():
    cases = []
    for label, d, tasks, alpha, steps, seed in (("d = 3, 4 tasks, one step", 3, 4, 0.1, 1, 1),
                                                ("d = 5, 6 tasks, three steps", 5, 6, 0.05, 3, 2),
                                                ("d = 2, one task, five steps", 2, 1, 0.2, 5, 3),
                                                ("d = 4, 3 tasks, no adaptation (0 steps)", 4, 3, 0.1, 0, 4),
                                                ("d = 1, 5 tasks, two large steps", 1, 5, 0.7, 2, 5)):
        gen = _rng(1540 + seed)
        M = gen.standard_normal((tasks, d, d))
        curvatures = M @ M.transpose(0, 2, 1) / d + 0.2 * np.eye(d)
        cases.append((label, gen.standard_normal(d), gen.standard_normal((tasks, d)), curvatures, alpha, steps))
    return cases


@exercise("15.4", title="The MAML meta-gradient of quadratic tasks", function="maml_meta_gradient", kind="derive",
          difficulty=3, minutes=40, blocked=("dlbook.meta_learning.adapt",),
          hint="k steps on (1/2)(θ - c)ᵀA(θ - c) give θ' = c + (I - αA)^k (θ - c); differentiate L(θ') with the "
               "chain rule: the Jacobian (I - αA)^k multiplies the gradient A(θ' - c). Average over the tasks.")
def check_maml_meta_gradient(maml_meta_gradient, cases):
    """Against the closed form written here with NumPy matrix powers, to 1e-10 relative."""
    for label, theta, centers, curvatures, alpha, steps in _maml_cases():
        with cases.case(f"maml_meta_gradient(...) with {label}, alpha = {alpha}"):
            got = as_array(maml_meta_gradient(torch.tensor(theta), torch.tensor(centers), torch.tensor(curvatures),
                                              alpha, steps), theta.shape, f"a gradient of shape {theta.shape}")
            expected = _maml_expected(theta, centers, curvatures, alpha, steps)
            _expect_close_array("the meta-gradient", got, expected, 1e-10 * max(1.0, np.abs(expected).max()))
