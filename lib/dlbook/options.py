"""Options: temporally extended actions, their models, and SMDP planning and learning (Chapter 12).

An option (Sutton, Precup and Singh 1999) is a policy with an initiation set
(the states where it may start) and a termination condition. Here options
are deterministic and end where they are told to: ``Option(initiation,
actions, termination)`` with Boolean arrays over states and one action per
state. Its *model* is what an SMDP planner needs, the discounted reward and
the discounted distribution of the state where it stops:

    R_o = (I - gamma P_o (I - B))^-1 r_o,
    F_o = (I - gamma P_o (I - B))^-1 gamma P_o B,

with P_o and r_o the transitions and rewards of the option's policy and B
the diagonal of termination probabilities (terminal states of the MDP always
stop an option). SMDP value iteration then backs up
v(s) = max_o R_o(s) + sum_s' F_o(s, s') v(s') over primitive actions (one-step
options) and the options available in s.

The hallway options of the four-rooms world take the agent from anywhere in a
room to one of that room's two hallways by a shortest path.
"""
from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from .gridworlds import FOUR_ROOMS_HALLWAYS, MOVES, GridWorld
from .mdp import MDP, mdp_rng, successor_table
from .td import epsilon_greedy
from .validation import as_tensor, check_float, check_int, describe

__all__ = ["Option", "hallway_options", "room_of", "option_model", "OptionModels", "option_models",
           "smdp_value_iteration", "smdp_q_learning"]


class Option(NamedTuple):
    """A deterministic option: where it may start, what it does, where it stops (Chapter 12)."""

    initiation: np.ndarray   # (S,) bool
    actions: np.ndarray      # (S,) int: the primitive action taken in each state
    termination: np.ndarray  # (S,) bool: stop on arriving here


def room_of(world: GridWorld) -> np.ndarray:
    """The room (0 top left, 1 top right, 2 bottom left, 3 bottom right) of every state; -1 for hallways."""
    rows, cols = world.cells[:, 0], world.cells[:, 1]
    bottom = np.where(cols <= 4, rows >= 6, rows >= 7)     # the two halves meet at different heights
    room = 2 * bottom + (cols >= 6)
    hallway = np.array([(r, c) in FOUR_ROOMS_HALLWAYS for r, c in world.cells])
    return np.where(hallway, -1, room)


def _hallways_of_room(world: GridWorld, room: np.ndarray, r: int) -> list[int]:
    """The hallway states next to room r."""
    successors = successor_table(world.mdp)
    hallways = [world.state(*cell) for cell in FOUR_ROOMS_HALLWAYS]
    return [h for h in hallways if any(room[successors[a, h]] == r for a in range(len(MOVES)))]


def hallway_options(world: GridWorld) -> list[Option]:
    """Eight options of the four-rooms world: from each room to each of its two hallways (Chapter 12).

    An option may start in its room or in the room's other hallway (never in a
    terminal state), follows a
    shortest path inside the room to its target hallway, and stops there.
    """
    if not isinstance(world, GridWorld) or world.mdp.num_states != 104:
        raise TypeError(f"world must be gridworlds.four_rooms(), got {describe(world)}")
    successors = successor_table(world.mdp)
    room = room_of(world)
    options = []
    for r in range(4):
        hallways = _hallways_of_room(world, room, r)
        for target in hallways:
            allowed = (room == r) | np.isin(np.arange(len(room)), hallways)
            # Breadth-first search backwards from the target, inside the room and its hallways.
            distance = np.full(len(room), np.inf)
            distance[target] = 0
            queue = deque([target])
            while queue:
                s = queue.popleft()
                for a in range(len(MOVES)):
                    for p in np.flatnonzero((successors[a] == s) & allowed):
                        if distance[p] == np.inf:
                            distance[p] = distance[s] + 1
                            queue.append(p)
            actions = np.zeros(len(room), dtype=int)
            for s in np.flatnonzero(allowed):
                if s != target:
                    # The first action (in the order up, right, down, left) that gets one step closer.
                    actions[s] = next(a for a in range(len(MOVES)) if distance[successors[a, s]] == distance[s] - 1)
            initiation = allowed & ~world.mdp.terminal     # an option never starts where the episode ended
            initiation[target] = False
            termination = ~allowed
            termination[target] = True
            options.append(Option(initiation, actions, termination))
    return options


