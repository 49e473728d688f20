"""Quadratic and least-squares problems, and the one gradient-descent loop on them.

Chapter 3 derives the rates of gradient descent on quadratics, chapter 4
reads early stopping as ridge regression, chapter 16 measures how
conditioning slows learning, and chapter 17 studies SGD's spread near an
optimum: all of them use the problems and loops here.

Everything is float64 by default: these functions exist to be compared
with closed forms.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from .runtime import generator
from .validation import (
    as_tensor,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_same_length,
    check_square,
    describe,
)

# ---------------------------------------------------------------------------
# Quadratics f(θ) = ½ θᵀAθ - bᵀθ
# ---------------------------------------------------------------------------

class Quadratic(NamedTuple):
    """f(θ) = ½ θᵀ A θ with A = Q diag(eigenvalues) Qᵀ; the minimum is f(0) = 0 (Chapter 3)."""

    A: torch.Tensor
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor


def spread_eigenvalues(dim: int, condition_number: float, *, smoothness: float = 1.0,
                       dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """``dim`` eigenvalues spaced geometrically from L/κ up to L = ``smoothness`` (Chapter 3)."""
    dim = check_int("dim", dim, minimum=1)
    kappa = check_float("condition_number", condition_number, low=1.0)
    smoothness = check_float("smoothness", smoothness, low=0.0, low_open=True)
    if dim == 1 and kappa != 1.0:
        raise ValueError(f"condition_number must be 1 for dim=1, got {kappa}")
    exponents = torch.linspace(-1.0, 0.0, dim, dtype=torch.float64)
    return (smoothness * kappa**exponents).to(device=check_device("device", device),
                                             dtype=check_dtype("dtype", dtype))


def quadratic(eigenvalues, *, seed: int | None = 0, device="cpu",
              dtype: torch.dtype = torch.float64) -> Quadratic:
    """The quadratic with these Hessian eigenvalues, in a random orthonormal basis (Chapter 3).

    ``seed=None`` keeps the coordinate axes as eigenvectors (A is diagonal).
    """
    eigenvalues = as_tensor("eigenvalues", eigenvalues, ndim=1, dtype=torch.float64)
    if len(eigenvalues) == 0 or not torch.all(eigenvalues > 0):
        raise ValueError("eigenvalues must be a non-empty vector of positive numbers")
    dim = len(eigenvalues)
    if seed is None:
        Q = torch.eye(dim, dtype=torch.float64)
    else:
        Q, R = torch.linalg.qr(torch.randn(dim, dim, generator=generator(seed), dtype=torch.float64))
        Q = Q * torch.sign(torch.diagonal(R))  # a uniformly random rotation (Haar measure)
    A = (Q * eigenvalues) @ Q.T
    A = (A + A.T) / 2  # exactly symmetric despite rounding
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    return Quadratic(A.to(device, dtype), eigenvalues.to(device, dtype), Q.to(device, dtype))


def condition_number(A) -> float:
    """κ = λ_max / λ_min of a symmetric positive definite matrix (Chapter 3)."""
    eigenvalues = torch.linalg.eigvalsh(check_square("A", A, symmetric=True).to(torch.float64))
    if eigenvalues[0] <= 0:
        raise ValueError(f"A must be positive definite, its smallest eigenvalue is "
                         f"{eigenvalues[0].item():.3g}")
    return (eigenvalues[-1] / eigenvalues[0]).item()


def quadratic_loss(A: torch.Tensor, theta: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """½ θᵀAθ - bᵀθ for one θ (d,) or a batch (..., d) (Chapter 3)."""
    A = check_square("A", A)
    theta = as_tensor("theta", theta, floating=True)
    if theta.dim() == 0 or theta.shape[-1] != len(A):
        raise ValueError(f"theta must end in a dimension of size {len(A)} to match A, got {describe(theta)}")
    if b is not None:
        b = as_tensor("b", b, shape=(len(A),), floating=True)
    return _quadratic_loss(A, theta, b)


def _quadratic_loss(A: torch.Tensor, theta: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """quadratic_loss without the checks, for the loops below (their arguments are checked once)."""
    loss = 0.5 * ((theta @ A) * theta).sum(-1)
    return loss if b is None else loss - theta @ b


class Run(NamedTuple):
    """An optimizer run on a quadratic: iterates (steps_done + 1, d), losses (steps_done + 1,) (Chapter 3)."""

    iterates: torch.Tensor
    losses: torch.Tensor
    diverged: bool


def _check_problem_vectors(A, theta0, b):
    A = check_square("A", A, symmetric=True)
    theta0 = as_tensor("theta0", theta0, ndim=1, floating=True).to(A)
    if len(theta0) != len(A):
        raise ValueError(f"theta0 must have {len(A)} entries to match A, got {len(theta0)}")
    if b is not None:
        b = as_tensor("b", b, ndim=1, floating=True).to(A)
        if len(b) != len(A):
            raise ValueError(f"b must have {len(A)} entries to match A, got {len(b)}")
    return A, theta0, b


def _loss_scale(A: torch.Tensor, start_loss: torch.Tensor, b) -> float:
    """max(|f(θ0)|, |min f|): a run diverges when |f| leaves this scale by the blow-up factor."""
    scale = abs(start_loss.item())
    if b is not None:  # min f = -½ bᵀA⁺b
        theta_star = torch.linalg.lstsq(A.double(), b.double()[:, None]).solution[:, 0]
        scale = max(scale, 0.5 * abs((b.double() @ theta_star).item()))
    return max(scale, torch.finfo(A.dtype).tiny)


def gradient_descent(A, theta0, lr: float, steps: int, *, b=None, blowup: float = 1e8) -> Run:
    """Gradient descent θ ← θ - lr (Aθ - b) on ½ θᵀAθ - bᵀθ, stopped cleanly at a blow-up (Chapter 3).

    The run stops early, with ``diverged=True``, as soon as |f| exceeds
    ``blowup`` times its starting size (so it never overflows to inf or NaN).
    Written out directly rather than through an optimizer (the tests check
    they agree): it is the inner loop of several figures.
    """
    A, theta, b = _check_problem_vectors(A, theta0, b)
    lr = check_float("lr", lr, low=0.0)
    steps = check_int("steps", steps, minimum=0)
    blowup = check_float("blowup", blowup, low=1.0, low_open=True)
    iterates, losses = [theta], [quadratic_loss(A, theta, b)]
    limit = blowup * _loss_scale(A, losses[0], b)
    for _ in range(steps):
        gradient = A @ theta if b is None else A @ theta - b
        theta = theta - lr * gradient
        loss = _quadratic_loss(A, theta, b)
        if not loss.abs().item() <= limit:  # also catches inf and NaN
            return Run(torch.stack(iterates), torch.stack(losses), True)
        iterates.append(theta)
        losses.append(loss)
    return Run(torch.stack(iterates), torch.stack(losses), False)


def run_on_quadratic(A, theta0, make_optimizer: Callable, steps: int, *, b=None,
                     blowup: float = 1e8) -> Run:
    """Run a torch.optim-style optimizer on ½ θᵀAθ - bᵀθ with the exact gradient (Chapter 3).

    ``make_optimizer(params)`` builds it, e.g. ``lambda p: optim.SGD(p, lr=0.1)``.
    Stops at a blow-up like :func:`gradient_descent`.
    """
    A, theta0, b = _check_problem_vectors(A, theta0, b)
    if not callable(make_optimizer):
        raise TypeError(f"make_optimizer must be callable, got {describe(make_optimizer)}")
    steps = check_int("steps", steps, minimum=0)
    blowup = check_float("blowup", blowup, low=1.0, low_open=True)
    theta = theta0.clone().requires_grad_(False)
    optimizer = make_optimizer([theta])
    iterates, losses = [theta0.clone()], [_quadratic_loss(A, theta0, b)]
    limit = blowup * _loss_scale(A, losses[0], b)
    diverged = False
    for _ in range(steps):
        theta.grad = A @ theta if b is None else A @ theta - b
        optimizer.step()
        loss = _quadratic_loss(A, theta, b)
        if not loss.abs().item() <= limit:  # also catches inf and NaN
            diverged = True
            break
        iterates.append(theta.clone())
        losses.append(loss)
    return Run(torch.stack(iterates), torch.stack(losses), diverged)


# ---------------------------------------------------------------------------
# Least squares L(θ) = ‖Xθ - y‖² / (2N)
# ---------------------------------------------------------------------------

class LeastSquares(NamedTuple):
    """L(θ) = ‖Xθ - y‖²/(2N): data, minimiser θ*, minimum, Hessian XᵀX/N and per-sample gradient
    covariance at θ* (Chapter 3)."""

    X: torch.Tensor
    y: torch.Tensor
    theta_star: torch.Tensor
    loss_min: float
    hessian: torch.Tensor
    gradient_covariance: torch.Tensor

    @property
    def linear_term(self) -> torch.Tensor:
        """Xᵀy/N: L(θ) = ½ θᵀHθ - (Xᵀy/N)ᵀθ + const."""
        return self.X.T @ self.y / len(self.X)

    def excess_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """L(θ) - L(θ*) = ½ δᵀHδ with δ = θ - θ*, for θ of shape (..., d)."""
        theta = as_tensor("theta", theta, floating=True)
        if theta.dim() == 0 or theta.shape[-1] != len(self.theta_star):
            raise ValueError(f"theta must end in a dimension of size {len(self.theta_star)}, got {describe(theta)}")
        delta = theta - self.theta_star
        return 0.5 * ((delta @ self.hessian) * delta).sum(-1)


def least_squares(X, y) -> LeastSquares:
    """The least-squares problem of data (X, y) with its exact minimiser (Chapter 3)."""
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, ndim=1, floating=True).to(X)
    check_same_length("X", X, "y", y)
    if len(X) < X.shape[1]:
        raise ValueError(f"X must have at least as many rows as columns, got {describe(X)}")
    theta_star = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    residual = X @ theta_star - y
    per_sample = X * residual[:, None]  # (N, d): gradient of sample i at θ*; they sum to 0
    return LeastSquares(X, y, theta_star, 0.5 * (residual**2).mean().item(),
                        X.T @ X / len(X), per_sample.T @ per_sample / len(X))


def least_squares_problem(num_points: int = 2000, curvatures=(1.0,) * 10, noise: float = 0.5, *,
                          seed: int = 0, device="cpu", dtype: torch.dtype = torch.float64) -> LeastSquares:
    """Gaussian inputs with variances ``curvatures``, y = x·θ_true + N(0, noise²) (Chapter 3).

    The expected Hessian is diag(curvatures); the problem's own Hessian is
    the empirical XᵀX/N.
    """
    curvatures = as_tensor("curvatures", list(curvatures), ndim=1, dtype=torch.float64)
    if len(curvatures) == 0 or torch.any(curvatures <= 0):
        raise ValueError("curvatures must be a non-empty list of positive numbers")
    num_points = check_int("num_points", num_points, minimum=len(curvatures))
    noise = check_float("noise", noise, low=0.0)
    rng = generator(check_int("seed", seed, minimum=0))
    dim = len(curvatures)
    X = torch.randn(num_points, dim, generator=rng, dtype=torch.float64) * curvatures.sqrt()
    theta_true = torch.randn(dim, generator=rng, dtype=torch.float64)
    y = X @ theta_true + noise * torch.randn(num_points, generator=rng, dtype=torch.float64)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    return least_squares(X.to(device, dtype), y.to(device, dtype))


def _check_least_squares(problem) -> LeastSquares:
    if not isinstance(problem, LeastSquares):
        raise TypeError(f"problem must be a quadratics.LeastSquares, got {describe(problem)}")
    return problem


def least_squares_gd(problem: LeastSquares, lr: float, steps: int, *, theta0=None) -> Run:
    """Full-batch gradient descent on a least-squares problem from ``theta0`` (default 0) (Chapter 4).

    The losses of the returned run are excess losses L(θ_t) - L(θ*).
    """
    problem = _check_least_squares(problem)
    start = torch.zeros_like(problem.theta_star) if theta0 is None else theta0
    run = gradient_descent(problem.hessian, start, lr, steps, b=problem.linear_term)
    return run._replace(losses=problem.excess_loss(run.iterates))


def sgd_offsets(problem: LeastSquares, lr: float, batch_size: int, steps: int, *,
                num_chains: int = 100, theta0=None, seed: int = 0) -> torch.Tensor:
    """Offsets θ_t - θ* of independent minibatch-SGD chains, shape (steps + 1, num_chains, d) (Chapter 3).

    Each chain draws its minibatches uniformly with replacement; all chains
    run at once as one batched computation. Chains start at ``theta0``
    (default: θ*).
    """
    problem = _check_least_squares(problem)
    X, y = problem.X, problem.y
    num_points, dim = X.shape
    lr = check_float("lr", lr, low=0.0)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    steps = check_int("steps", steps, minimum=0)
    num_chains = check_int("num_chains", num_chains, minimum=1)
    start = problem.theta_star if theta0 is None else as_tensor("theta0", theta0, ndim=1, floating=True).to(X)
    if len(start) != dim:
        raise ValueError(f"theta0 must have {dim} entries, got {len(start)}")
    rng = generator(check_int("seed", seed, minimum=0))
    theta = start.expand(num_chains, dim).clone()  # (R, d)
    offsets = [theta - problem.theta_star]
    for _ in range(steps):
        batch = torch.randint(num_points, (num_chains, batch_size), generator=rng).to(X.device)  # (R, B)
        X_batch = X[batch]                                                       # (R, B, d)
        residual = (X_batch @ theta.unsqueeze(-1)).squeeze(-1) - y[batch]        # (R, B)
        theta = theta - lr * (residual.unsqueeze(1) @ X_batch).squeeze(1) / batch_size  # (R, d)
        offsets.append(theta - problem.theta_star)
    return torch.stack(offsets)


def sgd_stationary_covariance(problem: LeastSquares, lr: float, batch_size: int) -> torch.Tensor:
    """The exact long-run E[δδᵀ] of δ = θ - θ* under minibatch SGD with replacement (Chapter 3).

    The update δ ← δ - lr·g_B(δ) is affine with random coefficients, so S = E[δδᵀ]
    obeys the linear recursion S ← (I - lr H) S (I - lr H) + lr²/B (M(S) + C - H S H),
    where C is the per-sample gradient covariance at θ* and
    M(S) = mean_i x_i x_iᵀ (x_iᵀ S x_i). Its fixed point is found by one d² x d²
    linear solve. Raises if SGD is unstable at this step size. The excess
    loss is ½ tr(H S).
    """
    problem = _check_least_squares(problem)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    # Small d x d algebra: done on the CPU in float64 whatever the problem's device.
    X = problem.X.detach().to("cpu", torch.float64)
    H = problem.hessian.detach().to("cpu", torch.float64)
    C = problem.gradient_covariance.detach().to("cpu", torch.float64)
    num_points, dim = X.shape
    step = torch.eye(dim, dtype=torch.float64) - lr * H

    def linear_part(S):  # S: (K, d, d), a batch of symmetric matrices
        quad = torch.einsum("nd,kde,ne->kn", X, S, X)  # x_iᵀ S x_i for every i and k
        M = torch.einsum("nd,kn,ne->kde", X, quad, X) / num_points
        return step @ S @ step + lr**2 / batch_size * (M - H @ S @ H)

    # The d² x d² matrix of the linear part, from its action on every basis matrix.
    basis = torch.eye(dim * dim, dtype=torch.float64).reshape(dim * dim, dim, dim)
    T = linear_part(basis).reshape(dim * dim, dim * dim).T
    if torch.linalg.eigvals(T).abs().max().item() >= 1:
        raise ValueError(f"SGD with lr={lr} and batch_size={batch_size} is unstable on this problem: "
                         "its second moment grows without bound")
    constant = (lr**2 / batch_size * C).reshape(-1)
    S = torch.linalg.solve(torch.eye(dim * dim, dtype=torch.float64) - T, constant).reshape(dim, dim)
    return (S + S.T) / 2


# ---------------------------------------------------------------------------
# Averaged SGD iterates (Chapter 3)
# ---------------------------------------------------------------------------
#
# Conditioned on δ_t = θ_t - θ*, the next offset has mean (I - lr H) δ_t exactly
# (the minibatch is drawn afresh and the per-sample gradients at θ* average
# to zero), so stationary offsets k steps apart have the cross moment
# E[δ_{t+k} δ_tᵀ] = (I - lr H)^k S. Summing these moments gives the second
# moment of any average of the iterates. In the eigenbasis of H only the
# diagonal of S matters for the excess loss ½ tr(H E[δ̄ δ̄ᵀ]).

def _eigen_moments(problem: LeastSquares, lr: float, batch_size: int):
    """Eigenvalues λ of H, the matching diagonal of S in H's eigenbasis, and a = 1 - lr λ."""
    S = sgd_stationary_covariance(problem, lr, batch_size)
    eigenvalues, Q = torch.linalg.eigh(problem.hessian.detach().to("cpu", torch.float64))
    if eigenvalues[0] <= 0:
        raise ValueError("problem must have a positive definite Hessian (X of full column rank)")
    return eigenvalues, (Q.T @ S @ Q).diagonal(), 1 - lr * eigenvalues


