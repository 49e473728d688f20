"""Small worlds as arrays: grid worlds from a text layout, random walks, the short corridor (Chapter 12).

A grid world is drawn as strings: ``.`` a free cell, ``#`` a wall, ``S`` the
start, ``G`` a goal (terminal; entering it pays ``goal_reward`` on top of the
step reward) and ``T`` a terminal cell that pays nothing extra. Walls are not
states: the MDP's states are the free cells in reading order, and a move into
a wall or off the grid leaves the agent where it is. The four actions are
up, right, down and left, the order gymnasium's CliffWalking uses.

The named worlds are the classic ones: Sutton and Barto's 4 x 4 grid world
(Example 4.1), the 5- and 19-state random walks (Example 6.2, Section 7.1),
the short corridor with switched actions (Example 13.1), the Dyna maze
(Figure 8.2) and the four rooms of Sutton, Precup and Singh (1999).
"""
from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from .mdp import MDP, make_mdp
from .validation import check_float, check_int, describe

__all__ = ["GridWorld", "grid_world", "MOVES", "ACTION_NAMES", "sutton_barto_gridworld", "dyna_maze",
           "four_rooms", "FOUR_ROOMS_HALLWAYS", "random_walk", "short_corridor", "shortest_path_length"]

#: Row and column change of up, right, down, left.
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
ACTION_NAMES = ("up", "right", "down", "left")
CELL_KINDS = ".#SGT"


class GridWorld(NamedTuple):
    """A grid world: its MDP, the (row, column) of each state, the start state and the layout."""

    mdp: MDP
    cells: np.ndarray        # (S, 2): row and column of state s
    start: int | None
    layout: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.layout), len(self.layout[0])

    def state(self, row: int, col: int) -> int:
        """The state of a free cell."""
        hits = np.flatnonzero((self.cells[:, 0] == row) & (self.cells[:, 1] == col))
        if not len(hits):
            raise ValueError(f"cell ({row}, {col}) is a wall or outside the {self.shape} grid")
        return int(hits[0])

    def to_grid(self, values) -> np.ndarray:
        """Per-state values laid out on the grid, NaN on walls (for imshow)."""
        values = np.asarray(values, dtype=float)
        if values.shape != (len(self.cells),):
            raise ValueError(f"values must have one entry per state ({len(self.cells)}), got {describe(values)}")
        grid = np.full(self.shape, np.nan)
        grid[self.cells[:, 0], self.cells[:, 1]] = values
        return grid


def _check_layout(layout) -> tuple[str, ...]:
    if isinstance(layout, str) or not isinstance(layout, (list, tuple)) or not layout:
        raise TypeError(f"layout must be a non-empty list of strings, got {describe(layout)}")
    if not all(isinstance(row, str) for row in layout):
        raise TypeError("layout must hold strings, one per row")
    if len({len(row) for row in layout}) != 1 or not layout[0]:
        raise ValueError("every row of layout must have the same, non-zero length")
    bad = sorted(set("".join(layout)) - set(CELL_KINDS))
    if bad:
        raise ValueError(f"layout may use only the characters {CELL_KINDS!r}, found {bad}")
    if "".join(layout).count("S") > 1:
        raise ValueError("layout may mark at most one start cell S")
    return tuple(layout)


def grid_world(layout, *, step_reward: float = -1.0, goal_reward: float = 0.0) -> GridWorld:
    """A deterministic grid world from a text layout (Chapter 12); see the module docstring."""
    layout = _check_layout(layout)
    step_reward = check_float("step_reward", step_reward)
    goal_reward = check_float("goal_reward", goal_reward)
    rows, cols = len(layout), len(layout[0])
    cells = np.array([(r, c) for r in range(rows) for c in range(cols) if layout[r][c] != "#"])
    index = -np.ones((rows, cols), dtype=int)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    kinds = np.array([layout[r][c] for r, c in cells])
    num_states = len(cells)
    P = np.zeros((len(MOVES), num_states, num_states))
    R = np.zeros((num_states, len(MOVES)))
    for a, (dr, dc) in enumerate(MOVES):
        target = cells + (dr, dc)
        inside = (target[:, 0] >= 0) & (target[:, 0] < rows) & (target[:, 1] >= 0) & (target[:, 1] < cols)
        nxt = np.arange(num_states)
        nxt[inside] = index[target[inside, 0], target[inside, 1]]
        nxt[nxt < 0] = np.arange(num_states)[nxt < 0]       # a wall: stay put
        P[a, np.arange(num_states), nxt] = 1.0
        R[:, a] = step_reward + goal_reward * (kinds[nxt] == "G")
    start = np.flatnonzero(kinds == "S")
    return GridWorld(make_mdp(P, R, np.isin(kinds, ["G", "T"])), cells,
                     int(start[0]) if len(start) else None, layout)


