"""Checks of chapter 12's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail
cleanly."""
from __future__ import annotations

import math
import random

import numpy as np

import dlbook.exercises.checks.ch12_rl as rl
from dlbook import mcts, mdp, td

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 6

IDS = ("12.1", "12.2", "12.3", "12.4")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def _q(P, R, terminal, gamma, v):
    return np.where(terminal[:, None], 0.0, R + gamma * np.einsum("ast,t->sa", P, v))


def value_iteration(P, R, terminal, gamma, epsilon):
    """Sweep until 2 gamma ||v^{k+1} - v^k|| < epsilon (1 - gamma); act greedily on the last iterate."""
    v = np.zeros(len(R))
    while True:
        new = _q(P, R, terminal, gamma, v).max(1)
        done = 2 * gamma * np.abs(new - v).max() < epsilon * (1 - gamma)
        v = new
        if done:
            return v, _q(P, R, terminal, gamma, v).argmax(1)


def value_iteration_to_convergence(P, R, terminal, gamma, epsilon):
    """Ignore epsilon and iterate until nothing changes: more work, also right."""
    v = np.zeros(len(R))
    while True:
        new = _q(P, R, terminal, gamma, v).max(1)
        if np.array_equal(new, v) or np.abs(new - v).max() < 1e-15:
            return new, _q(P, R, terminal, gamma, new).argmax(1)
        v = new


def _model(episodes, num_states):
    """Maximum-likelihood chain: transition counts (including to the end) and mean rewards on leaving."""
    counts = np.zeros((num_states, num_states))
    reward_sum, visits = np.zeros(num_states), np.zeros(num_states)
    for states, rewards in episodes:
        for t, s in enumerate(states):
            visits[s] += 1
            reward_sum[s] += rewards[t]
            if t + 1 < len(states):
                counts[s, states[t + 1]] += 1
    seen = visits > 0
    P_hat = np.zeros_like(counts)
    P_hat[seen] = counts[seen] / visits[seen, None]
    r_hat = np.where(seen, reward_sum / np.maximum(visits, 1), 0.0)
    return P_hat, r_hat


def batch_td_values(episodes, num_states):
    P_hat, r_hat = _model(episodes, num_states)
    return np.linalg.solve(np.eye(num_states) - P_hat, r_hat)


def batch_td_values_by_iteration(episodes, num_states):
    """The same fixed point, by iterating V <- r_hat + P_hat V (the estimated chain ends with probability one)."""
    P_hat, r_hat = _model(episodes, num_states)
    V = np.zeros(num_states)
    for _ in range(100_000):
        new = r_hat + P_hat @ V
        if np.abs(new - V).max() < 1e-14:
            return new
        V = new
    return V


def td_fixed_point(P, r, Phi, gamma):
    n = len(P)
    system = (np.eye(n) - P).T
    system[-1] = 1.0
    d = np.linalg.solve(system, np.eye(n)[-1])
    D = np.diag(d)
    return np.linalg.solve(Phi.T @ D @ (np.eye(n) - gamma * P) @ Phi, Phi.T @ D @ r)


def td_fixed_point_by_power_iteration(P, r, Phi, gamma):
    d = np.full(len(P), 1.0 / len(P))
    for _ in range(10_000):
        d = d @ P
    weighted = Phi.T * d
    return np.linalg.lstsq(weighted @ (Phi - gamma * P @ Phi), weighted @ r, rcond=None)[0]


def _to_move(board):
    return 1 if board.count(1) == board.count(-1) else -1


def _won(board):
    return any(board[a] != 0 and board[a] == board[b] == board[c] for a, b, c in rl._LINES)


