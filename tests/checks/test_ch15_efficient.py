"""Checks of chapter 15's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import math

import numpy as np
import torch

from dlbook import meta_learning, privacy, quadratics, quantization
from dlbook.exercises.checks import ch15_efficient as checks

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ["15.1", "15.2", "15.3", "15.4"]


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules and of the notebook)
# ---------------------------------------------------------------------------

def fixed_answers_variance(epsilon, num_respondents):
    p = 1 / (1 + math.exp(-epsilon))
    return p * (1 - p) / (num_respondents * (2 * p - 1) ** 2)


def quantize_per_channel(W, num_bits, *, variant="right"):
    top = 2 ** (num_bits - 1) - 1
    if variant == "per column":
        largest = W.abs().amax(dim=0, keepdim=True)
    elif variant == "per tensor":
        largest = W.abs().max().expand(W.shape[0], 1)
    else:
        largest = W.abs().amax(dim=1, keepdim=True)
    if variant == "full range":
        top = 2 ** (num_bits - 1)
    step = torch.where(largest > 0, largest / top, torch.ones_like(largest))
    rounded = torch.floor(W / step) if variant == "floor" else torch.round(W / step)
    return torch.clamp(rounded, -top, top) * step


def delayed_gradient_descent(A, b, x0, lr, delay, num_steps, *, variant="right"):
    iterates = [x0.clone()]
    for t in range(num_steps):
        staleness = max(delay - 1, 0) if variant == "one step less stale" else delay
        index = max(t - staleness, 0)
        stale = iterates[index]
        base = stale if variant == "step from the stale iterate" else iterates[t]
        iterates.append(base - lr * (A @ stale - b))
    return torch.stack(iterates)


def maml_meta_gradient(theta, centers, curvatures, alpha, steps, *, variant="right"):
    eye = torch.eye(len(theta), dtype=theta.dtype)
    total = torch.zeros_like(theta)
    for c, A in zip(centers, curvatures):
        J = torch.linalg.matrix_power(eye - alpha * A, steps)
        adapted = c + J @ (theta - c)
        gradient = A @ (adapted - c)
        total += gradient if variant == "first order" else J.T @ gradient
    return total if variant == "summed over tasks" else total / len(centers)


REFERENCES = {"15.1": fixed_answers_variance, "15.2": quantize_per_channel, "15.3": delayed_gradient_descent,
              "15.4": maml_meta_gradient}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _population_formula(epsilon, num_respondents):
    p = 1 / (1 + math.exp(-epsilon))
    return 0.25 / (num_respondents * (2 * p - 1) ** 2)      # lambda(1 - lambda) at its largest, 1/4


def _variance_by_package(epsilon, num_respondents):
    return privacy.estimate_variance(0.5, epsilon, num_respondents)


def _per_tensor_by_package(W, num_bits):
    return quantization.quantize_uniform(W, num_bits)


def _gradient_descent_by_package(A, b, x0, lr, delay, num_steps):
    return quadratics.gradient_descent(A, x0, lr, num_steps, b=b).iterates


def _first_order_by_package(theta, centers, curvatures, alpha, steps):
    model = torch.nn.Linear(1, 1)
    meta_learning.adapt(model, dict(model.named_parameters()), torch.zeros(1, 1), torch.zeros(1, 1), lr=alpha,
                        steps=steps)
    return maml_meta_gradient(theta, centers, curvatures, alpha, steps, variant="first order")


WRONG = {
    "15.1": {
        "the population formula at its worst case, 1 / (4 n (2p - 1)^2)": _population_formula,
        "without the (2p - 1)^2 correction, p(1 - p) / n": lambda eps, n: fixed_answers_variance(eps, n) * (
            2 / (1 + math.exp(-eps)) - 1) ** 2,
        "the variance of asking directly at share 1/2": lambda eps, n: 0.25 / n,
        "the package's population variance": _variance_by_package,
    },
    "15.2": {
        "one step per column": lambda W, b: quantize_per_channel(W, b, variant="per column"),
        "one step for the whole tensor": lambda W, b: quantize_per_channel(W, b, variant="per tensor"),
        "range up to 2^(b-1) instead of 2^(b-1) - 1": lambda W, b: quantize_per_channel(W, b, variant="full range"),
        "floor instead of round": lambda W, b: quantize_per_channel(W, b, variant="floor"),
        "the package's per-tensor quantizer": _per_tensor_by_package,
    },
    "15.3": {
        "one step less stale": lambda *a: delayed_gradient_descent(*a, variant="one step less stale"),
        "step taken from the stale iterate": lambda *a: delayed_gradient_descent(*a, variant="step from the stale "
                                                                                          "iterate"),
        "no delay at all": lambda A, b, x0, lr, delay, n: delayed_gradient_descent(A, b, x0, lr, 0, n),
        "the package's gradient descent": _gradient_descent_by_package,
    },
    "15.4": {
        "first-order MAML (the Jacobian dropped)": lambda *a: maml_meta_gradient(*a, variant="first order"),
        "summed instead of averaged over tasks": lambda *a: maml_meta_gradient(*a, variant="summed over tasks"),
        "one inner step whatever the number asked": lambda th, c, A, alpha, steps: maml_meta_gradient(
            th, c, A, alpha, 1),
        "the package's adaptation with a first-order gradient": _first_order_by_package,
    },
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns a 3x3 tensor",
                      "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests of the checks' own expectations
# ---------------------------------------------------------------------------

def test_simulated_variance_matches_the_closed_form():
    for epsilon, n in ((1.0, 200), (3.0, 50)):
        measured = checks._simulated_fixed_variance(epsilon, n, 0.3, seed=9)
        assert abs(measured / fixed_answers_variance(epsilon, n) - 1) < 0.04


def test_per_channel_expectation_equals_torch_fake_quantize_per_channel():
    label, W, bits = checks._per_channel_cases()[0]
    top = 2 ** (bits - 1) - 1
    steps = np.abs(W).max(axis=1) / top
    reference = torch.fake_quantize_per_channel_affine(torch.tensor(W, dtype=torch.float32),
                                                       torch.tensor(steps, dtype=torch.float32),
                                                       torch.zeros(len(W), dtype=torch.int32), 0, -top, top)
    np.testing.assert_allclose(checks._per_channel_expected(W, bits), reference.double().numpy(), rtol=1e-5,
                               atol=1e-6 * np.abs(W).max())


def test_delayed_expectation_without_delay_is_gradient_descent():
    label, A, b, x0, lr, delay, num_steps = checks._delayed_cases()[0]
    run = quadratics.gradient_descent(torch.tensor(A), torch.tensor(x0), lr, num_steps, b=torch.tensor(b))
    np.testing.assert_allclose(checks._delayed_expected(A, b, x0, lr, 0, num_steps),
                               run.iterates.numpy(), rtol=1e-12, atol=1e-12)


def test_maml_expectation_equals_autograd_through_the_inner_steps():
    for label, theta, centers, curvatures, alpha, steps in checks._maml_cases():
        t = torch.tensor(theta, requires_grad=True)
        loss = 0.0
        for c, A in zip(torch.tensor(centers), torch.tensor(curvatures)):
            adapted = t
            for _ in range(steps):
                adapted = adapted - alpha * (A @ (adapted - c))
            loss = loss + 0.5 * (adapted - c) @ A @ (adapted - c)
        (gradient,) = torch.autograd.grad(loss / len(centers), t)
        np.testing.assert_allclose(checks._maml_expected(theta, centers, curvatures, alpha, steps),
                                   gradient.numpy(), rtol=1e-10, atol=1e-12)
