"""Checks for the exercises of chapter 4 (04_training): dropout, stable initialization, folding
batch norm, what dropout converges to, and early stopping with weight decay.

Expected values come from independent code: NumPy in float64, PyTorch's own
batch norm, Monte Carlo measurements made here, explicit gradient-descent
loops and matrix powers, never from dlbook's chapter modules, so that a bug
there cannot make a wrong answer pass. The student's function receives
only tensors and numbers.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..core import Mismatch, as_array, as_float, describe, exercise, expect

# ---------------------------------------------------------------------------
# Exercise 4.1: inverted dropout
# ---------------------------------------------------------------------------


@exercise("4.1", title="Inverted dropout", function="inverted_dropout", kind="transcribe",
          difficulty=1, minutes=10, blocked=("dlbook.regularization.dropout",),
          hint="draw one keep-or-drop decision per entry from a generator seeded with seed, and "
               "rescale the kept entries so that the expectation does not change.")
def check_inverted_dropout(inverted_dropout, cases):
    """Statistical cases (5σ, fixed seeds), exact ones (kept values, p = 0 and 1), reproducibility."""
    num = 100_000
    for drop_prob, seed in ((0.3, 7), (0.5, 8), (0.8, 9)):
        with cases.case(f"inverted_dropout(torch.ones({num}), drop_prob={drop_prob}, seed={seed})"):
            out = as_array(inverted_dropout(torch.ones(num), drop_prob, seed), (num,))
            zeros = out == 0
            expect(np.allclose(out[~zeros], 1 / (1 - drop_prob), rtol=1e-6),
                   f"every kept entry equal to 1/(1 - drop_prob) = {1 / (1 - drop_prob):.6g}",
                   f"kept values such as {np.unique(np.round(out[~zeros], 6))[:3].tolist()}")
            sigma = math.sqrt(drop_prob * (1 - drop_prob) / num)
            expect(abs(zeros.mean() - drop_prob) < 5 * sigma,
                   f"a fraction {drop_prob} of zeros (within {5 * sigma:.4f})", f"{zeros.mean():.4f}")
            mean_sigma = math.sqrt(drop_prob / (1 - drop_prob) / num)
            expect(abs(out.mean() - 1) < 5 * mean_sigma,
                   f"mean 1 (dropout preserves the expectation; within {5 * mean_sigma:.4f})", f"{out.mean():.4f}")
    x = torch.randn(400, 30, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with cases.case("inverted_dropout(x, drop_prob=0.25, seed=1) on a (400, 30) Gaussian x"):
        out = as_array(inverted_dropout(x.clone(), 0.25, 1), (400, 30))
        kept = out != 0
        expect(np.allclose(out[kept], x.numpy()[kept] / 0.75, rtol=1e-6),
               "each entry either 0 or x / (1 - drop_prob)", "other values")
    with cases.case("inverted_dropout(x, drop_prob=0.25, seed) twice with seed 5, then with seed 6"):
        first = as_array(inverted_dropout(x.clone(), 0.25, 5), (400, 30))
        again = as_array(inverted_dropout(x.clone(), 0.25, 5), (400, 30))
        other = as_array(inverted_dropout(x.clone(), 0.25, 6), (400, 30))
        expect(np.array_equal(first, again), "the same mask for the same seed (draw from a generator seeded "
               "with seed, not from the global random stream)", "two different masks")
        expect(not np.array_equal(first == 0, other == 0), "different masks for different seeds",
               "the same mask for seeds 5 and 6")
    with cases.case("inverted_dropout(x, drop_prob=0.0, seed=2) (nothing dropped)"):
        out = as_array(inverted_dropout(x.clone(), 0.0, 2), (400, 30))
        expect(np.array_equal(out, x.numpy()), "x unchanged", "a changed tensor")
    with cases.case("inverted_dropout(x, drop_prob=1.0, seed=2) (everything dropped)"):
        out = as_array(inverted_dropout(x.clone(), 1.0, 2), (400, 30))
        expect(np.array_equal(out, np.zeros((400, 30))), "all zeros (and no division by zero)",
               f"values such as {np.round(out.ravel()[:3], 4).tolist()}")


# ---------------------------------------------------------------------------
# Exercise 4.2: a weight variance that keeps the signal alive (predict, then measure)
# ---------------------------------------------------------------------------

#: Gaussian pre-activations the check pushes through one layer to measure its gain.
_NUM_PREACTIVATIONS = 1_000_000


def _measured_second_moment(negative_slope: float, drop_prob: float, seed: int) -> float:
    """E[a²] of a = inverted dropout(leaky ReLU(z)) for z ~ N(0, 1), by simulation."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(_NUM_PREACTIVATIONS)
    activation = np.where(z > 0, z, negative_slope * z)
    kept = rng.random(_NUM_PREACTIVATIONS) >= drop_prob
    return float(np.mean((activation * kept / (1 - drop_prob)) ** 2))


