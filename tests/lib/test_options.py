"""Tests of dlbook.options: hallway options, option models, SMDP planning and learning."""
from __future__ import annotations

import numpy as np
import pytest

from dlbook import gridworlds, mdp, options


@pytest.fixture(scope="module")
def rooms():
    return gridworlds.four_rooms()


def test_hallway_options_reach_their_hallway(rooms):
    hallway_options = options.hallway_options(rooms)
    assert len(hallway_options) == 8
    successors = mdp.successor_table(rooms.mdp)
    targets = set()
    for option in hallway_options:
        ends = set()
        for s in np.flatnonzero(option.initiation):
            state = s
            for _ in range(30):
                state = successors[option.actions[state], state]
                if option.termination[state]:
                    break
            assert option.termination[state] and tuple(rooms.cells[state]) in gridworlds.FOUR_ROOMS_HALLWAYS
            ends.add(int(state))
        assert len(ends) == 1        # one target hallway, reached from everywhere in the room
        targets |= ends
    assert len(targets) == 4


def test_option_model_matches_a_rollout(rooms):
    gamma = 0.9
    option = options.hallway_options(rooms)[0]
    R, F = options.option_model(rooms.mdp, option, gamma)
    successors = mdp.successor_table(rooms.mdp)
    for s in np.flatnonzero(option.initiation)[:10]:
        state, k = s, 0
        while True:
            state, k = successors[option.actions[state], state], k + 1
            if option.termination[state]:
                break
        assert abs(F[s].sum() - gamma**k) < 1e-12 and F[s, state] == pytest.approx(gamma**k)
        assert R[s] == 0.0


def test_options_leave_the_optimal_values_unchanged_and_propagate_faster(rooms):
    gamma = 0.9
    exact = mdp.value_iteration(rooms.mdp, gamma).values
    plain = options.smdp_value_iteration(options.option_models(rooms.mdp, [], gamma), 40)
    with_options = options.smdp_value_iteration(
        options.option_models(rooms.mdp, options.hallway_options(rooms), gamma), 40)
    assert np.abs(plain[-1] - exact).max() < 1e-8 and np.abs(with_options[-1] - exact).max() < 1e-8
    assert np.abs(with_options[6] - exact).max() < np.abs(plain[6] - exact).max()


def test_smdp_q_learning_with_options_needs_fewer_steps(rooms):
    plain = options.smdp_q_learning(rooms, [], 8, num_runs=3, seed=0)
    with_options = options.smdp_q_learning(rooms, options.hallway_options(rooms), 8, num_runs=3, seed=0)
    assert plain.shape == with_options.shape == (3, 8)
    assert with_options.sum() < plain.sum()


def test_bad_inputs(rooms):
    with pytest.raises(TypeError, match="four_rooms"):
        options.hallway_options(gridworlds.dyna_maze())
    with pytest.raises(TypeError, match="must be an Option"):
        options.option_model(rooms.mdp, (1, 2, 3), 0.9)
    with pytest.raises(ValueError, match="gamma must be < 1"):
        options.option_models(rooms.mdp, [], 1.0)
    with pytest.raises(ValueError, match="at least one"):
        options.option_models(rooms.mdp, [], 0.9, primitives=False)