def _check_option(name: str, option, num_states: int) -> Option:
    if not isinstance(option, Option):
        raise TypeError(f"{name} must be an Option, got {describe(option)}")
    for field in option._fields:
        value = getattr(option, field)
        if not isinstance(value, np.ndarray) or value.shape != (num_states,):
            raise ValueError(f"{name}.{field} must be an array with one entry per state ({num_states})")
    return option


def option_model(mdp: MDP, option: Option, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """The model (R_o, F_o) of an option: discounted reward, discounted stopping distribution (Chapter 12)."""
    if not isinstance(mdp, MDP):
        raise TypeError(f"mdp must be a dlbook.mdp.MDP, got {describe(mdp)}")
    option = _check_option("option", option, mdp.num_states)
    gamma = check_float("gamma", gamma, low=0.0, high=1.0, high_open=True)
    states = np.arange(mdp.num_states)
    P_o = mdp.P[option.actions, states] * ~mdp.terminal[:, None]         # (S, S) under the option's policy
    r_o = mdp.R[states, option.actions] * ~mdp.terminal
    stops = (option.termination | mdp.terminal).astype(float)
    system = np.eye(mdp.num_states) - gamma * P_o * (1 - stops)[None, :]
    R = np.linalg.solve(system, r_o)
    F = np.linalg.solve(system, gamma * P_o * stops[None, :])
    return R, F


class OptionModels(NamedTuple):
    """Models of primitive actions and options side by side: R (S, K), F (K, S, S), available (S, K)."""

    R: np.ndarray
    F: np.ndarray
    available: np.ndarray


def option_models(mdp: MDP, options, gamma: float, *, primitives: bool = True) -> OptionModels:
    """Stack the models of the primitive actions (if ``primitives``) and of ``options`` (Chapter 12)."""
    if not isinstance(mdp, MDP):
        raise TypeError(f"mdp must be a dlbook.mdp.MDP, got {describe(mdp)}")
    gamma = check_float("gamma", gamma, low=0.0, high=1.0, high_open=True)
    R, F, available = [], [], []
    if primitives:
        live = ~mdp.terminal
        for a in range(mdp.num_actions):
            R.append(mdp.R[:, a] * live)
            F.append(gamma * mdp.P[a] * live[:, None])
            available.append(np.ones(mdp.num_states, dtype=bool))
    for i, option in enumerate(options):
        option = _check_option(f"options[{i}]", option, mdp.num_states)
        R_o, F_o = option_model(mdp, option, gamma)
        R.append(R_o)
        F.append(F_o)
        available.append(option.initiation & ~mdp.terminal)
    if not R:
        raise ValueError("there must be at least one primitive action or option")
    return OptionModels(np.array(R).T, np.array(F), np.array(available).T)


def smdp_value_iteration(models: OptionModels, num_sweeps: int, values=None) -> np.ndarray:
    """Every iterate of v(s) <- max over available k of R_k(s) + sum_s' F_k(s, s') v(s'), (num_sweeps + 1, S)."""
    if not isinstance(models, OptionModels):
        raise TypeError(f"models must be OptionModels, got {describe(models)}")
    num_sweeps = check_int("num_sweeps", num_sweeps, minimum=0)
    v = (np.zeros(models.R.shape[0]) if values is None
         else as_tensor("values", values, shape=(models.R.shape[0],)).double().cpu().numpy())
    iterates = [v]
    for _ in range(num_sweeps):
        backed_up = models.R + np.einsum("kst,t->sk", models.F, v)
        v = np.where(models.available, backed_up, -np.inf).max(1)
        iterates.append(v)
    return np.array(iterates)


def smdp_q_learning(world: GridWorld, options, num_episodes: int, *, num_runs: int = 5, alpha: float = 0.1,
                    epsilon: float = 0.1, gamma: float = 0.9, seed: int = 0, max_steps: int = 2_000_000) -> np.ndarray:
    """Primitive steps per episode of SMDP Q-learning over primitive actions and ``options``,
    shape (num_runs, num_episodes); with options=[] it is ordinary Q-learning (Chapter 12).

    At each decision the agent picks, epsilon-greedily among what is
    available, a primitive action or an option, runs it to its end, and then
    updates Q(s, o) += alpha (R + gamma^k max Q(s', .) - Q(s, o)), where k is the
    number of steps it took and R the discounted reward collected. Runs advance
    one primitive step at a time, in lockstep.
    """
    if not isinstance(world, GridWorld) or world.start is None:
        raise TypeError(f"world must be a GridWorld with a start cell, got {describe(world)}")
    mdp = world.mdp
    options = [_check_option(f"options[{i}]", o, mdp.num_states) for i, o in enumerate(options)]
    num_episodes = check_int("num_episodes", num_episodes, minimum=1)
    num_runs = check_int("num_runs", num_runs, minimum=1)
    alpha = check_float("alpha", alpha, low=0.0, high=1.0, low_open=True)
    epsilon = check_float("epsilon", epsilon, low=0.0, high=1.0)
    gamma = check_float("gamma", gamma, low=0.0, high=1.0)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    successors = successor_table(mdp)
    A, K, S = mdp.num_actions, mdp.num_actions + len(options), mdp.num_states
    # Column k < A is primitive action k; column A + i is option i. A primitive action is an
    # option that takes action k everywhere and stops after one step.
    actions = np.concatenate([np.repeat(np.arange(A)[:, None], S, 1)] + [o.actions[None] for o in options])
    stops = np.concatenate([np.ones((A, S), dtype=bool)] + [o.termination[None] for o in options]) | mdp.terminal
    available = np.concatenate([np.ones((A, S), dtype=bool)] + [o.initiation[None] for o in options]).T
    rng = mdp_rng(seed)
    rows = np.arange(num_runs)
    Q = np.zeros((num_runs, S, K))
    masked = np.where(available, 0.0, -np.inf)      # unavailable choices are never greedy
    steps = np.zeros((num_runs, num_episodes), dtype=int)
    done = np.zeros(num_runs, dtype=int)
    s = np.full(num_runs, world.start)
    start_state, choice = s.copy(), np.zeros(num_runs, dtype=int)
    collected, discount, length = np.zeros(num_runs), np.ones(num_runs), np.zeros(num_runs, dtype=int)
    deciding = np.ones(num_runs, dtype=bool)
    for _ in range(max_steps):
        if deciding.any():
            d = rows[deciding]
            picked = epsilon_greedy(Q[d, s[d]] + masked[s[d]], 0.0, rng)
            # Exploration: a uniformly random choice among the available ones.
            explore = rng.random(len(d)) < epsilon
            random_pick = np.argmax(available[s[d]] * (1 + rng.random((len(d), K))), axis=1)
            choice[d] = np.where(explore, random_pick, picked)
            start_state[d], collected[d], discount[d] = s[d], 0.0, 1.0
        a = actions[choice, s]
        s_next = successors[a, s]
        collected += discount * mdp.R[s, a]
        discount *= gamma
        length += 1
        s = s_next
        stopped = stops[choice, s]
        deciding = stopped
        if stopped.any():
            e = rows[stopped]
            ended = mdp.terminal[s[e]]
            following = np.where(ended, 0.0, (Q[e, s[e]] + masked[s[e]]).max(1))
            old = Q[e, start_state[e], choice[e]]
            Q[e, start_state[e], choice[e]] = old + alpha * (collected[e] + discount[e] * following - old)
            finished = e[ended]
            if len(finished):
                recording = finished[done[finished] < num_episodes]
                steps[recording, done[recording]] = length[recording]
                done[recording] += 1
                length[finished] = 0
                s[finished] = world.start
                if (done >= num_episodes).all():
                    return steps
    raise RuntimeError(f"not every run finished {num_episodes} episodes within {max_steps} steps")
