"""Rosenblatt's perceptron, margins, Novikoff's mistake bound and an exact separability test (Chapter 1).

Points X are (N, d) floating tensors (integer tensors are converted to the default
float dtype) and labels y hold -1 and +1. The perceptron works in X's dtype; the
bound and the linear program work in float64.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .validation import (
    as_tensor,
    check_bool,
    check_finite,
    check_float,
    check_int,
    check_labels_pm1,
    check_same_length,
)


class PerceptronResult(NamedTuple):
    """Outcome of train_perceptron: the separator, how many updates and epochs it took, and its path (Chapter 1)."""

    w: torch.Tensor
    b: torch.Tensor
    num_updates: int
    epochs: int
    converged: bool
    mistake_counts: torch.Tensor
    history: list


def _check_points(X, y) -> tuple[torch.Tensor, torch.Tensor]:
    """A design matrix and its ±1 labels, as floats of one dtype (integers converted, not truncated)."""
    X = as_tensor("X", X, ndim=2)
    if not X.is_floating_point():
        X = X.to(torch.get_default_dtype())
    check_finite("X", X)
    if len(X) == 0:
        raise ValueError("X must contain at least one point, got 0 rows")
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    check_labels_pm1("y", y)
    return X, y.to(dtype=X.dtype, device=X.device)


def _check_separator(X: torch.Tensor, w, b, w_name: str = "w", b_name: str = "b"):
    """Validate a weight vector matching X's columns and a scalar offset."""
    w = as_tensor(w_name, w, ndim=1)
    if w.shape[0] != X.shape[1]:
        raise ValueError(f"{w_name} must have one entry per column of X ({X.shape[1]}), "
                         f"got {w.shape[0]}")
    w = check_finite(w_name, w.to(dtype=X.dtype, device=X.device))
    if not torch.any(w != 0):
        raise ValueError(f"{w_name} must be non-zero: the margin divides by its norm")
    if isinstance(b, torch.Tensor):
        if b.numel() != 1:
            raise ValueError(f"{b_name} must be a scalar, got a tensor of shape {tuple(b.shape)}")
        b = b.item()
    b = check_float(b_name, b)
    return w, b


def train_perceptron(X, y, *, lr: float = 1.0, max_epochs: int = 1000, bias: bool = True,
                     max_history: int = 2000) -> PerceptronResult:
    """Rosenblatt's perceptron (Chapter 1): from w=0, b=0, sweep the points in order until no mistake.

    A point is a mistake when y (w.x + b) <= 0; the update is w += lr y x, b += lr y.
    ``history`` holds (w, b) on the CPU after each of the first ``max_history`` updates.
    Equal to train_perceptron_reference, the plain loop, but the Python loop runs once per update.
    """
    X, y = _check_points(X, y)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    max_epochs = check_int("max_epochs", max_epochs, minimum=1)
    bias = check_bool("bias", bias)
    max_history = check_int("max_history", max_history, minimum=0)

    num_points = len(X)
    # Augmented form: row i is y_i (x_i, 1) and weights are (w, b), so one
    # matrix-vector product gives every y_i (w.x_i + b) and an update is
    # weights += lr * row_i. Multiplying by y = ±1 is exact, so the scores and
    # updates are the same numbers as in the textbook loop.
    bias_column = y[:, None] if bias else torch.zeros_like(y)[:, None]
    signed_rows = torch.cat([y[:, None] * X, bias_column], dim=1)
    steps = lr * signed_rows            # the update each point makes, precomputed
    weights = torch.zeros(X.shape[1] + 1, dtype=X.dtype, device=X.device)
    mistakes, history, converged, epoch = [], [], False, 0
    for epoch in range(1, max_epochs + 1):
        start, updates_before = 0, len(mistakes)
        while start < num_points:
            # The sequential algorithm meets the first mistake among the points
            # still to visit next, so jump straight to it: the Python loop runs
            # once per update, not once per point.
            is_mistake = (signed_rows[start:] @ weights <= 0).to(torch.uint8)
            found, first = torch.max(is_mistake, dim=0)     # first maximal index
            if not found:
                break
            index = start + int(first)
            weights += steps[index]
            mistakes.append(index)
            if len(history) < max_history:
                snapshot = weights.detach().cpu().clone()
                history.append((snapshot[:-1], snapshot[-1]))
            start = index + 1
        if len(mistakes) == updates_before:
            converged = True
            break
    w, b = weights[:-1].clone(), weights[-1].clone()
    num_updates = len(mistakes)
    mistake_counts = torch.bincount(torch.tensor(mistakes, dtype=torch.int64),
                                    minlength=num_points).to(X.device)
    return PerceptronResult(w, b, num_updates, epoch, converged, mistake_counts, history)


