"""Order and chaos in random deep networks: the mean-field maps of signal propagation (Chapter 18).

A wide random network with weights N(0, σ_w²/n) and biases N(0, σ_b²) maps
the variance q of a pre-activation and the correlation c of two inputs'
pre-activations layer by layer (Poole et al.):

    q' = σ_w² E[φ(√q z)²] + σ_b²,
    c' = (σ_w² E[φ(u₁) φ(u₂)] + σ_b²) / q*,   u₁ = √q* z₁, u₂ = √q* (c z₁ + √(1 - c²) z₂).

The slope of the correlation map at c = 1, χ₁ = σ_w² E[φ'(√q* z)²], separates
the ordered phase (χ₁ < 1: all inputs become alike) from the chaotic one
(χ₁ > 1: nearby inputs decorrelate). The expectations are trapezoidal
quadratures (ReLU in closed form); :func:`simulate_correlation` measures the same quantities in a
finite random network. Chapter 4's :func:`dlbook.initialization.predicted_second_moments`
is the variance map without biases.

Everything here is float64: its purpose is a comparison with the mean-field theory.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize

from .initialization import ACTIVATIONS, activation_fn
from .runtime import generator
from .validation import check_choice, check_float, check_int

# Expectations under N(0, 1) by the trapezoidal rule on [-12, 12]: for integrands analytic in a strip
# it converges exponentially, and unlike Gauss-Hermite it does not lose digits to the poles of tanh
# near the real axis when q is large (101 Hermite nodes leave 5e-4 in χ₁ at q = 4).
_STEP = 0.02
_NODES = np.arange(-600, 601) * _STEP
_WEIGHTS = _STEP * np.exp(-_NODES ** 2 / 2) / math.sqrt(2 * math.pi)
# The two-dimensional correlation integral uses a coarser 401 x 401 grid on [-10, 10]²: the error
# still decays like exp(-2π d / h) for poles at distance d from the real axis (d ≈ 0.44 at q = 12.6).
_NODES_2D = np.arange(-200, 201) * 0.05
_WEIGHTS_2D = 0.05 * np.exp(-_NODES_2D ** 2 / 2) / math.sqrt(2 * math.pi)

_DERIVATIVES = {"linear": np.ones_like, "relu": lambda u: (u > 0).astype(float),
                "tanh": lambda u: 1.0 / np.cosh(u) ** 2}


def _phi(activation: str):
    check_choice("activation", activation, ACTIVATIONS)
    return {"linear": lambda u: u, "relu": lambda u: np.maximum(u, 0.0), "tanh": np.tanh}[activation]


def _stds(sigma_w, sigma_b) -> tuple[float, float]:
    return check_float("sigma_w", sigma_w, low=0.0), check_float("sigma_b", sigma_b, low=0.0)


def variance_map(q: float, sigma_w: float, sigma_b: float, activation: str = "tanh") -> float:
    """One layer of the variance recursion q' = σ_w² E[φ(√q z)²] + σ_b² (Chapter 18)."""
    q = check_float("q", q, low=0.0)
    sigma_w, sigma_b = _stds(sigma_w, sigma_b)
    phi = _phi(activation)
    if activation == "relu":
        return sigma_w ** 2 * q / 2 + sigma_b ** 2
    return sigma_w ** 2 * float(_WEIGHTS @ phi(math.sqrt(q) * _NODES) ** 2) + sigma_b ** 2