@exercise("4.2", title="A weight variance that keeps the signal alive", function="stable_weight_variance",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.initialization.weight_variance", "dlbook.initialization.predicted_second_moments"),
          hint="the variance recursion of section 4.1 multiplies E[z²] by fan_in · σ² · E[a²]/E[z²]; work "
               "out E[a²] for the leaky ReLU (both halves of the Gaussian) and then for the dropout mask.")
def check_stable_weight_variance(stable_weight_variance, cases):
    """The gain of a layer with the student's σ² is measured on 10⁶ Gaussian pre-activations."""
    for index, (fan_in, slope, drop_prob) in enumerate([(256, 0.0, 0.0), (100, 0.2, 0.0), (64, 0.0, 0.5),
                                                        (300, 0.5, 0.2), (50, -1.0, 0.3), (128, 1.0, 0.0),
                                                        (1000, 0.1, 0.4)]):
        label = f"stable_weight_variance(fan_in={fan_in}, negative_slope={slope}, drop_prob={drop_prob})"
        with cases.case(label):
            variance = as_float(stable_weight_variance(fan_in, slope, drop_prob), "a variance (one number)")
            expect(variance > 0, "a positive variance", f"{variance:.6g}")
            # z_next = Σ_j W_ij a_j with independent zero-mean weights: E[z_next²] = fan_in σ² E[a²],
            # and E[z²] = 1 for the simulated pre-activations.
            gain = fan_in * variance * _measured_second_moment(slope, drop_prob, seed=100 + index)
            expect(abs(gain - 1) <= 0.02,
                   "a layer that keeps E[z²]: measured factor per layer 1 ± 0.02",
                   f"σ² = {variance:.6g}, with which a layer multiplies E[z²] by {gain:.4f} "
                   f"(measured on {_NUM_PREACTIVATIONS:,} Gaussian pre-activations)")


# ---------------------------------------------------------------------------
# Exercise 4.3: folding batch norm into the linear layer before it
# ---------------------------------------------------------------------------


def _fold_case(seed: int, fan_out: int, fan_in: int, *, tiny_var: bool = False, zero_gamma: bool = False):
    rng = torch.Generator().manual_seed(seed)
    W = torch.randn(fan_out, fan_in, generator=rng, dtype=torch.float64)
    b = torch.randn(fan_out, generator=rng, dtype=torch.float64)
    gamma = 2 * torch.randn(fan_out, generator=rng, dtype=torch.float64)   # some negative
    if zero_gamma:
        gamma[0] = 0.0
    beta = torch.randn(fan_out, generator=rng, dtype=torch.float64)
    mean = 3 * torch.randn(fan_out, generator=rng, dtype=torch.float64)
    var = 0.1 + 4 * torch.rand(fan_out, generator=rng, dtype=torch.float64)
    if tiny_var:
        var = 1e-9 * torch.rand(fan_out, generator=rng, dtype=torch.float64)
    x = torch.randn(50, fan_in, generator=rng, dtype=torch.float64)
    return W, b, gamma, beta, mean, var, x


def _pair_of_arrays(out, shapes, names):
    if not isinstance(out, (tuple, list)) or len(out) != 2 or not all(
            isinstance(part, (torch.Tensor, np.ndarray)) for part in out):
        raise Mismatch(f"a pair ({names[0]}, {names[1]}) of tensors", describe(out))
    return tuple(as_array(part, shape, f"{name} of shape {shape}") for part, shape, name in zip(out, shapes, names))


@exercise("4.3", title="Folding batch norm into the layer before it", function="fold_batch_norm",
          kind="extend", difficulty=2, minutes=25,
          blocked=("dlbook.normalization.batch_norm", "dlbook.normalization.BatchNorm1d"),
          hint="in evaluation mode batch norm is y = γ (z − mean)/sqrt(var + ε) + β for each output "
               "feature z of the layer: substitute z = W x + b and collect what multiplies x.")
