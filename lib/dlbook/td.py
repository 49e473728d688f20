"""Learning values from experience: Monte Carlo, TD(0), TD(lambda), SARSA, Q-learning, linear TD (Chapter 12).

An episode is a pair ``(states, rewards)`` of equal length T: the agent is in
``states[t]`` and then receives ``rewards[t]`` (Sutton and Barto's R_{t+1});
after the last reward the episode has ended, in a terminal state worth 0.

Three kinds of code live here.

* Updates on given episodes, written plainly: online TD(0) and
  constant-alpha Monte Carlo, their batch versions (repeated passes over a
  fixed set of episodes, increments summed per pass), n-step and lambda-returns,
  and offline TD(lambda) in its forward view (lambda-returns) and its
  backward view (accumulating eligibility traces).
* Fast simulations, vectorised over independent runs in NumPy: prediction on
  the random walk, and SARSA and Q-learning on any tabular MDP. Each run
  advances one step per iteration, in lockstep with the others; a readable
  one-run loop that draws the same random numbers sits beside each and is
  tested equal to it.
* Linear function approximation: the TD fixed point A w = b of linear TD(0)
  on a Markov reward process, and the best approximation it is compared with.

Values and Q-tables are float64 NumPy arrays; randomness comes from
``mdp.mdp_rng(seed)``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .mdp import MDP, mdp_rng, stationary_distribution, successor_table
from .validation import as_tensor, check_choice, check_float, check_int, describe

__all__ = ["episode_returns", "td0_episode", "mc_episode", "batch_td0", "batch_mc", "n_step_return",
           "lambda_returns", "offline_lambda_return", "offline_td_lambda", "random_walk_moves", "move_budget",
           "walk_prediction", "walk_prediction_reference", "walk_episodes", "ControlRuns", "tabular_control",
           "tabular_control_reference", "epsilon_greedy", "epsilon_greedy_probabilities", "LinearTD", "linear_td",
           "weighted_norm", "expected_td_iterates"]

METHODS = ("td", "mc")
CONTROL_METHODS = ("sarsa", "q_learning")


# ---------------------------------------------------------------------------
# Episodes and updates
# ---------------------------------------------------------------------------

def _episode(name: str, episode, num_states: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(episode, (tuple, list)) or len(episode) != 2:
        raise TypeError(f"{name} must be a pair (states, rewards), got {describe(episode)}")
    states_t = as_tensor(f"{name} states", episode[0], ndim=1)
    if states_t.is_floating_point():
        raise TypeError(f"{name} states must be integers, got {describe(episode[0])}")
    states = states_t.cpu().numpy().astype(int)
    rewards = as_tensor(f"{name} rewards", episode[1], ndim=1).double().cpu().numpy()
    if len(states) != len(rewards) or not len(states):
        raise ValueError(f"{name} must have as many rewards as states (at least one), "
                         f"got {len(states)} and {len(rewards)}")
    if states.min() < 0 or states.max() >= num_states:
        raise ValueError(f"{name} states must lie in 0..{num_states - 1}, got {states.min()}..{states.max()}")
    return states, rewards


def _values(V) -> np.ndarray:
    values = as_tensor("V", V, ndim=1).double().cpu().numpy().copy()
    if not np.isfinite(values).all():
        raise ValueError("V must be finite")
    return values


def _check_unit(name: str, value) -> float:
    return check_float(name, value, low=0.0, high=1.0)


def episode_returns(rewards, gamma: float = 1.0) -> np.ndarray:
    """G_t = r_t + gamma r_{t+1} + ... for every step of one episode (its rewards in order)."""
    rewards = as_tensor("rewards", rewards, ndim=1).double().cpu().numpy()
    gamma = _check_unit("gamma", gamma)
    returns = np.zeros(len(rewards))
    following = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        following = rewards[t] + gamma * following
        returns[t] = following
    return returns


def td0_episode(V, episode, alpha: float, gamma: float = 1.0) -> np.ndarray:
    """Online TD(0) along one episode: V(s_t) += alpha (r_t + gamma V(s_{t+1}) - V(s_t)) (Chapter 12)."""
    V = _values(V)
    states, rewards = _episode("episode", episode, len(V))
    alpha, gamma = _check_unit("alpha", alpha), _check_unit("gamma", gamma)
    for t, (s, r) in enumerate(zip(states, rewards)):
        following = V[states[t + 1]] if t + 1 < len(states) else 0.0
        V[s] += alpha * (r + gamma * following - V[s])
    return V


def mc_episode(V, episode, alpha: float, gamma: float = 1.0) -> np.ndarray:
    """Constant-alpha every-visit Monte Carlo at the end of one episode: V(s_t) += alpha (G_t - V(s_t))."""
    V = _values(V)
    states, rewards = _episode("episode", episode, len(V))
    alpha = _check_unit("alpha", alpha)
    for s, G in zip(states, episode_returns(rewards, gamma)):
        V[s] += alpha * (G - V[s])
    return V


def _batch(increments, V, episodes, alpha: float, tol: float, max_passes: int) -> np.ndarray:
    """Sum the increments of every episode with V held fixed, apply them, repeat until nothing moves."""
    V = _values(V)
    episodes = [_episode(f"episodes[{i}]", e, len(V)) for i, e in enumerate(episodes)]
    alpha = check_float("alpha", alpha, low=0.0, low_open=True)
    tol, max_passes = check_float("tol", tol, low=0.0), check_int("max_passes", max_passes, minimum=1)
    for _ in range(max_passes):
        step = sum(increments(V, states, rewards) for states, rewards in episodes)
        V = V + alpha * step
        if np.abs(alpha * step).max() < tol:
            return V
    raise RuntimeError(f"batch updates did not settle within {max_passes} passes: lower alpha")


def batch_td0(V, episodes, alpha: float = 0.01, gamma: float = 1.0, *, tol: float = 1e-13,
              max_passes: int = 100_000) -> np.ndarray:
    """Batch TD(0): pass over a fixed set of episodes until the summed TD increments vanish (Chapter 12).

    The limit is the value function of the maximum-likelihood Markov model of the data.
    """
    gamma = _check_unit("gamma", gamma)

    def increments(V, states, rewards):
        following = np.append(V[states[1:]], 0.0)
        step = np.zeros_like(V)
        np.add.at(step, states, rewards + gamma * following - V[states])
        return step

    return _batch(increments, V, episodes, alpha, tol, max_passes)


def batch_mc(V, episodes, alpha: float = 0.01, gamma: float = 1.0, *, tol: float = 1e-13,
             max_passes: int = 100_000) -> np.ndarray:
    """Batch every-visit Monte Carlo: the limit is the mean observed return from each state (Chapter 12)."""
    gamma = _check_unit("gamma", gamma)

    def increments(V, states, rewards):
        step = np.zeros_like(V)
        np.add.at(step, states, episode_returns(rewards, gamma) - V[states])
        return step

    return _batch(increments, V, episodes, alpha, tol, max_passes)


def n_step_return(V, episode, t: int, n: int, gamma: float = 1.0) -> float:
    """G_t^(n) = r_t + ... + gamma^(n-1) r_{t+n-1} + gamma^n V(s_{t+n}); the full return past the end."""
    V = _values(V)
    states, rewards = _episode("episode", episode, len(V))
    t = check_int("t", t, minimum=0, maximum=len(states) - 1)
    n, gamma = check_int("n", n, minimum=1), _check_unit("gamma", gamma)
    end = min(t + n, len(states))
    value = sum(gamma ** (k - t) * rewards[k] for k in range(t, end))
    return value + (gamma**n * V[states[t + n]] if t + n < len(states) else 0.0)


def lambda_returns(V, episode, lam: float, gamma: float = 1.0) -> np.ndarray:
    """G_t^lambda = (1 - lambda) sum_n lambda^(n-1) G_t^(n), the weight left after the end on G_t (Chapter 12).

    Computed backwards with G_t^lambda = r_t + gamma ((1 - lambda) V(s_{t+1}) + lambda G_{t+1}^lambda).
    """
    V = _values(V)
    states, rewards = _episode("episode", episode, len(V))
    lam, gamma = _check_unit("lam", lam), _check_unit("gamma", gamma)
    returns = np.zeros(len(states))
    following = 0.0                              # G^lambda of the terminal state
    for t in range(len(states) - 1, -1, -1):
        bootstrap = V[states[t + 1]] if t + 1 < len(states) else 0.0
        following = rewards[t] + gamma * ((1 - lam) * bootstrap + lam * following)
        returns[t] = following
    return returns


def offline_lambda_return(V, episode, alpha: float, lam: float, gamma: float = 1.0) -> np.ndarray:
    """Forward view, offline: V(s_t) += alpha (G_t^lambda - V(s_t)), all increments computed from the old V."""
    V = _values(V)
    states, _ = _episode("episode", episode, len(V))
    alpha = _check_unit("alpha", alpha)
    step = np.zeros_like(V)
    np.add.at(step, states, lambda_returns(V, episode, lam, gamma) - V[states])
    return V + alpha * step


def offline_td_lambda(V, episode, alpha: float, lam: float, gamma: float = 1.0) -> np.ndarray:
    """Backward view, offline: accumulating traces e = gamma lambda e + 1[s_t], V += alpha delta_t e (summed)."""
    V = _values(V)
    states, rewards = _episode("episode", episode, len(V))
    alpha, lam, gamma = _check_unit("alpha", alpha), _check_unit("lam", lam), _check_unit("gamma", gamma)
    trace, step = np.zeros_like(V), np.zeros_like(V)
    for t, (s, r) in enumerate(zip(states, rewards)):
        following = V[states[t + 1]] if t + 1 < len(states) else 0.0
        delta = r + gamma * following - V[s]       # V is frozen for the whole episode
        trace *= gamma * lam
        trace[s] += 1.0
        step += delta * trace
    return V + alpha * step


# ---------------------------------------------------------------------------
# Prediction on the random walk, vectorised over runs
# ---------------------------------------------------------------------------

def move_budget(num_states: int, num_episodes: int) -> int:
    """Enough coin flips for ``num_episodes`` walks from the centre: three times the mean total, plus slack.

    A walk from the centre of n states lasts ((n + 1) / 2)^2 steps on average.
    """
    return 3 * num_episodes * ((num_states + 1) // 2 + 1) ** 2 + 1000


def random_walk_moves(num_runs: int, num_steps: int, seed: int = 0) -> np.ndarray:
    """The coin flips of the random walk, +1 (right) or -1 (left), one row per run."""
    num_runs = check_int("num_runs", num_runs, minimum=1)
    num_steps = check_int("num_steps", num_steps, minimum=1)
    return np.where(mdp_rng(seed).random((num_runs, num_steps)) < 0.5, 1, -1)


def walk_episodes(moves, num_states: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cut one run's coin flips into episodes from the centre; states 1..n, reward 1 on leaving right."""
    num_states = check_int("num_states", num_states, minimum=1)
    moves = np.asarray(moves)
    episodes, position, states, t = [], (num_states + 1) // 2, [], 0
    for t, move in enumerate(moves):
        states.append(position)
        position += int(move)
        if position in (0, num_states + 1):
            rewards = np.zeros(len(states))
            rewards[-1] = float(position == num_states + 1)
            episodes.append((np.array(states), rewards))
            position, states = (num_states + 1) // 2, []
    return episodes


