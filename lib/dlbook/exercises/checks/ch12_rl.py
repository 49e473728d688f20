"""Checks for the exercises of chapter 12 (12_rl): value iteration with a stopping rule that guarantees
an epsilon-optimal policy, the values batch TD(0) converges to, the fixed point of linear TD(0), and
Monte Carlo tree search on tic-tac-toe.

Expected values are computed here by independent code (value iteration run to machine precision and
linear solves, batch TD(0) run to convergence on the data, the stationary distribution as an
eigenvector, exhaustive negamax over tic-tac-toe), never by the chapter's modules mdp, td and mcts,
so that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..core import Mismatch, as_array, as_int, describe, exercise, expect

# ---------------------------------------------------------------------------
# Small MDPs, solved exactly
# ---------------------------------------------------------------------------


def _random_mdp(rng: np.random.Generator, num_states: int, num_actions: int, num_terminal: int = 0):
    """Dirichlet transitions, normal rewards; the last ``num_terminal`` states are terminal."""
    P = rng.dirichlet(np.full(num_states, 0.5), size=(num_actions, num_states))
    R = rng.normal(size=(num_states, num_actions))
    terminal = np.zeros(num_states, dtype=bool)
    if num_terminal:
        terminal[-num_terminal:] = True
    return P, R, terminal


def _backup(P, R, terminal, gamma, v):
    """q[s, a] = R + gamma P v, zero in terminal states."""
    q = R + gamma * np.einsum("ast,t->sa", P, v)
    return np.where(terminal[:, None], 0.0, q)


def _optimal_values(P, R, terminal, gamma) -> np.ndarray:
    """v* by value iteration run until nothing changes in float64."""
    v = np.zeros(len(R))
    for _ in range(200_000):
        new = _backup(P, R, terminal, gamma, v).max(1)
        if np.abs(new - v).max() <= 1e-14 * max(1.0, np.abs(new).max()):
            return new
        v = new
    raise RuntimeError("value iteration in the check did not converge")


def _policy_values(P, R, terminal, gamma, policy) -> np.ndarray:
    """v of a deterministic policy by a linear solve."""
    states = np.arange(len(R))
    P_pi = P[policy, states] * ~terminal[:, None]
    R_pi = R[states, policy] * ~terminal
    return np.linalg.solve(np.eye(len(R)) - gamma * P_pi, R_pi)


def _as_policy(value, num_states: int, num_actions: int) -> np.ndarray:
    policy = as_array(value, (num_states,), f"a policy: {num_states} integer actions")
    if not np.all(policy == np.round(policy)) or policy.min() < 0 or policy.max() >= num_actions:
        raise Mismatch(f"a policy: {num_states} integer actions in 0..{num_actions - 1}",
                       f"values in {policy.min():g}..{policy.max():g}")
    return policy.astype(int)


def _pair(value, what: str):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Mismatch(what, describe(value))
    return value


# ---------------------------------------------------------------------------
# Exercise 12.1: value iteration with an epsilon-optimal stopping rule
# ---------------------------------------------------------------------------

@exercise("12.1", title="Value iteration that knows when to stop", function="value_iteration",
          kind="derive", difficulty=2, minutes=30,
          blocked=("dlbook.mdp.value_iteration", "dlbook.mdp.policy_iteration", "dlbook.mdp.evaluate_policy",
                   "dlbook.mdp.bellman_optimality", "dlbook.mdp.q_from_v"),
          hint="from ||v^{k+1} - v^k|| and the contraction factor gamma, bound ||v^{k+1} - v*|| by a geometric "
               "series; stop when that bound is below epsilon / 2, then act greedily on v^{k+1}.")
def check_value_iteration(value_iteration, cases):
    """P (A, S, S), R (S, A), terminal (S,) bool: NumPy arrays; gamma, epsilon floats."""
    rng = np.random.default_rng(12)
    examples = [("5 states, 2 actions, gamma = 0.9, epsilon = 1e-3", 5, 2, 0, 0.9, 1e-3),
                ("20 states, 4 actions, gamma = 0.99, epsilon = 1e-2", 20, 4, 0, 0.99, 1e-2),
                ("12 states, 3 actions, 2 terminal, gamma = 0.95, epsilon = 1e-4", 12, 3, 2, 0.95, 1e-4),
                ("8 states, 3 actions, gamma = 0.5, epsilon = 1e-8", 8, 3, 0, 0.5, 1e-8),
                ("6 states, 2 actions, gamma = 0 (one sweep), epsilon = 1e-3", 6, 2, 0, 0.0, 1e-3),
                ("30 states, 5 actions, 3 terminal, gamma = 0.999, epsilon = 0.1", 30, 5, 3, 0.999, 0.1)]
    for label, S, A, num_terminal, gamma, epsilon in examples:
        P, R, terminal = _random_mdp(rng, S, A, num_terminal)
        with cases.case(label):
            values, policy = _pair(value_iteration(P.copy(), R.copy(), terminal.copy(), gamma, epsilon),
                                   "a pair (values, policy)")
            values = as_array(values, (S,), f"values: an array of {S} numbers")
            policy = _as_policy(policy, S, A)
            v_star = _optimal_values(P, R, terminal, gamma)
            gap = np.abs(values - v_star).max()
            expect(gap < epsilon / 2, f"values within epsilon / 2 = {epsilon / 2:g} of v*",
                   f"values off by {gap:.3g} (does the stopping rule use epsilon (1 - gamma) / (2 gamma)?)")
            shortfall = (v_star - _policy_values(P, R, terminal, gamma, policy))[~terminal].max()
            expect(shortfall <= epsilon, f"an epsilon-optimal policy (v_pi >= v* - {epsilon:g})",
                   f"a policy worth up to {shortfall:.3g} less than v*")


# ---------------------------------------------------------------------------
# Exercise 12.2: predict what batch TD(0) converges to
# ---------------------------------------------------------------------------

def _transitions(episodes):
    s, r, nxt = [], [], []
    for states, rewards in episodes:
        for t, (state, reward) in enumerate(zip(states, rewards)):
            s.append(state)
            r.append(reward)
            nxt.append(states[t + 1] if t + 1 < len(states) else -1)
    return np.array(s), np.array(r, dtype=float), np.array(nxt)


def _batch_td(episodes, num_states: int) -> np.ndarray:
    """Run batch TD(0) with gamma = 1 from V = 0: sum each pass's increments, repeat until nothing changes."""
    s, r, nxt = _transitions(episodes)
    alpha = 0.5 / np.bincount(s).max()
    V = np.zeros(num_states + 1)                      # index -1 is the terminal state, worth 0
    for _ in range(2_000_000):
        step = np.zeros(num_states + 1)
        np.add.at(step, s, r + V[nxt] - V[s])
        V[:-1] += alpha * step[:-1]
        if np.abs(step).max() < 1e-13:
            return V[:-1]
    raise RuntimeError("batch TD(0) in the check did not converge")


