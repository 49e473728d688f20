"""Checks for the exercises of chapter 4 (04_training): dropout, batch norm, smoothing, distillation, early stopping.

Expected values come from independent code: NumPy formulas in float64, or
PyTorch's own functional implementations (F.batch_norm, F.cross_entropy), never
from dlbook's chapter modules, so that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..core import Mismatch, as_array, as_float, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Exercise 4.1: inverted dropout
# ---------------------------------------------------------------------------


def _dropout_output(out, shape, what="the dropped-out tensor"):
    return as_array(out, shape, f"{what} of shape {shape}")


@exercise("4.1", title="Inverted dropout", function="inverted_dropout",
          hint="draw an independent keep-or-drop decision per entry from the given generator, "
               "and rescale the kept entries so that the expectation does not change.")
def check_inverted_dropout(inverted_dropout, cases):
    """Statistical cases (5σ tolerances, fixed generators) and exact ones (p = 0, kept values)."""
    num = 100_000
    for p in (0.3, 0.5, 0.8):
        with cases.case(f"inverted_dropout(torch.ones({num}), p={p}, generator)"):
            out = _dropout_output(inverted_dropout(torch.ones(num), p, torch.Generator().manual_seed(7)), (num,))
            zeros = out == 0
            expect(np.allclose(out[~zeros], 1 / (1 - p), rtol=1e-6),
                   f"every kept entry equal to 1/(1 - p) = {1 / (1 - p):.6g}",
                   f"kept values such as {np.unique(np.round(out[~zeros], 6))[:3].tolist()}")
            sigma = math.sqrt(p * (1 - p) / num)
            expect(abs(zeros.mean() - p) < 5 * sigma,
                   f"a fraction {p} of zeros (within {5 * sigma:.4f})", f"{zeros.mean():.4f}")
            mean_sigma = math.sqrt(p / (1 - p) / num)
            expect(abs(out.mean() - 1) < 5 * mean_sigma,
                   f"mean 1 (dropout preserves the expectation; within {5 * mean_sigma:.4f})",
                   f"{out.mean():.4f}")
    x = torch.randn(400, 30, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with cases.case("inverted_dropout(x, p=0.25, generator) on a (400, 30) Gaussian x"):
        out = _dropout_output(inverted_dropout(x, 0.25, torch.Generator().manual_seed(8)), (400, 30))
        kept = out != 0
        expect(np.allclose(out[kept], x.numpy()[kept] / 0.75, rtol=1e-6),
               "each entry either 0 or x / (1 - p)", "other values")
    with cases.case("inverted_dropout(x, p=0.0, generator) (nothing dropped)"):
        out = _dropout_output(inverted_dropout(x, 0.0, torch.Generator().manual_seed(9)), (400, 30))
        expect(np.allclose(out, x.numpy(), rtol=0, atol=1e-12), "x unchanged", "a changed tensor")
    with cases.case("two calls of inverted_dropout(x, p=0.5, generator) with one generator"):
        gen = torch.Generator().manual_seed(10)
        first = _dropout_output(inverted_dropout(x, 0.5, gen), (400, 30))
        second = _dropout_output(inverted_dropout(x, 0.5, gen), (400, 30))
        expect(not np.array_equal(first == 0, second == 0),
               "different masks on successive calls (draw from the generator)", "the same mask twice")


# ---------------------------------------------------------------------------
# Exercise 4.2: batch norm in training mode
# ---------------------------------------------------------------------------


def _batch_norm_case(seed: int, rows: int, features: int):
    rng = torch.Generator().manual_seed(seed)
    x = 2.0 + 3.0 * torch.randn(rows, features, generator=rng, dtype=torch.float64)
    gamma = 0.5 + torch.rand(features, generator=rng, dtype=torch.float64)
    beta = torch.randn(features, generator=rng, dtype=torch.float64)
    mean = torch.randn(features, generator=rng, dtype=torch.float64)
    var = 0.5 + torch.rand(features, generator=rng, dtype=torch.float64)
    return x, gamma, beta, mean, var


@exercise("4.2", title="Batch norm in training mode", function="batch_norm_train",
          hint="in training mode normalise with the statistics of the batch itself; the running "
               "averages are updated on the side, and the two use different variance estimates.")
def check_batch_norm_train(batch_norm_train, cases):
    """Compare output and running statistics with torch.nn.functional.batch_norm (float64)."""
    for seed, rows, features, momentum, eps in [(0, 16, 5, 0.1, 1e-5), (1, 2, 3, 0.1, 1e-5),
                                                (2, 64, 1, 0.5, 1e-3), (3, 7, 4, 1.0, 1e-5),
                                                (4, 32, 6, 0.0, 1e-5)]:
        x, gamma, beta, mean, var = _batch_norm_case(seed, rows, features)
        ref_mean, ref_var = mean.clone(), var.clone()
        expected = F.batch_norm(x, ref_mean, ref_var, gamma, beta, training=True, momentum=momentum, eps=eps)
        label = f"batch_norm_train(x, ...) with x of shape ({rows}, {features}), momentum={momentum}, eps={eps}"
        with cases.case(label):
            out = batch_norm_train(x.clone(), gamma.clone(), beta.clone(), mean.clone(), var.clone(),
                                   momentum, eps)
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise Mismatch("a tuple (output, new_running_mean, new_running_var)", describe(out))
            y = as_array(out[0], (rows, features), f"the output of shape ({rows}, {features})")
            new_mean = as_array(out[1], (features,), f"new_running_mean of length {features}")
            new_var = as_array(out[2], (features,), f"new_running_var of length {features}")
            for name, got, ref in [("output", y, expected), ("new_running_mean", new_mean, ref_mean),
                                   ("new_running_var", new_var, ref_var)]:
                error = float(np.abs(got - ref.numpy()).max())
                expect(error < 1e-8, f"{name} equal to torch's (max error < 1e-8)", f"max error {error:.3g}")


# ---------------------------------------------------------------------------
# Exercise 4.3: label-smoothed cross-entropy
# ---------------------------------------------------------------------------


def _logit_cases():
    rng = torch.Generator().manual_seed(5)
    out = []
    for name, rows, classes, scale, eps in [("A", 8, 10, 1.0, 0.1), ("B", 5, 2, 1.0, 0.2),
                                            ("C", 6, 4, 1.0, 0.0), ("D", 4, 3, 1.0, 1.0),
                                            ("E", 6, 10, 500.0, 0.1), ("F", 3, 5, 3.0, 0.5)]:
        logits = scale * torch.randn(rows, classes, generator=rng, dtype=torch.float64)
        y = torch.randint(0, classes, (rows,), generator=rng)
        out.append((name, logits, y, eps))
    return out


@exercise("4.3", title="Label-smoothed cross-entropy", function="smoothed_cross_entropy",
          hint="mix the one-hot targets with the uniform distribution, then take the "
               "cross-entropy against log-probabilities computed in a numerically stable way.")
def check_smoothed_cross_entropy(smoothed_cross_entropy, cases):
    """Compare with F.cross_entropy(label_smoothing=eps), including logits of size 1000."""
    for name, logits, y, eps in _logit_cases():
        expected = F.cross_entropy(logits, y, label_smoothing=eps).item()
        label = (f"smoothed_cross_entropy(logits, y, eps={eps}) on case {name} "
                 f"({logits.shape[0]} rows, {logits.shape[1]} classes, |logits| up to "
                 f"{logits.abs().max().item():.0f})")
        with cases.case(label):
            got = smoothed_cross_entropy(logits.clone(), y.clone(), eps)
            got = as_float(got, "the mean loss (one number)")
            expect_close(got, expected, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------
# Exercise 4.4: the distillation loss
# ---------------------------------------------------------------------------


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _distillation_reference(G: np.ndarray, Fl: np.ndarray, y: np.ndarray, T: float, alpha: float) -> float:
    p = np.exp(_log_softmax(Fl / T))
    soft = -(p * _log_softmax(G / T)).sum(axis=1).mean()
    hard = -_log_softmax(G)[np.arange(len(y)), y].mean()
    return alpha * T ** 2 * soft + (1 - alpha) * hard


@exercise("4.4", title="The distillation loss", function="distillation_loss",
          hint="soften both distributions with the temperature, compare them with a "
               "cross-entropy (mind the sign), scale that part by T squared and mix it with the "
               "ordinary loss on the labels.")
def check_distillation_loss(distillation_loss, cases):
    """Compare with a NumPy float64 reference over temperatures 1 to 20 and mixing weights 0 to 1."""
    rng = np.random.default_rng(11)
    for rows, classes, T, alpha in [(6, 10, 4.0, 0.9), (5, 3, 1.0, 0.5), (8, 5, 20.0, 1.0),
                                    (4, 10, 2.0, 0.0), (7, 4, 8.0, 0.3)]:
        G, Fl = 2 * rng.normal(size=(rows, classes)), 3 * rng.normal(size=(rows, classes))
        y = rng.integers(0, classes, size=rows)
        expected = _distillation_reference(G, Fl, y, T, alpha)
        label = f"distillation_loss(student, teacher, y, T={T}, alpha={alpha}) with {rows} rows, {classes} classes"
        with cases.case(label):
            got = distillation_loss(torch.tensor(G), torch.tensor(Fl), torch.tensor(y), T, alpha)
            got = as_float(got, "the loss (one number)")
            expect_close(got, expected, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------
# Exercise 4.5: early stopping in closed form
# ---------------------------------------------------------------------------


def _gd_reference(X: np.ndarray, y: np.ndarray, lr: float, steps: int) -> np.ndarray:
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        w = w - lr * X.T @ (X @ w - y) / len(X)
    return w


@exercise("4.5", title="Early stopping in closed form", function="gd_weights",
          hint="gradient descent on least squares acts independently on each eigen-direction of "
               "the input covariance: solve the scalar recursion there and transform back.")
def check_gd_weights(gd_weights, cases):
    """Compare with an explicit gradient-descent loop in float64 (t = 0, 1, a few hundred steps)."""
    rng = np.random.default_rng(4)
    for rows, dim, lr, steps in [(30, 5, 0.1, 50), (20, 3, 0.5, 1), (40, 8, 0.2, 0),
                                 (25, 4, 0.05, 400), (12, 12, 0.3, 30)]:
        X = rng.normal(size=(rows, dim)) * np.linspace(0.3, 1.5, dim)
        y = X @ rng.normal(size=dim) + 0.2 * rng.normal(size=rows)
        lam_max = np.linalg.eigvalsh(X.T @ X / rows).max()
        lr = lr / lam_max  # keep lr * lam below 1 so that every case converges
        expected = _gd_reference(X, y, lr, steps)
        with cases.case(f"gd_weights(X, y, lr={lr:.4g}, steps={steps}) with X of shape ({rows}, {dim})"):
            got = as_array(gd_weights(torch.tensor(X), torch.tensor(y), lr, steps), (dim,),
                           f"a weight vector of length {dim}")
            error = float(np.abs(got - expected).max())
            expect(error < 1e-8 * max(1.0, np.abs(expected).max()),
                   f"the weights after {steps} gradient steps, {np.round(expected, 5).tolist()}",
                   f"{np.round(got, 5).tolist()} (max error {error:.3g})")
