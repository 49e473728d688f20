"""Dyna-Q: learning a model of a deterministic world and planning with it between real steps (Chapter 12).

After every real step, Dyna-Q (Sutton 1990) does three things: the usual
Q-learning update, a model update (the model remembers, for each state and
action it has tried, the reward and next state it saw), and ``planning_steps``
simulated Q-learning updates on state-action pairs drawn uniformly from those
it has tried, with the model's answers. With planning_steps = 0 it is plain
Q-learning.

The planning updates of one run depend on each other one after the next, so
they cannot be spread over a vector; the code is plain Python on lists, with
a seeded ``random.Random`` per run, which for this inner loop is several
times faster than NumPy calls on tiny arrays. Ties between greedy actions are
broken at random.
"""
from __future__ import annotations

import random

import numpy as np

from .gridworlds import GridWorld
from .mdp import successor_table
from .validation import check_float, check_int, describe

__all__ = ["dyna_q_run", "dyna_q"]


def _choose(q_row: list[float], epsilon: float, rng: random.Random) -> int:
    """Epsilon-greedy with random tie-breaking."""
    if rng.random() < epsilon:
        return rng.randrange(len(q_row))
    best = max(q_row)
    return rng.choice([a for a, value in enumerate(q_row) if value == best])


def dyna_q_run(world: GridWorld, planning_steps: int, num_episodes: int, *, alpha: float = 0.1,
               epsilon: float = 0.1, gamma: float = 0.95, seed: int = 0, max_steps: int = 1_000_000) -> np.ndarray:
    """Steps taken in each of ``num_episodes`` episodes by one run of Dyna-Q (Chapter 12)."""
    if not isinstance(world, GridWorld):
        raise TypeError(f"world must be a GridWorld with a start cell, got {describe(world)}")
    if world.start is None:
        raise ValueError("world must have a start cell")
    table = successor_table(world.mdp)
    if table is None:
        raise ValueError("Dyna-Q's model here remembers one outcome per (s, a): the world must be deterministic")
    n = check_int("planning_steps", planning_steps, minimum=0)
    num_episodes = check_int("num_episodes", num_episodes, minimum=1)
    alpha = check_float("alpha", alpha, low=0.0, high=1.0, low_open=True)
    epsilon = check_float("epsilon", epsilon, low=0.0, high=1.0)
    gamma = check_float("gamma", gamma, low=0.0, high=1.0)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    rng = random.Random(check_int("seed", seed, minimum=0))
    successors, rewards = table.T.tolist(), world.mdp.R.tolist()      # [s][a]
    terminal = world.mdp.terminal.tolist()
    Q = [[0.0] * world.mdp.num_actions for _ in range(world.mdp.num_states)]
    model: dict[tuple[int, int], tuple[float, int | None]] = {}      # (s, a) -> (reward, next state or None)
    tried: list[tuple[int, int]] = []                                 # the keys of model, for uniform draws
    steps, s, length = [], world.start, 0
    for _ in range(max_steps):
        a = _choose(Q[s], epsilon, rng)
        s_next, reward = successors[s][a], rewards[s][a]
        ended = terminal[s_next]
        Q[s][a] += alpha * (reward + (0.0 if ended else gamma * max(Q[s_next])) - Q[s][a])
        if (s, a) not in model:
            tried.append((s, a))
        model[(s, a)] = (reward, None if ended else s_next)
        for _ in range(n):
            ps, pa = tried[int(rng.random() * len(tried))]
            pr, p_next = model[(ps, pa)]
            following = 0.0 if p_next is None else max(Q[p_next])
            Q[ps][pa] += alpha * (pr + gamma * following - Q[ps][pa])
        length += 1
        s = world.start if ended else s_next
        if ended:
            steps.append(length)
            length = 0
            if len(steps) == num_episodes:
                return np.array(steps)
    raise RuntimeError(f"Dyna-Q did not finish {num_episodes} episodes within {max_steps} steps")


def dyna_q(world: GridWorld, planning_steps: int, num_episodes: int, *, num_runs: int = 5, seed: int = 0,
           **settings) -> np.ndarray:
    """Steps per episode of ``num_runs`` independent runs, shape (num_runs, num_episodes) (Chapter 12).

    Run i uses seed ``seed * 1000 + i``; ``settings`` go to :func:`dyna_q_run`.
    """
    num_runs = check_int("num_runs", num_runs, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    return np.array([dyna_q_run(world, planning_steps, num_episodes, seed=seed * 1000 + i, **settings)
                     for i in range(num_runs)])