def polyak_average_excess_loss(problem: LeastSquares, lr: float, batch_size: int, num_steps: int) -> float:
    """Exact E[L(θ̄) - L(θ*)] for the mean θ̄ of ``num_steps`` consecutive stationary SGD iterates (Chapter 3).

    With a = 1 - lr λ per eigen-direction of H and s its stationary variance,
    the average's variance is s (2 f(a) - T) / T² with f(a) = Σ_{l<T} (T - l) aˡ.
    For large T this tends to tr(H⁻¹C)/(2 B T): averaging converges like 1/T
    where the iterates themselves stall at a noise floor.
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    eigenvalues, variances, a = _eigen_moments(problem, lr, batch_size)
    T = float(num_steps)
    weighted_sum = T / (1 - a) - a * (1 - a**num_steps) / (1 - a) ** 2  # Σ_{l<T} (T - l) aˡ
    return 0.5 * (eigenvalues * variances * (2 * weighted_sum - T)).sum().item() / T**2


def ema_excess_loss(problem: LeastSquares, lr: float, batch_size: int, decay: float) -> float:
    """Exact stationary E[L(θ̃) - L(θ*)] for the exponential moving average θ̃ of SGD's iterates (Chapter 3).

    θ̃ = (1 - decay) Σ_k decay^k θ_{t-k}; per eigen-direction its variance is
    s (1 - decay)(1 + decay a) / ((1 + decay)(1 - decay a)) with a = 1 - lr λ:
    a floor again, lower than the iterates' own by about the window 2/(1 - decay)
    over the iterates' correlation time 1/(lr λ).
    """
    decay = check_float("decay", decay, low=0.0, high=1.0, high_open=True)
    eigenvalues, variances, a = _eigen_moments(problem, lr, batch_size)
    shrink = (1 - decay) * (1 + decay * a) / ((1 + decay) * (1 - decay * a))
    return 0.5 * (eigenvalues * variances * shrink).sum().item()
