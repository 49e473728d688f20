"""SGD near a minimum as a noisy linear (AR(1), discrete Ornstein-Uhlenbeck) process (Chapter 17).

Near a minimum θ* with Hessian H, a step with gradient noise ξ_t of covariance C is
    θ_{t+1} - θ* = (I - ηH)(θ_t - θ*) - η ξ_t,
a vector autoregression of order one. For 0 < ηλ_i < 2 it forgets its start
geometrically and settles into a stationary Gaussian cloud whose covariance Σ solves
the discrete Lyapunov equation Σ = (I - ηH) Σ (I - ηH)^T + η² C. The module solves
that equation and simulates many chains in parallel, also with a minimum that
moves (a changing environment) and with heavy-tailed (Cauchy) noise whose variance
is infinite. Real minibatch SGD on a least-squares problem, whose gradient noise
is that of sampling a batch, and its exact stationary covariance live in
dlbook.quadratics (Chapter 3 uses them too). Everything is float64: the point is
the comparison with closed forms.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.linalg import solve_discrete_lyapunov

from .quadratics import LeastSquares, sgd_offsets
from .runtime import generator
from .validation import (
    as_tensor,
    check_choice,
    check_device,
    check_float,
    check_int,
    check_square,
    describe,
)

NOISE_KINDS = ("gaussian", "cauchy")
NOISE_MODELS = ("isotropic", "curvature", "round", "shifted")


def _check_stable(H: torch.Tensor, lr: float) -> None:
    eigenvalues = torch.linalg.eigvalsh(H)
    if eigenvalues.min() <= 0 or lr * eigenvalues.max() >= 2:
        raise ValueError(f"lr must satisfy 0 < lr·λ < 2 for every eigenvalue λ of H (need H positive definite); "
                         f"got lr = {lr} and eigenvalues in [{eigenvalues.min():.3g}, {eigenvalues.max():.3g}]")


def stationary_covariance(H, C, lr: float) -> torch.Tensor:
    """Stationary covariance Σ of θ_{t+1} = θ_t - lr (H θ_t + ξ_t), Cov ξ = C (Chapter 17).

    Σ solves the discrete Lyapunov equation Σ = AΣAᵀ + lr² C with A = I - lr H.
    """
    H, C = check_square("H", H, symmetric=True), check_square("C", C, symmetric=True)
    if H.shape != C.shape:
        raise ValueError(f"H and C must have the same shape, got {tuple(H.shape)} and {tuple(C.shape)}")
    lr = check_float("lr", lr, low=0.0, low_open=True)
    device = H.device
    H, C = H.detach().to("cpu", torch.float64), C.detach().to("cpu", torch.float64)  # small d x d algebra
    _check_stable(H, lr)
    A = torch.eye(len(H), dtype=torch.float64) - lr * H
    return torch.as_tensor(solve_discrete_lyapunov(A.numpy(), lr ** 2 * C.numpy())).to(device)


def diagonal_stationary_variance(curvatures, noise_variances, lr: float) -> torch.Tensor:
    """Closed form for diagonal H and C: Var_i = lr c_i / (λ_i (2 - lr λ_i)) (Chapter 17).

    About lr c_i / (2 λ_i) when lr λ_i is small.
    """
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
    """Memory of the AR(1) process along one eigen-direction: τ = -1 / log(1 - lr λ) ≈ 1 / (lr λ) (Chapter 17)."""
    curvature = check_float("curvature", curvature, low=0.0, low_open=True)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    if lr * curvature >= 1:
        raise ValueError(f"lr·curvature must be < 1 for a monotone decay, got {lr * curvature}")
    return float(-1.0 / np.log1p(-lr * curvature))


class ChainStatistics(NamedTuple):
    """Pooled statistics of θ - θ* over chains and the last steps, and the chains' final offsets (Chapter 17)."""

    mean: torch.Tensor
    covariance: torch.Tensor
    final: torch.Tensor


