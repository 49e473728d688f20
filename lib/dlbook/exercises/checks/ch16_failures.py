"""Checks for the exercises of chapter 16 (16_failures): the Walsh-Hadamard transform, the gradient
variance across sparse parities, the smallest automaton of a bounded language, an unbiased estimate
of the variance across targets, and weight-tied rewrites of networks with skip connections.

Expected values are computed here by independent code (dense Hadamard matrices from the popcount
definition, a NumPy transform along the axes of a (2, ..., 2) array, a trie automaton minimised
by partition refinement, Monte Carlo measurements, NumPy forward passes), never by the chapter's
modules parity, automata and equilibrium, so that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Hadamard transforms, written two independent ways
# ---------------------------------------------------------------------------


def _popcount(i: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: bin(int(v)).count("1"))(i)


def _hadamard(d: int) -> np.ndarray:
    """Dense Sylvester-Hadamard matrix of order 2^d: entry (i, j) is (-1)^popcount(i & j)."""
    i = np.arange(2**d)
    return np.where(_popcount(i[:, None] & i[None, :]) % 2 == 0, 1.0, -1.0)


def _transform_by_axes(A: np.ndarray) -> np.ndarray:
    """Phi @ A for A of shape (2^d, m): view the rows as a (2, ..., 2) array, apply [[1, 1], [1, -1]] per axis."""
    n, m = A.shape
    d = n.bit_length() - 1
    T = A.reshape((2,) * d + (m,))
    for axis in range(d):
        first, second = np.take(T, 0, axis=axis), np.take(T, 1, axis=axis)
        T = np.stack((first + second, first - second), axis=axis)
    return T.reshape(n, m)


# ---------------------------------------------------------------------------
# Exercise 16.1: the fast Walsh-Hadamard transform
# ---------------------------------------------------------------------------

@exercise("16.1", title="The fast Walsh-Hadamard transform", function="walsh_hadamard",
          kind="derive", difficulty=2, minutes=30,
          blocked=("dlbook.parity.fwht", "dlbook.parity.character_matrix"),
          hint="Phi for d bits is built from two copies of Phi for d - 1 bits, with a sign flip in one "
               "quarter; apply that block structure to the data, not to a matrix.")
def check_walsh_hadamard(walsh_hadamard, cases):
    """A is a float64 tensor of shape (2^d, m); compare with a dense Hadamard product, then at d = 20."""
    rng = np.random.default_rng(16)
    for d, m in [(0, 1), (1, 1), (2, 3), (5, 4), (8, 2), (10, 1)]:
        A = rng.normal(size=(2**d, m))
        with cases.case(f"walsh_hadamard(A) for A of shape ({2**d}, {m})"):
            got = as_array(walsh_hadamard(torch.tensor(A)), (2**d, m))
            err = np.abs(got - _hadamard(d) @ A).max()
            expect(err <= 1e-9, "Phi @ A (max error <= 1e-9)", f"a result off by {err:.3g}")
    # At d = 20 the dense matrix would have 2^40 entries: only an O(d 2^d) transform fits the time.
    n = 2**20
    A = np.zeros((n, 2))
    A[0, 0] = 1.0
    A[:, 1] = rng.choice([-1.0, 1.0], size=n)
    with cases.case("walsh_hadamard(A) at d = 20, A of shape (1048576, 2)", time_limit=5.0,
                    why="the task asks for d passes over the data, not a matrix with 2^(2d) entries"):
        got = as_array(walsh_hadamard(torch.tensor(A)), (n, 2))
        expected = _transform_by_axes(A)
        err = np.abs(got - expected).max()
        expect(err <= 1e-6, "Phi @ A (column 0 all ones, column 1 an integer vector)", f"a result off by {err:.3g}")


# ---------------------------------------------------------------------------
# Exercise 16.2: the variance across the parities of exactly k bits
# ---------------------------------------------------------------------------

def _sparse_family_variance(G: np.ndarray, k: int) -> float:
    """Variance across the parities S with |S| = k of E_x[chi_S g], the target-dependent gradient part."""
    n = G.shape[0]
    B = _transform_by_axes(G) / n                              # row S: E_x[chi_S(x) g(x)]
    rows = B[_popcount(np.arange(n)) == k]
    return float(((rows - rows.mean(axis=0)) ** 2).sum(axis=1).mean())


@exercise("16.2", title="Gradient variance across the parities of k bits", function="sparse_family_variance",
          kind="extend", difficulty=2, minutes=35,
          blocked=("dlbook.parity.fwht", "dlbook.parity.character_matrix", "dlbook.parity.family_gradients",
                   "dlbook.parity.family_variance", "dlbook.parity.variance_identity",
                   "dlbook.parity.per_target_grads"),
          hint="only the target-dependent part E_x[chi_S g] varies with S; compute it for every S with one "
               "transform of G, keep the subsets with k elements, and take the variance of those rows.")
def check_sparse_family_variance(sparse_family_variance, cases):
    """G is a float64 tensor (2^d, P) of per-sample gradients in hypercube order; k an int."""
    rng = np.random.default_rng(7)
    examples = [("d = 1, k = 1 (one target)", rng.normal(size=(2, 1)), 1),
                ("d = 3, k = 0 (the constant target only)", rng.normal(size=(8, 2)), 0),
                ("d = 3, k = 1", rng.normal(size=(8, 5)), 1),
                ("d = 4, k = 2", rng.normal(size=(16, 3)), 2),
                ("d = 5, k = 5 (the full parity only)", rng.normal(size=(32, 2)), 5),
                ("d = 6, k = 3, a large row 0", np.vstack([10 * np.ones((1, 4)), rng.normal(size=(63, 4))]), 3),
                ("d = 7, k = 2, every row equal", np.tile(rng.normal(size=(1, 3)), (128, 1)), 2),
                ("d = 8, k = 4", rng.normal(size=(256, 3)) + np.linspace(0, 1, 256)[:, None], 4)]
    for label, G, k in examples:
        with cases.case(f"sparse_family_variance(G, {k}) with {label}"):
            got = as_float(sparse_family_variance(torch.tensor(G), k), "the variance as a float")
            expect_close(got, _sparse_family_variance(G, k), rtol=1e-9, atol=1e-15)
    G = rng.normal(size=(2**16, 2))
    with cases.case("sparse_family_variance(G, 8) at d = 16", time_limit=10.0,
                    why="the 12870 parities of 8 bits times 65536 inputs are too many for a dense matrix"):
        got = as_float(sparse_family_variance(torch.tensor(G), 8), "the variance as a float")
        expect_close(got, _sparse_family_variance(G, 8), rtol=1e-8, atol=1e-15)


# ---------------------------------------------------------------------------
# Exercise 16.3: the smallest automaton of a bounded language, predicted and measured
# ---------------------------------------------------------------------------

def _minimal_states(words: list[str], alphabet: str) -> int:
    """Number of states of the smallest complete DFA accepting exactly ``words``.

    Build the trie (one state per prefix, plus a dead state), then refine the partition
    {accepting, rejecting} by successor classes until it is stable (Moore).
    """
    index = {"": 0}
    for word in words:
        for end in range(1, len(word) + 1):
            index.setdefault(word[:end], len(index))
    dead = len(index)
    successors = [[index.get(prefix + s, dead) for s in alphabet] for prefix in index] + [[dead] * len(alphabet)]
    accepting = {index[w] for w in words}
    block = [int(q in accepting) for q in range(dead + 1)]
    while True:
        keys = [(block[q], *(block[r] for r in successors[q])) for q in range(dead + 1)]
        numbering = {key: i for i, key in enumerate(dict.fromkeys(keys))}
        refined = [numbering[key] for key in keys]
        if len(numbering) == len(set(block)):
            return len(numbering)
        block = refined


def _abc_words(N: int) -> list[str]:
    return ["a" * n + "b" * n + "c" * n for n in range(N + 1)]


def _abc_states(N: int) -> int:
    """The count the measurements agree with: N(N - 1)/2 + 2N + 3 for N >= 1, and 2 for N = 0."""
    return 2 if N == 0 else N * (N - 1) // 2 + 2 * N + 3


@exercise("16.3", title="How big is the automaton for a bounded language?", function="minimal_dfa_states",
          kind="predict", difficulty=3, minutes=40,
          blocked=("dlbook.automata.minimize", "dlbook.automata.finite_language_dfa"),
          hint="two prefixes need different states exactly when some suffix completes one and not the "
               "other (Myhill-Nerode); sort the prefixes a^i, a^i b^j, a^i b^i c^j by what is still "
               "missing, and do not forget the dead state.")
def check_minimal_dfa_states(minimal_dfa_states, cases):
    """The prediction is compared with minimised automata for N <= 9 and with their pattern at large N."""
    for N in range(10):
        measured = _minimal_states(_abc_words(N), "abc")
        assert measured == _abc_states(N), (N, measured)      # the check's own formula is the measurement
        with cases.case(f"minimal_dfa_states({N}) against a minimised automaton"):
            got = as_int(minimal_dfa_states(N), "the number of states as an integer")
            expect(got == measured, f"{measured} states (measured by minimising the automaton)", str(got))
    for N in (100, 2000):
        with cases.case(f"minimal_dfa_states({N})", time_limit=1.0,
                        why="at this N the automaton has millions of states: predict, do not build it"):
            got = as_int(minimal_dfa_states(N), "the number of states as an integer")
            expect(got == _abc_states(N), f"{_abc_states(N)} states", str(got))


# ---------------------------------------------------------------------------
# Exercise 16.4: an unbiased estimate of the variance across targets
# ---------------------------------------------------------------------------

def _draw(rng, means: np.ndarray, scales: np.ndarray, n: int) -> np.ndarray:
    """n samples per target: means (T, P) plus noise with per-target, per-coordinate scales (T, P)."""
    T, P = means.shape
    return means[:, None, :] + scales[:, None, :] * rng.normal(size=(T, n, P))


@exercise("16.4", title="The variance across targets, from noisy gradients", function="target_variance_estimate",
          kind="derive", difficulty=2, minutes=30,
          hint="work out the expectation of the plain variance of the T sample means: each mean carries "
               "its own noise, and so does their average. Subtract an unbiased estimate of the excess.")
def check_target_variance_estimate(target_variance_estimate, cases):
    """G is a float64 tensor (T, n, P); statistical cases compare the average answer with the truth."""
    rng = np.random.default_rng(4)
    # Exact cases: without noise the estimate is the plain variance of the means; one target gives 0.
    means = rng.normal(size=(5, 3))
    G = np.repeat(means[:, None, :], 4, axis=1)
    with cases.case("target_variance_estimate(G) with noise-free samples (T = 5, n = 4, P = 3)"):
        got = as_float(target_variance_estimate(torch.tensor(G)), "the estimate as a float")
        expect_close(got, float(((means - means.mean(0)) ** 2).sum(1).mean()), rtol=1e-9, atol=1e-12)
    with cases.case("target_variance_estimate(G) with one target (T = 1, n = 6, P = 2)"):
        got = as_float(target_variance_estimate(torch.tensor(rng.normal(size=(1, 6, 2)))), "the estimate as a float")
        expect_close(got, 0.0, atol=1e-12)
    settings = [("T = 2, n = 2, P = 4, targets equal (variance 0)", np.zeros((2, 4)), np.full((2, 4), 2.0), 2),
                ("T = 8, n = 5, P = 3, equal noise", rng.normal(size=(8, 3)), np.ones((8, 3)), 5),
                ("T = 16, n = 10, P = 2, noise that differs between targets",
                 0.3 * rng.normal(size=(16, 2)), rng.uniform(0.2, 3.0, size=(16, 2)), 10)]
    repeats = 600
    for label, means, scales, n in settings:
        truth = float(((means - means.mean(0)) ** 2).sum(1).mean())
        with cases.case(f"the average of {repeats} estimates with {label}"):
            answers = np.array([as_float(target_variance_estimate(torch.tensor(_draw(rng, means, scales, n))),
                                         "the estimate as a float") for _ in range(repeats)])
            average, error = answers.mean(), answers.std(ddof=1) / math.sqrt(repeats)
            expect(abs(average - truth) <= 4.5 * error + 1e-12,
                   f"an unbiased estimate: average {truth:.4g} within 4.5 standard errors ({4.5 * error:.2g})",
                   f"an average of {average:.4g}")


# ---------------------------------------------------------------------------
# Exercise 16.5: weight-tied rewrites of networks with skip connections
# ---------------------------------------------------------------------------

#: Networks given by their layers' sources (0 is the input), widths n_0, n_1, ..., n_L.
_DAGS = [
    ("a chain of 3 layers", [[0], [1], [2]], [3, 4, 5, 2]),
    ("one layer", [[0]], [4, 3]),
    ("3 layers that all read the input", [[0], [0], [0]], [2, 3, 4, 2]),
    ("a residual chain (layer 3 also reads layer 1)", [[0], [1], [2, 1]], [3, 5, 5, 5]),
    ("dense connections (every layer reads all before it)", [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]], [2, 3, 3, 2, 1]),
    ("two branches of depth 1 and 3 merged", [[0], [0], [2], [3], [1, 4]], [3, 4, 2, 2, 3, 2]),
]


def _dag_network(rng, sources, widths):
    layers = []
    for i, srcs in enumerate(sources, start=1):
        weights = [rng.normal(size=(widths[i], widths[j])) / math.sqrt(widths[j]) for j in srcs]
        layers.append({"sources": list(srcs), "weights": weights, "bias": 0.5 * rng.normal(size=widths[i])})
    return layers


def _dag_forward(layers, x: np.ndarray) -> np.ndarray:
    """tanh layers on one input x; returns the concatenated outputs of layers 1..L."""
    values = [x]
    for layer in layers:
        pre = layer["bias"] + sum(W @ values[j] for j, W in zip(layer["sources"], layer["weights"]))
        values.append(np.tanh(pre))
    return np.concatenate(values[1:])


@exercise("16.5", title="Weight tying for networks with skip connections", function="weight_tied_dag",
          kind="extend", difficulty=3, minutes=40, blocked=("dlbook.equilibrium.weight_tied",),
          hint="give every layer its block of the state; a weight from layer j to layer i goes to block "
               "(i, j) of W_z, or to W_x when j is the input. Then ask when each block first holds its "
               "final value.")
def check_weight_tied_dag(weight_tied_dag, cases):
    """layers: list of dicts {"sources", "weights", "bias"} (float64 arrays); answer (W_z, W_x, b, iterations)."""
    rng = np.random.default_rng(5)
    for label, sources, widths in _DAGS:
        layers = _dag_network(rng, sources, widths)
        size = sum(widths[1:])
        with cases.case(f"weight_tied_dag for {label}, widths {widths}"):
            out = weight_tied_dag(layers, widths[0])
            if not isinstance(out, (list, tuple)) or len(out) != 4:
                raise Mismatch("a tuple (W_z, W_x, b, iterations)", describe(out))
            W_z = as_array(out[0], (size, size), f"W_z of shape ({size}, {size})")
            W_x = as_array(out[1], (size, widths[0]), f"W_x of shape ({size}, {widths[0]})")
            b = as_array(out[2], (size,), f"b with {size} entries")
            iterations = as_int(out[3], "the number of iterations as an integer")
            for trial in range(3):
                x = rng.normal(size=widths[0])
                reference = _dag_forward(layers, x)
                z, history = np.zeros(size), []
                for _ in range(len(sources) + 1):
                    z = np.tanh(W_z @ z + W_x @ x + b)
                    history.append(z)
                err = np.abs(history[len(sources) - 1] - reference).max()
                expect(err <= 1e-12, f"the stacked layer outputs after L = {len(sources)} iterations from z = 0",
                       f"states off by {err:.3g}")
                expect(np.abs(history[-1] - history[-2]).max() <= 1e-12, "a fixed point (one more iteration "
                       "changes nothing)", "a state that still moves")
                # Measure the first iteration at which the state reaches the fixed point.
                first = next(t + 1 for t, state in enumerate(history) if np.abs(state - reference).max() <= 1e-12)
                # (it exists: the state after L iterations matched the reference above)
                expect(iterations == first, f"{first} iterations (measured from z = 0)", str(iterations))
            power = np.linalg.matrix_power
            expect(np.abs(power(W_z, iterations)).max() <= 1e-12 and np.abs(power(W_z, iterations - 1)).max() > 0,
                   f"W_z nilpotent of index {iterations}", "another W_z")