def check_fold_batch_norm(fold_batch_norm, cases):
    """Compare with torch.nn.functional.batch_norm in evaluation mode on random inputs (float64)."""
    for seed, fan_out, fan_in, eps, extra in [(0, 5, 5, 1e-5, {}), (1, 4, 6, 1e-5, {}), (2, 1, 3, 1e-5, {}),
                                              (3, 7, 2, 1e-3, {"zero_gamma": True}),
                                              (4, 3, 8, 1e-5, {"tiny_var": True}), (5, 16, 9, 0.1, {})]:
        W, b, gamma, beta, mean, var, x = _fold_case(seed, fan_out, fan_in, **extra)
        expected = F.batch_norm(x @ W.T + b, mean, var, gamma, beta, training=False, eps=eps).numpy()
        what = {"zero_gamma": ", one γ equal to 0", "tiny_var": ", running variances far below ε"}
        label = (f"fold_batch_norm(W, b, gamma, beta, running_mean, running_var, eps={eps}) with W of shape "
                 f"({fan_out}, {fan_in}){''.join(what[k] for k in extra)}")
        with cases.case(label):
            arguments = [t.clone() for t in (W, b, gamma, beta, mean, var)]
            W_folded, b_folded = _pair_of_arrays(fold_batch_norm(*arguments, eps), [(fan_out, fan_in), (fan_out,)],
                                                 ["W_folded", "b_folded"])
            unchanged = all(torch.equal(a, o) for a, o in zip(arguments, (W, b, gamma, beta, mean, var)))
            expect(unchanged, "the arguments left unchanged", "arguments modified in place")
            got = x.numpy() @ W_folded.T + b_folded
            error = float(np.abs(got - expected).max())
            scale = max(1.0, float(np.abs(expected).max()))
            expect(error <= 1e-9 * scale, "x @ W_folded.T + b_folded equal to batch norm (evaluation mode) of "
                   f"x @ W.T + b, e.g. {np.round(expected[0], 5).tolist()}",
                   f"{np.round(got[0], 5).tolist()} (largest error {error:.3g} over 50 inputs)")


# ---------------------------------------------------------------------------
# Exercise 4.4: what training with dropout converges to (predict, then measure)
# ---------------------------------------------------------------------------

#: Dropout masks the check draws to measure the minimizer of the averaged loss.
_NUM_MASKS = 20_000


def _regression_case(seed: int, rows: int, dim: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, dim)) * np.geomspace(0.3, 3.0, dim)
    y = X @ rng.normal(size=dim) + 0.5 * rng.normal(size=rows)
    return X, y


