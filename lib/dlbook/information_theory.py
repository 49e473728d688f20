"""Information-theoretic quantities of discrete joint distributions, and the information bottleneck (Chapter 18).

A joint distribution of k discrete variables is a k-dimensional table of
probabilities, axis i for variable i. Entropies, conditional entropies,
mutual and conditional mutual information and total correlation are sums over
such tables, in nats; KL divergence is :func:`dlbook.divergences.kl_divergence`
(Chapter 10) applied to the flattened tables. The information bottleneck
compresses X into Z while keeping what Z says about Y, minimising
I(Z; X) - β I(Z; Y) (Tishby's convention; a source written as
H(Y|Z) + β' I(Z; X) has β = 1/β').

Everything here is float64: the identities between these quantities hold to rounding.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from . import divergences
from .runtime import generator
from .validation import as_tensor, check_float, check_int, check_ints, check_square, describe


def _table(name: str, p, ndim: int | None = None) -> torch.Tensor:
    p = as_tensor(name, p, floating=True, dtype=torch.float64)
    if ndim is not None and p.dim() != ndim:
        raise ValueError(f"{name} must be a joint table with {ndim} axes, got {describe(p)}")
    if p.dim() == 0 or p.numel() == 0:
        raise ValueError(f"{name} must be a non-empty table of probabilities, got {describe(p)}")
    if not torch.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"{name} must hold finite, non-negative probabilities")
    if abs(p.sum().item() - 1) > 1e-9:
        raise ValueError(f"{name} must sum to 1, got {p.sum().item():.12g}")
    return p


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.xlogy(p, p).sum()


def entropy(p) -> float:
    """H = -Σ p log p of a distribution given as a table of any shape, in nats (Chapter 18)."""
    return _entropy(_table("p", p)).item()


def marginal(p, axes) -> torch.Tensor:
    """The marginal table of the variables on ``axes`` (in that order) (Chapter 18)."""
    p = _table("p", p)
    axes = check_ints("axes", axes, minimum=0)
    if max(axes) >= p.dim() or len(set(axes)) != len(axes):
        raise ValueError(f"axes must be distinct axes of a table with {p.dim()} axes, got {axes}")
    others = [a for a in range(p.dim()) if a not in axes]
    summed = p.sum(dim=others) if others else p
    kept = sorted(axes)
    return summed.permute([kept.index(a) for a in axes])


def conditional_entropy(p_xy) -> float:
    """H(Y | X) = H(X, Y) - H(X) for a table with X on axis 0 and Y on axis 1 (Chapter 18)."""
    p = _table("p_xy", p_xy, ndim=2)
    return (_entropy(p) - _entropy(p.sum(1))).item()


def mutual_information(p_xy) -> float:
    """I(X; Y) = Σ p(x, y) log[p(x, y) / (p(x) p(y))] for a two-axis table (Chapter 18)."""
    p = _table("p_xy", p_xy, ndim=2)
    independent = p.sum(1, keepdim=True) * p.sum(0, keepdim=True)
    return divergences.kl_divergence(p.reshape(-1), independent.reshape(-1)).item()


def conditional_mutual_information(p_xyz) -> float:
    """I(X; Y | Z) = H(X, Z) + H(Y, Z) - H(X, Y, Z) - H(Z) for a three-axis table (X, Y, Z) (Chapter 18)."""
    p = _table("p_xyz", p_xyz, ndim=3)
    return (_entropy(p.sum(1)) + _entropy(p.sum(0)) - _entropy(p) - _entropy(p.sum((0, 1)))).item()


def kl_divergence(p, q) -> float:
    """KL(P ‖ Q) between two tables of the same shape, in nats (Chapter 18; Chapter 10's function)."""
    p, q = _table("p", p), _table("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    return divergences.kl_divergence(p.reshape(-1), q.reshape(-1)).item()


def cross_entropy(p, q) -> float:
    """H(P, Q) = -Σ p log q = H(P) + KL(P ‖ Q), in nats (Chapter 18)."""
    p, q = _table("p", p), _table("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    return (-torch.xlogy(p, q).sum()).item()


def total_correlation(p) -> float:
    """TC = Σ_i H(X_i) - H(X_1, ..., X_k) = KL(p ‖ ∏ p_i) >= 0 (Chapter 18)."""
    p = _table("p", p)
    singles = sum(_entropy(p.sum(dim=[b for b in range(p.dim()) if b != a])) for a in range(p.dim())
                  ) if p.dim() > 1 else _entropy(p)
    return (singles - _entropy(p)).item()


def gaussian_total_correlation(cov) -> float:
    """TC of a Gaussian with covariance Σ: ½ (Σ_i log Σ_ii - log det Σ), zero when Σ is diagonal (Chapter 18)."""
    cov = check_square("cov", cov, symmetric=True).to(torch.float64)
    sign, logdet = torch.linalg.slogdet(cov)
    if sign <= 0:
        raise ValueError("cov must be positive definite")
    return 0.5 * (torch.log(torch.diagonal(cov)).sum() - logdet).item()


def _random_distribution(shape, gen) -> torch.Tensor:
    # Dirichlet(1) rows: normalised exponential draws
    draws = -torch.log(torch.rand(shape, generator=gen, dtype=torch.float64).clamp_min(1e-300))
    return draws / draws.sum(-1, keepdim=True)


def random_markov_chain(sizes, *, seed: int = 0) -> torch.Tensor:
    """Joint table p(x) p(y|x) p(z|y) of a random Markov chain X → Y → Z with the given alphabet sizes (Chapter 18)."""
    nx, ny, nz = check_ints("sizes", sizes, minimum=1, min_length=3)
    if len(sizes) != 3:
        raise ValueError(f"sizes must have 3 entries (X, Y, Z), got {len(sizes)}")
    gen = generator(seed)
    p_x = _random_distribution((nx,), gen)
    p_y_x = _random_distribution((nx, ny), gen)
    p_z_y = _random_distribution((ny, nz), gen)
    return p_x[:, None, None] * p_y_x[:, :, None] * p_z_y[None, :, :]


class Bottleneck(NamedTuple):
    """An information-bottleneck encoder p(z|x) (rows x) with its two informations, in nats."""
    encoder: torch.Tensor
    info_zx: float
    info_zy: float


def information_bottleneck(p_xy, num_clusters: int, beta: float, *, iterations: int = 500, seed: int = 0,
                           encoder=None, jitter: float = 0.0) -> Bottleneck:
    """Blahut-Arimoto iteration of the discrete information bottleneck, min I(Z; X) - β I(Z; Y) (Chapter 18).

    Repeats p(z|x) ∝ p(z) exp(-β KL(p(y|x) ‖ p(y|z))), p(z) = Σ_x p(x) p(z|x) and
    p(y|z) = Σ_x p(y|x) p(x|z) from a random encoder (or ``encoder``, to follow
    a path in β). Codes that are copies of each other stay copies under the
    iteration, so a path needs its splits seeded: ``jitter`` multiplies the
    given encoder entrywise by 1 + jitter·U(0, 1), drawn from ``seed``, instead
    of leaving them to rounding errors.
    """
    p = _table("p_xy", p_xy, ndim=2)
    num_clusters = check_int("num_clusters", num_clusters, minimum=1)
    beta = check_float("beta", beta, low=0.0)
    iterations = check_int("iterations", iterations, minimum=1)
    jitter = check_float("jitter", jitter, low=0.0)
    p_x = p.sum(1)
    if (p_x == 0).any():
        raise ValueError("p_xy must give every x positive probability")
    p_y_x = p / p_x[:, None]
    if encoder is None:
        q = _random_distribution((len(p_x), num_clusters), generator(seed))
    else:
        q = as_tensor("encoder", encoder, shape=(len(p_x), num_clusters), floating=True, dtype=torch.float64)
        q = q * (1 + jitter * torch.rand(q.shape, generator=generator(seed), dtype=torch.float64))
        q = q / q.sum(1, keepdim=True)
    for _ in range(iterations):
        p_z = p_x @ q
        p_y_z = (q * p_x[:, None]).T @ p_y_x / p_z.clamp_min(1e-300)[:, None]      # (Z, Y)
        # KL(p(y|x) ‖ p(y|z)) for every pair, (X, Z)
        kl = (torch.xlogy(p_y_x, p_y_x).sum(1)[:, None]
              - torch.xlogy(p_y_x[:, None, :], p_y_z.clamp_min(1e-300)[None]).sum(-1))
        logits = torch.log(p_z.clamp_min(1e-300))[None, :] - beta * kl
        q = torch.softmax(logits, dim=1)
    joint_xz = q * p_x[:, None]
    joint_zy = joint_xz.T @ p_y_x
    return Bottleneck(q, mutual_information(joint_xz), mutual_information(joint_zy))
