"""The Marchenko-Pastur law for the spectrum of a sample covariance matrix (Chapter 18).

For an n x p matrix X of independent entries with mean 0 and variance 1, the
eigenvalues of S = XᵀX / n follow, as n, p → ∞ with γ = p / n fixed, the
Marchenko-Pastur law: a density on [λ₋, λ₊], λ± = (1 ± √γ)², and, when γ > 1,
an atom of mass 1 - 1/γ at zero (S has rank n < p). The law does not depend on
the distribution of the entries (universality), which
:func:`sample_covariance_spectrum` lets one check with Rademacher entries.

Everything here is float64: its purpose is a comparison with a closed form.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int

#: Entry distributions of :func:`sample_covariance_spectrum` (both mean 0, variance 1).
ENTRIES = ("gaussian", "rademacher")


class Edges(NamedTuple):
    """The ends of the support of the continuous part of the Marchenko-Pastur law."""
    lower: float
    upper: float


def _gamma(gamma) -> float:
    return check_float("gamma", gamma, low=0.0, low_open=True)


def marchenko_pastur_edges(gamma: float) -> Edges:
    """The edges λ± = (1 ± √γ)² of the Marchenko-Pastur law with aspect ratio γ = p/n (Chapter 18)."""
    root = math.sqrt(_gamma(gamma))
    return Edges((1.0 - root) ** 2, (1.0 + root) ** 2)


def marchenko_pastur_atom(gamma: float) -> float:
    """The mass 1 - 1/γ of the atom at zero when γ > 1, else 0 (Chapter 18)."""
    gamma = _gamma(gamma)
    return max(0.0, 1.0 - 1.0 / gamma)


def marchenko_pastur_density(x, gamma: float) -> torch.Tensor:
    """The density √((λ₊ - x)(x - λ₋)) / (2πγx) of the continuous part, zero outside [λ₋, λ₊] (Chapter 18).

    For γ > 1 it integrates to 1/γ; the rest of the mass is the atom at zero.
    """
    x = as_tensor("x", x, floating=True, dtype=torch.float64)
    low, high = marchenko_pastur_edges(gamma)
    inside = (x > low) & (x < high) & (x > 0)
    safe = torch.where(inside, x, torch.ones_like(x))
    value = torch.sqrt(((high - safe) * (safe - low)).clamp_min(0.0)) / (2 * math.pi * gamma * safe)
    return torch.where(inside, value, torch.zeros_like(x))


def marchenko_pastur_cdf(x, gamma: float, *, num_nodes: int = 64) -> torch.Tensor:
    """The distribution function of the Marchenko-Pastur law, atom at zero included (Chapter 18).

    The substitution λ = m - r cos θ (m, r the centre and half-width of the support)
    turns the square-root singularities at the edges into a smooth integrand,
    sin²θ r² / (2πγλ), which Gauss-Legendre quadrature with ``num_nodes`` nodes
    integrates to rounding; it stays bounded even for γ = 1, where the density
    itself blows up at zero.
    """
    x = as_tensor("x", x, floating=True, dtype=torch.float64)
    num_nodes = check_int("num_nodes", num_nodes, minimum=2)
    low, high = marchenko_pastur_edges(gamma)
    centre, half = (high + low) / 2, (high - low) / 2
    theta_x = torch.arccos(((centre - x) / half).clamp(-1.0, 1.0))           # 0 at λ₋, π at λ₊
    nodes, weights = (torch.as_tensor(a, dtype=torch.float64) for a in np.polynomial.legendre.leggauss(num_nodes))
    theta = theta_x.unsqueeze(-1) * (nodes + 1) / 2                            # x.shape + (num_nodes,)
    lam = centre - half * torch.cos(theta)
    integrand = (half * torch.sin(theta)) ** 2 / (2 * math.pi * gamma * lam.clamp_min(1e-300))
    continuous = (integrand * weights).sum(-1) * theta_x / 2
    atom = marchenko_pastur_atom(gamma)
    return torch.where(x < 0, torch.zeros_like(x), atom + continuous)


def sample_covariance_spectrum(num_samples: int, dim: int, *, entries: str = "gaussian",
                               seed: int = 0) -> torch.Tensor:
    """Ascending eigenvalues of XᵀX / n for an n x p matrix of i.i.d. unit-variance entries (Chapter 18).

    ``entries`` is "gaussian" or "rademacher" (±1 with equal probability).
    """
    num_samples = check_int("num_samples", num_samples, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    check_choice("entries", entries, ENTRIES)
    gen = generator(seed)
    if entries == "gaussian":
        X = torch.randn(num_samples, dim, generator=gen, dtype=torch.float64)
    else:
        X = torch.randint(0, 2, (num_samples, dim), generator=gen).to(torch.float64) * 2 - 1
    return torch.linalg.eigvalsh(X.T @ X / num_samples)


def _eigenvalues(eigenvalues) -> torch.Tensor:
    eigenvalues = as_tensor("eigenvalues", eigenvalues, ndim=1, floating=True, dtype=torch.float64)
    if len(eigenvalues) == 0:
        raise ValueError("eigenvalues must not be empty")
    return eigenvalues


def zero_eigenvalues(eigenvalues, *, rtol: float = 1e-9) -> torch.Tensor:
    """Mask of the eigenvalues that are zero up to rounding: |λ| <= rtol · max|λ| (Chapter 18)."""
    eigenvalues = _eigenvalues(eigenvalues)
    rtol = check_float("rtol", rtol, low=0.0, high=1.0, high_open=True)
    return eigenvalues.abs() <= rtol * eigenvalues.abs().max()


def ks_distance(eigenvalues, gamma: float, *, rtol: float = 1e-9) -> float:
    """Kolmogorov-Smirnov distance of the non-zero eigenvalues to the continuous Marchenko-Pastur part (Chapter 18).

    The atom at zero is taken out first (it is checked by counting, see
    :func:`zero_eigenvalues`): the remaining eigenvalues are compared with
    (F(x) - atom) / (1 - atom), the law of the continuous part alone.
    """
    eigenvalues = _eigenvalues(eigenvalues)
    positive = torch.sort(eigenvalues[~zero_eigenvalues(eigenvalues, rtol=rtol)]).values
    if len(positive) == 0:
        raise ValueError("eigenvalues must contain at least one non-zero value")
    atom = marchenko_pastur_atom(gamma)
    F = (marchenko_pastur_cdf(positive, gamma) - atom) / (1.0 - atom)
    n = len(positive)
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    return max((ranks / n - F).max().item(), (F - (ranks - 1) / n).max().item())
