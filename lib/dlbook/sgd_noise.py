"""SGD near a minimum as a noisy linear (AR(1), discrete Ornstein-Uhlenbeck) process (Chapter 17).

Near a minimum θ* with Hessian H, a step with gradient noise ξ_t of covariance C is
    θ_{t+1} - θ* = (I - ηH)(θ_t - θ*) - η ξ_t,
a vector autoregression of order one. For 0 < ηλ_i < 2 it forgets its start
geometrically and settles into a stationary Gaussian cloud whose covariance Σ solves
the discrete Lyapunov equation Σ = (I - ηH) Σ (I - ηH)^T + η² C. The module solves
that equation and simulates many chains in parallel. Real minibatch SGD on a
least-squares problem, whose gradient noise is that of sampling a batch, and its
exact stationary covariance live in dlbook.quadratics (Chapter 3 uses them too).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.linalg import solve_discrete_lyapunov

from .quadratics import LeastSquares, sgd_offsets
from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int, check_square, describe


def _check_stable(H: torch.Tensor, lr: float) -> None:
    eigenvalues = torch.linalg.eigvalsh(H)
    if eigenvalues.min() <= 0 or lr * eigenvalues.max() >= 2:
        raise ValueError(f"lr must satisfy 0 < lr·λ < 2 for every eigenvalue λ of H (need H positive definite); "
                         f"got lr = {lr} and eigenvalues in [{eigenvalues.min():.3g}, {eigenvalues.max():.3g}]")


def stationary_covariance(H, C, lr: float) -> torch.Tensor:
    """Stationary covariance Σ of θ_{t+1} = θ_t - lr (H θ_t + ξ_t), Cov ξ = C: Σ = AΣA^T + lr² C, A = I - lr H."""
    H, C = check_square("H", H, symmetric=True).double(), check_square("C", C, symmetric=True).double()
    if H.shape != C.shape:
        raise ValueError(f"H and C must have the same shape, got {tuple(H.shape)} and {tuple(C.shape)}")
    lr = check_float("lr", lr, low=0.0, low_open=True)
    _check_stable(H, lr)
    A = torch.eye(len(H), dtype=torch.float64) - lr * H
    return torch.as_tensor(solve_discrete_lyapunov(A.numpy(), lr ** 2 * C.numpy()))


def diagonal_stationary_variance(curvatures, noise_variances, lr: float) -> torch.Tensor:
    """Closed form for diagonal H and C: Var_i = lr c_i / (λ_i (2 - lr λ_i)), about lr c_i / (2 λ_i) for small lr."""
    lam = as_tensor("curvatures", curvatures, ndim=1, dtype=torch.float64)
    c = as_tensor("noise_variances", noise_variances, ndim=1, dtype=torch.float64)
    if lam.shape != c.shape:
        raise ValueError(f"curvatures and noise_variances must have the same length, got {len(lam)} and {len(c)}")
    if torch.any(c < 0):
        raise ValueError("noise_variances must be non-negative")
    lr = check_float("lr", lr, low=0.0, low_open=True)
    _check_stable(torch.diag(lam), lr)
    return lr * c / (lam * (2 - lr * lam))


def autocorrelation_time(curvature: float, lr: float) -> float:
    """Memory of the AR(1) process along one eigen-direction: τ = -1 / log(1 - lr λ) ≈ 1 / (lr λ)."""
    curvature = check_float("curvature", curvature, low=0.0, low_open=True)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    if lr * curvature >= 1:
        raise ValueError(f"lr·curvature must be < 1 for a monotone decay, got {lr * curvature}")
    return float(-1.0 / np.log1p(-lr * curvature))


class ChainStatistics(NamedTuple):
    """Empirical stationary covariance (pooled over chains and the last steps) and the final states."""

    covariance: torch.Tensor
    final: torch.Tensor


def simulate_quadratic_sgd(H, C, lr: float, *, steps: int, num_chains: int = 1000, window: int = 1000,
                           start=None, seed: int = 0, device="cpu") -> ChainStatistics:
    """Run ``num_chains`` independent chains θ ← θ - lr (H θ + ξ), ξ ~ N(0, C), from θ* = 0 (or ``start``).

    The covariance is estimated from all chains over the last ``window`` steps. Noise is
    drawn on the CPU from a seeded generator and moved to ``device``.
    """
    H, C = check_square("H", H, symmetric=True).double(), check_square("C", C, symmetric=True).double()
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    num_chains = check_int("num_chains", num_chains, minimum=2)
    window = check_int("window", window, minimum=1, maximum=steps)
    rng = generator(check_int("seed", seed, minimum=0))
    dim = len(H)
    # A square root of C that also exists when C is singular (noise in a subspace only).
    eigenvalues, eigenvectors = torch.linalg.eigh(C)
    noise_factor = (eigenvectors * eigenvalues.clamp(min=0).sqrt()).to(device)
    A = (torch.eye(dim, dtype=torch.float64) - lr * H).to(device)
    theta = torch.zeros(num_chains, dim, dtype=torch.float64, device=device)
    if start is not None:
        theta = theta + as_tensor("start", start, ndim=1, dtype=torch.float64, device=device)
    second_moment = torch.zeros(dim, dim, dtype=torch.float64, device=device)
    for step in range(steps):
        xi = torch.randn(num_chains, dim, generator=rng, dtype=torch.float64).to(device) @ noise_factor.T
        theta = theta @ A.T - lr * xi  # (chains, dim)
        if step >= steps - window:
            second_moment += theta.T @ theta
    return ChainStatistics(second_moment / (window * num_chains), theta)


# ---------------------------------------------------------------------------
# Real minibatch SGD on least squares
# ---------------------------------------------------------------------------

def minibatch_noise_covariance(problem: LeastSquares, batch_size: int) -> torch.Tensor:
    """Covariance at θ* of a batch gradient drawn with replacement: the per-sample covariance over B."""
    if not isinstance(problem, LeastSquares):
        raise TypeError(f"problem must be a quadratics.LeastSquares, got {describe(problem)}")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    return problem.gradient_covariance / batch_size


def minibatch_sgd_spread(problem: LeastSquares, lr: float, batch_size: int, *, steps: int = 4000,
                         num_chains: int = 200, window: int = 2000, seed: int = 0) -> ChainStatistics:
    """Covariance of θ - θ* under minibatch SGD, pooled over chains and the last ``window`` steps (Chapter 17).

    Chains start at the optimum (dlbook.quadratics.sgd_offsets); also returns
    the final offsets θ - θ* of the chains, shape (num_chains, d).
    """
    steps = check_int("steps", steps, minimum=1)
    window = check_int("window", window, minimum=1, maximum=steps)
    if not isinstance(problem, LeastSquares):
        raise TypeError(f"problem must be a quadratics.LeastSquares, got {describe(problem)}")
    _check_stable(problem.hessian, check_float("lr", lr, low=0.0, low_open=True))
    offsets = sgd_offsets(problem, lr, batch_size, steps, num_chains=num_chains, seed=seed)
    recent = offsets[-window:].reshape(-1, offsets.shape[-1])  # (window * chains, d)
    return ChainStatistics(recent.T @ recent / len(recent), offsets[-1])


def noise_model(curvatures, kind: str, scale: float = 1.0) -> torch.Tensor:
    """Diagonal noise variances: "isotropic" (all = scale) or "curvature" (∝ λ_i, largest = scale)."""
    lam = as_tensor("curvatures", curvatures, ndim=1, dtype=torch.float64)
    check_choice("kind", kind, ("isotropic", "curvature"))
    scale = check_float("scale", scale, low=0.0)
    return torch.full_like(lam, scale) if kind == "isotropic" else scale * lam / lam.max()
