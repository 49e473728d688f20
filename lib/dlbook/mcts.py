"""Monte Carlo tree search (UCT) on tic-tac-toe, checked against exact minimax (Chapter 12).

A board is a tuple of nine entries, 1 for X, -1 for O and 0 for empty, read
row by row; X moves first, so the player to move follows from the counts.
Values are from the point of view of the player to move: +1 a win, 0 a draw,
-1 a loss (negamax). :func:`minimax_value` solves a position exactly (with a
cache: tic-tac-toe has 5,478 legal positions).

:func:`uct_search` is Kocsis and Szepesvari's UCT: each simulation walks down
the tree choosing the child with the largest
mean + c sqrt(ln N(parent) / N(child)) (an unvisited child first), adds one
new node, finishes the game with uniformly random moves and backs the result
up, flipping its sign at every level. It is plain Python with a seeded
``random.Random``.
"""
from __future__ import annotations

import math
import random
from functools import lru_cache
from typing import NamedTuple

from .validation import check_float, check_int, describe

__all__ = ["EMPTY_BOARD", "LINES", "to_move", "winner", "legal_moves", "play", "minimax_value",
           "minimax_move_values", "UCTResult", "uct_search", "random_playout"]

EMPTY_BOARD = (0,) * 9
#: The eight lines of three cells.
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _check_board(board) -> tuple[int, ...]:
    if not isinstance(board, (tuple, list)) or len(board) != 9 or any(x not in (-1, 0, 1) for x in board):
        raise ValueError(f"board must be nine entries from -1, 0, 1, got {describe(board)}")
    board = tuple(int(x) for x in board)
    crosses, noughts = board.count(1), board.count(-1)
    if crosses - noughts not in (0, 1):
        raise ValueError(f"X moves first, so X has as many marks as O or one more; got {crosses} and {noughts}")
    return board


def to_move(board) -> int:
    """1 if X is to move, -1 if O is."""
    board = _check_board(board)
    return 1 if board.count(1) == board.count(-1) else -1


def winner(board) -> int | None:
    """1 or -1 for the player with three in a line, 0 for a full board without one, None while the game runs."""
    for i, j, k in LINES:
        if board[i] != 0 and board[i] == board[j] == board[k]:
            return board[i]
    return 0 if 0 not in board else None


def legal_moves(board) -> list[int]:
    """Empty cells of a running game (none once it is over)."""
    return [] if winner(board) is not None else [i for i, x in enumerate(board) if x == 0]


def play(board, move: int) -> tuple[int, ...]:
    """The board after the player to move marks ``move``."""
    board = _check_board(board)
    if move not in legal_moves(board):
        raise ValueError(f"move must be one of {legal_moves(board)}, got {move!r}")
    player = 1 if board.count(1) == board.count(-1) else -1
    return board[:move] + (player,) + board[move + 1:]


@lru_cache(maxsize=None)
def _negamax(board: tuple[int, ...]) -> int:
    result = winner(board)
    if result is not None:
        player = 1 if board.count(1) == board.count(-1) else -1
        return result * player              # the previous player may have won: -1 for the player to move
    player = 1 if board.count(1) == board.count(-1) else -1
    return max(-_negamax(board[:m] + (player,) + board[m + 1:]) for m in range(9) if board[m] == 0)


def minimax_value(board) -> int:
    """The game-theoretic value for the player to move: +1 win, 0 draw, -1 loss."""
    return _negamax(_check_board(board))


def minimax_move_values(board) -> dict[int, int]:
    """For each legal move, its exact value for the player making it."""
    board = _check_board(board)
    return {m: -_negamax(play(board, m)) for m in legal_moves(board)}


def random_playout(board, rng: random.Random) -> int:
    """Finish the game with uniformly random moves; the result for the player to move at ``board``."""
    player = 1 if board.count(1) == board.count(-1) else -1
    cells = list(board)
    mover = player
    while True:
        result = winner(cells)
        if result is not None:
            return result * player
        empty = [i for i, x in enumerate(cells) if x == 0]
        cells[rng.choice(empty)] = mover
        mover = -mover


class _Node:
    """A node of the search tree: visit count, total value for the player who moved into it, children."""

    __slots__ = ("board", "visits", "total", "children", "untried")

    def __init__(self, board):
        self.board = board
        self.visits = 0
        self.total = 0.0
        self.children: dict[int, _Node] = {}
        self.untried = legal_moves(board)


class UCTResult(NamedTuple):
    """What a search found at the root: the most visited move, its mean value, and every child's statistics."""

    move: int
    value: float                 # mean result of the chosen move, for the player to move at the root
    move_values: dict            # move -> mean result
    move_visits: dict            # move -> visits


def uct_search(board, num_simulations: int, *, exploration: float = math.sqrt(2), seed: int = 0) -> UCTResult:
    """Search from ``board`` with ``num_simulations`` UCT simulations (Chapter 12)."""
    board = _check_board(board)
    if not legal_moves(board):
        raise ValueError("the game is over at this board: there is nothing to search")
    num_simulations = check_int("num_simulations", num_simulations, minimum=1)
    exploration = check_float("exploration", exploration, low=0.0)
    rng = random.Random(check_int("seed", seed, minimum=0))
    root = _Node(board)
    for _ in range(num_simulations):
        node, path = root, [root]
        # Selection: descend while every move of the node has been tried.
        while not node.untried and node.children:
            log_n = math.log(node.visits)
            node = max(node.children.values(),
                       key=lambda child: child.total / child.visits + exploration * math.sqrt(log_n / child.visits))
            path.append(node)
        # Expansion: one new child.
        if node.untried:
            move = node.untried.pop(rng.randrange(len(node.untried)))
            child = _Node(play(node.board, move))
            node.children[move] = child
            node, path = child, path + [child]
        # Simulation, from the point of view of the player to move at the new node.
        outcome = random_playout(node.board, rng)
        # Backup: a node's total is for the player who moved into it, the opponent of its player to move.
        value = -outcome
        for visited in reversed(path):
            visited.visits += 1
            visited.total += value
            value = -value
    values = {m: child.total / child.visits for m, child in root.children.items()}
    visits = {m: child.visits for m, child in root.children.items()}
    best = max(visits, key=lambda m: (visits[m], values[m]))
    return UCTResult(best, values[best], values, visits)