def fixed_point_variance(sigma_w: float, sigma_b: float, activation: str = "tanh", *, q0: float = 1.0,
                         max_iter: int = 10_000, tol: float = 1e-13) -> float:
    """The variance q* that :func:`variance_map` settles to, by iteration from q0 (Chapter 18)."""
    q = check_float("q0", q0, low=0.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    for _ in range(max_iter):
        q_next = variance_map(q, sigma_w, sigma_b, activation)
        if abs(q_next - q) <= tol * max(1.0, q):
            return q_next
        q = q_next
    raise ValueError(f"the variance map did not settle within max_iter={max_iter} steps "
                     f"(sigma_w={sigma_w}, sigma_b={sigma_b}, activation={activation!r})")


def correlation_map(c: float, q: float, sigma_w: float, sigma_b: float, activation: str = "tanh") -> float:
    """One layer of the correlation recursion at variance q (normally q*) (Chapter 18)."""
    c = check_float("c", c, low=-1.0, high=1.0)
    q = check_float("q", q, low=0.0, low_open=True)
    sigma_w, sigma_b = _stds(sigma_w, sigma_b)
    phi = _phi(activation)
    if activation == "relu":           # the arc-cosine kernel in closed form; the kink spoils quadrature
        cross = q / (2 * math.pi) * (math.sqrt(max(0.0, 1 - c * c)) + (math.pi - math.acos(c)) * c)
        return (sigma_w ** 2 * cross + sigma_b ** 2) / q
    z1, z2 = _NODES_2D[:, None], _NODES_2D[None, :]                # a product grid
    u1 = math.sqrt(q) * z1
    u2 = math.sqrt(q) * (c * z1 + math.sqrt(max(0.0, 1.0 - c * c)) * z2)
    cross = float(_WEIGHTS_2D @ (phi(u1) * phi(u2)) @ _WEIGHTS_2D)
    return (sigma_w ** 2 * cross + sigma_b ** 2) / q


def chi1(sigma_w: float, sigma_b: float, activation: str = "tanh") -> float:
    """χ₁ = σ_w² E[φ'(√q* z)²], the slope of the correlation map at c = 1 (Chapter 18)."""
    q_star = fixed_point_variance(sigma_w, sigma_b, activation)
    if activation == "relu":
        return sigma_w ** 2 / 2
    return sigma_w ** 2 * float(_WEIGHTS @ _DERIVATIVES[activation](math.sqrt(q_star) * _NODES) ** 2)


def critical_sigma_w(sigma_b: float, activation: str = "tanh", *, low: float = 0.5, high: float = 5.0) -> float:
    """The weight scale σ_w with χ₁ = 1 at bias scale σ_b > 0: the edge of chaos (Chapter 18).

    (At σ_b = 0 the edge is σ_w = 1 for tanh, where q* = 0 is reached only as a power law.)
    """
    sigma_b = check_float("sigma_b", sigma_b, low=0.0, low_open=True)
    low = check_float("low", low, low=0.0, low_open=True)
    high = check_float("high", high, low=low, low_open=True)
    gap = lambda s: chi1(s, sigma_b, activation) - 1.0                 # noqa: E731
    if gap(low) * gap(high) > 0:
        raise ValueError(f"chi1 - 1 does not change sign between low={low} and high={high}")
    return optimize.brentq(gap, low, high, xtol=1e-12)


def predicted_correlations(c0: float, depth: int, sigma_w: float, sigma_b: float,
                           activation: str = "tanh") -> torch.Tensor:
    """Correlations c_1..c_depth from iterating :func:`correlation_map` at q* (Chapter 18)."""
    depth = check_int("depth", depth, minimum=1)
    q_star = fixed_point_variance(sigma_w, sigma_b, activation)
    c, out = check_float("c0", c0, low=-1.0, high=1.0), []
    for _ in range(depth):
        c = min(1.0, correlation_map(c, q_star, sigma_w, sigma_b, activation))
        out.append(c)
    return torch.tensor(out, dtype=torch.float64)


class Propagation(NamedTuple):
    """Per-layer variance of each input's pre-activations and their correlation, layers 1..depth."""
    variances: torch.Tensor     # (depth, 2)
    correlations: torch.Tensor  # (depth,)


def simulate_correlation(c0: float, depth: int, width: int, sigma_w: float, sigma_b: float,
                         activation: str = "tanh", *, q0: float | None = None, seed: int = 0) -> Propagation:
    """Push two pre-activation vectors with correlation c0 through one random network; measure q and c (Chapter 18).

    The starting vectors play the part of layer 0's pre-activations, with mean
    square q0 per unit (default: q*, so the variance starts at its fixed point):
    layer l computes h_l = W_l φ(h_{l-1}) + b_l with fresh weights N(0, σ_w²/width)
    and biases N(0, σ_b²), which is what the maps describe.
    """
    c0 = check_float("c0", c0, low=-1.0, high=1.0)
    depth = check_int("depth", depth, minimum=1)
    width = check_int("width", width, minimum=2)
    sigma_w, sigma_b = _stds(sigma_w, sigma_b)
    phi = activation_fn(activation)
    q0 = fixed_point_variance(sigma_w, sigma_b, activation) if q0 is None else check_float("q0", q0, low=0.0)
    gen = generator(seed)
    a, b = torch.randn(2, width, generator=gen, dtype=torch.float64)
    inputs = math.sqrt(q0) * torch.stack([a, c0 * a + math.sqrt(1 - c0 * c0) * b])   # (2, width)
    h, variances, correlations = inputs, [], []
    for layer in range(depth):
        W = sigma_w / math.sqrt(width) * torch.randn(width, width, generator=gen, dtype=torch.float64)
        bias = sigma_b * torch.randn(width, generator=gen, dtype=torch.float64)
        h = phi(h) @ W.T + bias
        second = (h ** 2).mean(1)
        variances.append(second)
        correlations.append((h[0] @ h[1] / width) / second.prod().sqrt())
    return Propagation(torch.stack(variances), torch.stack(correlations))
