"""Tests of dlbook.dyna: Dyna-Q on the Dyna maze."""
from __future__ import annotations

import numpy as np
import pytest

from dlbook import dyna, gridworlds


def test_planning_shortens_the_early_episodes():
    maze = gridworlds.dyna_maze()
    plain = dyna.dyna_q(maze, 0, 4, num_runs=4, seed=0)
    planning = dyna.dyna_q(maze, 50, 4, num_runs=4, seed=0)
    assert plain.shape == planning.shape == (4, 4)
    assert planning[:, 2].mean() <= 25 <= 100 <= plain[:, 2].mean()
    assert np.all(planning >= gridworlds.shortest_path_length(maze))


def test_runs_are_reproducible_and_seeded_independently():
    maze = gridworlds.dyna_maze()
    a = dyna.dyna_q_run(maze, 5, 3, seed=11)
    assert np.array_equal(a, dyna.dyna_q_run(maze, 5, 3, seed=11))
    assert np.array_equal(dyna.dyna_q(maze, 5, 3, num_runs=2, seed=0)[1], dyna.dyna_q_run(maze, 5, 3, seed=1))


def test_greedy_dyna_on_a_corridor_walks_straight_after_learning():
    corridor = gridworlds.grid_world(["S....G"], step_reward=0.0, goal_reward=1.0)
    steps = dyna.dyna_q_run(corridor, 20, 6, epsilon=0.0, seed=0)
    assert steps[-1] == 5


def test_bad_inputs():
    with pytest.raises(TypeError, match="world must be a GridWorld"):
        dyna.dyna_q_run("maze", 5, 3)
    with pytest.raises(ValueError, match="must have a start cell"):
        dyna.dyna_q_run(gridworlds.sutton_barto_gridworld(), 5, 3)
    with pytest.raises(ValueError, match="planning_steps must be >= 0"):
        dyna.dyna_q_run(gridworlds.dyna_maze(), -1, 3)
