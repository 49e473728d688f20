"""Tests of dlbook.automata: trie automata, minimisation, the counter network in finite precision."""
import itertools

import pytest
import torch

from dlbook import automata as A


def all_words(alphabet, max_len):
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


def test_trie_and_minimal_dfa_accept_exactly_the_language():
    words = A.anbn_words(4)
    for dfa in (A.finite_language_dfa(words), A.minimize(A.finite_language_dfa(words))):
        assert [w for w in all_words("ab", 10) if A.accepts(dfa, w)] == sorted(words, key=len)


def test_minimal_dfa_of_bounded_anbn_has_2N_plus_2_states():
    for N in range(0, 12):
        assert A.minimize(A.finite_language_dfa(A.anbn_words(N))).num_states == 2 * N + 2


def test_minimize_merges_equivalent_states_and_keeps_distinct_ones():
    # All words of length 2 over {a, b}: the minimal DFA counts to 2 and has a dead state.
    dfa = A.finite_language_dfa(["aa", "ab", "ba", "bb"])
    assert dfa.num_states == 8 and A.minimize(dfa).num_states == 4
    # Minimising twice changes nothing; the empty language needs one (dead) state.
    once = A.minimize(dfa)
    assert A.minimize(once) == once
    assert A.minimize(A.finite_language_dfa([])).num_states == 1


def test_counter_rnn_recognises_anbn_exactly_in_float64():
    words = all_words("ab", 8)
    expected = [w in set(A.anbn_words(4)) for w in words]
    assert A.counter_rnn(words, dtype=torch.float64).tolist() == expected


def test_counter_rnn_breaks_where_float16_stops_counting():
    n = 2048                                    # float16 holds every integer up to 2^11, not 2^11 + 1
    words = ["a" * n + "b" * n, "a" * (n + 1) + "b" * (n + 1), "a" * (n + 1) + "b" * n]
    assert A.counter_rnn(words, dtype=torch.float16).tolist() == [True, False, True]
    assert A.counter_rnn(words, dtype=torch.float32).tolist() == [True, True, False]


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="alphabet"):
        A.finite_language_dfa(["ab"], alphabet="aa")
    with pytest.raises(ValueError, match="words"):
        A.finite_language_dfa(["abc"])
    with pytest.raises(TypeError, match="words"):
        A.finite_language_dfa("ab")
    with pytest.raises(TypeError, match="dfa"):
        A.minimize("dfa")
    with pytest.raises(TypeError, match="dtype"):
        A.counter_rnn(["ab"], dtype=torch.int32)
    with pytest.raises(ValueError, match="max_n"):
        A.anbn_words(-1)
    with pytest.raises(ValueError, match="words"):
        A.counter_rnn([])