def walk_prediction(method: str, alpha: float, num_episodes: int, *, num_runs: int = 20, num_states: int = 5,
                    initial: float = 0.5, seed: int = 0) -> np.ndarray:
    """TD(0) or constant-alpha MC on the random walk, many runs at once (Chapter 12).

    Returns V after each episode, shape (num_runs, num_episodes + 1, num_states
    + 2); ends (states 0 and n + 1) stay 0. Every run takes one step per
    iteration; a run that finishes an episode records its values and starts
    again from the centre. Rewards come only on leaving the right end and
    gamma = 1, so every visit of an episode has the same return G, and k
    constant-alpha MC updates of one state collapse to
    V <- G - (1 - alpha)^k (G - V).
    """
    method = check_choice("method", method, METHODS)
    alpha = check_float("alpha", alpha, low=0.0, high=1.0, low_open=True)
    num_episodes = check_int("num_episodes", num_episodes, minimum=1)
    num_states = check_int("num_states", num_states, minimum=1)
    initial = check_float("initial", initial)
    moves = random_walk_moves(num_runs, move_budget(num_states, num_episodes), seed)
    runs, centre, right = np.arange(moves.shape[0]), (num_states + 1) // 2, num_states + 1
    V = np.zeros((len(runs), num_states + 2))
    V[:, 1:-1] = initial
    flat = V.reshape(-1)                           # a view: row r, state s at r * (n + 2) + s
    base = runs * (num_states + 2)
    history = np.zeros((len(runs), num_episodes + 1, num_states + 2))
    history[:, 0] = V
    done = np.zeros(len(runs), dtype=int)          # episodes finished per run
    s = np.full(len(runs), centre)
    visits = np.zeros_like(V)                      # MC: visits of each state in the current episode
    # Runs that have finished keep walking (cheaper than masking them out) but record nothing more.
    for t in range(moves.shape[1]):
        s_next = s + moves[:, t]
        if method == "td":
            # Rewards come only on entering the right end, and the ends are worth 0.
            flat[base + s] += alpha * ((s_next == right) + flat[base + s_next] - flat[base + s])
        else:
            visits.reshape(-1)[base + s] += 1
        ended = (s_next == 0) | (s_next == right)
        s = s_next
        if ended.any():
            finished = runs[ended]
            if method == "mc":
                G = (s[finished] == right).astype(float)[:, None]
                seen = visits[finished] > 0
                V[finished] = np.where(seen, G - (1 - alpha) ** visits[finished] * (G - V[finished]), V[finished])
                visits[finished] = 0
            s[finished] = centre
            recording = finished[done[finished] < num_episodes]
            done[recording] += 1
            history[recording, done[recording]] = V[recording]
            if (done >= num_episodes).all():
                return history
    raise RuntimeError("the random walk ran out of coin flips; raise move_budget")


