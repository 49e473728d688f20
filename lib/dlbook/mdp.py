"""Finite Markov decision processes as arrays, and dynamic programming on them (Chapter 12).

An MDP here is three arrays: ``P[a, s, s']`` = Pr(s' | s, a), the expected
reward ``R[s, a]`` of taking action a in state s, and a Boolean ``terminal[s]``
marking the states where an episode ends. A terminal state is worth 0: the
operators below ignore its row of P and of R, so with gamma = 1 a policy that
reaches a terminal state with probability one still has a finite value and
an invertible system (I - gamma P_pi) v = R_pi.

Policies are arrays too: ``pi[s, a]`` = Pr(a | s), or one action per state
(an integer array, the deterministic case). Everything is NumPy in float64:
tabular problems are small, and the point of this module is exact agreement
between the linear solve, the sweeps of iterative policy evaluation, value
iteration and policy iteration.

``from_gymnasium`` reads the transition table ``env.unwrapped.P`` of
gymnasium's toy-text environments (FrozenLake, CliffWalking, Taxi) into this
form.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .validation import as_tensor, check_bool, check_float, check_int, describe

__all__ = ["MDP", "make_mdp", "random_mdp", "from_gymnasium", "Rollout", "rollout", "policy_probabilities",
           "uniform_policy", "policy_dynamics", "evaluate_policy", "q_from_v", "v_from_q", "bellman_expectation",
           "bellman_optimality", "greedy_policy", "PolicySweeps", "evaluate_policy_sweeps", "ValueIteration",
           "value_iteration", "PolicyIteration", "policy_iteration", "successor_table", "stationary_distribution",
           "mdp_rng"]

#: Tolerance on the row sums of a transition matrix.
ROW_SUM_TOL = 1e-9


class MDP(NamedTuple):
    """A finite MDP (Chapter 12): P[a, s, s'] = Pr(s' | s, a), R[s, a], terminal[s]."""

    P: np.ndarray
    R: np.ndarray
    terminal: np.ndarray

    @property
    def num_states(self) -> int:
        return self.R.shape[0]

    @property
    def num_actions(self) -> int:
        return self.R.shape[1]


def _float_array(name: str, value, *, ndim: int) -> np.ndarray:
    """A float64 NumPy copy of an array-like with ``ndim`` dimensions and finite entries."""
    array = as_tensor(name, value, ndim=ndim).double().cpu().numpy().copy()
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite, but it contains NaN or infinity")
    return array


def _check_rows_are_distributions(name: str, matrix: np.ndarray) -> None:
    """Every row along the last axis is a probability distribution (to ROW_SUM_TOL)."""
    if (matrix < 0).any():
        raise ValueError(f"{name} must hold probabilities, found a negative entry {matrix.min():.3g}")
    sums = matrix.sum(-1)
    worst = np.abs(sums - 1).max()
    if worst > ROW_SUM_TOL:
        index = np.unravel_index(np.abs(sums - 1).argmax(), sums.shape)
        raise ValueError(f"each row of {name} must sum to 1; the row at index {tuple(int(i) for i in index)} "
                         f"sums to {sums[index]:.6g}")


def mdp_rng(seed: int) -> np.random.Generator:
    """A seeded NumPy generator for the tabular code of Chapter 12 (never the global stream)."""
    return np.random.default_rng(check_int("seed", seed, minimum=0))


def make_mdp(P, R, terminal=None) -> MDP:
    """Check and package arrays P (A, S, S), R (S, A) and terminal (S,) as an :class:`MDP` (Chapter 12).

    Terminal states become absorbing with reward 0, whatever their rows said.
    """
    P = _float_array("P", P, ndim=3)
    R = _float_array("R", R, ndim=2)
    num_actions, num_states = P.shape[0], P.shape[1]
    if P.shape[2] != num_states:
        raise ValueError(f"P must have shape (num_actions, num_states, num_states), got {P.shape}")
    if R.shape != (num_states, num_actions):
        raise ValueError(f"R must have shape (num_states, num_actions) = {(num_states, num_actions)}, "
                         f"got {R.shape}")
    if terminal is None:
        terminal = np.zeros(num_states, dtype=bool)
    terminal_t = as_tensor("terminal", terminal, shape=(num_states,))
    if terminal_t.dtype != torch.bool:
        raise TypeError(f"terminal must be a Boolean array, got {describe(terminal)}")
    terminal = terminal_t.cpu().numpy().copy()
    P[:, terminal, :] = 0.0
    P[:, terminal, terminal.nonzero()[0]] = 1.0  # absorbing: each terminal state leads to itself
    R[terminal] = 0.0
    _check_rows_are_distributions("P", P)
    return MDP(P, R, terminal)


def random_mdp(num_states: int, num_actions: int, *, seed: int = 0, concentration: float = 1.0) -> MDP:
    """Transitions drawn from Dirichlet(concentration), rewards from N(0, 1), no terminal state (Chapter 12)."""
    num_states = check_int("num_states", num_states, minimum=1)
    num_actions = check_int("num_actions", num_actions, minimum=1)
    concentration = check_float("concentration", concentration, low=0.0, low_open=True)
    rng = mdp_rng(seed)
    P = rng.dirichlet(np.full(num_states, concentration), size=(num_actions, num_states))
    R = rng.normal(size=(num_states, num_actions))
    return make_mdp(P, R)


def from_gymnasium(env) -> MDP:
    """The MDP of a gymnasium toy-text environment, read from ``env.unwrapped.P`` (Chapter 12).

    ``P[s][a]`` lists (probability, next state, reward, terminated) tuples; a
    next state reached with terminated=True is a terminal state. Rewards are
    averaged over the outcomes: R[s, a] = sum p r.
    """
    table = getattr(getattr(env, "unwrapped", env), "P", None)
    if not isinstance(table, dict):
        raise TypeError(f"env must be a gymnasium environment with a transition table env.unwrapped.P, "
                        f"got {describe(env)}")
    num_states = len(table)
    num_actions = len(table[0])
    P = np.zeros((num_actions, num_states, num_states))
    R = np.zeros((num_states, num_actions))
    ends = np.zeros(num_states, dtype=bool)
    continues = np.zeros(num_states, dtype=bool)
    for s, actions in table.items():
        for a, outcomes in actions.items():
            for probability, s_next, reward, terminated in outcomes:
                P[a, s, int(s_next)] += probability
                R[s, a] += probability * reward
                (ends if terminated else continues)[int(s_next)] = True
    # The toy-text tables also list moves out of terminal states, which an episode never makes.
    reached_from_live = np.zeros(num_states, dtype=bool)
    for s, actions in table.items():
        if not ends[s]:
            for outcomes in actions.values():
                for _, s_next, _, terminated in outcomes:
                    if not terminated:
                        reached_from_live[int(s_next)] = True
    if (ends & reached_from_live).any():
        raise ValueError("env.unwrapped.P enters some state both with and without terminated=True")
    return make_mdp(P, R, ends)


class Rollout(NamedTuple):
    """One episode in a real environment: the states visited, the rewards, and whether it terminated."""

    states: np.ndarray        # (T + 1,): s_0 .. s_T
    rewards: np.ndarray       # (T,)
    terminated: bool

    @property
    def episode_return(self) -> float:
        return float(self.rewards.sum())


def rollout(env, policy, *, max_steps: int = 1000, seed: int = 0) -> Rollout:
    """Run a deterministic policy (one action per state) in a gymnasium environment for one episode.

    Stops when the environment terminates or truncates, or after
    ``max_steps`` steps (then ``terminated`` is False: a policy that walks in
    circles never finishes).
    """
    actions = as_tensor("policy", policy, ndim=1)
    if actions.is_floating_point():
        raise TypeError(f"policy must hold one integer action per state, got {describe(policy)}")
    actions = actions.cpu().numpy()
    max_steps = check_int("max_steps", max_steps, minimum=1)
    state, _ = env.reset(seed=check_int("seed", seed, minimum=0))
    states, rewards = [int(state)], []
    for _ in range(max_steps):
        state, reward, terminated, truncated, _ = env.step(int(actions[int(state)]))
        states.append(int(state))
        rewards.append(float(reward))
        if terminated or truncated:
            return Rollout(np.array(states), np.array(rewards), bool(terminated))
    return Rollout(np.array(states), np.array(rewards), False)


# ---------------------------------------------------------------------------
# Policies and the Bellman operators
# ---------------------------------------------------------------------------

def policy_probabilities(policy, num_actions: int) -> np.ndarray:
    """A policy as an (S, A) array of action probabilities: integer actions become one-hot rows."""
    num_actions = check_int("num_actions", num_actions, minimum=1)
    policy_t = as_tensor("policy", policy)
    if policy_t.dim() == 1 and not policy_t.is_floating_point():
        actions = policy_t.cpu().numpy()
        if actions.size and (actions.min() < 0 or actions.max() >= num_actions):
            raise ValueError(f"policy must hold actions in 0..{num_actions - 1}, got values in "
                             f"{actions.min()}..{actions.max()}")
        return np.eye(num_actions)[actions]
    if policy_t.dim() != 2 or policy_t.shape[1] != num_actions:
        raise ValueError(f"policy must be an (num_states, {num_actions}) array of probabilities or one "
                         f"integer action per state, got {describe(policy)}")
    probabilities = policy_t.double().cpu().numpy()
    _check_rows_are_distributions("policy", probabilities)
    return probabilities


def uniform_policy(mdp: MDP) -> np.ndarray:
    """The equiprobable random policy, pi(a | s) = 1 / |A|."""
    return np.full((mdp.num_states, mdp.num_actions), 1.0 / mdp.num_actions)


def _check_mdp(mdp) -> MDP:
    if not isinstance(mdp, MDP):
        raise TypeError(f"mdp must be a dlbook.mdp.MDP (see make_mdp), got {describe(mdp)}")
    return mdp


def _check_gamma(gamma) -> float:
    return check_float("gamma", gamma, low=0.0, high=1.0)


def _live(mdp: MDP) -> tuple[np.ndarray, np.ndarray]:
    """P and R with the rows of terminal states zeroed: terminal states are worth 0."""
    live = ~mdp.terminal
    return mdp.P * live[None, :, None], mdp.R * live[:, None]


def _policy_and_states(mdp: MDP, policy) -> np.ndarray:
    probabilities = policy_probabilities(policy, mdp.num_actions)
    if probabilities.shape[0] != mdp.num_states:
        raise ValueError(f"policy must give one row per state ({mdp.num_states}), got {probabilities.shape[0]}")
    return probabilities


def policy_dynamics(mdp: MDP, policy) -> tuple[np.ndarray, np.ndarray]:
    """P_pi[s, s'] = sum_a pi(a|s) P[a, s, s'] and R_pi[s] = sum_a pi(a|s) R[s, a], terminal rows zeroed."""
    mdp = _check_mdp(mdp)
    pi = _policy_and_states(mdp, policy)
    P, R = _live(mdp)
    return np.einsum("sa,ast->st", pi, P), (pi * R).sum(1)


def evaluate_policy(mdp: MDP, policy, gamma: float) -> np.ndarray:
    """v_pi by solving the Bellman expectation equation (I - gamma P_pi) v = R_pi (Chapter 12)."""
    gamma = _check_gamma(gamma)
    P_pi, R_pi = policy_dynamics(mdp, policy)
    system = np.eye(mdp.num_states) - gamma * P_pi
    if np.linalg.cond(system) > 1e12:
        raise ValueError("I - gamma P_pi is singular: with gamma = 1 the policy must reach a terminal state "
                         "from every state with probability one")
    return np.linalg.solve(system, R_pi)


def q_from_v(mdp: MDP, v, gamma: float) -> np.ndarray:
    """q[s, a] = R[s, a] + gamma sum_s' P[a, s, s'] v[s'] (0 in terminal states)."""
    mdp, gamma = _check_mdp(mdp), _check_gamma(gamma)
    v = _float_array("v", v, ndim=1)
    if v.shape != (mdp.num_states,):
        raise ValueError(f"v must have one entry per state ({mdp.num_states}), got shape {v.shape}")
    P, R = _live(mdp)
    return R + gamma * np.einsum("ast,t->sa", P, v)


def v_from_q(q, policy) -> np.ndarray:
    """v[s] = sum_a pi(a|s) q[s, a]."""
    q = _float_array("q", q, ndim=2)
    pi = policy_probabilities(policy, q.shape[1])
    if pi.shape != q.shape:
        raise ValueError(f"policy must give one row per row of q ({q.shape[0]}), got {pi.shape[0]}")
    return (pi * q).sum(1)


def bellman_expectation(mdp: MDP, policy, v, gamma: float) -> np.ndarray:
    """One synchronous backup of iterative policy evaluation: T_pi v = R_pi + gamma P_pi v."""
    return v_from_q(q_from_v(mdp, v, gamma), _policy_and_states(_check_mdp(mdp), policy))


def bellman_optimality(mdp: MDP, v, gamma: float) -> np.ndarray:
    """One value-iteration backup: (T v)[s] = max_a (R[s, a] + gamma sum_s' P[a, s, s'] v[s'])."""
    return q_from_v(mdp, v, gamma).max(1)


def greedy_policy(q, *, tol: float = 1e-10) -> np.ndarray:
    """The greedy action in each state; among actions within ``tol`` of the best, the first (Chapter 12).

    The tolerance makes ties that rounding has split resolve the same way on every run.
    """
    q = _float_array("q", q, ndim=2)
    tol = check_float("tol", tol, low=0.0)
    scale = np.maximum(1.0, np.abs(q).max(1, keepdims=True))
    return np.argmax(q >= q.max(1, keepdims=True) - tol * scale, axis=1)


# ---------------------------------------------------------------------------
# Dynamic programming
# ---------------------------------------------------------------------------

class PolicySweeps(NamedTuple):
    """Iterative policy evaluation: the iterates v^0..v^K and the largest change of each sweep."""

    values: np.ndarray        # (K + 1, S): row k is v^k
    max_changes: np.ndarray   # (K,): max_s |v^{k+1}(s) - v^k(s)|
    sweeps: int


def _check_stopping(tol, max_sweeps) -> tuple[float, int]:
    return check_float("tol", tol, low=0.0), check_int("max_sweeps", max_sweeps, minimum=1)


def evaluate_policy_sweeps(mdp: MDP, policy, gamma: float, *, tol: float = 1e-4, max_sweeps: int = 100_000,
                           in_place: bool = False, values=None) -> PolicySweeps:
    """Iterative policy evaluation until the largest change of a sweep drops below ``tol`` (Chapter 12).

    Synchronous sweeps compute v^{k+1} = R_pi + gamma P_pi v^k from the whole
    of v^k; ``in_place=True`` overwrites v(s) state by state, so later states
    of a sweep already see the new values (Gauss-Seidel).
    """
    mdp, gamma = _check_mdp(mdp), _check_gamma(gamma)
    tol, max_sweeps = _check_stopping(tol, max_sweeps)
    in_place = check_bool("in_place", in_place)
    P_pi, R_pi = policy_dynamics(mdp, policy)
    v = np.zeros(mdp.num_states) if values is None else _float_array("values", values, ndim=1)
    iterates, changes = [v.copy()], []
    for _ in range(max_sweeps):
        if in_place:
            new = v.copy()
            for s in range(mdp.num_states):
                new[s] = R_pi[s] + gamma * P_pi[s] @ new
        else:
            new = R_pi + gamma * P_pi @ v
        changes.append(np.abs(new - v).max())
        iterates.append(new)
        v = new
        if changes[-1] < tol:
            break
    return PolicySweeps(np.array(iterates), np.array(changes), len(changes))


class ValueIteration(NamedTuple):
    """Value iteration: the final values, a greedy policy, and every iterate."""

    values: np.ndarray
    policy: np.ndarray
    sweeps: int
    iterates: np.ndarray      # (K + 1, S): row k is v^k


def value_iteration(mdp: MDP, gamma: float, *, tol: float = 1e-12, max_sweeps: int = 100_000,
                    values=None) -> ValueIteration:
    """Apply the Bellman optimality backup until a sweep changes no value by ``tol`` or more (Chapter 12)."""
    mdp, gamma = _check_mdp(mdp), _check_gamma(gamma)
    tol, max_sweeps = _check_stopping(tol, max_sweeps)
    v = np.zeros(mdp.num_states) if values is None else _float_array("values", values, ndim=1)
    P, R = _live(mdp)
    iterates = [v.copy()]
    for _ in range(max_sweeps):
        new = (R + gamma * np.einsum("ast,t->sa", P, v)).max(1)
        iterates.append(new)
        change, v = np.abs(new - v).max(), new
        if change < tol:
            break
    return ValueIteration(v, greedy_policy(q_from_v(mdp, v, gamma)), len(iterates) - 1, np.array(iterates))


class PolicyIteration(NamedTuple):
    """Policy iteration: the final values and policy, and the value of each policy on the way."""

    values: np.ndarray
    policy: np.ndarray
    iterations: int
    value_history: np.ndarray   # (iterations + 1, S): v of the policy evaluated at each step


def policy_iteration(mdp: MDP, gamma: float, *, policy=None, max_iterations: int = 1000) -> PolicyIteration:
    """Evaluate exactly, improve greedily, until the policy is stable (Chapter 12).

    Starts from ``policy`` (the uniform random policy by default, which is
    proper in every grid world of the chapter). A state keeps its action when
    that action is still among the best, so the loop cannot cycle between
    equally good policies.
    """
    mdp, gamma = _check_mdp(mdp), _check_gamma(gamma)
    max_iterations = check_int("max_iterations", max_iterations, minimum=1)
    current = uniform_policy(mdp) if policy is None else _policy_and_states(mdp, policy)
    history, previous = [], None
    for iteration in range(max_iterations + 1):
        v = evaluate_policy(mdp, current, gamma)
        history.append(v)
        q = q_from_v(mdp, v, gamma)
        improved = greedy_policy(q)
        if previous is not None:
            scale = np.maximum(1.0, np.abs(q).max(1))
            keep = q[np.arange(mdp.num_states), previous] >= q.max(1) - 1e-10 * scale
            improved = np.where(keep, previous, improved)
            if np.array_equal(improved, previous):
                return PolicyIteration(v, improved, iteration, np.array(history))
        previous, current = improved, improved
    raise RuntimeError(f"policy iteration did not stabilise within {max_iterations} iterations")


def successor_table(mdp: MDP) -> np.ndarray | None:
    """next[a, s] when every transition is deterministic, else None (Chapter 12)."""
    mdp = _check_mdp(mdp)
    if np.all(mdp.P.max(2) == 1.0):
        return mdp.P.argmax(2)
    return None


def stationary_distribution(P_pi) -> np.ndarray:
    """The distribution d with d P = d of an irreducible stochastic matrix (Chapter 12)."""
    P_pi = _float_array("P_pi", P_pi, ndim=2)
    if P_pi.shape[0] != P_pi.shape[1]:
        raise ValueError(f"P_pi must be square, got shape {P_pi.shape}")
    _check_rows_are_distributions("P_pi", P_pi)
    n = len(P_pi)
    # d (I - P) = 0 with sum(d) = 1: replace one equation by the normalisation.
    system = (np.eye(n) - P_pi).T
    system[-1] = 1.0
    rhs = np.zeros(n)
    rhs[-1] = 1.0
    return np.linalg.solve(system, rhs)
