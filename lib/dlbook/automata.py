"""Finite automata and counters: what bounded lengths and finite precision do to expressivity (Chapter 16).

* The language {a^n b^n} is context-free and not regular; restricted to n <= N
  it is finite, hence regular. :func:`finite_language_dfa` builds the trie
  automaton of a finite language and :func:`minimize` reduces it to the
  smallest equivalent DFA (Moore's partition refinement), so the size of the
  smallest DFA is measured, not assumed.
* A recurrent network with a counter unit recognises a^n b^n for every n with
  three units and fixed weights, but only while its arithmetic is exact:
  :func:`counter_rnn` runs it in a chosen floating-point dtype.

Automata are plain Python (exact integers); the counter network is torch.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .validation import check_dtype, check_int, describe

__all__ = ["DFA", "finite_language_dfa", "minimize", "accepts", "anbn_words", "counter_rnn"]


class DFA(NamedTuple):
    """A complete deterministic finite automaton over ``alphabet`` (Chapter 16).

    ``transitions[q][i]`` is the state reached from q on the symbol ``alphabet[i]``;
    state 0 is the start state.
    """

    alphabet: str
    transitions: tuple      # (num_states,) tuples of next states, one per symbol
    accepting: frozenset

    @property
    def num_states(self) -> int:
        return len(self.transitions)


def _check_words(words, alphabet: str) -> list[str]:
    if isinstance(words, str) or not isinstance(words, (list, tuple, set, frozenset)):
        raise TypeError(f"words must be a list of strings, got {describe(words)}")
    checked = []
    for word in words:
        if not isinstance(word, str):
            raise TypeError(f"words must hold strings, got {describe(word)}")
        if set(word) - set(alphabet):
            raise ValueError(f"words must use only the symbols {alphabet!r}, got {word!r}")
        checked.append(word)
    return checked


def _check_alphabet(alphabet) -> str:
    if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet):
        raise ValueError(f"alphabet must be a non-empty string of distinct symbols, got {alphabet!r}")
    return alphabet


def finite_language_dfa(words, alphabet: str = "ab") -> DFA:
    """The trie automaton of a finite language, completed with one dead state (Chapter 16).

    It accepts exactly ``words``: one state per distinct prefix, plus a dead state
    that every missing transition leads to.
    """
    alphabet = _check_alphabet(alphabet)
    words = _check_words(words, alphabet)
    prefixes = {"": 0}
    for word in words:
        for end in range(1, len(word) + 1):
            prefixes.setdefault(word[:end], len(prefixes))
    dead = len(prefixes)
    table = [[dead] * len(alphabet) for _ in range(dead + 1)]
    for prefix, state in prefixes.items():
        for i, symbol in enumerate(alphabet):
            table[state][i] = prefixes.get(prefix + symbol, dead)
    accepting = frozenset(prefixes[word] for word in words)
    return DFA(alphabet, tuple(tuple(row) for row in table), accepting)


def _check_dfa(dfa) -> DFA:
    if not isinstance(dfa, DFA):
        raise TypeError(f"dfa must be an automata.DFA, got {describe(dfa)}")
    return dfa


def minimize(dfa: DFA) -> DFA:
    """The smallest DFA accepting the same language: Moore's partition refinement (Chapter 16).

    Start from {accepting, rejecting} and split classes whose states disagree on the
    class of some successor, until nothing changes. Unreachable states are dropped first.
    """
    dfa = _check_dfa(dfa)
    reachable, frontier = {0}, [0]
    while frontier:
        for nxt in dfa.transitions[frontier.pop()]:
            if nxt not in reachable:
                reachable.add(nxt)
                frontier.append(nxt)
    states = sorted(reachable)
    block = {q: int(q in dfa.accepting) for q in states}
    while True:
        signatures = {q: (block[q], tuple(block[nxt] for nxt in dfa.transitions[q])) for q in states}
        numbering: dict = {}
        refined = {q: numbering.setdefault(signatures[q], len(numbering)) for q in states}
        if len(numbering) == len(set(block.values())):
            break
        block = refined
    # Number the classes in order of first appearance; state 0 comes first, so the start is class 0.
    relabel: dict = {}
    for q in states:
        relabel.setdefault(block[q], len(relabel))
    table = [None] * len(relabel)
    for q in states:
        table[relabel[block[q]]] = tuple(relabel[block[nxt]] for nxt in dfa.transitions[q])
    accepting = frozenset(relabel[block[q]] for q in dfa.accepting if q in reachable)
    return DFA(dfa.alphabet, tuple(table), accepting)


def accepts(dfa: DFA, word: str) -> bool:
    """Whether ``dfa`` accepts ``word`` (Chapter 16)."""
    dfa = _check_dfa(dfa)
    (word,) = _check_words([word], dfa.alphabet)
    state = 0
    for symbol in word:
        state = dfa.transitions[state][dfa.alphabet.index(symbol)]
    return state in dfa.accepting


def anbn_words(max_n: int) -> list[str]:
    """The words a^n b^n for n = 0, ..., max_n (Chapter 16)."""
    max_n = check_int("max_n", max_n, minimum=0)
    return ["a" * n + "b" * n for n in range(max_n + 1)]


def counter_rnn(words, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Accept or reject each word over {a, b} with a three-unit ReLU recurrent network (Chapter 16).

    The units are a counter c (+1 on a, -1 on b), a flag s that a b has been seen, and
    an error flag e raised by an a after a b or by the counter going below zero:

        c <- c + x_a - x_b,   s <- s + relu(x_b - s),   e <- e + relu(relu(s + x_a - 1) + relu(-c) - e)

    (max(u, v) = u + relu(v - u)). A word is accepted when c = 0 and e = 0 at its end.
    With exact arithmetic this recognises a^n b^n for every n; in ``dtype`` the counter
    stops being exact once it exceeds the largest run of consecutive integers the format holds.
    Returns a boolean tensor, one entry per word.
    """
    dtype = check_dtype("dtype", dtype)
    words = _check_words(words, "ab")
    if not words:
        raise ValueError("words must not be empty")
    length = max(len(w) for w in words)
    # (num_words, length) one-hot streams; padding is neither a nor b and changes nothing.
    is_a = torch.tensor([[w[t] == "a" if t < len(w) else False for t in range(length)] for w in words], dtype=dtype)
    is_b = torch.tensor([[w[t] == "b" if t < len(w) else False for t in range(length)] for w in words], dtype=dtype)
    c = torch.zeros(len(words), dtype=dtype)
    s = torch.zeros_like(c)
    e = torch.zeros_like(c)
    for t in range(length):
        x_a, x_b = is_a[:, t], is_b[:, t]
        violation = torch.relu(s + x_a - 1)          # an a after a b
        s = s + torch.relu(x_b - s)
        c = c + x_a - x_b
        e = e + torch.relu(violation + torch.relu(-c) - e)
    return (c == 0) & (e == 0)