def walk_prediction_reference(method: str, alpha: float, moves, num_episodes: int, *, num_states: int = 5,
                              initial: float = 0.5) -> np.ndarray:
    """One run of :func:`walk_prediction`, episode by episode with :func:`td0_episode` or :func:`mc_episode`."""
    method = check_choice("method", method, METHODS)
    update = td0_episode if method == "td" else mc_episode
    V = np.zeros(num_states + 2)
    V[1:-1] = initial
    history = [V.copy()]
    for episode in walk_episodes(moves, num_states)[:num_episodes]:
        V = update(V, episode, alpha)
        history.append(V.copy())
    return np.array(history)


# ---------------------------------------------------------------------------
# Control: SARSA and Q-learning, vectorised over runs
# ---------------------------------------------------------------------------

class ControlRuns(NamedTuple):
    """Independent runs of SARSA or Q-learning: per run its method and epsilon, final Q-table, and
    the return and length of every episode."""

    Q: np.ndarray             # (runs, S, A), when each run finished its last episode
    returns: np.ndarray       # (runs, episodes): the return earned while learning
    lengths: np.ndarray       # (runs, episodes): steps per episode
    method: np.ndarray        # (runs,): "sarsa" or "q_learning"
    epsilon: np.ndarray       # (runs,)

    def select(self, method: str, epsilon: float) -> ControlRuns:
        """The runs of one method at one epsilon."""
        keep = (self.method == method) & np.isclose(self.epsilon, epsilon)
        if not keep.any():
            raise ValueError(f"no runs of {method!r} at epsilon={epsilon}; there are "
                             f"{sorted(set(zip(self.method.tolist(), self.epsilon.tolist())))}")
        return ControlRuns(*(field[keep] for field in self))


