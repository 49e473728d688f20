"""Distances and divergences between probability distributions (Chapter 10).

Total variation, Kullback-Leibler and Jensen-Shannon compare two distributions
point by point; the Wasserstein-1 (earth mover's) distance asks how far mass must
move; the maximum mean discrepancy compares kernel mean embeddings. Discrete
distributions are probability vectors over the same support; a density tabulated
on a grid becomes one by multiplying with the cell width, and then the sums
below are Riemann sums of the integrals (inside the logarithms the cell width
cancels). These functions compare with closed forms to many digits, so they
default to float64 (module policy, CONTRIBUTING.md).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from scipy import integrate
from scipy.optimize import linear_sum_assignment

from .validation import as_tensor, check_float, check_int, check_same_shape, describe


class Divergences(NamedTuple):
    """Total variation, KL(P || Q), Jensen-Shannon (nats) and Wasserstein-1 between two distributions."""

    tv: float
    kl: float
    js: float
    w1: float


# ---------------------------------------------------------------------------
# Discrete distributions
# ---------------------------------------------------------------------------

def _distribution(name: str, p) -> torch.Tensor:
    p = as_tensor(name, p, floating=True)
    if p.dim() == 0 or p.numel() == 0:
        raise ValueError(f"{name} must be a non-empty vector of probabilities, got {describe(p)}")
    if not torch.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"{name} must hold finite, non-negative probabilities")
    total = p.sum(-1)
    if ((total - 1).abs() > 1e-6).any():
        raise ValueError(f"{name} must sum to 1 along its last dimension, got sums such as "
                         f"{total.reshape(-1)[0].item():.6g}")
    return p


def _pair(p, q) -> tuple[torch.Tensor, torch.Tensor]:
    p, q = _distribution("p", p), _distribution("q", q)
    check_same_shape("p", p, "q", q)
    dtype = torch.promote_types(p.dtype, q.dtype)
    return p.to(dtype), q.to(dtype)


def _xlogy_ratio(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Terms p log(p / q), with 0 log(0 / q) = 0 and p log(p / 0) = inf for p > 0."""
    return torch.xlogy(p, p) - torch.xlogy(p, q)


def total_variation(p, q) -> torch.Tensor:
    """sup_A |P(A) - Q(A)| = (1/2) sum |p - q| (Chapter 10)."""
    p, q = _pair(p, q)
    return 0.5 * (p - q).abs().sum(-1)


def kl_divergence(p, q) -> torch.Tensor:
    """KL(P || Q) = sum p log(p / q) in nats; infinite when P puts mass where Q has none (Chapter 10)."""
    p, q = _pair(p, q)
    return _xlogy_ratio(p, q).sum(-1)


def js_divergence(p, q) -> torch.Tensor:
    """JS(P, Q) = KL(P || M)/2 + KL(Q || M)/2 with M = (P + Q)/2, in nats; at most log 2 (Chapter 10)."""
    p, q = _pair(p, q)
    m = 0.5 * (p + q)
    return 0.5 * _xlogy_ratio(p, m).sum(-1) + 0.5 * _xlogy_ratio(q, m).sum(-1)


# ---------------------------------------------------------------------------
# Wasserstein-1 between samples
# ---------------------------------------------------------------------------

def _samples(name: str, X, ndim: int) -> torch.Tensor:
    X = as_tensor(name, X, ndim=ndim, floating=True)
    if len(X) == 0:
        raise ValueError(f"{name} must hold at least one sample")
    if not torch.isfinite(X).all():
        raise ValueError(f"{name} must be finite, but it contains NaN or infinity")
    return X


def w1_sorted(x, y) -> torch.Tensor:
    """W1 between two equal-size 1-D samples: the mean gap between their order statistics (Chapter 10).

    In one dimension the optimal transport plan matches the i-th smallest point of
    one sample with the i-th smallest of the other.
    """
    x, y = _samples("x", x, 1), _samples("y", y, 1)
    check_same_shape("x", x, "y", y)
    return (torch.sort(x).values - torch.sort(y).values).abs().mean()


def w1_assignment(X, Y) -> float:
    """Exact W1 between two equal-size samples in any dimension, as an assignment problem (Chapter 10).

    With n points on each side and mass 1/n each, an optimal coupling may be taken
    to be a permutation (Birkhoff), so W1 is the cheapest matching of the Euclidean
    distance matrix, solved exactly by scipy.optimize.linear_sum_assignment.
    """
    X, Y = _samples("X", X, 2), _samples("Y", Y, 2)
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape (equal sample sizes), got "
                         f"{tuple(X.shape)} and {tuple(Y.shape)}")
    cost = torch.cdist(X.detach().cpu().double(), Y.detach().cpu().double()).numpy()
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


# ---------------------------------------------------------------------------
# Closed forms and the book's examples
# ---------------------------------------------------------------------------

