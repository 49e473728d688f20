"""Convergence of gradient methods, measured against the theory (Chapter 3).

* The rates theory predicts on quadratics for gradient descent, heavy-ball
  and Nesterov momentum, and measured contraction factors of a run (the
  quadratics and the runs themselves live in dlbook.quadratics).
* Reddi, Kale and Kumar's online problem on which Adam converges to the worst
  point and AMSGrad to the best.

Everything is float64 by default: the checks compare with theory to many digits.
"""
from __future__ import annotations

import math

import torch

from . import optim
from .validation import as_tensor, check_choice, check_float, check_int


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
    """Gradient of the online loss f_t(x) = C x if t = 1 mod 3, else -x (steps t = 1, 2, ...) (Chapter 3)."""
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
