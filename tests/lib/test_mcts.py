"""Tests of dlbook.mcts: tic-tac-toe, exact minimax and UCT."""
from __future__ import annotations

import pytest

from dlbook import mcts

X, O, _ = 1, -1, 0  # noqa: E741  (the players of tic-tac-toe)


def test_rules_and_minimax():
    assert mcts.minimax_value(mcts.EMPTY_BOARD) == 0                    # perfect play draws
    board = (X, X, _, O, O, _, _, _, _)                                   # X to move wins at 2
    assert mcts.to_move(board) == 1 and mcts.minimax_value(board) == 1
    assert mcts.minimax_move_values(board)[2] == 1
    assert mcts.winner(mcts.play(board, 2)) == 1 and mcts.legal_moves(mcts.play(board, 2)) == []
    lost = (X, O, _, _, X, _, _, _, _)     # O must block 8, then X at 6 threatens 2 and 3 at once
    assert mcts.to_move(lost) == -1 and mcts.minimax_value(lost) == -1
    assert mcts.winner((X, O, X, X, O, O, O, X, X)) == 0


def test_playout_result_is_for_the_player_to_move():
    board = (X, X, _, O, O, _, O, X, _)    # X to move: 2 wins, 5 blocks, 8 loses... random play decides
    import random
    results = {mcts.random_playout(board, random.Random(seed)) for seed in range(50)}
    assert results <= {-1, 0, 1} and 1 in results


@pytest.mark.parametrize("board", [
    (X, X, _, O, O, _, _, _, _),
    (X, _, _, _, O, _, _, _, _),
    (X, O, X, _, O, _, _, _, _),
    (X, _, _, _, _, _, _, _, _),
])
def test_uct_picks_a_move_that_keeps_the_game_value(board):
    result = mcts.uct_search(board, 1500, seed=0)
    assert mcts.minimax_move_values(board)[result.move] == mcts.minimax_value(board)
    assert sum(result.move_visits.values()) == 1500 - 0 and set(result.move_values) == set(mcts.legal_moves(board))


def test_bad_inputs():
    with pytest.raises(ValueError, match="nine entries"):
        mcts.minimax_value((1, 0))
    with pytest.raises(ValueError, match="X moves first"):
        mcts.to_move((O, _, _, _, _, _, _, _, _))
    with pytest.raises(ValueError, match="move must be one of"):
        mcts.play((X, _, _, _, _, _, _, _, _), 0)
    with pytest.raises(ValueError, match="game is over"):
        mcts.uct_search((X, X, X, O, O, _, _, _, _), 10)