def _walk_episodes(rng: np.random.Generator, num_episodes: int, num_states: int = 5):
    episodes = []
    for _ in range(num_episodes):
        position, states = num_states // 2, []
        while 0 <= position < num_states:
            states.append(position)
            position += rng.choice([-1, 1])
        rewards = [0.0] * len(states)
        rewards[-1] = float(position == num_states)
        episodes.append((states, rewards))
    return episodes


def _chain_episodes(rng: np.random.Generator, num_episodes: int, num_states: int, visited: int):
    """Episodes on a random chain over the first ``visited`` states, ending with probability 0.3 a step."""
    P = rng.dirichlet(np.ones(visited), size=visited)
    rewards_of = rng.normal(size=visited)
    episodes = []
    for _ in range(num_episodes):
        state, states, rewards = int(rng.integers(visited)), [], []
        while True:
            states.append(state)
            rewards.append(float(rewards_of[state] + rng.normal(scale=0.5)))
            if rng.random() < 0.3:
                break
            state = int(rng.choice(visited, p=P[state]))
        episodes.append((states, rewards))
    return episodes


@exercise("12.2", title="Predict the batch TD(0) values", function="batch_td_values",
          kind="predict", difficulty=2, minutes=30,
          blocked=("dlbook.td.batch_td0", "dlbook.td.batch_mc", "dlbook.td.td0_episode",
                   "dlbook.mdp.evaluate_policy"),
          hint="count the observed transitions out of each state (into states and into the end) and the mean "
               "reward received on leaving it; then solve the Bellman equation of that estimated chain.")
