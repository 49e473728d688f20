"""Adversarial robustness of linear classifiers in closed form, and two models where it is exact (Chapter 13).

For a linear score the worst perturbation in a norm ball is known: moving x by
delta changes w^T x by at most eps ||w||_*, the dual norm (l1 for an
l-infinity attack, l2 for an l2 attack). This gives the exact worst-case loss
of a binary linear model, exact robust accuracy of a multiclass one, and the
accuracies of linear classifiers on the Gaussian models of Schmidt et al.
(2018) and Tsipras et al. (2019). Comparisons with closed forms run in float64.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int, describe

DUAL = {"linf": 1, "l2": 2}


def _check_linear(W, b, X, y):
    W = as_tensor("W", W, ndim=2, floating=True)
    b = as_tensor("b", b, shape=(W.shape[0],), floating=True)
    X = as_tensor("X", X, shape=(None, W.shape[1]), floating=True)
    y = as_tensor("y", y, shape=(len(X),))
    if y.is_floating_point():
        raise TypeError(f"y must hold integer class indices, got {describe(y)}")
    return W, b, X, y.long()


def worst_case_margins(W, b, X, y, eps: float, *, norm: str = "linf") -> torch.Tensor:
    """min over j != y of (w_y - w_j)^T x + b_y - b_j - eps ||w_y - w_j||_*, one value per row (Chapter 13).

    Row i is robust (no perturbation of norm <= eps changes its prediction,
    with no box constraint) exactly when its value is positive.
    """
    W, b, X, y = _check_linear(W, b, X, y)
    eps = check_float("eps", eps, low=0.0)
    check_choice("norm", norm, tuple(DUAL))
    differences = W[y][:, None, :] - W[None, :, :]              # (N, classes, d): w_y - w_j
    scores = X @ W.T + b                                         # (N, classes)
    margins = scores.gather(1, y[:, None]) - scores             # (N, classes): z_y - z_j
    margins = margins - eps * differences.norm(p=DUAL[norm], dim=2)
    margins[torch.arange(len(X)), y] = torch.inf               # j = y is not a competitor
    return margins.min(dim=1).values


def robust_accuracy(W, b, X, y, eps: float, *, norm: str = "linf") -> float:
    """The exact fraction of rows no perturbation of norm <= eps can misclassify (no box) (Chapter 13)."""
    return (worst_case_margins(W, b, X, y, eps, norm=norm) > 0).double().mean().item()


def logistic_loss(negative_margin: torch.Tensor) -> torch.Tensor:
    """log(1 + e^(-m)) as a function of -m, exact in both tails (F.softplus turns linear above 20)."""
    return torch.logaddexp(torch.zeros_like(negative_margin), negative_margin)


def binary_worst_case_loss(theta, X, y, eps: float, loss=logistic_loss) -> torch.Tensor:
    """max over ||delta||_inf <= eps of L(y theta^T (x + delta)) = L(y theta^T x - eps ||theta||_1) (Chapter 13).

    ``loss`` maps the negated margin to the loss and must increase (the logistic
    loss by default); ``y`` holds labels -1 or +1.
    """
    theta = as_tensor("theta", theta, ndim=1, floating=True)
    X = as_tensor("X", X, shape=(None, len(theta)), floating=True)
    y = as_tensor("y", y, shape=(len(X),)).to(theta.dtype)   # labels often arrive as float32 or int64
    if not torch.all((y == 1) | (y == -1)):
        raise ValueError("y must hold labels -1 and +1")
    eps = check_float("eps", eps, low=0.0)
    return loss(-(y * (X @ theta) - eps * theta.abs().sum()))


class GaussianAccuracy(NamedTuple):
    """Standard accuracy and l-infinity robust accuracy of one linear classifier."""

    standard: float
    robust: float


def gaussian_model_accuracy(w, mean, sigma: float, eps: float) -> GaussianAccuracy:
    """Accuracies of sign(w^T x) on x = y mean + sigma g, g standard normal (Schmidt et al.; Chapter 13).

    Standard: Phi(w^T mean / (sigma ||w||_2)); robust at l-infinity radius eps:
    Phi((w^T mean - eps ||w||_1) / (sigma ||w||_2)).
    """
    w = as_tensor("w", w, ndim=1, floating=True).double()
    mean = as_tensor("mean", mean, shape=(len(w),), floating=True).double()
    sigma = check_float("sigma", sigma, low=0.0, low_open=True)
    eps = check_float("eps", eps, low=0.0)
    scale = sigma * w.norm().item()
    if scale == 0:
        raise ValueError("w must not be all zeros")
    signal = (w @ mean).item()
    return GaussianAccuracy(_phi(signal / scale), _phi((signal - eps * w.abs().sum().item()) / scale))


def _phi(t: float) -> float:
    return 0.5 * math.erfc(-t / math.sqrt(2))


def gaussian_model_sample(num_points: int, mean, sigma: float, *, seed: int = 0):
    """Labels y = +-1 (fair coin) and inputs x = y mean + sigma g, in float64 (Chapter 13)."""
    num_points = check_int("num_points", num_points, minimum=1)
    mean = as_tensor("mean", mean, ndim=1, floating=True).double()
    sigma = check_float("sigma", sigma, low=0.0, low_open=True)
    rng = generator(check_int("seed", seed, minimum=0))
    y = 2.0 * torch.randint(0, 2, (num_points,), generator=rng, dtype=torch.float64) - 1
    return y[:, None] * mean + sigma * torch.randn(num_points, len(mean), generator=rng, dtype=torch.float64), y


def averaging_classifier(X, y) -> torch.Tensor:
    """w = mean of y_i x_i, the classifier Schmidt et al. analyse (Chapter 13)."""
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, shape=(len(X),), floating=True)
    return (y[:, None] * X).mean(dim=0)
