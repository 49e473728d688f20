"""Tests of dlbook.policy_gradient: the short corridor, REINFORCE, baselines, ES and CartPole."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dlbook import gridworlds, mdp
from dlbook import policy_gradient as pg


def _corridor_policy(p):
    return np.tile([1 - p, p], (4, 1))


def test_corridor_closed_form_matches_the_linear_solve_and_its_optimum():
    corridor = gridworlds.short_corridor()
    for p in (0.1, 0.3, 0.5858, 0.9):
        assert abs(pg.corridor_value(p) - mdp.evaluate_policy(corridor, _corridor_policy(p), 1.0)[0]) < 1e-10
    p_star, J_star = pg.corridor_optimum()
    assert abs(p_star - (2 - np.sqrt(2))) < 1e-15 and abs(J_star + 6 + 4 * np.sqrt(2)) < 1e-12
    assert abs(pg.corridor_gradient(p_star)) < 1e-12
    grid = np.linspace(0.01, 0.99, 98001)
    assert abs(grid[np.argmax(pg.corridor_value(grid))] - p_star) < 1e-4


def test_corridor_gradient_matches_finite_differences_and_the_theorem():
    corridor = gridworlds.short_corridor()
    for p in (0.2, 0.3, 0.7):
        theta, h = np.log(p / (1 - p)), 1e-6
        numeric = (pg.corridor_value(1 / (1 + np.exp(-theta - h))) -
                   pg.corridor_value(1 / (1 + np.exp(-theta + h)))) / (2 * h)
        assert abs(pg.corridor_gradient(p) - numeric) < 1e-6
        dpi = np.tile([-p * (1 - p), p * (1 - p)], (4, 1))[None]
        theorem = pg.policy_gradient_theorem(corridor, _corridor_policy(p), dpi, start=0)
        assert abs(theorem[0] - pg.corridor_gradient(p)) < 1e-10


def test_policy_gradient_theorem_on_a_random_mdp_against_finite_differences():
    problem = mdp.random_mdp(6, 3, seed=4)
    theta = np.random.default_rng(1).normal(size=(6, 3))
    gamma = 0.9

    def value(theta):
        pi = np.exp(theta) / np.exp(theta).sum(1, keepdims=True)
        return mdp.evaluate_policy(problem, pi, gamma)[2]

    pi = np.exp(theta) / np.exp(theta).sum(1, keepdims=True)
    # d pi(a|s) / d theta[s, b] = pi(a|s) (1[a = b] - pi(b|s)), one parameter per (s, b).
    dpi = np.zeros((18, 6, 3))
    for s in range(6):
        for b in range(3):
            dpi[3 * s + b, s] = pi[s] * ((np.arange(3) == b) - pi[s, b])
    grad = pg.policy_gradient_theorem(problem, pi, dpi, start=2, gamma=gamma)
    numeric = np.zeros(18)
    for k in range(18):
        step = np.zeros(18)
        step[k] = 1e-6
        numeric[k] = (value(theta + step.reshape(6, 3)) - value(theta - step.reshape(6, 3))) / 2e-6
    assert np.abs(grad - numeric).max() < 1e-7


def test_reinforce_estimates_are_unbiased_and_the_baseline_lowers_their_variance():
    truth = pg.corridor_gradient(0.3)
    plain = pg.corridor_gradient_estimates(0.3, 40_000, seed=1)
    based = pg.corridor_gradient_estimates(0.3, 40_000, baseline=pg.corridor_value(0.3), seed=1)
    for estimates in (plain, based):
        assert abs(estimates.mean() - truth) < 4 * estimates.std() / np.sqrt(len(estimates))
    assert based.var() < 0.6 * plain.var()


def test_reinforce_estimate_of_one_episode_by_hand():
    # With p fixed, the estimate of one episode is sum_t (G_t - b) (1[right] - p); check the bookkeeping
    # S2 - (T + b) S1 against a direct sum over a simulated episode with the same draws.
    p, b = 0.4, -3.0
    rng = mdp.mdp_rng(9)
    state, rights = 0, []
    while state != 3:
        right = rng.random(1)[0] < p
        rights.append(right)
        state = {0: (1 if right else 0), 1: (0 if right else 2), 2: (3 if right else 1)}[state]
    T = len(rights)
    direct = sum((-(T - t) - b) * (r - p) for t, r in enumerate(rights))
    assert abs(pg.corridor_gradient_estimates(p, 1, baseline=b, seed=9)[0] - direct) < 1e-12


def test_reinforce_learns_the_corridor():
    runs = pg.reinforce_corridor(2.0**-9, 600, num_runs=6, seed=0)
    assert runs.p.shape == (6, 601) and np.all(runs.returns <= -3)
    assert pg.corridor_value(runs.p[:, -1]).mean() > -12.5


def test_softmax_bandit_gradient_equals_autograd():
    theta = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    rewards = torch.tensor([1.0, -0.5, 2.0, 0.3, 0.0], dtype=torch.float64)
    (torch.softmax(theta, 0) * rewards).sum().backward()
    assert (pg.softmax_bandit_gradient(theta.detach(), rewards) - theta.grad).abs().max() < 1e-12


def test_es_gradient_of_a_quadratic():
    c = np.array([1.0, -2.0, 0.5])
    theta = np.zeros(3)

    def objective(points):
        return -((points - c) ** 2).sum(1)

    for antithetic in (True, False):
        estimate, se = pg.es_gradient(objective, theta, 0.3, 4000, antithetic=antithetic, seed=2)
        assert np.all(np.abs(estimate - 2 * c) < 4 * se + 1e-12)
    # Antithetic pairs cancel the even part of F: for a quadratic the estimate is far less noisy.
    _, se_anti = pg.es_gradient(objective, theta, 0.3, 4000, seed=2)
    _, se_plain = pg.es_gradient(objective, theta, 0.3, 4000, antithetic=False, seed=2)
    assert np.all(se_anti < se_plain)


def test_cartpole_returns_and_sampling():
    rewards = np.ones((4, 2))
    alive = np.array([[1, 1], [1, 1], [1, 0], [1, 0]], dtype=bool)
    assert np.allclose(pg.cartpole_returns(rewards, alive, 0.5), [[1.875, 1.5], [1.75, 1.0], [1.5, 0], [1.0, 0]])
    logits = np.log(np.tile([0.2, 0.8], (50000, 1)))
    assert abs(pg.sample_actions(logits, np.random.default_rng(0)).mean() - 0.8) < 0.01


@pytest.mark.slow
@pytest.mark.parametrize("method", ["reinforce", "actor_critic"])
def test_cartpole_policy_gradients_improve(method):
    run = pg.train_cartpole(pg.CartPoleConfig(method=method, num_updates=12, seed=0))
    assert run.mean_returns.shape == (12,) and run.mean_returns[-3:].mean() > 1.3 * run.mean_returns[:3].mean()


def test_bad_inputs():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        pg.corridor_value(1.0)
    with pytest.raises(ValueError, match="baseline must be one of"):
        pg.reinforce_corridor(0.01, 10, baseline="mean")
    with pytest.raises(TypeError, match="objective must be a function"):
        pg.es_gradient(3.0, np.zeros(2), 0.1, 10)
    with pytest.raises(ValueError, match="policy_grad must have shape"):
        pg.policy_gradient_theorem(gridworlds.short_corridor(), _corridor_policy(0.5), np.zeros((1, 3, 2)), 0)
    with pytest.raises(TypeError, match="config must be a CartPoleConfig"):
        pg.train_cartpole({"method": "reinforce"})
    with pytest.raises(ValueError, match="config.method must be one of"):
        pg.train_cartpole(pg.CartPoleConfig(method="a2c"))
