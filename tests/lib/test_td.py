"""Tests of dlbook.td: Monte Carlo, TD(0), TD(lambda), SARSA, Q-learning and linear TD."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dlbook import mdp, td

# Sutton and Barto's "you are the predictor" data: states A = 0, B = 1.
AB_EPISODES = [([0, 1], [0.0, 0.0])] + [([1], [1.0])] * 6 + [([1], [0.0])]


def test_batch_td_and_batch_mc_on_the_ab_example():
    assert np.abs(td.batch_td0(np.zeros(2), AB_EPISODES, 0.05) - [0.75, 0.75]).max() < 1e-10
    assert np.abs(td.batch_mc(np.zeros(2), AB_EPISODES, 0.05) - [0.0, 0.75]).max() < 1e-10


def test_episode_updates_by_hand():
    V = np.array([0.5, 0.2, 0.0])
    episode = ([0, 1], [1.0, 2.0])
    # TD(0): V0 += 0.1 (1 + 0.9 * 0.2 - 0.5); then V1 += 0.1 (2 + 0 - 0.2).
    assert np.allclose(td.td0_episode(V, episode, 0.1, 0.9), [0.5 + 0.1 * 0.68, 0.2 + 0.18, 0.0])
    assert np.allclose(td.episode_returns([1.0, 2.0], 0.9), [2.8, 2.0])
    assert np.allclose(td.mc_episode(V, episode, 0.1, 0.9), [0.5 + 0.1 * 2.3, 0.2 + 0.1 * 1.8, 0.0])
    assert td.n_step_return(V, episode, 0, 1, 0.9) == pytest.approx(1 + 0.9 * 0.2)
    assert td.n_step_return(V, episode, 0, 5, 0.9) == pytest.approx(2.8)


def _walk19_episodes(seed):
    episodes = td.walk_episodes(td.random_walk_moves(1, 3000, seed)[0], 19)
    return [(s, np.where(np.arange(len(r)) == len(r) - 1, 2 * r[-1] - 1, 0.0)) for s, r in episodes]


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_offline_td_lambda_forward_equals_backward(lam):
    V = np.random.default_rng(0).normal(size=21)
    V[[0, 20]] = 0
    for episode in _walk19_episodes(1)[:20]:
        for gamma in (1.0, 0.9):
            forward = td.offline_lambda_return(V, episode, 0.1, lam, gamma)
            backward = td.offline_td_lambda(V, episode, 0.1, lam, gamma)
            assert np.abs(forward - backward).max() < 1e-12


def test_lambda_returns_at_the_ends():
    V = np.random.default_rng(2).normal(size=21)
    V[[0, 20]] = 0
    episode = _walk19_episodes(3)[0]
    states, rewards = episode
    assert np.allclose(td.lambda_returns(V, episode, 1.0), td.episode_returns(rewards))
    one_step = rewards + np.append(V[states[1:]], 0.0)
    assert np.allclose(td.lambda_returns(V, episode, 0.0), one_step)
    mc = V.copy()
    np.add.at(mc, states, 0.1 * (td.episode_returns(rewards) - V[states]))
    assert np.abs(td.offline_td_lambda(V, episode, 0.1, 1.0) - mc).max() < 1e-12


@pytest.mark.parametrize("method", ["td", "mc"])
def test_walk_prediction_equals_the_episode_by_episode_reference(method):
    fast = td.walk_prediction(method, 0.1, 60, num_runs=4, seed=5)
    moves = td.random_walk_moves(4, td.move_budget(5, 60), 5)
    for run in range(4):
        reference = td.walk_prediction_reference(method, 0.1, moves[run], 60)
        assert np.abs(fast[run] - reference).max() < 1e-12


def test_td_on_the_random_walk_gets_close():
    history = td.walk_prediction("td", 0.02, 1000, num_runs=20, seed=0)
    rms = np.sqrt(((history[:, -1, 1:-1] - np.arange(1, 6) / 6) ** 2).mean(1))
    assert rms.mean() < 0.04


@pytest.mark.parametrize("method", ["sarsa", "q_learning"])
@pytest.mark.parametrize("world", ["cliff", "slippery"])
def test_tabular_control_equals_the_step_by_step_reference(method, world):
    if world == "cliff":
        problem, start = mdp.from_gymnasium(gym.make("CliffWalking-v1")), 36
    else:
        problem, start = mdp.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=True)), 0
    fast = td.tabular_control(problem, method, start=start, num_episodes=30, num_runs=1, seed=7, epsilon=0.2)
    slow = td.tabular_control_reference(problem, method, start=start, num_episodes=30, seed=7, epsilon=0.2)
    assert np.array_equal(fast.returns, slow.returns) and np.array_equal(fast.lengths, slow.lengths)
    assert np.abs(fast.Q - slow.Q).max() < 1e-12


def test_q_learning_finds_the_cliff_edge():
    cliff = mdp.from_gymnasium(gym.make("CliffWalking-v1"))
    runs = td.tabular_control(cliff, ("sarsa", "q_learning"), start=36, num_episodes=300, num_runs=4, seed=1)
    q_learning = runs.select("q_learning", 0.1)
    assert runs.Q.shape == (8, 48, 4) and q_learning.Q.shape == (4, 48, 4)
    for Q in q_learning.Q:
        assert mdp.rollout(gym.make("CliffWalking-v1"), Q.argmax(1), max_steps=100).episode_return == -13
    with pytest.raises(ValueError, match="no runs"):
        runs.select("sarsa", 0.3)


def test_epsilon_greedy_probabilities_and_draws():
    Q = np.array([[1.0, 3.0, 3.0, 0.0]])
    assert np.allclose(td.epsilon_greedy_probabilities(Q, 0.2), [[0.05, 0.45, 0.45, 0.05]])
    actions = td.epsilon_greedy(np.repeat(Q, 20000, 0), 0.2, np.random.default_rng(0))
    assert np.abs(np.bincount(actions, minlength=4) / 20000 - [0.05, 0.45, 0.45, 0.05]).max() < 0.01


def test_linear_td_fixed_point_and_bound():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(30), size=30)
    r, Phi, gamma = rng.normal(size=30), rng.normal(size=(30, 4)), 0.9
    result = td.linear_td(P, r, Phi, gamma)
    assert np.allclose(result.A @ result.w_td, result.b)
    td_error = td.weighted_norm(Phi @ result.w_td - result.v, result.d)
    best = td.weighted_norm(Phi @ result.w_best - result.v, result.d)
    assert best <= td_error <= best / np.sqrt(1 - gamma**2)
    iterates = td.expected_td_iterates(result.A, result.b, 0.5, 5000)
    assert np.abs(iterates[-1] - result.w_td).max() < 1e-8
    # The best fit is the D-weighted projection: its residual is D-orthogonal to the features.
    assert np.abs(Phi.T @ (result.d * (Phi @ result.w_best - result.v))).max() < 1e-10


def test_bad_inputs():
    with pytest.raises(TypeError, match="pair"):
        td.td0_episode(np.zeros(3), [0, 1, 2], 0.1)
    with pytest.raises(ValueError, match="as many rewards as states"):
        td.td0_episode(np.zeros(3), ([0, 1], [1.0]), 0.1)
    with pytest.raises(ValueError, match="states must lie in 0..2"):
        td.mc_episode(np.zeros(3), ([0, 3], [1.0, 0.0]), 0.1)
    with pytest.raises(TypeError, match="states must be integers"):
        td.mc_episode(np.zeros(3), ([0.0, 1.0], [1.0, 0.0]), 0.1)
    with pytest.raises(ValueError, match="method must be one of"):
        td.walk_prediction("dp", 0.1, 10)
    with pytest.raises(ValueError, match="alpha must be"):
        td.walk_prediction("td", 0.0, 10)
    cliff = mdp.from_gymnasium(gym.make("CliffWalking-v1"))
    with pytest.raises(ValueError, match="start must not be a terminal"):
        td.tabular_control(cliff, "sarsa", start=47)
    with pytest.raises(ValueError, match="epsilon must be <= 1"):
        td.tabular_control(cliff, "sarsa", start=36, epsilon=(0.1, 2.0))
    with pytest.raises(RuntimeError, match="within 10 steps"):
        td.tabular_control(cliff, "sarsa", start=36, max_steps=10)
    with pytest.raises(ValueError, match="gamma must be < 1"):
        td.linear_td(np.eye(2), np.ones(2), np.ones((2, 1)), 1.0)
    with pytest.raises(TypeError, match="rng must be"):
        td.epsilon_greedy(np.zeros((2, 2)), 0.1, 0)
