"""Tests of dlbook.mdp: MDPs as arrays, the Bellman equations and dynamic programming."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dlbook import gridworlds, mdp


def test_sutton_barto_gridworld_random_policy_values():
    world = gridworlds.sutton_barto_gridworld()
    v = mdp.evaluate_policy(world.mdp, mdp.uniform_policy(world.mdp), 1.0)
    expected = [[0, -14, -20, -22], [-14, -18, -20, -20], [-20, -20, -18, -14], [-22, -20, -14, 0]]
    assert np.abs(world.to_grid(v) - np.array(expected)).max() < 1e-9


def test_synchronous_sweeps_need_173_sweeps_and_in_place_fewer():
    world = gridworlds.sutton_barto_gridworld()
    policy = mdp.uniform_policy(world.mdp)
    exact = mdp.evaluate_policy(world.mdp, policy, 1.0)
    sweeps = mdp.evaluate_policy_sweeps(world.mdp, policy, 1.0, tol=1e-4)
    assert sweeps.sweeps == 173 and sweeps.max_changes[-1] < 1e-4 <= sweeps.max_changes[-2]
    assert np.abs(sweeps.values[-1] - exact).max() < 1e-2
    in_place = mdp.evaluate_policy_sweeps(world.mdp, policy, 1.0, tol=1e-4, in_place=True)
    assert in_place.sweeps < sweeps.sweeps
    assert np.abs(in_place.values[-1] - exact).max() < 1e-2


def test_optimal_gridworld_values_are_minus_the_distance_to_the_nearest_corner():
    world = gridworlds.sutton_barto_gridworld()
    rows, cols = world.cells.T
    distance = np.minimum(rows + cols, 6 - rows - cols)
    assert np.array_equal(mdp.value_iteration(world.mdp, 1.0).values, -distance)
    assert np.array_equal(mdp.policy_iteration(world.mdp, 1.0).values, -distance)


@pytest.mark.parametrize("seed", range(4))
def test_value_iteration_policy_iteration_and_linear_solve_agree(seed):
    problem = mdp.random_mdp(12, 3, seed=seed)
    gamma = 0.9
    vi = mdp.value_iteration(problem, gamma, tol=1e-13)
    pi = mdp.policy_iteration(problem, gamma)
    assert np.array_equal(vi.policy, pi.policy)
    exact = mdp.evaluate_policy(problem, pi.policy, gamma)
    assert np.abs(vi.values - exact).max() < 1e-8 and np.abs(pi.values - exact).max() < 1e-10
    # The contraction: ||v^k - v*|| <= gamma^k ||v^0 - v*|| at every k.
    errors = np.abs(vi.iterates - exact).max(1)
    assert np.all(errors <= gamma ** np.arange(len(errors)) * errors[0] + 1e-12)
    # Policy improvement is monotone.
    assert np.all(np.diff(pi.value_history, axis=0) >= -1e-12)


def test_bellman_expectation_identities():
    problem = mdp.random_mdp(7, 4, seed=3)
    gamma = 0.8
    policy = np.random.default_rng(0).dirichlet(np.ones(4), size=7)
    v = mdp.evaluate_policy(problem, policy, gamma)
    q = mdp.q_from_v(problem, v, gamma)
    assert np.abs(mdp.v_from_q(q, policy) - v).max() < 1e-10
    assert np.abs(mdp.bellman_expectation(problem, policy, v, gamma) - v).max() < 1e-10
    q_from_q = problem.R + gamma * np.einsum("ast,t->sa", problem.P, mdp.v_from_q(q, policy))
    assert np.abs(q_from_q - q).max() < 1e-10
    vi = mdp.value_iteration(problem, gamma)
    assert np.abs(mdp.bellman_optimality(problem, vi.values, gamma) - vi.values).max() < 1e-10


def test_deterministic_policy_and_terminal_states():
    world = gridworlds.sutton_barto_gridworld()
    left = np.full(world.mdp.num_states, 3)
    P_pi, R_pi = mdp.policy_dynamics(world.mdp, left)
    assert np.all(P_pi[world.mdp.terminal] == 0) and np.all(R_pi[world.mdp.terminal] == 0)
    with pytest.raises(ValueError, match="singular"):
        mdp.evaluate_policy(world.mdp, left, 1.0)        # the left column never reaches a corner


def test_stationary_distribution():
    P = np.random.default_rng(1).dirichlet(np.ones(6), size=6)
    d = mdp.stationary_distribution(P)
    assert abs(d.sum() - 1) < 1e-12 and np.abs(d @ P - d).sum() < 1e-12


@pytest.mark.parametrize("make", [
    lambda: gym.make("FrozenLake-v1", is_slippery=False),
    lambda: gym.make("CliffWalking-v1"),
])
def test_from_gymnasium_matches_env_step_deterministic(make):
    env = make()
    problem = mdp.from_gymnasium(env)
    env.reset(seed=0)
    for s in np.flatnonzero(~problem.terminal):
        for a in range(problem.num_actions):
            env.unwrapped.s = int(s)
            s_next, reward, terminated, _, _ = env.step(a)
            assert problem.P[a, s, s_next] == 1.0
            assert problem.R[s, a] == reward
            assert problem.terminal[s_next] == terminated


def test_from_gymnasium_matches_env_step_slippery():
    env = gym.make("FrozenLake-v1", is_slippery=True)
    problem = mdp.from_gymnasium(env)
    env.reset(seed=0)
    for s in (0, 6, 14):
        for a in range(4):
            counts = np.zeros(problem.num_states)
            reward = 0.0
            for _ in range(300):
                env.unwrapped.s = s
                s_next, r, terminated, _, _ = env.step(a)
                counts[s_next] += 1
                reward += r
                assert problem.terminal[s_next] == terminated
            assert np.abs(counts / 300 - problem.P[a, s]).max() < 0.1
            assert abs(reward / 300 - problem.R[s, a]) < 0.1


def test_frozen_lake_and_cliff_optimal_values():
    slippery = mdp.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=True))
    for gamma, expected in ((0.9, 0.068891), (0.99, 0.542026), (1.0, 14 / 17)):
        vi = mdp.value_iteration(slippery, gamma)
        assert abs(vi.values[0] - expected) < 1e-6
        assert abs(mdp.evaluate_policy(slippery, vi.policy, gamma)[0] - vi.values[0]) < 1e-9
    plain = mdp.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=False))
    assert abs(mdp.value_iteration(plain, 0.9).values[0] - 0.9**5) < 1e-12
    cliff = mdp.from_gymnasium(gym.make("CliffWalking-v1"))
    vi = mdp.value_iteration(cliff, 1.0)
    assert vi.values[36] == -13
    run = mdp.rollout(gym.make("CliffWalking-v1"), vi.policy)
    assert run.terminated and run.episode_return == -13 and len(run.rewards) == 13


def test_rollout_of_a_looping_policy_does_not_terminate():
    run = mdp.rollout(gym.make("CliffWalking-v1"), np.zeros(48, dtype=int), max_steps=20)   # always up
    assert not run.terminated and len(run.rewards) == 20


def test_greedy_policy_breaks_ties_towards_the_first_action():
    q = np.array([[1.0, 1.0 + 1e-14, 0.0], [0.0, 2.0, 2.0]])
    assert mdp.greedy_policy(q).tolist() == [0, 1]


def test_bad_inputs():
    P = np.full((2, 3, 3), 1 / 3)
    R = np.zeros((3, 2))
    with pytest.raises(ValueError, match="sum to 1"):
        mdp.make_mdp(P * 0.9, R)
    with pytest.raises(ValueError, match="negative"):
        mdp.make_mdp(P - 0.5, R)
    with pytest.raises(ValueError, match="R must have shape"):
        mdp.make_mdp(P, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="P must have shape"):
        mdp.make_mdp(np.full((2, 3, 4), 0.25), R)
    with pytest.raises(TypeError, match="terminal must be a Boolean"):
        mdp.make_mdp(P, R, [0, 1, 0])
    with pytest.raises(ValueError, match="finite"):
        mdp.make_mdp(P, R * np.nan)
    problem = mdp.make_mdp(P, R)
    with pytest.raises(ValueError, match="gamma must be <= 1"):
        mdp.evaluate_policy(problem, mdp.uniform_policy(problem), 1.5)
    with pytest.raises(ValueError, match="policy must hold actions in 0..1"):
        mdp.evaluate_policy(problem, [0, 2, 1], 0.5)
    with pytest.raises(ValueError, match="policy must be an"):
        mdp.evaluate_policy(problem, np.ones((3, 3)) / 3, 0.5)
    with pytest.raises(TypeError, match="mdp must be"):
        mdp.value_iteration("frozen lake", 0.9)
    with pytest.raises(TypeError, match="env must be"):
        mdp.from_gymnasium(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="v must have one entry per state"):
        mdp.q_from_v(problem, np.zeros(4), 0.5)
    with pytest.raises(TypeError, match="policy must hold one integer action"):
        mdp.rollout(gym.make("CliffWalking-v1"), np.zeros(48))