def uct(board, num_simulations, seed, *, flip=True):
    """UCT with random play-outs; node statistics are for the player who moved into the node."""
    rng = random.Random(seed)
    board = tuple(board)
    stats = {}                                              # board -> [visits, total]
    children = {}                                           # board -> {move: child board}

    def free(b):
        return [] if _won(b) else [i for i in range(9) if b[i] == 0]

    def playout(b):
        while free(b):
            m = rng.choice(free(b))
            b = b[:m] + (_to_move(b),) + b[m + 1:]
        if not _won(b):
            return 0
        return 1 if _to_move(b) == -1 else -1               # +1 if X won

    stats[board], children[board] = [0, 0.0], {}
    for _ in range(num_simulations):
        node, path = board, [board]
        while free(node) and len(children[node]) == len(free(node)):
            log_n = math.log(stats[node][0])
            node = max(children[node].values(), key=lambda c: stats[c][1] / stats[c][0]
                       + math.sqrt(2) * math.sqrt(log_n / stats[c][0]))
            path.append(node)
        untried = [m for m in free(node) if m not in children[node]]
        if untried:
            m = rng.choice(untried)
            child = node[:m] + (_to_move(node),) + node[m + 1:]
            children[node][m] = child
            stats[child], children[child] = [0, 0.0], {}
            node = child
            path.append(node)
        x_result = playout(node)
        for visited in path:
            mover = -_to_move(visited)                      # the player who moved into this node
            stats[visited][0] += 1
            stats[visited][1] += x_result * (mover if flip else 1)
    visits = [0] * 9
    for m, child in children[board].items():
        visits[m] = stats[child][0]
    return max(range(9), key=lambda m: visits[m]), visits


