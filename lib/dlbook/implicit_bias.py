"""Implicit bias of gradient descent, deep linear networks and Rademacher complexity (Chapter 18).

On linearly separable data the mean logistic loss has no minimiser: gradient
descent drives ‖w‖ to infinity like log t, and its direction turns toward the
hard-margin SVM direction (Soudry et al.), which :func:`max_margin_direction`
computes as a small quadratic programme. A deep linear network trained by
gradient descent reaches the least-squares optimum while (nearly) conserving
the balance matrices W_{k+1}ᵀW_{k+1} - W_k W_kᵀ, exactly conserved by the flow.
The Rademacher complexity of a norm-bounded linear class has a Monte Carlo
estimate and the closed-form bound B √(Σ‖x_i‖²) / N.

Everything here is float64: its purpose is a comparison with exact answers.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize, special

from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_finite,
    check_float,
    check_int,
    check_ints,
    check_labels_pm1,
    check_same_length,
    describe,
)


def _separable_data(X, y) -> tuple[torch.Tensor, torch.Tensor]:
    X = check_finite("X", as_tensor("X", X, ndim=2, floating=True, dtype=torch.float64))
    y = as_tensor("y", y, ndim=1, dtype=torch.float64)
    check_same_length("X", X, "y", y)
    check_labels_pm1("y", y)
    return X, y


def logistic_loss(X, y, w) -> torch.Tensor:
    """Mean logistic loss (1/N) Σ log(1 + exp(-y_i w·x_i)) of a linear classifier without bias (Chapter 18)."""
    X, y = _separable_data(X, y)
    w = as_tensor("w", w, shape=(X.shape[1],), floating=True, dtype=torch.float64)
    return torch.nn.functional.softplus(-y * (X @ w)).mean()


class LogisticRun(NamedTuple):
    """Weights after each recorded step of gradient descent on the logistic loss."""
    steps: torch.Tensor         # (R,) step counts
    weights: torch.Tensor       # (R, d)


def logistic_gradient_descent(X, y, *, lr: float = 1.0, steps: int = 100_000, record=None,
                              normalized: bool = False) -> LogisticRun:
    """Gradient descent from w = 0 on the mean logistic loss of separable data (Chapter 18).

    ``record`` lists the step counts to keep (default: the last). With
    ``normalized`` each step is divided by the current loss, which keeps the
    step size from vanishing as the loss decays and turns the direction much faster.
    """
    X, y = _separable_data(X, y)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    normalized = check_bool("normalized", normalized)
    record = [steps] if record is None else check_ints("record", record, minimum=0)
    if max(record) > steps:
        raise ValueError(f"record must not exceed steps={steps}, got {max(record)}")
    wanted = set(record)
    # The loop runs in numpy: for 40 points in the plane a step costs a few microseconds
    # there, several times less than the same five torch calls.
    Z = (y.unsqueeze(1) * X).numpy()                             # (N, d) signed inputs
    w = np.zeros(X.shape[1])
    kept = {0: w.copy()} if 0 in wanted else {}
    for step in range(1, steps + 1):
        margins = Z @ w
        grad = -(special.expit(-margins) @ Z) / len(Z)
        if normalized:
            grad = grad / np.logaddexp(0.0, -margins).mean()
        w = w - lr * grad
        if step in wanted:
            kept[step] = w.copy()
    return LogisticRun(torch.tensor(record), torch.as_tensor(np.stack([kept[s] for s in record])))


def max_margin_direction(X, y) -> torch.Tensor:
    """Unit direction of the hard-margin SVM without bias: argmin ‖w‖ s.t. y_i w·x_i >= 1 (Chapter 18).

    Solved as a quadratic programme (SLSQP). Raises if the data are not
    linearly separable through the origin.
    """
    X, y = _separable_data(X, y)
    Z = (y.unsqueeze(1) * X).numpy()
    start = torch.linalg.lstsq(X, y.unsqueeze(1)).solution.squeeze(1).numpy()
    result = optimize.minimize(lambda w: 0.5 * w @ w, start, jac=lambda w: w, method="SLSQP",
                               constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1, "jac": lambda w: Z}],
                               options={"ftol": 1e-14, "maxiter": 1000})
    if not result.success or (Z @ result.x).min() < 1 - 1e-6:
        raise ValueError("X and y must be linearly separable by a hyperplane through the origin")
    w = torch.as_tensor(result.x, dtype=torch.float64)
    return w / w.norm()


def angle_degrees(u, v) -> float:
    """The angle between two non-zero vectors, in degrees (Chapter 18)."""
    u = as_tensor("u", u, ndim=1, floating=True, dtype=torch.float64)
    v = as_tensor("v", v, shape=(len(u),), floating=True, dtype=torch.float64)
    if u.norm() == 0 or v.norm() == 0:
        raise ValueError("u and v must be non-zero")
    cosine = (u @ v / (u.norm() * v.norm())).clamp(-1.0, 1.0)
    return math.degrees(math.acos(cosine.item()))


def deep_linear_init(widths, *, scale: float = 0.5, seed: int = 0) -> list[torch.Tensor]:
    """Weights W_k of shape (widths[k+1], widths[k]) with entries N(0, scale² / widths[k]) (Chapter 18)."""
    widths = check_ints("widths", widths, minimum=1, min_length=2)
    scale = check_float("scale", scale, low=0.0)
    gen = generator(seed)
    return [scale * torch.randn(m, n, generator=gen, dtype=torch.float64) / n ** 0.5
            for n, m in zip(widths[:-1], widths[1:])]


def _weights(weights) -> list[torch.Tensor]:
    if not isinstance(weights, (list, tuple)) or len(weights) == 0:
        raise TypeError(f"weights must be a non-empty list of matrices, got {describe(weights)}")
    weights = [as_tensor(f"weights[{k}]", W, ndim=2, floating=True) for k, W in enumerate(weights)]
    for k in range(len(weights) - 1):
        if weights[k + 1].shape[1] != weights[k].shape[0]:
            raise ValueError(f"weights[{k + 1}] must have {weights[k].shape[0]} columns to follow weights[{k}], "
                             f"got {describe(weights[k + 1])}")
    return weights


def end_to_end(weights) -> torch.Tensor:
    """The product W_L ... W_1 computed by a deep linear network (Chapter 18)."""
    weights = _weights(weights)
    product = weights[0]
    for W in weights[1:]:
        product = W @ product
    return product


def squared_loss(X, Y, weights) -> torch.Tensor:
    """Half the mean squared error (1/2N) ‖Y - X Wᵀ‖² of the end-to-end map W (Chapter 18)."""
    W = end_to_end(weights)
    X = as_tensor("X", X, shape=(None, W.shape[1]), floating=True)
    Y = as_tensor("Y", Y, shape=(len(X), W.shape[0]), floating=True)
    return 0.5 * ((Y - X @ W.T) ** 2).sum() / len(X)


def least_squares_loss(X, Y) -> float:
    """The smallest value of :func:`squared_loss` over all linear maps (Chapter 18)."""
    X = as_tensor("X", X, ndim=2, floating=True, dtype=torch.float64)
    Y = as_tensor("Y", Y, shape=(len(X), None), floating=True, dtype=torch.float64)
    W = torch.linalg.pinv(X) @ Y                                 # (d_in, d_out)
    return (0.5 * ((Y - X @ W) ** 2).sum() / len(X)).item()


def _deep_linear_problem(X, Y, weights, lr, steps):
    weights = [W.detach().to(torch.float64) for W in _weights(weights)]
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=0)
    X = as_tensor("X", X, floating=True, dtype=torch.float64)
    Y = as_tensor("Y", Y, floating=True, dtype=torch.float64)
    squared_loss(X, Y, weights)                                  # checks the shapes once
    return X, Y, weights, lr, steps


def deep_linear_gradient_descent(X, Y, weights, *, lr: float = 0.01, steps: int = 1000) -> list[torch.Tensor]:
    """Full-batch gradient descent on :func:`squared_loss` from ``weights`` (Chapter 18); returns the new weights.

    Backpropagation written out in numpy: with h_0 = X, h_k = h_{k-1} W_kᵀ and
    g_L = (h_L - Y) / N, the gradient of W_k is g_kᵀ h_{k-1} and g_{k-1} = g_k W_k.
    A step costs a few small matrix products, tens of times less than autograd's
    bookkeeping (:func:`deep_linear_gradient_descent_reference`, tested equal).
    """
    X, Y, weights, lr, steps = _deep_linear_problem(X, Y, weights, lr, steps)
    X, Y, Ws = X.numpy(), Y.numpy(), [W.numpy().copy() for W in weights]
    for _ in range(steps):
        hs = [X]
        for W in Ws:
            hs.append(hs[-1] @ W.T)
        g = (hs[-1] - Y) / len(X)
        for k in range(len(Ws) - 1, -1, -1):
            grad = g.T @ hs[k]
            g = g @ Ws[k]
            Ws[k] -= lr * grad
    return [torch.as_tensor(W) for W in Ws]


def deep_linear_gradient_descent_reference(X, Y, weights, *, lr: float = 0.01, steps: int = 1000) -> list[torch.Tensor]:
    """The same descent with gradients from autograd: the readable reference (Chapter 18)."""
    X, Y, weights, lr, steps = _deep_linear_problem(X, Y, weights, lr, steps)
    weights = [W.clone().requires_grad_(True) for W in weights]
    for _ in range(steps):
        grads = torch.autograd.grad(squared_loss(X, Y, weights), weights)
        with torch.no_grad():
            for W, g in zip(weights, grads):
                W -= lr * g
    return [W.detach() for W in weights]


def balance_matrices(weights) -> list[torch.Tensor]:
    """W_{k+1}ᵀ W_{k+1} - W_k W_kᵀ for each pair of consecutive layers, conserved by gradient flow (Chapter 18)."""
    weights = _weights(weights)
    return [after.T @ after - before @ before.T for before, after in zip(weights[:-1], weights[1:])]


def balance_drift(initial, final) -> float:
    """Largest Frobenius-norm change of a balance matrix between two sets of weights (Chapter 18)."""
    return max((b - a).norm().item() for a, b in zip(balance_matrices(initial), balance_matrices(final)))


def rademacher_complexity_linear(X, norm_bound: float, *, num_draws: int = 10_000, seed: int = 0) -> float:
    """Monte Carlo estimate of the empirical Rademacher complexity of {x ↦ w·x : ‖w‖ <= B} (Chapter 18).

    The supremum over the ball is attained in closed form, B ‖Σ σ_i x_i‖ / N,
    so only the signs σ are sampled.
    """
    X = as_tensor("X", X, ndim=2, floating=True, dtype=torch.float64)
    norm_bound = check_float("norm_bound", norm_bound, low=0.0)
    num_draws = check_int("num_draws", num_draws, minimum=1)
    signs = torch.randint(0, 2, (num_draws, len(X)), generator=generator(seed)).to(torch.float64) * 2 - 1
    return (norm_bound * (signs @ X).norm(dim=1) / len(X)).mean().item()


def rademacher_bound_linear(X, norm_bound: float) -> float:
    """The bound B √(Σ ‖x_i‖²) / N on the Rademacher complexity of the same class (Jensen) (Chapter 18)."""
    X = as_tensor("X", X, ndim=2, floating=True, dtype=torch.float64)
    norm_bound = check_float("norm_bound", norm_bound, low=0.0)
    return norm_bound * X.norm().item() / len(X)
