"""Langevin dynamics, Gibbs distributions and escape over a barrier (Chapter 18).

The Euler-Maruyama step x ← x - γ ∇V(x) + √(2Tγ) ξ, ξ ~ N(0, 1), discretises
dx = -∇V dt + √(2T) dB, whose stationary law is the Gibbs distribution
p(x) ∝ e^{-V(x)/T} (the √2 matters: without it the chain samples e^{-2V/T}).
On the double well V(x) = (x² - 1)² a chain started at x = -1 crosses the
barrier ΔV = 1 after a time that grows like e^{ΔV/T} (Arrhenius, Kramers);
replica exchange swaps chains between temperatures to cross it faster.

Chains are float64 and all advance together (in numpy; results are tensors).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import integrate

from .runtime import generator
from .validation import as_tensor, check_float, check_int, check_same_length, describe

#: The barrier height of :func:`double_well` between its minima at ±1 and the saddle at 0.
DOUBLE_WELL_BARRIER = 1.0


def double_well(x) -> torch.Tensor:
    """The double-well potential V(x) = (x² - 1)² (Chapter 18)."""
    x = as_tensor("x", x, floating=True)
    return (x ** 2 - 1) ** 2


def double_well_grad(x) -> torch.Tensor:
    """Its derivative V'(x) = 4x(x² - 1) (Chapter 18)."""
    x = as_tensor("x", x, floating=True)
    return 4 * x * (x ** 2 - 1)


def _temperature(temperature) -> float:
    return check_float("temperature", temperature, low=0.0, low_open=True)


def langevin_step(x, grad, step: float, temperature: float, noise):
    """One Euler-Maruyama step x - γ ∇V(x) + √(2Tγ) ξ for given standard normal ``noise`` (Chapter 18).

    Works on tensors and arrays alike; the arguments are the caller's (no checks in the inner loop).
    """
    return x - step * grad + math.sqrt(2 * temperature * step) * noise


def langevin_chains(temperature: float, *, step: float = 1e-3, steps: int = 20_000, num_chains: int = 5000,
                    x0: float | None = None, seed: int = 0) -> torch.Tensor:
    """Final positions of ``num_chains`` independent Langevin chains on the double well (Chapter 18).

    By default the chains start alternately at -1 and +1, so the population is
    balanced between the wells even at temperatures where a chain crosses the
    barrier only a few times in the run; ``x0`` starts them all at one point.
    """
    temperature = _temperature(temperature)
    step = check_float("step", step, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=1)
    num_chains = check_int("num_chains", num_chains, minimum=1)
    if x0 is None:
        x = 1.0 - 2.0 * (np.arange(num_chains) % 2)
    else:
        x = np.full(num_chains, check_float("x0", x0))
    for noise in _noise_blocks(steps, num_chains, seed):
        for xi in noise:
            x = langevin_step(x, 4 * x * (x * x - 1), step, temperature, xi)
    return torch.as_tensor(x)


_BLOCK = 1000


def _noise_blocks(steps: int, num_chains: int, seed: int):
    """Standard normal noise for ``steps`` steps, drawn from the seeded torch generator 1000 steps at a time.

    The chains then run in numpy: a step on a few thousand numbers costs a few
    microseconds there, several times less than the same torch calls.
    """
    gen = generator(seed)
    for start in range(0, steps, _BLOCK):
        yield torch.randn(min(_BLOCK, steps - start), num_chains, generator=gen, dtype=torch.float64).numpy()


def gibbs_cdf(x, temperature: float, *, low: float = -3.0, high: float = 3.0, num_points: int = 20_001) -> torch.Tensor:
    """The distribution function of p(x) ∝ e^{-V(x)/T} for the double well (Chapter 18).

    The density is integrated by the trapezoidal rule on ``num_points`` points of
    [low, high] (the mass outside is below 1e-30 for T <= 1) and interpolated linearly (error about 1e-7).
    """
    x = as_tensor("x", x, floating=True, dtype=torch.float64)
    temperature = _temperature(temperature)
    num_points = check_int("num_points", num_points, minimum=3)
    grid = np.linspace(low, high, num_points)
    density = np.exp(-(grid ** 2 - 1) ** 2 / temperature)
    cdf = integrate.cumulative_trapezoid(density, grid, initial=0.0)
    values = np.interp(x.numpy(), grid, cdf / cdf[-1], left=0.0, right=1.0)
    return torch.as_tensor(values, dtype=torch.float64)


class EscapeTimes(NamedTuple):
    """First times (steps x step size) at which chains started at -1 reach x > 0; censored ones hold the cap."""
    times: torch.Tensor         # (num_chains,)
    escaped: torch.Tensor       # (num_chains,) bool: False where the chain hit max_steps first


def escape_times(temperature: float, *, step: float = 2e-3, num_chains: int = 2000, max_steps: int = 100_000,
                 seed: int = 0) -> EscapeTimes:
    """Times for Langevin chains started in the left well (x = -1) to cross the barrier to x > 0 (Chapter 18)."""
    temperature = _temperature(temperature)
    step = check_float("step", step, low=0.0, low_open=True)
    num_chains = check_int("num_chains", num_chains, minimum=1)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    x = np.full(num_chains, -1.0)
    hit = np.full(num_chains, max_steps)
    waiting = np.ones(num_chains, dtype=bool)
    n = 0
    for noise in _noise_blocks(max_steps, num_chains, seed):
        for xi in noise:
            n += 1
            x = langevin_step(x, 4 * x * (x * x - 1), step, temperature, xi)
            crossed = waiting & (x > 0)
            hit[crossed] = n
            waiting &= ~crossed
        if not waiting.any():
            break
    return EscapeTimes(torch.as_tensor(hit * step, dtype=torch.float64), torch.as_tensor(~waiting))


def arrhenius_slope(temperatures, mean_times) -> float:
    """Slope of log(mean escape time) against 1/T by least squares: the effective barrier height (Chapter 18)."""
    temperatures = as_tensor("temperatures", temperatures, ndim=1, floating=True, dtype=torch.float64)
    mean_times = as_tensor("mean_times", mean_times, ndim=1, floating=True, dtype=torch.float64)
    check_same_length("temperatures", temperatures, "mean_times", mean_times)
    if len(temperatures) < 2 or (temperatures <= 0).any() or (mean_times <= 0).any():
        raise ValueError("temperatures and mean_times must hold at least two positive values, "
                         f"got {describe(temperatures)} and {describe(mean_times)}")
    return float(np.polyfit(1 / temperatures.numpy(), np.log(mean_times.numpy()), 1)[0])


def replica_swap_probability(v1, v2, temperature1: float, temperature2: float) -> torch.Tensor:
    """Metropolis probability min{1, exp[(1/T₁ - 1/T₂)(V(x₁) - V(x₂))]} of swapping two replicas (Chapter 18)."""
    v1 = as_tensor("v1", v1, floating=True, dtype=torch.float64)
    v2 = as_tensor("v2", v2, floating=True, dtype=torch.float64)
    beta_gap = 1 / _temperature(temperature1) - 1 / check_float("temperature2", temperature2, low=0.0, low_open=True)
    return torch.exp((beta_gap * (v1 - v2)).clamp(max=0.0))