def check_batch_td_values(batch_td_values, cases):
    """episodes: a list of (states, rewards) pairs of lists; num_states an int. The check measures by running
    batch TD(0) on the same data."""
    rng = np.random.default_rng(120)
    ab = [([0, 1], [0.0, 0.0])] + [([1], [1.0])] * 6 + [([1], [0.0])]
    examples = [("the eight A/B episodes of the chapter", ab, 2),
                ("the A/B episodes with a third, unvisited state", ab, 3),
                ("30 episodes of the 5-state random walk", _walk_episodes(rng, 30), 5),
                ("one episode A -> B -> C with rewards 1, 2, 3", [([0, 1, 2], [1.0, 2.0, 3.0])], 3),
                ("40 episodes of a random 6-state chain with noisy rewards", _chain_episodes(rng, 40, 6, 6), 6),
                ("25 episodes visiting 4 of 7 states, revisits included", _chain_episodes(rng, 25, 7, 4), 7)]
    for label, episodes, num_states in examples:
        with cases.case(label):
            given = [(list(states), list(rewards)) for states, rewards in episodes]
            got = as_array(batch_td_values(given, num_states), (num_states,),
                           f"values: an array of {num_states} numbers")
            measured = _batch_td(episodes, num_states)
            gap = np.abs(got - measured).max()
            expect(gap < 1e-8, f"the values batch TD(0) converges to, {np.round(measured, 4).tolist()}",
                   f"{np.round(got, 4).tolist()}")


# ---------------------------------------------------------------------------
# Exercise 12.3: the fixed point of linear TD(0)
# ---------------------------------------------------------------------------

def _stationary(P: np.ndarray) -> np.ndarray:
    """The left eigenvector of P for eigenvalue 1, normalised to sum 1."""
    eigenvalues, vectors = np.linalg.eig(P.T)
    d = np.real(vectors[:, np.argmin(np.abs(eigenvalues - 1))])
    return d / d.sum()


def _td_fixed_point(P, r, Phi, gamma) -> np.ndarray:
    D = np.diag(_stationary(P))
    return np.linalg.solve(Phi.T @ D @ (np.eye(len(P)) - gamma * P) @ Phi, Phi.T @ D @ r)


@exercise("12.3", title="Where linear TD(0) converges", function="td_fixed_point",
          kind="derive", difficulty=2, minutes=25,
          blocked=("dlbook.td.linear_td", "dlbook.td.expected_td_iterates", "dlbook.mdp.stationary_distribution"),
          hint="average the semi-gradient update over s ~ d and s' ~ P(s, .): it is alpha (b - A w); the limit "
               "makes the average zero. d is the stationary distribution of P.")