REFERENCES = {
    "12.1": [value_iteration, value_iteration_to_convergence],
    "12.2": [batch_td_values, batch_td_values_by_iteration],
    "12.3": [td_fixed_point, td_fixed_point_by_power_iteration],
    "12.4": [uct],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def value_iteration_by_the_library(P, R, terminal, gamma, epsilon):
    run = mdp.value_iteration(mdp.make_mdp(P, R, terminal), gamma, tol=epsilon * (1 - gamma) / 2)
    return run.values, run.policy


def value_iteration_stopping_at_epsilon(P, R, terminal, gamma, epsilon):
    """Stops when a sweep changes nothing by epsilon: far too early when gamma is near 1."""
    v = np.zeros(len(R))
    while True:
        new = _q(P, R, terminal, gamma, v).max(1)
        done = np.abs(new - v).max() < epsilon
        v = new
        if done:
            return v, _q(P, R, terminal, gamma, v).argmax(1)


def value_iteration_ignoring_terminals(P, R, terminal, gamma, epsilon):
    """Backs up terminal states like any other."""
    return value_iteration(P, R, np.zeros_like(terminal), gamma, epsilon)


def batch_td_by_the_library(episodes, num_states):
    episodes = [(np.array(s), np.array(r, dtype=float)) for s, r in episodes]
    return td.batch_td0(np.zeros(num_states), episodes, 0.01)


def batch_mc_values(episodes, num_states):
    """The batch Monte Carlo answer: the mean observed return after each visit."""
    total, visits = np.zeros(num_states), np.zeros(num_states)
    for states, rewards in episodes:
        returns = np.cumsum(rewards[::-1])[::-1]
        for s, g in zip(states, returns):
            total[s] += g
            visits[s] += 1
    return np.where(visits > 0, total / np.maximum(visits, 1), 0.0)


def mean_immediate_reward(episodes, num_states):
    _, r_hat = _model(episodes, num_states)
    return r_hat


def td_fixed_point_by_the_library(P, r, Phi, gamma):
    return td.linear_td(P, r, Phi, gamma).w_td


def best_linear_fit(P, r, Phi, gamma):
    """The d-weighted least-squares fit of the true values, which TD does not find."""
    d = rl._stationary(P)
    v = np.linalg.solve(np.eye(len(P)) - gamma * P, r)
    return np.linalg.solve(Phi.T @ (Phi * d[:, None]), Phi.T @ (d * v))


def td_fixed_point_uniform_weights(P, r, Phi, gamma):
    """Every state weighted equally instead of by the stationary distribution."""
    return np.linalg.solve(Phi.T @ (np.eye(len(P)) - gamma * P) @ Phi, Phi.T @ r)


def td_fixed_point_transposed(P, r, Phi, gamma):
    """P^T where P belongs: the chain run backwards."""
    D = np.diag(rl._stationary(P))
    return np.linalg.solve(Phi.T @ D @ (np.eye(len(P)) - gamma * P.T) @ Phi, Phi.T @ D @ r)


def uct_by_the_library(board, num_simulations, seed):
    result = mcts.uct_search(tuple(board), num_simulations, seed=seed)
    return result.move, [result.move_visits.get(m, 0) for m in range(9)]


def win_block_or_first_free(board, num_simulations, seed):
    """Win if possible, else block, else the first free square; visits made up to look like a search."""
    board, player = tuple(board), _to_move(tuple(board))
    free = [i for i in range(9) if board[i] == 0]
    move = free[0]
    for who in (-player, player):
        for m in free:
            if _won(board[:m] + (who,) + board[m + 1:]):
                move = m
    visits = [0] * 9
    for i, m in enumerate(free):
        visits[m] = num_simulations // len(free) + (1 if i < num_simulations % len(free) else 0)
    bonus = max(visits) - visits[move] + 1 if visits[move] < max(visits) else 0
    visits[move] += bonus
    visits[free[-1] if free[-1] != move else free[0]] -= bonus
    return move, visits


def uct_without_sign_flip(board, num_simulations, seed):
    """Every node scored for X: O then chooses the moves that are best for X."""
    return uct(board, num_simulations, seed, flip=False)


WRONG = {
    "12.1": {"dlbook.mdp.value_iteration (blocked)": value_iteration_by_the_library,
             "stop when a sweep changes less than epsilon": value_iteration_stopping_at_epsilon,
             "terminal states backed up": value_iteration_ignoring_terminals},
    "12.2": {"dlbook.td.batch_td0 (blocked)": batch_td_by_the_library,
             "batch Monte Carlo": batch_mc_values, "mean immediate reward": mean_immediate_reward},
    "12.3": {"dlbook.td.linear_td (blocked)": td_fixed_point_by_the_library,
             "the best linear fit": best_linear_fit, "uniform state weights": td_fixed_point_uniform_weights,
             "P transposed": td_fixed_point_transposed},
    "12.4": {"dlbook.mcts.uct_search (blocked)": uct_by_the_library,
             "win, block or first free square": win_block_or_first_free,
             "no sign flip between players": uct_without_sign_flip},
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_the_checks_agree_with_the_chapter_modules():
    rng = np.random.default_rng(0)
    P, R, terminal = rl._random_mdp(rng, 10, 3, 2)
    v_star = rl._optimal_values(P, R, terminal, 0.9)
    assert np.abs(v_star - mdp.value_iteration(mdp.make_mdp(P, R, terminal), 0.9).values).max() < 1e-10
    ab = [([0, 1], [0.0, 0.0])] + [([1], [1.0])] * 6 + [([1], [0.0])]
    assert np.abs(rl._batch_td(ab, 2) - 0.75).max() < 1e-10
    chain = rng.dirichlet(np.ones(12), size=12)
    r, Phi = rng.normal(size=12), rng.normal(size=(12, 3))
    assert np.abs(rl._td_fixed_point(chain, r, Phi, 0.9) - td.linear_td(chain, r, Phi, 0.9).w_td).max() < 1e-10
    for _, board in rl.UCT_POSITIONS:
        assert rl._negamax(board) == mcts.minimax_value(board)


def test_the_uct_positions_defeat_the_one_ply_rule():
    wrong = [board for _, board in rl.UCT_POSITIONS
             if rl._move_value(board, win_block_or_first_free(board, 10, 0)[0]) != rl._negamax(board)]
    assert len(wrong) >= 3