def shifted_normal_divergences(theta: float) -> Divergences:
    """TV, KL, JS and W1 between N(0, 1) and N(theta, 1) (Chapter 10).

    KL = theta^2/2, TV = 2 Phi(|theta|/2) - 1 = erf(|theta| / 2 sqrt 2) and W1 = |theta| in closed form; JS by
    adaptive quadrature of its integral.
    """
    theta = check_float("theta", theta)
    log_norm = 0.5 * math.log(2 * math.pi)

    def integrand(x):  # plain floats: quadrature calls this a few thousand times per theta
        log_p, log_q = -0.5 * x * x - log_norm, -0.5 * (x - theta) ** 2 - log_norm
        log_m = max(log_p, log_q) + math.log1p(math.exp(-abs(log_p - log_q))) - math.log(2)
        return 0.5 * (math.exp(log_p) * (log_p - log_m) + math.exp(log_q) * (log_q - log_m))

    low, high = min(0.0, theta) - 40.0, max(0.0, theta) + 40.0
    js, _ = integrate.quad(integrand, low, high, points=[0.0, theta / 2, theta], limit=200,
                           epsabs=1e-13, epsrel=1e-12)
    return Divergences(tv=math.erf(abs(theta) / (2 * math.sqrt(2))), kl=theta**2 / 2, js=js, w1=abs(theta))


def parallel_lines(theta: float, *, num_points: int = 1000) -> Divergences:
    """Divergences between P_0 = law(0, Z) and P_theta = law(theta, Z), Z ~ U[0, 1] (Chapter 10).

    TV, KL and JS are computed from the two distributions discretised on a common
    grid of ``num_points`` heights on each of the lines x = 0 and x = theta (the
    lines coincide when theta = 0); W1 as the exact assignment between
    ``num_points`` equally spaced points on each segment.
    """
    theta = check_float("theta", theta)
    num_points = check_int("num_points", num_points, minimum=1)
    heights = (torch.arange(num_points, dtype=torch.float64) + 0.5) / num_points
    uniform = torch.full((num_points,), 1.0 / num_points, dtype=torch.float64)
    if theta == 0:
        p = q = uniform
    else:  # the support is two lines; P lives on the first, P_theta on the second
        zeros = torch.zeros(num_points, dtype=torch.float64)
        p, q = torch.cat([uniform, zeros]), torch.cat([zeros, uniform])
    points_p = torch.stack([torch.zeros(num_points, dtype=torch.float64), heights], 1)
    points_q = torch.stack([torch.full((num_points,), theta, dtype=torch.float64), heights], 1)
    return Divergences(tv=total_variation(p, q).item(), kl=kl_divergence(p, q).item(),
                       js=js_divergence(p, q).item(), w1=w1_assignment(points_p, points_q))


# ---------------------------------------------------------------------------
# Maximum mean discrepancy
# ---------------------------------------------------------------------------

def _mmd_inputs(X, Y, bandwidth) -> tuple[torch.Tensor, torch.Tensor, float]:
    X, Y = _samples("X", X, 2), _samples("Y", Y, 2)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of columns, got {X.shape[1]} and {Y.shape[1]}")
    if len(X) < 2 or len(Y) < 2:
        raise ValueError(f"the unbiased MMD needs at least two samples on each side, got {len(X)} and {len(Y)}")
    dtype = torch.promote_types(X.dtype, Y.dtype)
    return X.to(dtype), Y.to(dtype), check_float("bandwidth", bandwidth, low=0.0, low_open=True)


def gaussian_kernel(X, Y, bandwidth: float) -> torch.Tensor:
    """The matrix k(x_i, y_j) = exp(-|x_i - y_j|^2 / (2 bandwidth^2)) (Chapter 10)."""
    X, Y = _samples("X", X, 2), _samples("Y", Y, 2)
    bandwidth = check_float("bandwidth", bandwidth, low=0.0, low_open=True)
    squared = (X[:, None, :] - Y[None, :, :]).pow(2).sum(-1)  # (n, m); exact, unlike cdist's expansion
    return torch.exp(-squared / (2 * bandwidth**2))


def mmd_squared(X, Y, bandwidth: float) -> torch.Tensor:
    """Unbiased estimate of MMD^2 with a Gaussian kernel (Chapter 10).

    MMD^2 = E k(x, x') + E k(y, y') - 2 E k(x, y); the unbiased estimator leaves
    out the diagonal terms k(x_i, x_i) of the within-sample averages, so it can be
    slightly negative when the two distributions are equal.
    """
    X, Y, bandwidth = _mmd_inputs(X, Y, bandwidth)
    n, m = len(X), len(Y)
    Kxx, Kyy, Kxy = gaussian_kernel(X, X, bandwidth), gaussian_kernel(Y, Y, bandwidth), gaussian_kernel(X, Y, bandwidth)
    within_x = (Kxx.sum() - Kxx.diagonal().sum()) / (n * (n - 1))
    within_y = (Kyy.sum() - Kyy.diagonal().sum()) / (m * (m - 1))
    return within_x + within_y - 2 * Kxy.mean()


def mmd_squared_reference(X, Y, bandwidth: float) -> float:
    """The same estimate as :func:`mmd_squared`, written as the double sums over pairs (Chapter 10)."""
    X, Y, bandwidth = _mmd_inputs(X, Y, bandwidth)
    xs, ys = X.tolist(), Y.tolist()

    def k(a, b):
        return math.exp(-sum((u - v) ** 2 for u, v in zip(a, b)) / (2 * bandwidth**2))

    n, m = len(xs), len(ys)
    within_x = sum(k(xs[i], xs[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    within_y = sum(k(ys[i], ys[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    across = sum(k(x, y) for x in xs for y in ys) / (n * m)
    return within_x + within_y - 2 * across