def simulate_quadratic_sgd(H, C, lr: float, *, steps: int, num_chains: int = 1000, window: int = 1000,
                           start=None, drift=None, noise: str = "gaussian", seed: int = 0,
                           device="cpu") -> ChainStatistics:
    """Run ``num_chains`` independent chains θ ← θ - lr (H (θ - θ*) + ξ) from θ* (or θ* + ``start``) (Chapter 17).

    The statistics are those of the offsets θ - θ*, pooled over all chains and the
    last ``window`` steps. With ``drift`` the minimum moves by that vector after
    every step (θ*_{t+1} = θ*_t + drift), as in an environment that changes. The noise
    ξ = C^{1/2} z has independent coordinates z: standard normal (``noise="gaussian"``,
    so Cov ξ = C) or standard Cauchy (``"cauchy"``: infinite variance, C^{1/2} sets
    the scale). Noise is drawn on the CPU from a seeded generator and moved to ``device``.
    """
    H, C = check_square("H", H, symmetric=True), check_square("C", C, symmetric=True)
    if H.shape != C.shape:
        raise ValueError(f"H and C must have the same shape, got {tuple(H.shape)} and {tuple(C.shape)}")
    H, C = H.detach().to("cpu", torch.float64), C.detach().to("cpu", torch.float64)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    num_chains = check_int("num_chains", num_chains, minimum=2)
    window = check_int("window", window, minimum=1, maximum=steps)
    check_choice("noise", noise, NOISE_KINDS)
    rng = generator(check_int("seed", seed, minimum=0))
    device = check_device("device", device)
    dim = len(H)
    theta = torch.zeros(num_chains, dim, dtype=torch.float64, device=device)  # offsets θ - θ*
    if start is not None:
        theta = theta + _vector("start", start, dim, device)
    shift = None if drift is None else _vector("drift", drift, dim, device)
    # A square root of C that also exists when C is singular (noise in a subspace only).
    eigenvalues, eigenvectors = torch.linalg.eigh(C)
    noise_factor = (eigenvectors * eigenvalues.clamp(min=0).sqrt()).to(device)
    A = (torch.eye(dim, dtype=torch.float64) - lr * H).to(device)
    total = torch.zeros(dim, dtype=torch.float64, device=device)
    second_moment = torch.zeros(dim, dim, dtype=torch.float64, device=device)
    for step in range(steps):
        if noise == "gaussian":
            z = torch.randn(num_chains, dim, generator=rng, dtype=torch.float64)
        else:  # inverse CDF of the standard Cauchy distribution
            z = torch.tan(torch.pi * (torch.rand(num_chains, dim, generator=rng, dtype=torch.float64) - 0.5))
        theta = theta @ A.T - lr * (z.to(device) @ noise_factor.T)  # (chains, dim)
        if shift is not None:
            theta = theta - shift  # the minimum moved away by `drift`
        if step >= steps - window:
            total += theta.sum(dim=0)
            second_moment += theta.T @ theta
    count = window * num_chains
    mean = total / count
    return ChainStatistics(mean, second_moment / count - torch.outer(mean, mean), theta)


def _vector(name: str, value, dim: int, device) -> torch.Tensor:
    vector = as_tensor(name, value, ndim=1, floating=True)
    if len(vector) != dim:
        raise ValueError(f"{name} must have {dim} entries to match H, got {len(vector)}")
    return vector.to(device=device, dtype=torch.float64)


