"""Multiplying numbers with a few smooth neurons (Chapter 18).

Lin, Tegmark and Rolnick's gate: for an activation σ with σ''(0) ≠ 0,

    xy ≈ [σ(λ(x + y)) + σ(-λ(x + y)) - σ(λ(x - y)) - σ(-λ(x - y))] / (4 λ² σ''(0)),

four hidden neurons whose error shrinks like λ² as the input scale λ → 0 (the
odd terms of the Taylor series cancel and the quadratic ones leave 4xy). With
one hidden layer, a product of n numbers needs 2ⁿ neurons (the source's "2n"
is wrong); a binary tree of gates needs 4(n - 1).

Everything here is float64.
"""
from __future__ import annotations

import torch

from .validation import as_tensor, check_choice, check_float, check_int

#: Smooth activations with their second derivative at 0.
CURVATURES = {"softplus": 0.25, "exp": 1.0}
_FUNCTIONS = {"softplus": torch.nn.functional.softplus, "exp": torch.exp}


def multiplication_gate(x, y, *, scale: float = 0.01, activation: str = "softplus") -> torch.Tensor:
    """The four-neuron approximation of x * y at input scale λ = ``scale`` (Chapter 18)."""
    x = as_tensor("x", x, floating=True, dtype=torch.float64)
    y = as_tensor("y", y, floating=True, dtype=torch.float64)
    scale = check_float("scale", scale, low=0.0, low_open=True)
    check_choice("activation", activation, CURVATURES)
    s = _FUNCTIONS[activation]
    u, v = scale * (x + y), scale * (x - y)
    return (s(u) + s(-u) - s(v) - s(-v)) / (4 * scale ** 2 * CURVATURES[activation])


def product_tree(X, *, scale: float = 0.01, activation: str = "softplus") -> torch.Tensor:
    """The product of the columns of X (num, n) by a binary tree of gates, 4(n - 1) neurons (Chapter 18)."""
    X = as_tensor("X", X, ndim=2, floating=True, dtype=torch.float64)
    if X.shape[1] == 0:
        raise ValueError("X must have at least one column")
    columns = list(X.T)
    while len(columns) > 1:
        paired = [multiplication_gate(a, b, scale=scale, activation=activation)
                  for a, b in zip(columns[0::2], columns[1::2])]
        columns = paired + ([columns[-1]] if len(columns) % 2 else [])
    return columns[0]


def shallow_product_neurons(num_factors: int) -> int:
    """Neurons one hidden layer needs to multiply ``num_factors`` numbers: 2ⁿ (Chapter 18)."""
    return 2 ** check_int("num_factors", num_factors, minimum=1)
