"""Explanations of one prediction: which input features the score of a class depends on (Chapter 13).

Gradient methods (saliency, gradient x input, SmoothGrad, integrated
gradients), occlusion, the radius of the linear region a ReLU network is
affine on, and exact and sampled Shapley values. All of them work on a batch:
``X`` has shape (N, d) and ``target`` holds one class per row. Gradients of a
batch come from one backward pass of the summed scores, which is exact
because row i's score depends on row i alone (the model must not mix rows,
as batch normalisation in training mode would).
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .runtime import generator
from .validation import as_tensor, check_float, check_int, describe


def _check(model, X, target):
    if not isinstance(model, nn.Module) and not callable(model):
        raise TypeError(f"model must be a torch.nn.Module or a callable, got {describe(model)}")
    X = as_tensor("X", X, ndim=2, floating=True)
    target = as_tensor("target", target, shape=(len(X),))
    if target.is_floating_point():
        raise TypeError(f"target must hold integer class indices, got {describe(target)}")
    return X, target.long().to(X.device)


def class_scores(model, X, target) -> torch.Tensor:
    """S_c(x) for c = target[i], one per row."""
    X, target = _check(model, X, target)
    return model(X).gather(1, target[:, None])[:, 0]


def input_gradient(model, X, target) -> torch.Tensor:
    """dS_c/dx for each row, shape (N, d) (Chapter 13)."""
    X, target = _check(model, X, target)
    with torch.enable_grad():  # explanations are often asked for inside torch.no_grad()
        X = X.detach().requires_grad_(True)
        (gradient,) = torch.autograd.grad(model(X).gather(1, target[:, None]).sum(), X)
    return gradient


def saliency(model, X, target) -> torch.Tensor:
    """|dS_c/dx|, the saliency map of Simonyan et al. for one-channel inputs (Chapter 13)."""
    return input_gradient(model, X, target).abs()


def gradient_times_input(model, X, target) -> torch.Tensor:
    """x * dS_c/dx; its sum is S_c(x) for a bias-free ReLU network (Chapter 13)."""
    return X * input_gradient(model, X, target)


def smoothgrad(model, X, target, *, noise: float = 0.1, samples: int = 50, seed: int = 0) -> torch.Tensor:
    """The mean gradient over x + N(0, noise^2) draws (Smilkov et al.; Chapter 13)."""
    X, target = _check(model, X, target)
    noise = check_float("noise", noise, low=0.0)
    samples = check_int("samples", samples, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    draws = torch.randn(samples, *X.shape, generator=rng, dtype=torch.float64).to(X)
    noisy = (X + noise * draws).reshape(-1, X.shape[1])               # (samples * N, d)
    gradients = input_gradient(model, noisy, target.repeat(samples))
    return gradients.reshape(samples, *X.shape).mean(dim=0)


def integrated_gradients(model, X, target, *, baseline=None, steps: int = 64) -> torch.Tensor:
    """(x - x') times the mean gradient along the straight path from x' to x (Sundararajan et al.; Chapter 13).

    The path integral is taken by the midpoint rule with ``steps`` points,
    so the attributions add up to S_c(x) - S_c(x') up to an error of order
    1/steps^2 for a smooth score. ``baseline`` defaults to zeros.
    """
    X, target = _check(model, X, target)
    steps = check_int("steps", steps, minimum=1)
    baseline = torch.zeros_like(X) if baseline is None else \
        as_tensor("baseline", baseline, floating=True).to(X).expand_as(X)
    alphas = ((torch.arange(steps, dtype=torch.float64) + 0.5) / steps).to(X)
    path = baseline + alphas[:, None, None] * (X - baseline)            # (steps, N, d)
    gradients = input_gradient(model, path.reshape(-1, X.shape[1]), target.repeat(steps))
    return (X - baseline) * gradients.reshape(steps, *X.shape).mean(dim=0)


def occlusion(model, X, target, *, fill: float = 0.0) -> torch.Tensor:
    """S_c(x) minus S_c(x with feature k set to ``fill``), for every feature k (Chapter 13)."""
    X, target = _check(model, X, target)
    fill = check_float("fill", fill)
    N, d = X.shape
    occluded = X[:, None, :].repeat(1, d, 1)                             # (N, d, d): copy k hides feature k
    occluded[:, torch.arange(d), torch.arange(d)] = fill
    with torch.no_grad():
        full = class_scores(model, X, target)
        hidden = class_scores(model, occluded.reshape(N * d, d), target.repeat_interleave(d))
    return full[:, None] - hidden.reshape(N, d)


class LinearRegion(NamedTuple):
    """The radius of the largest l2 ball around x on which the activation pattern stays the same,
    and the unit (layer, index) whose zero set is nearest."""

    radius: float
    layer: int
    unit: int
    gradient: torch.Tensor


def linear_region_radius(model: nn.Sequential, x) -> LinearRegion:
    """R = min over hidden units of |z(x)| / ||grad_x z||_2, for a network of Linear and ReLU layers (Chapter 13).

    Inside its activation region the network is affine, so every pre-activation
    is z = a^T x + c there, and the nearest zero set of a unit lies at distance
    |z| / ||a||. The affine maps are carried along the layers exactly.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be an nn.Sequential of Linear and ReLU layers, got {describe(model)}")
    x = as_tensor("x", x, ndim=1, floating=True)
    with torch.no_grad():
        A = torch.eye(len(x), dtype=x.dtype, device=x.device)           # d(current layer)/dx
        value = x
        best = LinearRegion(math.inf, -1, -1, torch.zeros_like(x))
        layer = 0
        modules = list(model)
        for position, module in enumerate(modules):
            if isinstance(module, nn.Linear):
                A, value = module.weight @ A, module(value)
            elif isinstance(module, nn.ReLU):
                distances = value.abs() / A.norm(dim=1).clamp_min(1e-300)
                unit = int(distances.argmin())
                if distances[unit] < best.radius:
                    best = LinearRegion(float(distances[unit]), layer, unit, A[unit].clone())
                on = (value > 0).to(x.dtype)
                A, value, layer = A * on[:, None], value * on, layer + 1
            else:
                raise TypeError(f"model must hold only Linear and ReLU layers, got {describe(module)}")
    return best


class ShapleyEstimate(NamedTuple):
    """Permutation-sampling Shapley values and their standard errors."""

    values: np.ndarray
    standard_errors: np.ndarray


def _coalition_values(value_fn, x, baseline, masks):
    """v(S) = f(x on S, baseline elsewhere) for each row of the boolean matrix ``masks``."""
    hybrid = np.where(masks, x, baseline)
    return np.asarray(value_fn(hybrid), dtype=float)


def _check_shapley(value_fn, x, baseline, max_features):
    if not callable(value_fn):
        raise TypeError(f"value_fn must be callable, got {describe(value_fn)}")
    x = np.asarray(as_tensor("x", x, ndim=1, floating=True).double().cpu())
    baseline = np.asarray(as_tensor("baseline", baseline, shape=(len(x),), floating=True).double().cpu())
    if max_features is not None and len(x) > max_features:
        raise ValueError(f"x must have at most {max_features} features for exact enumeration, got {len(x)}")
    return x, baseline


def shapley_values(value_fn, x, baseline) -> np.ndarray:
    """Exact Shapley values of the features of x, by enumerating all 2^d coalitions (Chapter 13).

    ``value_fn`` maps an (M, d) array of inputs to M scores; a feature outside the
    coalition takes its baseline value. phi_i = sum over S without i of
    |S|! (d - |S| - 1)! / d! [v(S + i) - v(S)].
    """
    x, baseline = _check_shapley(value_fn, x, baseline, max_features=16)
    d = len(x)
    masks = np.array(list(itertools.product([False, True], repeat=d)))   # (2^d, d), row = coalition
    values = _coalition_values(value_fn, x, baseline, masks)
    index = masks @ (1 << np.arange(d - 1, -1, -1))                       # row number of each coalition
    sizes = masks.sum(axis=1)
    weights = np.array([math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d) if s < d else 0.0
                        for s in sizes])
    phi = np.zeros(d)
    for i in range(d):
        without = ~masks[:, i]
        with_i = index[without] + (1 << (d - 1 - i))
        phi[i] = (weights[without] * (values[with_i] - values[without])).sum()
    return phi


def shapley_sampling(value_fn, x, baseline, *, permutations: int = 200, seed: int = 0) -> ShapleyEstimate:
    """Shapley values estimated from random feature orders, with standard errors (Chapter 13)."""
    x, baseline = _check_shapley(value_fn, x, baseline, max_features=None)
    permutations = check_int("permutations", permutations, minimum=2)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    d = len(x)
    orders = np.argsort(rng.random((permutations, d)), axis=1)           # (P, d) random orders
    ranks = np.argsort(orders, axis=1)                                    # position of each feature
    # Coalition k of order p holds the first k features: masks[p, k, i] = rank of i < k.
    masks = ranks[:, None, :] < np.arange(d + 1)[None, :, None]           # (P, d + 1, d)
    values = _coalition_values(value_fn, x, baseline, masks.reshape(-1, d)).reshape(permutations, d + 1)
    gains = np.take_along_axis(np.diff(values, axis=1), ranks, axis=1)    # (P, d): feature i's marginal gain
    return ShapleyEstimate(gains.mean(axis=0), gains.std(axis=0, ddof=1) / math.sqrt(permutations))