def quantile_sgd(level: float, lr: float, *, steps: int, num_chains: int = 1000, window: int = 1000,
                 seed: int = 0, device="cpu") -> ChainStatistics:
    """SGD on the asymmetric pinball loss of standard normal data, one fresh sample per step (Chapter 17).

    The loss of an estimate q on a sample y is level·(y - q) if y > q and
    (1 - level)·(q - y) otherwise; its expectation is smallest at the ``level``
    quantile of the data. Each chain starts at 0 and steps q ← q - lr (1[y < q] - level).
    Returns the pooled mean and variance of q over the last ``window`` steps. Samples
    are drawn on the CPU from a seeded generator and moved to ``device``.
    """
    level = check_float("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    num_chains = check_int("num_chains", num_chains, minimum=2)
    window = check_int("window", window, minimum=1, maximum=steps)
    rng = generator(check_int("seed", seed, minimum=0))
    device = check_device("device", device)
    q = torch.zeros(num_chains, dtype=torch.float64, device=device)
    total = torch.zeros((), dtype=torch.float64, device=device)
    total_sq = torch.zeros((), dtype=torch.float64, device=device)
    for step in range(steps):
        y = torch.randn(num_chains, generator=rng, dtype=torch.float64).to(device)
        q = q - lr * ((y < q).double() - level)  # the pinball loss's gradient in q
        if step >= steps - window:
            total += q.sum()
            total_sq += (q * q).sum()
    count = window * num_chains
    mean = total / count
    return ChainStatistics(mean.reshape(1), (total_sq / count - mean * mean).reshape(1, 1), q[:, None])


# ---------------------------------------------------------------------------
# Real minibatch SGD on least squares
# ---------------------------------------------------------------------------

def minibatch_noise_covariance(problem: LeastSquares, batch_size: int) -> torch.Tensor:
    """Covariance at θ* of a batch gradient drawn with replacement: the per-sample covariance over B (Chapter 17)."""
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
    mean = recent.mean(dim=0)
    return ChainStatistics(mean, recent.T @ recent / len(recent) - torch.outer(mean, mean), offsets[-1])


class Refits(NamedTuple):
    """Least-squares fits of one linear model to independent samples (Chapter 17)."""

    theta_true: torch.Tensor   # (d,): the parameters the labels were made with
    estimates: torch.Tensor    # (num_datasets, d): the minimiser θ*(D) of each sample's loss


def least_squares_refits(num_points: int, curvatures=(2.0, 0.5), *, noise: float = 1.0, num_datasets: int = 1000,
                         seed: int = 0, device="cpu") -> Refits:
    """Fit y = x·θ + N(0, noise²) by least squares on ``num_datasets`` independent samples (Chapter 17).

    Inputs are Gaussian with variances ``curvatures`` (the population Hessian); θ_true
    is drawn once from the seed and shared by all samples, so the spread of the
    estimates is the uncertainty of the minimiser θ*(D) that comes from the sample
    alone. For Gaussian inputs E|θ*(D) - θ_true|² = noise² tr(H⁻¹) / (N - d - 1). Data are
    drawn on the CPU from a seeded generator; the fits run on ``device``.
    """
    curvatures = as_tensor("curvatures", list(curvatures), ndim=1, floating=True).to(torch.float64)
    if len(curvatures) == 0 or torch.any(curvatures <= 0):
        raise ValueError(f"curvatures must be a non-empty list of positive numbers, got {curvatures.tolist()}")
    dim = len(curvatures)
    num_points = check_int("num_points", num_points, minimum=dim + 2)
    noise = check_float("noise", noise, low=0.0)
    num_datasets = check_int("num_datasets", num_datasets, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    device = check_device("device", device)
    theta_true = torch.randn(dim, generator=rng, dtype=torch.float64)
    X = torch.randn(num_datasets, num_points, dim, generator=rng, dtype=torch.float64) * curvatures.sqrt()
    y = X @ theta_true + noise * torch.randn(num_datasets, num_points, generator=rng, dtype=torch.float64)
    # On the CPU lstsq's default driver needs full-rank samples, which Gaussian data have (N > d).
    estimates = torch.linalg.lstsq(X.to(device), y.to(device)[..., None]).solution[..., 0]  # (num_datasets, d)
    return Refits(theta_true.to(device), estimates)


def noise_model(curvatures, kind: str, scale: float = 1.0, *, lr: float | None = None) -> torch.Tensor:
    """Diagonal gradient-noise variances c_i for Hessian eigenvalues λ_i, largest equal to ``scale`` (Chapter 17).

    "isotropic": all equal; "curvature": c_i ∝ λ_i; "round": c_i ∝ λ_i (2 - lr λ_i),
    which makes every stationary variance equal (needs ``lr``); "shifted":
    c_i ∝ λ_i², the noise of a minimum displaced by an isotropic random shift.
    """
    lam = as_tensor("curvatures", curvatures, ndim=1, floating=True).to(torch.float64)
    if len(lam) == 0 or torch.any(lam <= 0):
        raise ValueError(f"curvatures must be a non-empty vector of positive numbers, got {describe(lam)}")
    check_choice("kind", kind, NOISE_MODELS)
    scale = check_float("scale", scale, low=0.0)
    if kind == "round":
        if lr is None:
            raise ValueError("the 'round' noise model needs the learning rate: pass lr=")
        lr = check_float("lr", lr, low=0.0, low_open=True)
        _check_stable(torch.diag(lam), lr)
    shapes = {"isotropic": lambda: torch.ones_like(lam), "curvature": lambda: lam,
              "round": lambda: lam * (2 - lr * lam), "shifted": lambda: lam ** 2}
    variances = shapes[kind]()
    return scale * variances / variances.max()
