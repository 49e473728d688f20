"""Weight initialization and signal propagation through depth (Chapter 4).

A scheme fixes the spread of a layer's random weights from its fan-in n and
fan-out m (always in that order: ``fan_in, fan_out``). Pushing random inputs
through a deep stack of such layers and recording the second moment of every
pre-activation shows which schemes keep the signal alive;
:func:`predicted_second_moments` gives the same curve from the one-line
variance recursion q_{l+1} = n σ² E[φ(z)²], z ~ N(0, q_l). The backward
signal is measured by :func:`first_layer_gradient_norm`.

Weights and activations default to float32 (they are network weights);
the recursion and the singular values of deep products are float64.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .nets import linear_layers
from .runtime import generator
from .validation import (
    as_tensor,
    check_choice,
    check_class_indices,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_same_length,
    describe,
)

#: Initialization schemes: Gaussian LeCun (1/n), Xavier/Glorot (2/(n+m)), He/Kaiming (2/n),
#: PyTorch's nn.Linear default "torch" (uniform on ±1/√n, variance 1/(3n), as ``nets.mlp(init="torch")``)
#: and orthogonal.
SCHEMES = ("lecun", "xavier", "he", "torch", "orthogonal")
#: Activations used in the propagation experiments.
ACTIVATIONS = ("linear", "relu", "tanh")


def weight_variance(fan_in: int, fan_out: int, scheme: str) -> float:
    """Variance of one weight under ``scheme`` for a layer with the given fans (Chapter 4).

    For "orthogonal" it is the variance of an entry of a random orthogonal
    matrix, 1/max(n, m), which gives the same gain n σ² = 1 for square layers.
    """
    fan_in = check_int("fan_in", fan_in, minimum=1)
    fan_out = check_int("fan_out", fan_out, minimum=1)
    check_choice("scheme", scheme, SCHEMES)
    return {"lecun": 1.0 / fan_in,
            "xavier": 2.0 / (fan_in + fan_out),
            "he": 2.0 / fan_in,
            "torch": 1.0 / (3.0 * fan_in),
            "orthogonal": 1.0 / max(fan_in, fan_out)}[scheme]


def init_weight(fan_in: int, fan_out: int, scheme: str, *, seed: int = 0, device="cpu",
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A weight matrix of shape (fan_out, fan_in), the layout of nn.Linear, drawn from ``scheme`` (Chapter 4).

    Drawn in float64 on the CPU from ``seed``, then cast to ``dtype`` (a floating dtype) and moved.
    """
    variance = weight_variance(fan_in, fan_out, scheme)
    seed = check_int("seed", seed, minimum=0)
    device = check_device("device", device)
    dtype = check_dtype("dtype", dtype)
    rng = generator(seed)
    if scheme == "torch":
        # kaiming_uniform_(a=√5) reduces to U[-1/√n, 1/√n]; variance bound² / 3.
        bound = math.sqrt(3.0 * variance)
        weight = (torch.rand(fan_out, fan_in, generator=rng, dtype=torch.float64) * 2 - 1) * bound
    elif scheme == "orthogonal":
        # QR of a Gaussian matrix, with the signs of R's diagonal folded into Q
        # so that Q is Haar-distributed rather than biased.
        tall = torch.randn(max(fan_out, fan_in), min(fan_out, fan_in), generator=rng, dtype=torch.float64)
        q, r = torch.linalg.qr(tall)
        q = q * torch.sign(torch.diagonal(r))
        weight = q if fan_out >= fan_in else q.T
    else:
        weight = torch.randn(fan_out, fan_in, generator=rng, dtype=torch.float64) * math.sqrt(variance)
    return weight.to(device=device, dtype=dtype)


def activation_fn(name: str):
    """The elementwise function called ``name`` in :data:`ACTIVATIONS` (Chapter 4)."""
    check_choice("activation", name, ACTIVATIONS)
    return {"linear": lambda z: z, "relu": torch.relu, "tanh": torch.tanh}[name]