def epsilon_greedy_probabilities(Q, epsilon: float) -> np.ndarray:
    """pi(a|s) of the epsilon-greedy policy: epsilon/|A| each, the rest shared by the greedy actions."""
    Q = as_tensor("Q", Q, floating=True).double().cpu().numpy()
    epsilon = _check_unit("epsilon", epsilon)
    best = Q == Q.max(-1, keepdims=True)
    return epsilon / Q.shape[-1] + (1 - epsilon) * best / best.sum(-1, keepdims=True)


def epsilon_greedy(Q_rows: np.ndarray, epsilon, rng: np.random.Generator) -> np.ndarray:
    """One action per row of Q-values: uniform with probability epsilon, else greedy, ties broken at random.

    ``epsilon`` is one number or one per row. Draws one row of A + 2 uniforms
    per row: explore?, which random action, and tie-breaking noise for each
    action. (Called once per step by the lockstep learners, so it checks only
    the kinds of its arguments.)
    """
    if not isinstance(Q_rows, np.ndarray) or Q_rows.ndim != 2:
        raise TypeError(f"Q_rows must be a 2-D NumPy array, got {describe(Q_rows)}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {describe(rng)}")
    num_actions = Q_rows.shape[1]
    u = rng.random((len(Q_rows), num_actions + 2))
    best = Q_rows == Q_rows.max(1, keepdims=True)
    greedy = np.argmax(np.where(best, u[:, 2:] + 1.0, u[:, 2:]), axis=1)
    random_action = (u[:, 1] * num_actions).astype(int)
    return np.where(u[:, 0] < epsilon, random_action, greedy)


