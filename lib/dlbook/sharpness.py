"""Sharpness of a minimum and why it is not invariant (Chapter 18).

Sharpness here is the largest eigenvalue of the Hessian of the loss with
respect to the parameters, found by power iteration on Hessian-vector
products (two backward passes each, never the full Hessian). Dinh et al.
showed that it is not a property of the function a network computes: scaling
one ReLU layer by α > 0 and the next by 1/α leaves the function unchanged
(ReLU is positively homogeneous) but changes the Hessian, so a minimum can
be made as sharp as one likes.

Tests compare with the full Hessian in float64.
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from .runtime import generator
from .validation import check_float, check_int, describe


def _params(params) -> list[torch.Tensor]:
    params = list(params)
    if not params or not all(isinstance(p, torch.Tensor) and p.requires_grad for p in params):
        raise TypeError(f"params must be a non-empty list of tensors that require grad, got {describe(params)}")
    return params


def hessian_vector_product(loss_fn: Callable[[], torch.Tensor], params, vectors) -> list[torch.Tensor]:
    """H v for the Hessian of ``loss_fn()`` with respect to ``params``, v given per parameter (Chapter 18)."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function of no arguments returning the loss, got {describe(loss_fn)}")
    params = _params(params)
    vectors = list(vectors)
    if len(vectors) != len(params) or any(v.shape != p.shape for v, p in zip(vectors, params)):
        raise ValueError("vectors must hold one tensor of each parameter's shape")
    grads = torch.autograd.grad(loss_fn(), params, create_graph=True)
    dot = sum((g * v).sum() for g, v in zip(grads, vectors))
    return [h.detach() for h in torch.autograd.grad(dot, params)]


def top_hessian_eigenvalue(loss_fn: Callable[[], torch.Tensor], params, *, iterations: int = 200,
                           tol: float = 1e-10, seed: int = 0) -> float:
    """The eigenvalue of largest magnitude of the loss Hessian, by power iteration (Chapter 18).

    At a minimum the Hessian is positive semi-definite, so this is the top
    eigenvalue, the sharpness. Stops when the Rayleigh quotient changes by less
    than ``tol`` (relative).
    """
    params = _params(params)
    iterations = check_int("iterations", iterations, minimum=1)
    tol = check_float("tol", tol, low=0.0)
    gen = generator(seed)
    v = [torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p) for p in params]
    norm = torch.sqrt(sum((x ** 2).sum() for x in v))
    v = [x / norm for x in v]
    value = 0.0
    for _ in range(iterations):
        hv = hessian_vector_product(loss_fn, params, v)
        new_value = sum((a * b).sum() for a, b in zip(v, hv)).item()
        norm = torch.sqrt(sum((x ** 2).sum() for x in hv))
        if norm == 0:
            return 0.0
        v = [x / norm for x in hv]
        if abs(new_value - value) <= tol * abs(new_value):
            return new_value
        value = new_value
    return value


def rescale_relu_layers(model: nn.Sequential, layer: int, alpha: float) -> nn.Sequential:
    """A copy of a Linear/ReLU net with Linear ``layer`` scaled by α and the next Linear's weight by 1/α (Chapter 18).

    The function is unchanged for every α > 0 (ReLU(αz) = α ReLU(z)); the
    parameters, and so the Hessian and the sharpness, are not.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be an nn.Sequential of Linear and ReLU layers, got {describe(model)}")
    alpha = check_float("alpha", alpha, low=0.0, low_open=True)
    linears = [m for m in model if isinstance(m, nn.Linear)]
    if any(not isinstance(m, (nn.Linear, nn.ReLU)) for m in model):
        raise ValueError("model must contain only Linear and ReLU layers")
    layer = check_int("layer", layer, minimum=0, maximum=len(linears) - 2)
    rescaled = copy.deepcopy(model)
    first, second = [m for m in rescaled if isinstance(m, nn.Linear)][layer:layer + 2]
    with torch.no_grad():
        first.weight.mul_(alpha)
        if first.bias is not None:
            first.bias.mul_(alpha)
        second.weight.div_(alpha)
    return rescaled
