"""Low-rank factorization of weight matrices by truncated SVD (Chapter 15).

By the Eckart-Young theorem the best rank-r approximation of W (m x n) in the Frobenius
norm keeps the r largest singular triples, and its error is sqrt(Σ_{i>r} σ_i²). Stored
as the product A B with A of shape (m, r) and B of shape (r, n), a rank-r layer has
r(m + n) weights instead of m n, fewer whenever r < m n / (m + n). The functions keep the
dtype of their input; the tests compare with the closed form in float64.
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn

from .validation import as_tensor, check_finite, check_int, describe


class Factors(NamedTuple):
    """W ≈ A @ B with A = U_r diag(σ_r) of shape (m, r) and B = V_rᵀ of shape (r, n) (Chapter 15)."""
    A: torch.Tensor
    B: torch.Tensor

    def matrix(self) -> torch.Tensor:
        """The rank-r matrix A @ B."""
        return self.A @ self.B


def _matrix(W) -> torch.Tensor:
    return check_finite("W", as_tensor("W", W, ndim=2, floating=True))


def _rank(rank: int, W: torch.Tensor) -> int:
    return check_int("rank", rank, minimum=0, maximum=min(W.shape))


def truncated_svd(W, rank: int) -> Factors:
    """The best rank-``rank`` factors of W (Eckart-Young), the singular values folded into A (Chapter 15)."""
    W = _matrix(W)
    rank = _rank(rank, W)
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    return Factors(U[:, :rank] * S[:rank], Vh[:rank].clone())


def truncation_error(W, rank: int) -> float:
    """The Frobenius error sqrt(Σ_{i>r} σ_i²) of the best rank-r approximation (Chapter 15)."""
    W = _matrix(W)
    rank = _rank(rank, W)
    return float(torch.linalg.svdvals(W)[rank:].pow(2).sum().sqrt())


def low_rank_parameters(fan_in: int, fan_out: int, rank: int) -> int:
    """Weights r(m + n) of a rank-r factorization of an (m = fan_out) x (n = fan_in) matrix (Chapter 15)."""
    fan_in = check_int("fan_in", fan_in, minimum=1)
    fan_out = check_int("fan_out", fan_out, minimum=1)
    rank = check_int("rank", rank, minimum=0, maximum=min(fan_in, fan_out))
    return rank * (fan_in + fan_out)


def low_rank_linear(linear: nn.Linear, rank: int) -> nn.Sequential:
    """Replace an nn.Linear by Linear(n, r, no bias) then Linear(r, m) holding its truncated SVD (Chapter 15).

    The bias is kept in the second layer, so at full rank the pair computes the same map.
    """
    if not isinstance(linear, nn.Linear):
        raise TypeError(f"linear must be a torch.nn.Linear, got {describe(linear)}")
    W = linear.weight.detach()
    rank = check_int("rank", rank, minimum=1, maximum=min(W.shape))
    A, B = truncated_svd(W, rank)
    first = nn.Linear(W.shape[1], rank, bias=False, dtype=W.dtype, device=W.device)
    second = nn.Linear(rank, W.shape[0], bias=linear.bias is not None, dtype=W.dtype, device=W.device)
    with torch.no_grad():
        first.weight.copy_(B)
        second.weight.copy_(A)
        if linear.bias is not None:
            second.bias.copy_(linear.bias)
    return nn.Sequential(first, second)


def low_rank_model(model: nn.Sequential, rank: int) -> nn.Sequential:
    """A copy of an nn.Sequential whose Linear layers are replaced by rank-min(rank, m, n) pairs (Chapter 15).

    Layers whose factorization would not save weights (r(m + n) >= m n) are copied unchanged.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be a torch.nn.Sequential, got {describe(model)}")
    rank = check_int("rank", rank, minimum=1)
    layers = []
    for module in model:
        if isinstance(module, nn.Linear):
            m, n = module.weight.shape
            r = min(rank, m, n)
            if r * (m + n) < m * n:
                layers.append(low_rank_linear(module, r))
                continue
        layers.append(copy.deepcopy(module))
    return nn.Sequential(*layers)