def check_td_fixed_point(td_fixed_point, cases):
    """P (S, S) a stochastic matrix, r (S,), Phi (S, k): NumPy arrays; gamma a float in [0, 1)."""
    rng = np.random.default_rng(1200)
    examples = [("30 states, 4 random features, gamma = 0.9", 30, 4, 0.9, "normal"),
                ("10 states, 2 features, gamma = 0.5", 10, 2, 0.5, "normal"),
                ("50 states, 6 features, gamma = 0.99", 50, 6, 0.99, "normal"),
                ("8 states, one constant feature, gamma = 0.8", 8, 1, 0.8, "constant"),
                ("12 states, tabular features (Phi = I), gamma = 0.9", 12, 12, 0.9, "tabular"),
                ("20 states, 3 state-aggregation features, gamma = 0.95", 20, 3, 0.95, "aggregation")]
    for label, S, k, gamma, kind in examples:
        P = rng.dirichlet(np.full(S, 0.3), size=S)
        r = rng.normal(size=S)
        if kind == "normal":
            Phi = rng.normal(size=(S, k))
        elif kind == "constant":
            Phi = np.ones((S, 1))
        elif kind == "tabular":
            Phi = np.eye(S)
        else:
            Phi = np.eye(k)[np.arange(S) * k // S]
        with cases.case(label):
            got = as_array(td_fixed_point(P.copy(), r.copy(), Phi.copy(), gamma), (k,),
                           f"weights: an array of {k} numbers")
            expected = _td_fixed_point(P, r, Phi, gamma)
            gap = np.abs(got - expected).max() / max(1.0, np.abs(expected).max())
            expect(gap < 1e-8, f"w_TD = {np.round(expected, 4).tolist()}", f"{np.round(got, 4).tolist()}")


# ---------------------------------------------------------------------------
# Exercise 12.4: Monte Carlo tree search on tic-tac-toe
# ---------------------------------------------------------------------------

_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _winner(board) -> int:
    for a, b, c in _LINES:
        if board[a] != 0 and board[a] == board[b] == board[c]:
            return board[a]
    return 0


@lru_cache(maxsize=None)
def _negamax(board: tuple) -> int:
    """Game value for the player to move: +1 win, 0 draw, -1 loss, by exhaustive search."""
    player = 1 if board.count(1) == board.count(-1) else -1
    if _winner(board):
        return -1                                   # the previous player just won
    moves = [i for i in range(9) if board[i] == 0]
    if not moves:
        return 0
    return max(-_negamax(board[:i] + (player,) + board[i + 1:]) for i in moves)


def _move_value(board: tuple, move: int) -> int:
    player = 1 if board.count(1) == board.count(-1) else -1
    return -_negamax(board[:move] + (player,) + board[move + 1:])


#: Positions (1 = X, -1 = O, X moves first) where a win-else-block-else-first-free rule errs.
UCT_POSITIONS = (
    ("X in a corner, O to answer", (1, 0, 0, 0, 0, 0, 0, 0, 0)),
    ("X in opposite corners around O's centre: O must take an edge", (1, 0, 0, 0, -1, 0, 0, 0, 1)),
    ("X against O in the opposite corner: two winning moves", (1, 0, 0, 0, 0, 0, 0, 0, -1)),
    ("X on an edge against O in a corner: one winning move", (0, 1, 0, 0, 0, 0, 0, 0, -1)),
    ("O must block the fork in advance", (0, 0, 1, 0, -1, 0, 1, 0, 0)),
    ("X to win in two moves", (1, -1, 0, 0, 0, 0, 0, 0, 0)),
)


@exercise("12.4", title="Monte Carlo tree search for tic-tac-toe", function="uct",
          kind="extend", difficulty=3, minutes=50,
          blocked=("dlbook.mcts.uct_search", "dlbook.mcts.minimax_value", "dlbook.mcts.minimax_move_values",
                   "dlbook.mcts.random_playout"),
          hint="keep, for each node, its visits and the total result for the player who moved into it; select by "
               "mean + c sqrt(log N / n), expand one untried move, play out at random, and flip the sign of "
               "the result at every level on the way back up.")
def check_uct(uct, cases):
    """board: a tuple of 9 ints (1 X, -1 O, 0 free); num_simulations, seed ints. Returns (move, visits)."""
    def run(board, num_simulations, seed):
        move, visits = _pair(uct(board, num_simulations, seed), "a pair (move, visits)")
        move = as_int(move, "a move: an int in 0..8")
        visits = as_array(visits, (9,), "visits: a list of 9 counts")
        legal = [i for i in range(9) if board[i] == 0]
        expect(move in legal, f"a legal move, one of {legal}", f"move {move}")
        expect(np.all(visits[[i for i in range(9) if board[i] != 0]] == 0), "no visits to occupied squares",
               f"visits {visits.astype(int).tolist()}")
        expect(visits.sum() == num_simulations, f"root visits summing to num_simulations = {num_simulations}",
               f"visits summing to {visits.sum():g}")
        expect(visits[move] == visits.max(), "the most visited move", f"move {move} with {visits[move]:g} visits "
               f"of {visits.astype(int).tolist()}")
        return move, visits, legal

    # Before any move is tried twice, every move is tried once.
    for board in ((0,) * 9, (1, 0, 0, 0, -1, 0, 0, 0, 0)):
        with cases.case(f"uct({board}, num_simulations = number of free squares, seed = 0)"):
            num_free = board.count(0)
            _, visits, legal = run(board, num_free, 0)
            expect(np.all(visits[legal] == 1), "one visit to each free square (expand every move before repeating)",
                   f"visits {visits.astype(int).tolist()}")
    for label, board in UCT_POSITIONS:
        with cases.case(f"{label}: uct({board}, 3000, seed = 1)"):
            move, _, legal = run(board, 3000, 1)
            best = _negamax(board)
            expect(_move_value(board, move) == best,
                   f"a move of game value {best:+d}, one of {[m for m in legal if _move_value(board, m) == best]}",
                   f"move {move}, of value {_move_value(board, move):+d}")