def sutton_barto_gridworld() -> GridWorld:
    """The 4 x 4 grid world: terminal corners, reward -1 per move (Sutton and Barto, Example 4.1)."""
    return grid_world(["T...", "....", "....", "...T"], step_reward=-1.0)


def dyna_maze() -> GridWorld:
    """The 6 x 9 Dyna maze: start (2, 0), goal (0, 8), reward 1 at the goal and 0 otherwise (Figure 8.2)."""
    return grid_world([".......#G",
                       "..#....#.",
                       "S.#....#.",
                       "..#......",
                       ".....#...",
                       "........."], step_reward=0.0, goal_reward=1.0)


#: The four hallway cells of the four-rooms world, as (row, column).
FOUR_ROOMS_HALLWAYS = ((2, 5), (5, 1), (6, 8), (9, 5))


def four_rooms(goal=(8, 8), start=(0, 0)) -> GridWorld:
    """The 11 x 11 four-rooms world (104 cells), reward 1 on reaching ``goal``, 0 per step (Sutton et al. 1999)."""
    layout = [list(row) for row in (".....#.....",
                                    ".....#.....",
                                    "...........",
                                    ".....#.....",
                                    ".....#.....",
                                    "#.####.....",
                                    ".....###.##",
                                    ".....#.....",
                                    ".....#.....",
                                    "...........",
                                    ".....#.....")]
    for name, (r, c), mark in (("goal", goal, "G"), ("start", start, "S")):
        r, c = check_int(f"{name}[0]", r, minimum=0, maximum=10), check_int(f"{name}[1]", c, minimum=0, maximum=10)
        if layout[r][c] != ".":
            raise ValueError(f"{name} must be a free cell, got ({r}, {c}), which is {layout[r][c]!r}")
        layout[r][c] = mark
    return grid_world(["".join(row) for row in layout], step_reward=0.0, goal_reward=1.0)


def random_walk(num_states: int = 5, *, left_reward: float = 0.0, right_reward: float = 1.0) -> MDP:
    """A random walk on a line of ``num_states`` states between two terminal ends (one action) (Chapter 12).

    States 0 and num_states + 1 are the ends; each step moves left or right
    with probability 1/2 and pays ``left_reward`` or ``right_reward`` on
    entering an end. With the defaults and 5 states (Sutton and Barto,
    Example 6.2) the values are 1/6, ..., 5/6; the 19-state walk of their
    Section 7.1 uses left_reward = -1.
    """
    num_states = check_int("num_states", num_states, minimum=1)
    left_reward = check_float("left_reward", left_reward)
    right_reward = check_float("right_reward", right_reward)
    n = num_states + 2
    P = np.zeros((1, n, n))
    inner = np.arange(1, n - 1)
    P[0, inner, inner - 1] = 0.5
    P[0, inner, inner + 1] = 0.5
    R = np.zeros((n, 1))
    R[1, 0] += 0.5 * left_reward
    R[n - 2, 0] += 0.5 * right_reward
    terminal = np.zeros(n, dtype=bool)
    terminal[[0, n - 1]] = True
    return make_mdp(P, R, terminal)


def short_corridor() -> MDP:
    """Sutton and Barto's short corridor with switched actions (Example 13.1), actions (left, right).

    States 0, 1, 2 and the terminal goal 3; every step pays -1. In state 0 left
    bumps into the wall, in state 1 the actions are reversed.
    """
    P = np.zeros((2, 4, 4))
    left, right = 0, 1
    P[left, 0, 0], P[right, 0, 1] = 1, 1
    P[left, 1, 2], P[right, 1, 0] = 1, 1      # switched
    P[left, 2, 1], P[right, 2, 3] = 1, 1
    R = -np.ones((4, 2))
    return make_mdp(P, R, np.array([False, False, False, True]))


def shortest_path_length(world: GridWorld, start: int | None = None) -> int:
    """Fewest moves from ``start`` (the world's start by default) to a terminal state, by breadth-first search."""
    if not isinstance(world, GridWorld):
        raise TypeError(f"world must be a GridWorld, got {describe(world)}")
    start = world.start if start is None else check_int("start", start, minimum=0,
                                                        maximum=world.mdp.num_states - 1)
    if start is None:
        raise ValueError("the world has no start cell: pass start=")
    successors = world.mdp.P.argmax(2)          # (A, S): deterministic next states
    distance = {start: 0}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        if world.mdp.terminal[s]:
            return distance[s]
        for s_next in successors[:, s]:
            if int(s_next) not in distance:
                distance[int(s_next)] = distance[s] + 1
                queue.append(int(s_next))
    raise ValueError("no terminal state can be reached from the start")
