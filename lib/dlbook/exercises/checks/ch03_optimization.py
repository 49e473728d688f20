"""Checks for the exercises of chapter 3 (03_optimization): backprop, step sizes, Adam, momentum.

Every expected value is computed here with a few lines of independent NumPy
code (not by calling dlbook.autograd, dlbook.optim or dlbook.convergence), so
that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, describe, exercise, expect

# ---------------------------------------------------------------------------
# Exercise 3.1: the backward pass of softmax cross-entropy
# ---------------------------------------------------------------------------


def _reference_ce_grad(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(softmax(z) - one_hot(y)) / N, with the row maximum subtracted for stability."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(targets)), targets] -= 1.0
    return p / len(targets)


def _ce_cases():
    rng = np.random.default_rng(31)
    cases = [("random logits, N = 7, C = 4", rng.normal(size=(7, 4)), rng.integers(0, 4, 7)),
             ("random logits, N = 32, C = 10", 3 * rng.normal(size=(32, 10)), rng.integers(0, 10, 32)),
             ("a single example, C = 3", np.array([[0.5, -1.0, 2.0]]), np.array([1])),
             ("two classes, equal logits", np.zeros((4, 2)), np.array([0, 1, 1, 0])),
             ("large logits (around 1000)", 1000 + rng.normal(size=(5, 6)), rng.integers(0, 6, 5)),
             ("very negative logits (around -800)", -800 + rng.normal(size=(3, 5)), rng.integers(0, 5, 3))]
    return cases


@exercise("3.1", title="The backward pass of softmax cross-entropy", function="cross_entropy_backward",
          hint="differentiate the softmax and the logarithm together: the result is remarkably "
               "simple. For stability, shift each row of logits before exponentiating.")
def check_cross_entropy_backward(cross_entropy_backward, cases):
    """logits: (N, C) float64 tensor; targets: (N,) int64 tensor."""
    for label, logits, targets in _ce_cases():
        with cases.case(f"cross_entropy_backward(logits, targets) on {label}"):
            out = cross_entropy_backward(torch.tensor(logits, dtype=torch.float64),
                                         torch.tensor(targets, dtype=torch.int64))
            got = as_array(out, logits.shape, f"a gradient of shape {logits.shape}")
            expected = _reference_ce_grad(logits, targets)
            error = np.abs(got - expected).max()
            expect(error <= 1e-10, f"(softmax - one_hot) / N within 1e-10, e.g. row 0 = "
                                   f"{np.round(expected[0], 6).tolist()}",
                   f"row 0 = {np.round(got[0], 6).tolist()} (largest error {error:.3g})")


# ---------------------------------------------------------------------------
# Exercise 3.2: step sizes for a quadratic
# ---------------------------------------------------------------------------


def _spd(eigenvalues, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(len(eigenvalues), len(eigenvalues))))
    A = (Q * np.asarray(eigenvalues, dtype=float)) @ Q.T
    return (A + A.T) / 2


@exercise("3.2", title="Step sizes for a quadratic", function="step_size_facts",
          hint="everything follows from the extreme eigenvalues of A: the stability limit, the "
               "best constant step and the rate that step achieves.")
def check_step_size_facts(step_size_facts, cases):
    """A: symmetric positive definite float64 tensor; answer (largest stable, best step, best rate)."""
    spectra = [("eigenvalues 0.01 ... 1 in R^5", [0.01, 0.1, 0.3, 0.7, 1.0], 1),
               ("eigenvalues 2 and 50 in R^2", [2.0, 50.0], 2),
               ("eigenvalues 0.5 ... 8 in R^6", [8.0, 0.5, 3.0, 3.0, 1.0, 7.5], 3),
               ("a multiple of the identity, 4 I in R^3", [4.0, 4.0, 4.0], 4)]
    for label, eigenvalues, seed in spectra:
        A = _spd(eigenvalues, seed)
        mu, L = min(eigenvalues), max(eigenvalues)
        with cases.case(f"step_size_facts(A) with {label}"):
            out = step_size_facts(torch.tensor(A, dtype=torch.float64))
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise Mismatch("a tuple (largest_stable_step, best_step, best_rate)", describe(out))
            names = ("largest_stable_step", "best_step", "best_rate")
            for name, got, expected in zip(names, out, (2 / L, 2 / (mu + L), (L - mu) / (L + mu))):
                value = as_float(got, f"{name} as a number")
                expect(abs(value - expected) <= 1e-8 * max(1.0, abs(expected)),
                       f"{name} = {expected:.10g}", f"{value:.10g}")


# ---------------------------------------------------------------------------
# Exercise 3.3: Adam from scratch
# ---------------------------------------------------------------------------


def _reference_adam(grad_fn, theta0: np.ndarray, lr, betas, eps, steps) -> np.ndarray:
    beta1, beta2 = betas
    theta = theta0.copy()
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    out = [theta.copy()]
    for t in range(1, steps + 1):
        g = grad_fn(theta)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        theta = theta - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
        out.append(theta.copy())
    return np.array(out)


def _adam_problems():
    A = _spd([0.05, 0.5, 2.0, 10.0], 7)
    return [
        ("an ill-conditioned quadratic in R^4", lambda th: A @ th, np.array([1.0, -2.0, 0.5, 3.0]),
         dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, steps=80)),
        ("h = sum log(1 + theta^2) in R^3", lambda th: 2 * th / (1 + th**2), np.array([3.0, -0.2, 1.5]),
         dict(lr=0.1, betas=(0.8, 0.99), eps=1e-8, steps=60)),
        ("h = sum theta^4 / 4 with a large eps (where eps goes matters)", lambda th: th**3,
         np.array([0.3, -1.2]), dict(lr=0.02, betas=(0.9, 0.999), eps=0.5, steps=40)),
        ("a single step on a linear function", lambda th: np.array([1e-3, -50.0]), np.array([0.0, 0.0]),
         dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, steps=1)),
    ]


@exercise("3.3", title="Adam from scratch", function="adam_iterates",
          hint="keep running averages of the gradient and of its square, correct both for "
               "starting at zero, and remember that the step counter starts at 1.")
def check_adam_iterates(adam_iterates, cases):
    """grad_fn maps a float64 tensor to a float64 tensor; compare all iterates with the reference."""
    for label, grad_np, theta0, kwargs in _adam_problems():
        def grad_fn(theta, grad_np=grad_np):
            return torch.as_tensor(grad_np(theta.detach().cpu().numpy()), dtype=torch.float64)

        expected = _reference_adam(grad_np, theta0, kwargs["lr"], kwargs["betas"], kwargs["eps"], kwargs["steps"])
        settings = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        with cases.case(f"adam_iterates(grad_fn, theta0, {settings}) on {label}"):
            out = adam_iterates(grad_fn, torch.tensor(theta0, dtype=torch.float64), **kwargs)
            got = as_array(out, expected.shape, f"iterates of shape {expected.shape} (start included)")
            error = np.abs(got - expected).max(axis=1)
            first_bad = int(np.argmax(error > 1e-9)) if np.any(error > 1e-9) else None
            expect(first_bad is None,
                   "the reference iterates within 1e-9" + (
                       "" if first_bad is None else
                       f"; at step {first_bad}: {np.round(expected[first_bad], 12).tolist()}"),
                   "" if first_bad is None else
                   f"{np.round(got[first_bad], 12).tolist()} (off by {error[first_bad]:.2g})")


# ---------------------------------------------------------------------------
# Exercise 3.4: momentum under a constant gradient
# ---------------------------------------------------------------------------


def _reference_heavy_ball(lr: float, momentum: float, num_steps: int) -> np.ndarray:
    theta_prev = theta = 0.0
    lengths = []
    for _ in range(num_steps):
        theta_next = theta - lr * 1.0 + momentum * (theta - theta_prev)
        lengths.append(abs(theta - theta_next))
        theta_prev, theta = theta, theta_next
    return np.array(lengths)


@exercise("3.4", title="Momentum under a constant gradient", function="heavy_ball_steps",
          hint="unroll the momentum recursion under a constant gradient: each step adds one more "
               "power of the momentum.")
def check_heavy_ball_steps(heavy_ball_steps, cases):
    """Compare with the simulated recursion theta+ = theta - lr g + momentum (theta - theta_prev)."""
    for lr, momentum, num_steps in [(0.1, 0.9, 50), (0.01, 0.5, 20), (1.0, 0.0, 5), (0.3, 0.99, 200),
                                    (0.2, 0.9, 1)]:
        expected = _reference_heavy_ball(lr, momentum, num_steps)
        with cases.case(f"heavy_ball_steps(lr={lr}, momentum={momentum}, num_steps={num_steps})"):
            got = as_array(heavy_ball_steps(lr, momentum, num_steps), (num_steps,),
                           f"a vector of {num_steps} step lengths")
            error = np.abs(got - expected)
            bad = int(np.argmax(error)) if error.max() > 1e-10 * max(1.0, expected.max()) else None
            expect(bad is None,
                   "the simulated step lengths" + ("" if bad is None else f"; step {bad} = {expected[bad]:.10g}"),
                   "" if bad is None else f"{got[bad]:.10g}")