def _fit_on_masked_copies(X: np.ndarray, y: np.ndarray, keep_prob: float, seed: int) -> np.ndarray:
    """Least squares on _NUM_MASKS copies of the data, each with its own inverted-dropout mask.

    Accumulates the normal equations over the copies in chunks: (1/M) Σ_k X_kᵀX_k w = (1/M) Σ_k X_kᵀ y
    with X_k = (R_k ⊙ X)/q.
    """
    rng = np.random.default_rng(seed)
    gram, moment = np.zeros((X.shape[1], X.shape[1])), np.zeros(X.shape[1])
    for _ in range(_NUM_MASKS // 1000):
        masked = (rng.random((1000, *X.shape)) < keep_prob) * X / keep_prob      # (1000, N, d)
        gram += np.einsum("kni,knj->ij", masked, masked)
        moment += np.einsum("kni,n->i", masked, y)
    return np.linalg.solve(gram, moment)


@exercise("4.4", title="What training with dropout converges to", function="dropout_ridge_weights",
          kind="predict", difficulty=2, minutes=30,
          blocked=("dlbook.regularization.dropout_marginal_loss", "dlbook.regularization.ridge_solution",
                   "dlbook.regularization.dropout"),
          hint="write the masked prediction as its mean plus a zero-mean fluctuation: the mean term gives "
               "the ordinary squared error, the variance of the fluctuation a penalty on each weight. Then "
               "set the gradient of the sum to zero.")
def check_dropout_ridge_weights(dropout_ridge_weights, cases):
    """The prediction is compared with a least-squares fit on 20,000 dropout-masked copies of the data."""
    for index, (rows, dim, keep_prob) in enumerate([(40, 5, 0.5), (60, 3, 0.8), (30, 6, 0.3), (25, 4, 1.0),
                                                    (8, 12, 0.7)]):
        X, y = _regression_case(10 + index, rows, dim)
        label = f"dropout_ridge_weights(X, y, keep_prob={keep_prob}) with X of shape ({rows}, {dim})"
        if rows < dim:
            label += " (more features than examples)"
        with cases.case(label):
            got = as_array(dropout_ridge_weights(torch.tensor(X), torch.tensor(y), keep_prob), (dim,),
                           f"a weight vector of length {dim}")
            measured = _fit_on_masked_copies(X, y, keep_prob, seed=20 + index)
            error = float(np.linalg.norm(got - measured) / np.linalg.norm(measured))
            expect(error <= 0.05,
                   f"the weights a fit on {_NUM_MASKS:,} dropout-masked copies of the data converges to, "
                   f"{np.round(measured, 4).tolist()} (within 5%)",
                   f"{np.round(got, 4).tolist()} ({100 * error:.1f}% away)")


# ---------------------------------------------------------------------------
# Exercise 4.5: early stopping with weight decay, in closed form
# ---------------------------------------------------------------------------


def _gd_loop(X: np.ndarray, y: np.ndarray, lr: float, steps: int, weight_decay: float) -> np.ndarray:
    """The iteration itself: w ← w − η (Xᵀ(Xw − y)/N + μ w), from w = 0."""
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        w = w - lr * (X.T @ (X @ w - y) / len(X) + weight_decay * w)
    return w


def _gd_matrix_power(X: np.ndarray, y: np.ndarray, lr: float, steps: int, weight_decay: float) -> np.ndarray:
    """The same iterate from the affine map (w, 1) ↦ (Mw + ηXᵀy/N, 1) raised to the power ``steps``
    by repeated squaring: log2(steps) matrix products, no eigendecomposition."""
    dim = X.shape[1]
    affine = np.eye(dim + 1)
    affine[:dim, :dim] -= lr * (X.T @ X / len(X) + weight_decay * np.eye(dim))
    affine[:dim, dim] = lr * X.T @ y / len(X)
    return np.linalg.matrix_power(affine, steps)[:dim, dim]


def _gd_case(seed: int, rows: int, dim: int, step_size: float, weight_decay: float):
    """Data and a learning rate ``step_size`` / (λ_max + μ) for the penalized problem."""
    X, y = _regression_case(seed, rows, dim)
    curvature = np.linalg.eigvalsh(X.T @ X / rows).max() + weight_decay
    return X, y, step_size / curvature


#: (seed, rows, dim, η(λ_max + μ), steps, μ, seconds allowed or None).
_GD_CASES = [(30, 30, 5, 0.5, 50, 0.1, None), (31, 20, 3, 0.9, 1, 0.0, None), (32, 40, 8, 0.5, 0, 0.05, None),
             (33, 25, 4, 0.8, 400, 0.0, None), (34, 12, 12, 0.5, 30, 0.05, None),
             (35, 10, 16, 0.9, 500, 0.2, None), (36, 30, 5, 1.6, 200, 0.01, None),
             (37, 30, 6, 0.9, 300_000, 1e-3, 0.25), (38, 40, 5, 1.9, 10**9, 0.0, 0.25),
             (39, 8, 20, 0.7, 10**12, 1e-3, 0.25)]


@exercise("4.5", title="Early stopping with weight decay, without a loop", function="gd_weights",
          kind="derive", difficulty=3, minutes=35,
          blocked=("dlbook.regularization.early_stopped_solution", "dlbook.regularization.early_stopping_shrinkage",
                   "dlbook.regularization.gradient_descent_path", "dlbook.regularization.decay_trajectory",
                   "dlbook.regularization.ridge_solution", "dlbook.quadratics.gradient_descent",
                   "dlbook.quadratics.least_squares_gd"),
          hint="with the penalty the Hessian is XᵀX/N + μI, with the same eigenvectors as XᵀX/N; solve the "
               "scalar recursion w ← (1 − η(λ + μ)) w + η c along each eigenvector, keeping the division by "
               "λ + μ away from directions where it is zero.")
def check_gd_weights(gd_weights, cases):
    """Compare with an explicit loop (small step counts) or a matrix power (large ones), in float64."""
    for seed, rows, dim, step_size, steps, weight_decay, seconds in _GD_CASES:
        X, y, lr = _gd_case(seed, rows, dim, step_size, weight_decay)
        expected = (_gd_loop if seconds is None else _gd_matrix_power)(X, y, lr, steps, weight_decay)
        label = (f"gd_weights(X, y, lr={lr:.4g}, steps={steps:,}, weight_decay={weight_decay:g}) with X of "
                 f"shape ({rows}, {dim})")
        if step_size > 1:
            label += f", η(λ_max + μ) = {step_size}"
        timing = {} if seconds is None else {
            "time_limit": seconds, "why": "the task asks for a closed form, without a loop over the steps"}
        with cases.case(label, **timing):
            got = as_array(gd_weights(torch.tensor(X), torch.tensor(y), lr, steps, weight_decay), (dim,),
                           f"a weight vector of length {dim}")
            error = float(np.abs(got - expected).max())
            expect(error <= 1e-8 * max(1.0, float(np.abs(expected).max())),
                   f"the weights after {steps:,} gradient steps, {np.round(expected, 5).tolist()}",
                   f"{np.round(got, 5).tolist()} (largest error {error:.3g})")
