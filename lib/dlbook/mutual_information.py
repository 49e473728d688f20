"""Mutual information as a yardstick for representations: the Donsker-Varadhan lower bound, its
optimal critic for a Gaussian pair, and MINE, which trains a critic to maximise the bound (Chapter 9).

I(X; Y) = KL(P_XY || P_X P_Y) >= E_joint[T] - log E_marginals[e^T] for every critic T,
with equality at T* = log dP_XY / d(P_X P_Y) + const. Samples of the product of the
marginals come from shuffling y within a batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from . import nets, train
from .runtime import generator
from .validation import as_tensor, check_float, check_int


def gaussian_mutual_information(rho: float) -> float:
    """I(X; Y) = -1/2 log(1 - rho^2) nats for a standard bivariate Gaussian with correlation rho (Chapter 9)."""
    rho = check_float("rho", rho, low=-1.0, high=1.0, low_open=True, high_open=True)
    return -0.5 * math.log1p(-rho**2)


def gaussian_pairs(num_pairs: int, rho: float, *, seed: int = 0) -> torch.Tensor:
    """Rows (x, y) of a standard bivariate Gaussian with correlation rho, shape (num_pairs, 2), float64 (Chapter 9)."""
    num_pairs = check_int("num_pairs", num_pairs, minimum=1)
    rho = check_float("rho", rho, low=-1.0, high=1.0, low_open=True, high_open=True)
    u = torch.randn(num_pairs, 2, generator=generator(check_int("seed", seed, minimum=0)), dtype=torch.float64)
    return torch.stack([u[:, 0], rho * u[:, 0] + math.sqrt(1 - rho**2) * u[:, 1]], dim=1)


def shuffle_pairs(pairs, *, seed: int = 0) -> torch.Tensor:
    """(x_i, y_pi(i)) for a random permutation pi: samples of the product of the marginals (Chapter 9)."""
    pairs = as_tensor("pairs", pairs, shape=(None, 2), floating=True)
    order = torch.randperm(len(pairs), generator=generator(check_int("seed", seed, minimum=0))).to(pairs.device)
    return torch.stack([pairs[:, 0], pairs[order, 1]], dim=1)


def gaussian_optimal_critic(pairs, rho: float) -> torch.Tensor:
    """T*(x, y) = log p(x, y) / (p(x) p(y)) for the standard bivariate Gaussian (Chapter 9)."""
    pairs = as_tensor("pairs", pairs, shape=(None, 2), floating=True)
    rho = check_float("rho", rho, low=-1.0, high=1.0, low_open=True, high_open=True)
    x, y = pairs[:, 0], pairs[:, 1]
    return (-0.5 * math.log1p(-rho**2)
            - (rho**2 * (x**2 + y**2) - 2 * rho * x * y) / (2 * (1 - rho**2)))


def donsker_varadhan(critic_joint, critic_marginal) -> torch.Tensor:
    """The Donsker-Varadhan bound mean(T on joint samples) - log mean(exp T on shuffled samples) (Chapter 9).

    The log-mean-exp is computed with logsumexp, so large critic values do not overflow.
    """
    critic_joint = as_tensor("critic_joint", critic_joint, ndim=1, floating=True)
    critic_marginal = as_tensor("critic_marginal", critic_marginal, ndim=1, floating=True)
    if len(critic_joint) == 0 or len(critic_marginal) == 0:
        raise ValueError("critic_joint and critic_marginal must not be empty")
    return critic_joint.mean() - (torch.logsumexp(critic_marginal, 0) - math.log(len(critic_marginal)))


@dataclass(frozen=True)
class MineRun:
    """Settings of one MINE run on a bivariate Gaussian."""

    rho: float = 0.5
    steps: int = 400
    batch_size: int = 256
    width: int = 32
    lr: float = 1e-3
    seed: int = 0


class MineResult(NamedTuple):
    """The bound on each training batch, and the bound of the final critic on a large fresh sample."""

    estimates: torch.Tensor
    final_estimate: float
    true_value: float


@train.cached
def mine(config: MineRun) -> MineResult:
    """Train a critic MLP (2, width, width, 1) by Adam to maximise the DV bound (MINE, Belghazi et al.)
    on fresh batches of a Gaussian pair (Chapter 9)."""
    rho = check_float("rho", config.rho, low=-1.0, high=1.0, low_open=True, high_open=True)
    steps = check_int("steps", config.steps, minimum=1)
    batch_size = check_int("batch_size", config.batch_size, minimum=2)
    critic = nets.mlp((2, check_int("width", config.width, minimum=1), config.width, 1), seed=config.seed)
    optimizer = torch.optim.Adam(critic.parameters(), lr=check_float("lr", config.lr, low=0.0, low_open=True))
    estimates = []
    for step in range(steps):
        seed = config.seed * 1_000_003 + step
        pairs = gaussian_pairs(batch_size, rho, seed=seed).float()
        bound = donsker_varadhan(critic(pairs).squeeze(1), critic(shuffle_pairs(pairs, seed=seed)).squeeze(1))
        optimizer.zero_grad()
        (-bound).backward()
        optimizer.step()
        estimates.append(bound.item())
    with torch.no_grad():
        pairs = gaussian_pairs(100_000, rho, seed=config.seed + 77).float()
        shuffled = shuffle_pairs(pairs, seed=config.seed + 78)
        final = donsker_varadhan(critic(pairs).squeeze(1), critic(shuffled).squeeze(1))
    return MineResult(torch.tensor(estimates, dtype=torch.float64), final.item(), gaussian_mutual_information(rho))