def propagate(depth: int, width: int, scheme: str, activation: str, *, num_inputs: int = 1000,
              seed: int = 0, device="cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Second moments E[z_l²] of the pre-activations of a random deep net, l = 1..depth (Chapter 4).

    Inputs are standard Gaussian (E[x²] = 1); z_1 = W_1 x and z_{l+1} = W_{l+1} φ(z_l),
    square layers of ``width`` units and no biases. Returns a float64 tensor of length ``depth``.
    """
    depth = check_int("depth", depth, minimum=1)
    width = check_int("width", width, minimum=1)
    num_inputs = check_int("num_inputs", num_inputs, minimum=1)
    check_choice("scheme", scheme, SCHEMES)
    phi = activation_fn(activation)
    seed = check_int("seed", seed, minimum=0)
    device = check_device("device", device)
    dtype = check_dtype("dtype", dtype)
    x = torch.randn(num_inputs, width, generator=generator(seed), dtype=torch.float64)
    signal = x.to(device=device, dtype=dtype)
    moments = []
    for layer in range(depth):
        # One seed per layer, derived from the run's seed, so depth 10 is a prefix of depth 50.
        weight = init_weight(width, width, scheme, seed=seed * 100_003 + layer + 1, device=device, dtype=dtype)
        z = (phi(signal) if layer > 0 else signal) @ weight.T
        moments.append(z.double().pow(2).mean())
        signal = z
    return torch.stack(moments).cpu()


def _mean_square_activation(activation: str, q: float, nodes: np.ndarray, weights: np.ndarray) -> float:
    """E[φ(z)²] for z ~ N(0, q), by Gauss-Hermite quadrature (exact for linear and ReLU)."""
    if activation == "linear":
        return q
    if activation == "relu":
        return q / 2.0  # half the mass is zeroed, the other half keeps its second moment
    z = math.sqrt(2.0 * q) * nodes
    return float(np.sum(weights * np.tanh(z) ** 2) / math.sqrt(math.pi))


def predicted_second_moments(depth: int, scheme: str, activation: str, width: int, *,
                             input_second_moment: float = 1.0) -> torch.Tensor:
    """The variance recursion q_1 = g q_0, q_{l+1} = g E[φ(z)²] with z ~ N(0, q_l) and g = n σ² (Chapter 4).

    This is the infinite-width prediction for :func:`propagate`; float64, length ``depth``.
    """
    depth = check_int("depth", depth, minimum=1)
    width = check_int("width", width, minimum=1)
    check_choice("activation", activation, ACTIVATIONS)
    q = check_float("input_second_moment", input_second_moment, low=0.0, low_open=True)
    gain = width * weight_variance(width, width, scheme)
    nodes, weights = np.polynomial.hermite.hermgauss(80)
    moments = [gain * q]
    for _ in range(depth - 1):
        moments.append(gain * _mean_square_activation(activation, moments[-1], nodes, weights))
    return torch.tensor(moments, dtype=torch.float64)


def ratio_per_layer(moments) -> float:
    """Geometric mean of E[z_{l+1}²] / E[z_l²] over the layers: how fast the signal grows or shrinks (Chapter 4)."""
    moments = as_tensor("moments", moments, ndim=1, floating=True).double()
    if len(moments) < 2:
        raise ValueError(f"moments must hold at least two layers, got {len(moments)}")
    if not torch.all(moments > 0):
        raise ValueError("moments must be positive")
    return math.exp((moments[-1].log() - moments[0].log()).item() / (len(moments) - 1))


def end_to_end_singular_values(depth: int, width: int, scheme: str, *, seed: int = 0,
                               device="cpu") -> torch.Tensor:
    """Singular values of the product W_depth ... W_1 of a deep linear net, float64 (Chapter 4)."""
    depth = check_int("depth", depth, minimum=1)
    width = check_int("width", width, minimum=1)
    check_choice("scheme", scheme, SCHEMES)
    seed = check_int("seed", seed, minimum=0)
    product = torch.eye(width, dtype=torch.float64, device=check_device("device", device))
    for layer in range(depth):
        weight = init_weight(width, width, scheme, seed=seed * 100_003 + layer + 1, device=device,
                             dtype=torch.float64)
        product = weight @ product
    return torch.linalg.svdvals(product).cpu()


def first_layer_gradient_norm(model, X, y) -> float:
    """Norm of the cross-entropy gradient with respect to the first linear layer's weight (Chapter 4).

    Measures how much of the backward signal reaches the bottom of a deep
    network; the model's own gradients are left as they were.
    """
    first = linear_layers(model)[0]
    X = as_tensor("X", X, ndim=2, floating=True)
    if X.shape[1] != first.in_features:
        raise ValueError(f"X must have {first.in_features} columns (the model's inputs), got {describe(X)}")
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    logits = model(X)
    y = check_class_indices("y", y, logits.shape[1])
    gradient, = torch.autograd.grad(F.cross_entropy(logits, y), first.weight)
    return gradient.norm().item()