def _sample_next(mdp: MDP, table, a: np.ndarray, s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One next state per (a, s) pair: a table look-up, or one uniform per pair."""
    if table is not None:
        return table[a, s]
    u = rng.random(len(s))
    return np.minimum((u[:, None] >= np.cumsum(mdp.P[a, s], axis=1)).sum(1), mdp.num_states - 1)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple, np.ndarray)) else (value,)


def _control_arguments(mdp, methods, start, alpha, epsilons, num_episodes, gamma, max_steps):
    if not isinstance(mdp, MDP):
        raise TypeError(f"mdp must be a dlbook.mdp.MDP, got {describe(mdp)}")
    methods = [check_choice("method", m, CONTROL_METHODS) for m in _as_tuple(methods)]
    epsilons = [_check_unit("epsilon", e) for e in _as_tuple(epsilons)]
    start = check_int("start", start, minimum=0, maximum=mdp.num_states - 1)
    if mdp.terminal[start]:
        raise ValueError(f"start must not be a terminal state, got {start}")
    return (methods, start, check_float("alpha", alpha, low=0.0, high=1.0, low_open=True), epsilons,
            check_int("num_episodes", num_episodes, minimum=1), _check_unit("gamma", gamma),
            check_int("max_steps", max_steps, minimum=1))


def tabular_control(mdp: MDP, method, *, start: int, alpha: float = 0.5, epsilon=0.1, num_episodes: int = 500,
                    num_runs: int = 10, gamma: float = 1.0, seed: int = 0,
                    max_steps: int = 1_000_000) -> ControlRuns:
    """SARSA and/or Q-learning with epsilon-greedy behaviour, all runs in lockstep (Chapter 12).

    ``method`` is "sarsa", "q_learning" or a tuple of both; ``epsilon`` one
    value or a tuple. Every combination gets ``num_runs`` independent runs,
    and all of them advance one step per iteration, which is what makes the
    NumPy version fast. Q starts at 0. SARSA's target is r + gamma Q(s', a')
    with a' the action it takes next; Q-learning's is r + gamma max Q(s', .).
    Terminal states are worth 0. Rewards are R[s, a] (exact for worlds whose
    reward depends only on the state and the action, as in every world of the
    chapter). Use :meth:`ControlRuns.select` to pick one setting.
    """
    methods, start, alpha, epsilons, num_episodes, gamma, max_steps = _control_arguments(
        mdp, method, start, alpha, epsilon, num_episodes, gamma, max_steps)
    num_runs = check_int("num_runs", num_runs, minimum=1)
    settings = [(m, e) for m in methods for e in epsilons for _ in range(num_runs)]
    run_method = np.array([m for m, _ in settings])
    run_epsilon = np.array([e for _, e in settings])
    is_sarsa = run_method == "sarsa"
    batch, S, A = len(settings), mdp.num_states, mdp.num_actions
    rng, table = mdp_rng(seed), successor_table(mdp)
    Q = np.zeros((batch * S, A))              # row run * S + s
    base = np.arange(batch) * S
    final_Q = np.zeros((batch, S, A))
    returns = np.zeros((batch, num_episodes))
    lengths = np.zeros((batch, num_episodes), dtype=int)
    done = np.zeros(batch, dtype=int)
    s = np.full(batch, start)
    a = epsilon_greedy(Q[base + s], run_epsilon, rng)
    episode_return, episode_length = np.zeros(batch), np.zeros(batch, dtype=int)
    rows = np.arange(batch)
    # Runs that have finished keep learning (cheaper than masking them out) but record nothing more.
    for _ in range(max_steps):
        s_next = _sample_next(mdp, table, a, s, rng)
        reward = mdp.R[s, a]
        ended = mdp.terminal[s_next]
        q_next = Q[base + s_next]
        a_next = epsilon_greedy(q_next, run_epsilon, rng)
        following = np.where(is_sarsa, q_next[rows, a_next], q_next.max(1))
        target = reward + gamma * np.where(ended, 0.0, following)
        Q[base + s, a] += alpha * (target - Q[base + s, a])
        episode_return += reward
        episode_length += 1
        s, a = s_next, a_next
        if ended.any():
            finished = rows[ended & (done < num_episodes)]
            returns[finished, done[finished]] = episode_return[finished]
            lengths[finished, done[finished]] = episode_length[finished]
            done[finished] += 1
            last = finished[done[finished] == num_episodes]
            final_Q[last] = Q.reshape(batch, S, A)[last]
            episode_return[ended], episode_length[ended] = 0.0, 0
            # A fresh episode starts with a fresh choice in the start state.
            s = np.where(ended, start, s)
            restart = rows[ended]
            a[restart] = epsilon_greedy(Q[base[restart] + start], run_epsilon[restart], rng)
            if (done >= num_episodes).all():
                return ControlRuns(final_Q, returns, lengths, run_method, run_epsilon)
    raise RuntimeError(f"not every run finished {num_episodes} episodes within {max_steps} steps")


def tabular_control_reference(mdp: MDP, method: str, *, start: int, alpha: float = 0.5, epsilon: float = 0.1,
                              num_episodes: int = 500, gamma: float = 1.0, seed: int = 0,
                              max_steps: int = 1_000_000) -> ControlRuns:
    """One run of :func:`tabular_control`, step by step; it draws the same random numbers, so a single
    run of the fast version gives the same result."""
    methods, start, alpha, epsilons, num_episodes, gamma, max_steps = _control_arguments(
        mdp, method, start, alpha, epsilon, num_episodes, gamma, max_steps)
    (method,), (epsilon,) = methods, epsilons
    rng, table = mdp_rng(seed), successor_table(mdp)
    Q = np.zeros((mdp.num_states, mdp.num_actions))
    returns, lengths = [], []
    s = start
    a = int(epsilon_greedy(Q[[s]], epsilon, rng)[0])
    total, steps = 0.0, 0
    for _ in range(max_steps):
        s_next = int(_sample_next(mdp, table, np.array([a]), np.array([s]), rng)[0])
        reward = mdp.R[s, a]
        a_next = int(epsilon_greedy(Q[[s_next]], epsilon, rng)[0])
        if mdp.terminal[s_next]:
            target = reward
        elif method == "sarsa":
            target = reward + gamma * Q[s_next, a_next]
        else:
            target = reward + gamma * Q[s_next].max()
        Q[s, a] += alpha * (target - Q[s, a])
        total, steps = total + reward, steps + 1
        s, a = s_next, a_next
        if mdp.terminal[s]:
            returns.append(total)
            lengths.append(steps)
            if len(returns) == num_episodes:
                return ControlRuns(Q[None], np.array([returns]), np.array([lengths]), np.array([method]),
                                   np.array([epsilon]))
            total, steps, s = 0.0, 0, start
            a = int(epsilon_greedy(Q[[s]], epsilon, rng)[0])
    raise RuntimeError(f"{method} did not finish {num_episodes} episodes within {max_steps} steps")


# ---------------------------------------------------------------------------
# Linear function approximation
# ---------------------------------------------------------------------------

class LinearTD(NamedTuple):
    """Linear TD(0) on a Markov reward process: the fixed point A w = b and what it is compared with."""

    w_td: np.ndarray          # the TD fixed point, A^-1 b
    A: np.ndarray             # Phi^T D (I - gamma P) Phi
    b: np.ndarray             # Phi^T D r
    w_best: np.ndarray        # the D-weighted least-squares fit of the true values
    v: np.ndarray             # the true values (I - gamma P)^-1 r
    d: np.ndarray             # the stationary distribution, the weights of the norm


def weighted_norm(x, d) -> float:
    """||x||_d = sqrt(sum_s d(s) x(s)^2)."""
    x = as_tensor("x", x, ndim=1).double().cpu().numpy()
    d = as_tensor("d", d, shape=(len(x),)).double().cpu().numpy()
    return float(np.sqrt((d * x**2).sum()))


def linear_td(P, r, Phi, gamma: float) -> LinearTD:
    """The fixed point of linear TD(0) with features Phi (S, k) on the chain P, reward r (Chapter 12).

    Semi-gradient TD(0), w += alpha (r + gamma x(s')^T w - x(s)^T w) x(s), has
    the expected update alpha (b - A w) when states come from the stationary
    distribution d of P.
    """
    P = as_tensor("P", P, ndim=2, floating=True).double().cpu().numpy()
    num_states = P.shape[0]
    r = as_tensor("r", r, shape=(num_states,), floating=True).double().cpu().numpy()
    Phi = as_tensor("Phi", Phi, shape=(num_states, None), floating=True).double().cpu().numpy()
    gamma = check_float("gamma", gamma, low=0.0, high=1.0, high_open=True)
    d = stationary_distribution(P)
    v = np.linalg.solve(np.eye(num_states) - gamma * P, r)
    D = np.diag(d)
    A = Phi.T @ D @ (np.eye(num_states) - gamma * P) @ Phi
    b = Phi.T @ D @ r
    w_best = np.linalg.solve(Phi.T @ D @ Phi, Phi.T @ D @ v)
    return LinearTD(np.linalg.solve(A, b), A, b, w_best, v, d)


def expected_td_iterates(A, b, alpha: float, num_steps: int, w0=None) -> np.ndarray:
    """The deterministic expected update w <- w + alpha (b - A w), every iterate (num_steps + 1, k)."""
    A = as_tensor("A", A, ndim=2, floating=True).double().cpu().numpy()
    b = as_tensor("b", b, shape=(A.shape[0],), floating=True).double().cpu().numpy()
    alpha = check_float("alpha", alpha, low=0.0, low_open=True)
    num_steps = check_int("num_steps", num_steps, minimum=0)
    w = np.zeros(len(b)) if w0 is None else as_tensor("w0", w0, shape=(len(b),)).double().cpu().numpy()
    iterates = [w]
    for _ in range(num_steps):
        w = w + alpha * (b - A @ w)
        iterates.append(w)
    return np.array(iterates)