def train_perceptron_reference(X, y, *, lr: float = 1.0, max_epochs: int = 1000, bias: bool = True,
                               max_history: int = 2000) -> PerceptronResult:
    """The textbook loop behind train_perceptron, one point at a time (Chapter 1): slower, same result."""
    X, y = _check_points(X, y)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    max_epochs = check_int("max_epochs", max_epochs, minimum=1)
    bias = check_bool("bias", bias)
    max_history = check_int("max_history", max_history, minimum=0)

    w = torch.zeros(X.shape[1], dtype=X.dtype, device=X.device)
    b = torch.zeros((), dtype=X.dtype, device=X.device)
    mistake_counts = torch.zeros(len(X), dtype=torch.int64, device=X.device)
    history, converged = [], False
    for epoch in range(1, max_epochs + 1):
        mistakes = 0
        for i in range(len(X)):
            if y[i] * (X[i] @ w + b) <= 0:          # a point on the boundary is a mistake too
                w = w + lr * y[i] * X[i]
                if bias:
                    b = b + lr * y[i]
                mistake_counts[i] += 1
                mistakes += 1
                if len(history) < max_history:
                    history.append((w.detach().cpu().clone(), b.detach().cpu().clone()))
        if mistakes == 0:
            converged = True
            break
    return PerceptronResult(w, b, int(mistake_counts.sum()), epoch, converged, mistake_counts, history)


def signed_margins(X, y, w, b=0.0) -> torch.Tensor:
    """Signed distance y (w.x + b) / ||w|| of each point to the hyperplane; > 0 iff correct (Chapter 1)."""
    X, y = _check_points(X, y)
    w, b = _check_separator(X, w, b)
    return y * (X @ w + b) / torch.linalg.vector_norm(w)


def dataset_margin(X, y, w, b=0.0) -> float:
    """Margin of a data set under (w, b): the smallest signed distance (Chapter 1)."""
    return float(signed_margins(X, y, w, b).min())


def novikoff_bound(X, y, w_star, b_star=0.0, *, bias: bool = True) -> float:
    """Novikoff's bound (R/gamma)^2 on the perceptron's number of updates (Chapter 1).

    With bias, x is augmented to (x, 1) and (w_star, b_star) normalised jointly. The
    bound is *at most* floor(R^2/gamma^2) updates (not "fewer than").
    """
    X, y = _check_points(X, y)
    bias = check_bool("bias", bias)
    X = X.to(torch.float64)
    w_star, b_star = _check_separator(X, w_star, b_star, "w_star", "b_star")
    if bias:
        X = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype, device=X.device)], dim=1)
        w_star = torch.cat([w_star, torch.tensor([b_star], dtype=X.dtype, device=X.device)])
    elif b_star != 0.0:
        raise ValueError(f"b_star must be 0 when bias=False (a homogeneous separator), got {b_star}")
    gamma = float((y.to(X.dtype) * (X @ w_star)).min() / torch.linalg.vector_norm(w_star))
    if gamma <= 0:
        raise ValueError(f"w_star must separate the data (margin > 0), but its margin is {gamma:.3g}")
    radius = float(torch.linalg.vector_norm(X, dim=1).max())
    return (radius / gamma) ** 2


def _lp_separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Feasibility of y_i w.x_i >= 1 by linear programming (HiGHS); X, y already checked."""
    from scipy.optimize import linprog

    result = linprog(c=np.zeros(X.shape[1]), A_ub=-(y[:, None] * X), b_ub=-np.ones(len(X)),
                     bounds=(None, None), method="highs")
    if result.status == 0:
        return True
    if result.status == 2:
        return False
    raise RuntimeError(f"the separability LP failed: {result.message}")


def is_linearly_separable(X, y, *, bias: bool = False) -> bool:
    """Exact test whether some hyperplane separates the ±1 labels, by linear programming (Chapter 1).

    Homogeneous (through the origin) unless bias=True; scaling makes "> 0" and ">= 1" equivalent.
    """
    X, y = _check_points(X, y)
    bias = check_bool("bias", bias)
    X_np = X.detach().cpu().to(torch.float64).numpy()
    if bias:
        X_np = np.hstack([X_np, np.ones((len(X_np), 1))])
    return _lp_separable(X_np, y.detach().cpu().to(torch.float64).numpy())
