"""Convergence of gradient methods, measured against the theory (Chapter 3).

* Quadratics f(θ) = ½ θᵀAθ: condition numbers, gradient-descent runs that stop
  cleanly when they blow up, measured contraction factors, and the rates
  theory predicts for gradient descent, heavy-ball and Nesterov momentum.
* Reddi, Kale and Kumar's online problem on which Adam converges to the worst
  point and AMSGrad to the best.
* Minibatch SGD on least squares: the noise floor it settles on, measured
  with many independent chains and predicted exactly from the second moments.

Everything is float64 by default: the checks compare with theory to many digits.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from . import optim
from .data import _check_device, _check_dtype
from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int, _describe


# ---------------------------------------------------------------------------
# Quadratics
# ---------------------------------------------------------------------------

class Quadratic(NamedTuple):
    """f(θ) = ½ θᵀ A θ with A = Q diag(eigenvalues) Qᵀ; the minimum is f(0) = 0."""

    A: torch.Tensor
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor


def spread_eigenvalues(dim: int, condition_number: float, *, smoothness: float = 1.0,
                       dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """``dim`` eigenvalues spaced geometrically from L/κ up to L (Chapter 3)."""
    dim = check_int("dim", dim, minimum=1)
    kappa = check_float("condition_number", condition_number, low=1.0)
    smoothness = check_float("smoothness", smoothness, low=0.0, low_open=True)
    if dim == 1 and kappa != 1.0:
        raise ValueError(f"condition_number must be 1 for dim=1, got {kappa}")
    exponents = torch.linspace(-1.0, 0.0, dim, dtype=torch.float64)
    return (smoothness * kappa**exponents).to(device=_check_device(device), dtype=_check_dtype(dtype))


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
    device, dtype = _check_device(device), _check_dtype(dtype)
    return Quadratic(A.to(device, dtype), eigenvalues.to(device, dtype), Q.to(device, dtype))


def _check_spd(A) -> torch.Tensor:
    A = as_tensor("A", A, ndim=2)
    if A.shape[0] != A.shape[1] or not A.is_floating_point():
        raise ValueError(f"A must be a square floating matrix, got {_describe(A)}")
    if not torch.allclose(A, A.T, rtol=1e-10, atol=1e-12):
        raise ValueError("A must be symmetric")
    return A


def condition_number(A) -> float:
    """κ = λ_max / λ_min of a symmetric positive definite matrix (Chapter 3)."""
    eigenvalues = torch.linalg.eigvalsh(_check_spd(A).to(torch.float64))
    if eigenvalues[0] <= 0:
        raise ValueError(f"A must be positive definite, its smallest eigenvalue is {eigenvalues[0].item():.3g}")
    return (eigenvalues[-1] / eigenvalues[0]).item()


def gd_rate(eigenvalues, lr: float) -> float:
    """Per-step contraction of GD on a quadratic: max_i |1 - lr λ_i| (Chapter 3). Above 1 it diverges."""
    eigenvalues = as_tensor("eigenvalues", eigenvalues, ndim=1, dtype=torch.float64)
    lr = check_float("lr", lr, low=0.0)
    return (1 - lr * eigenvalues).abs().max().item()


def optimal_step(mu: float, L: float) -> float:
    """The constant step 2/(μ + L) that minimises max |1 - η λ| over λ in [μ, L] (Chapter 3)."""
    mu = check_float("mu", mu, low=0.0, low_open=True)
    L = check_float("L", L, low=mu)
    return 2.0 / (mu + L)


def optimal_rate(condition_number: float) -> float:
    """GD's best per-step contraction on a quadratic, (κ - 1)/(κ + 1) (Chapter 3)."""
    kappa = check_float("condition_number", condition_number, low=1.0)
    return (kappa - 1) / (kappa + 1)


def heavy_ball_parameters(mu: float, L: float) -> tuple[float, float]:
    """Polyak's tuning (lr, momentum) = (4/(√L + √μ)², ((√κ-1)/(√κ+1))²); rate (√κ-1)/(√κ+1) (Chapter 3)."""
    mu = check_float("mu", mu, low=0.0, low_open=True)
    L = check_float("L", L, low=mu)
    root_kappa = math.sqrt(L / mu)
    return 4.0 / (math.sqrt(L) + math.sqrt(mu)) ** 2, ((root_kappa - 1) / (root_kappa + 1)) ** 2


