"""Tests of dlbook.gridworlds: grid worlds from text layouts and the named small worlds."""
from __future__ import annotations

import numpy as np
import pytest

from dlbook import gridworlds, mdp


def test_layout_moves_walls_and_rewards():
    world = gridworlds.grid_world(["S.#", "..G"], step_reward=-1.0, goal_reward=10.0)
    assert world.mdp.num_states == 5 and world.shape == (2, 3)
    start, right_of_start = world.state(0, 0), world.state(0, 1)
    next_state = world.mdp.P.argmax(2)
    assert next_state[1, start] == right_of_start            # right
    assert next_state[1, right_of_start] == right_of_start    # into the wall: stay
    assert next_state[0, start] == start                      # off the grid: stay
    below_goal = world.state(1, 1)
    assert world.mdp.R[below_goal, 1] == 9.0 and world.mdp.terminal[world.state(1, 2)]
    grid = world.to_grid(np.arange(5.0))
    assert np.isnan(grid[0, 2]) and grid[1, 2] == world.state(1, 2)


def test_dyna_maze_and_four_rooms():
    maze = gridworlds.dyna_maze()
    assert maze.mdp.num_states == 54 - 7 and maze.cells[maze.start].tolist() == [2, 0]
    assert gridworlds.shortest_path_length(maze) == 14
    rooms = gridworlds.four_rooms()
    assert rooms.mdp.num_states == 104
    assert gridworlds.shortest_path_length(rooms) == 16      # (0, 0) -> (8, 8) through a hallway


def test_random_walk_values():
    walk = gridworlds.random_walk(5)
    v = mdp.evaluate_policy(walk, np.zeros(7, dtype=int), 1.0)
    assert np.abs(v[1:-1] - np.arange(1, 6) / 6).max() < 1e-12 and v[0] == v[-1] == 0
    walk19 = gridworlds.random_walk(19, left_reward=-1.0)
    v = mdp.evaluate_policy(walk19, np.zeros(21, dtype=int), 1.0)
    assert np.abs(v[1:-1] - np.linspace(-0.9, 0.9, 19)).max() < 1e-12


def test_short_corridor_optimum():
    corridor = gridworlds.short_corridor()
    grid = np.linspace(0.01, 0.99, 9801)
    values = [mdp.evaluate_policy(corridor, np.tile([1 - p, p], (4, 1)), 1.0)[0] for p in grid[::50]]
    best = grid[::50][int(np.argmax(values))]
    assert abs(best - (2 - np.sqrt(2))) < 0.01 and abs(max(values) + 6 + 4 * np.sqrt(2)) < 1e-3


def test_bad_layouts():
    with pytest.raises(TypeError, match="layout must be a non-empty list"):
        gridworlds.grid_world("S.G")
    with pytest.raises(ValueError, match="same, non-zero length"):
        gridworlds.grid_world(["S.", "..G"])
    with pytest.raises(ValueError, match="only the characters"):
        gridworlds.grid_world(["S.X"])
    with pytest.raises(ValueError, match="at most one start"):
        gridworlds.grid_world(["S.S"])
    with pytest.raises(ValueError, match="free cell"):
        gridworlds.four_rooms(goal=(5, 0))
    with pytest.raises(ValueError, match="wall or outside"):
        gridworlds.dyna_maze().state(1, 2)
    with pytest.raises(ValueError, match="no start cell"):
        gridworlds.shortest_path_length(gridworlds.sutton_barto_gridworld())