def nesterov_parameters(mu: float, L: float) -> tuple[float, float]:
    """The standard strongly convex tuning (lr, momentum) = (1/L, (√κ-1)/(√κ+1)) (Chapter 3)."""
    mu = check_float("mu", mu, low=0.0, low_open=True)
    L = check_float("L", L, low=mu)
    root_kappa = math.sqrt(L / mu)
    return 1.0 / L, (root_kappa - 1) / (root_kappa + 1)


class Run(NamedTuple):
    """An optimizer run on a quadratic: iterates (steps_done + 1, d), losses (steps_done + 1,)."""

    iterates: torch.Tensor
    losses: torch.Tensor
    diverged: bool


def quadratic_loss(A: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """½ θᵀ A θ for one θ (d,) or a batch (..., d)."""
    return 0.5 * ((theta @ A) * theta).sum(-1)


def run_on_quadratic(A, theta0, make_optimizer: Callable, steps: int, *,
                     blowup: float = 1e8) -> Run:
    """Run a torch.optim-style optimizer on ½ θᵀAθ with the exact gradient Aθ (Chapter 3).

    ``make_optimizer(params)`` builds it, e.g. ``lambda p: optim.SGD(p, lr=0.1)``.
    The run stops early, with ``diverged=True``, as soon as the loss exceeds
    ``blowup`` times its starting value (so it never overflows to inf or NaN).
    """
    A = _check_spd(A)
    theta0 = as_tensor("theta0", theta0, ndim=1, dtype=A.dtype, device=A.device)
    if len(theta0) != len(A):
        raise ValueError(f"theta0 must have {len(A)} entries to match A, got {len(theta0)}")
    if not callable(make_optimizer):
        raise TypeError(f"make_optimizer must be callable, got {_describe(make_optimizer)}")
    steps = check_int("steps", steps, minimum=0)
    blowup = check_float("blowup", blowup, low=1.0, low_open=True)
    theta = theta0.clone().requires_grad_(False)
    optimizer = make_optimizer([theta])
    iterates, losses = [theta0.clone()], [quadratic_loss(A, theta0)]
    limit = blowup * max(losses[0].item(), torch.finfo(A.dtype).tiny)
    diverged = False
    for _ in range(steps):
        theta.grad = A @ theta
        optimizer.step()
        loss = quadratic_loss(A, theta)
        if not loss.item() <= limit:  # also catches inf and NaN
            diverged = True
            break
        iterates.append(theta.clone())
        losses.append(loss)
    return Run(torch.stack(iterates), torch.stack(losses), diverged)


def gradient_descent(A, theta0, lr: float, steps: int, *, blowup: float = 1e8) -> Run:
    """Plain gradient descent θ ← θ - lr Aθ on ½ θᵀAθ, stopped cleanly at a blow-up (Chapter 3).

    Written out directly rather than through optim.SGD (the tests check they agree): it is
    the inner loop of several figures, and the optimizer's bookkeeping would dominate.
    """
    A = _check_spd(A)
    theta = as_tensor("theta0", theta0, ndim=1, dtype=A.dtype, device=A.device)
    if len(theta) != len(A):
        raise ValueError(f"theta0 must have {len(A)} entries to match A, got {len(theta)}")
    lr = check_float("lr", lr, low=0.0)
    steps = check_int("steps", steps, minimum=0)
    blowup = check_float("blowup", blowup, low=1.0, low_open=True)
    iterates, losses = [theta], [quadratic_loss(A, theta)]
    limit = blowup * max(losses[0].item(), torch.finfo(A.dtype).tiny)
    for _ in range(steps):
        theta = theta - lr * (A @ theta)
        loss = quadratic_loss(A, theta)
        if not loss.item() <= limit:  # also catches inf and NaN
            return Run(torch.stack(iterates), torch.stack(losses), True)
        iterates.append(theta)
        losses.append(loss)
    return Run(torch.stack(iterates), torch.stack(losses), False)


def contraction_factor(values, *, start: int = 0, end: int | None = None) -> float:
    """Measured per-step factor (v_end / v_start)^(1 / (end - start)) of a geometric sequence (Chapter 3).

    Pass distances ‖θ_t - θ*‖ (or square roots of loss gaps) to compare with max |1 - ηλ|.
    """
    values = as_tensor("values", values, ndim=1, dtype=torch.float64)
    end = len(values) - 1 if end is None else end
    start = check_int("start", start, minimum=0)
    end = check_int("end", end, minimum=start + 1, maximum=len(values) - 1)
    if values[start] <= 0 or values[end] <= 0:
        raise ValueError("values must be positive at start and end")
    return math.exp((math.log(values[end].item()) - math.log(values[start].item())) / (end - start))


def steps_to_reach(losses, fraction: float) -> int | None:
    """First step at which the loss is at most ``fraction`` times its start; None if never (Chapter 3)."""
    losses = as_tensor("losses", losses, ndim=1, dtype=torch.float64)
    fraction = check_float("fraction", fraction, low=0.0, low_open=True)
    hits = torch.nonzero(losses <= fraction * losses[0]).flatten()
    return int(hits[0]) if len(hits) else None


# ---------------------------------------------------------------------------
# Reddi, Kale and Kumar's counterexample for Adam
# ---------------------------------------------------------------------------

def reddi_gradient(t: int, C: float) -> float:
    """Gradient of the online loss f_t(x) = C x if t = 1 mod 3, else -x (steps t = 1, 2, ...)."""
    return C if t % 3 == 1 else -1.0


def reddi_counterexample(method: str = "adam", *, C: float = 3.0, steps: int = 3000, lr: float = 0.1,
                         x0: float = 0.0) -> torch.Tensor:
    """Iterates of Adam or AMSGrad on Reddi et al.'s online problem over x in [-1, 1] (Chapter 3).

    Settings from the paper: beta1 = 0, beta2 = 1/(1 + C²), step lr/√t, projection onto
    [-1, 1]. The average loss (C - 2) x / 3 is minimised at x = -1; Adam ends at +1.
    Runs dlbook.optim.Adam; returns the (steps + 1,) iterates.
    """
    method = check_choice("method", method, ("adam", "amsgrad"))
    C = check_float("C", C, low=2.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    x0 = check_float("x0", x0, low=-1.0, high=1.0)
    x = torch.tensor([x0], dtype=torch.float64)
    optimizer = optim.Adam([x], lr=lr, betas=(0.0, 1.0 / (1.0 + C**2)), amsgrad=(method == "amsgrad"))
    iterates = [x0]
    for t in range(1, steps + 1):
        optimizer.param_groups[0]["lr"] = lr / math.sqrt(t)
        x.grad = torch.tensor([reddi_gradient(t, C)], dtype=torch.float64)
        optimizer.step()
        x.data.clamp_(-1.0, 1.0)  # projection onto the feasible interval
        iterates.append(x.item())
    return torch.tensor(iterates, dtype=torch.float64)


# ---------------------------------------------------------------------------
# Minibatch SGD on least squares: the noise floor
# ---------------------------------------------------------------------------

class LeastSquares(NamedTuple):
    """L(θ) = ‖Xθ - y‖² / (2N) with its minimiser theta_hat and minimum loss_min."""

    X: torch.Tensor
    y: torch.Tensor
    theta_hat: torch.Tensor
    loss_min: float


def least_squares_problem(num_points: int = 2000, dim: int = 10, noise: float = 0.5, *, seed: int = 0,
                          device="cpu", dtype: torch.dtype = torch.float64) -> LeastSquares:
    """Gaussian inputs, y = x·θ_true + noise, and the exact minimiser of the empirical loss (Chapter 3)."""
    dim = check_int("dim", dim, minimum=1)
    num_points = check_int("num_points", num_points, minimum=dim)
    noise = check_float("noise", noise, low=0.0)
    rng = generator(check_int("seed", seed, minimum=0))
    X = torch.randn(num_points, dim, generator=rng, dtype=torch.float64)
    theta_true = torch.randn(dim, generator=rng, dtype=torch.float64)
    y = X @ theta_true + noise * torch.randn(num_points, generator=rng, dtype=torch.float64)
    theta_hat = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    loss_min = 0.5 * ((X @ theta_hat - y) ** 2).mean().item()
    device, dtype = _check_device(device), _check_dtype(dtype)
    return LeastSquares(X.to(device, dtype), y.to(device, dtype), theta_hat.to(device, dtype), loss_min)


def _check_problem(problem) -> LeastSquares:
    if not isinstance(problem, LeastSquares):
        raise TypeError(f"problem must be a LeastSquares from least_squares_problem, got {_describe(problem)}")
    return problem


def sgd_least_squares(problem: LeastSquares, batch_size: int, lr: float, steps: int, *,
                      num_chains: int = 100, theta0=None, seed: int = 0) -> torch.Tensor:
    """Excess loss L(θ_t) - L(θ̂), averaged over independent SGD chains, for t = 0..steps (Chapter 3).

    Each chain draws its minibatches uniformly with replacement; all chains run
    at once as one batched computation. Chains start at ``theta0`` (default: θ̂).
    """
    problem = _check_problem(problem)
    X, y = problem.X, problem.y
    num_points, dim = X.shape
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, low=0.0)
    steps = check_int("steps", steps, minimum=0)
    num_chains = check_int("num_chains", num_chains, minimum=1)
    start = problem.theta_hat if theta0 is None else as_tensor("theta0", theta0, ndim=1, dtype=X.dtype)
    if len(start) != dim:
        raise ValueError(f"theta0 must have {dim} entries, got {len(start)}")
    rng = generator(check_int("seed", seed, minimum=0))
    theta = start.to(X.device).expand(num_chains, dim).clone()  # (R, d)
    H = X.T @ X / num_points
    excess = [_excess_loss(H, theta - problem.theta_hat).mean()]
    for _ in range(steps):
        batch = torch.randint(num_points, (num_chains, batch_size), generator=rng).to(X.device)  # (R, B)
        Xb = X[batch]  # (R, B, d)
        residual = (Xb @ theta[:, :, None])[..., 0] - y[batch]  # (R, B)
        grad = (Xb * residual[..., None]).mean(dim=1)  # (R, d)
        theta -= lr * grad
        excess.append(_excess_loss(H, theta - problem.theta_hat).mean())
    return torch.stack(excess)


def _excess_loss(H: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """L(θ) - L(θ̂) = ½ δᵀ H δ with δ = θ - θ̂ and H = XᵀX/N (L is quadratic), for a batch δ (R, d)."""
    return 0.5 * ((delta @ H) * delta).sum(dim=1)


def stationary_excess_loss(problem: LeastSquares, batch_size: int, lr: float) -> float:
    """The exact long-run mean of L(θ_t) - L(θ̂) under SGD with replacement (Chapter 3).

    The update δ ← δ - lr·g_B(δ) of δ = θ - θ̂ is an affine map with random
    coefficients, so the second moment S = E[δδᵀ] obeys a linear recursion
    S ← (I - lr H) S (I - lr H) + lr²/B (M(S) + C - H S H), where C is the
    per-example gradient covariance at θ̂ and M(S) = mean_i x_i x_iᵀ (x_iᵀ S x_i).
    Its fixed point gives the excess loss ½ tr(H S). Raises if SGD is unstable.
    """
    problem = _check_problem(problem)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    # Small d x d algebra: done on the CPU in float64 whatever the problem's device.
    X = problem.X.detach().to("cpu", torch.float64)
    num_points, dim = X.shape
    H = X.T @ X / num_points
    residual = X @ problem.theta_hat.detach().to("cpu", torch.float64) - problem.y.detach().to("cpu", torch.float64)
    C = (X * residual[:, None] ** 2).T @ X / num_points
    step = torch.eye(dim, dtype=torch.float64) - lr * H

    def linear_part(S):  # S: (K, d, d), a batch of symmetric matrices
        quad = torch.einsum("nd,kde,ne->kn", X, S, X)  # x_iᵀ S x_i for every i and k
        M = torch.einsum("nd,kn,ne->kde", X, quad, X) / num_points
        return step @ S @ step + lr**2 / batch_size * (M - H @ S @ H)

    # Build the d² x d² matrix of the linear part by applying it to every basis matrix.
    basis = torch.eye(dim * dim, dtype=torch.float64).reshape(dim * dim, dim, dim)
    T = linear_part(basis).reshape(dim * dim, dim * dim).T
    if torch.linalg.eigvals(T).abs().max().item() >= 1:
        raise ValueError(f"SGD with lr={lr} and batch_size={batch_size} is unstable on this problem")
    constant = (lr**2 / batch_size * C).reshape(-1)
    S = torch.linalg.solve(torch.eye(dim * dim, dtype=torch.float64) - T, constant).reshape(dim, dim)
    return 0.5 * torch.trace(H @ S).item()
