"""Checks of chapter 16's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail
cleanly."""
from __future__ import annotations

import math

import numpy as np
import torch

import dlbook.exercises.checks.ch16_failures as failures
from dlbook import automata, data, equilibrium, nets, parity
from dlbook.exercises import run_check

from exercise_contract import bad_types, outlast

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("16.1", "16.2", "16.3", "16.4", "16.5")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def walsh_hadamard(A):
    """Butterflies on a (2, ..., 2, m) view: one pass per bit, most significant first."""
    n, m = A.shape
    d = n.bit_length() - 1
    out = A.clone()
    for bit in range(d):
        view = out.reshape(2**bit, 2, n // 2**(bit + 1), m)
        out = torch.stack((view[:, 0] + view[:, 1], view[:, 0] - view[:, 1]), dim=1).reshape(n, m)
    return out


def walsh_hadamard_numpy(A):
    """Least significant bit first, in NumPy, returning an array: (a, b) -> (a + b, a - b) for blocks of length h."""
    out = A.numpy().copy()
    n, m = out.shape
    h = 1
    while h < n:
        blocks = out.reshape(n // (2 * h), 2, h, m)
        out = np.concatenate((blocks[:, :1] + blocks[:, 1:], blocks[:, :1] - blocks[:, 1:]), axis=1).reshape(n, m)
        h *= 2
    return out


def _popcounts(n):
    return torch.tensor([bin(i).count("1") for i in range(n)])


def sparse_family_variance(G, k):
    B = walsh_hadamard(G) / G.shape[0]                 # row S: E_x[chi_S(x) g(x)]
    rows = B[_popcounts(G.shape[0]) == k]
    return ((rows - rows.mean(dim=0)) ** 2).sum(dim=1).mean().item()


def minimal_dfa_states(N):
    # Classes: a^i (N + 1), a^i b^j with 0 < j < i (N(N - 1)/2), "c^m still missing" (N + 1), dead (1).
    # At N = 0 the only word is the empty one: start (accepting) and dead.
    return 2 if N == 0 else N * (N - 1) // 2 + 2 * N + 3


def target_variance_estimate(G):
    T, n, _ = G.shape
    means = G.mean(dim=1)
    naive = ((means - means.mean(dim=0)) ** 2).sum(dim=1).mean()
    noise = G.var(dim=1).sum(dim=1) / n               # tr Cov(mean of target S), unbiased, (T,)
    return (naive - (T - 1) / T**2 * noise.sum()).item()


def target_variance_estimate_by_pairs(G):
    """Half the average over ordered pairs of distinct targets of an unbiased ||mu_S - mu_R||^2."""
    T, n, _ = G.shape
    means, noise = G.mean(dim=1), G.var(dim=1).sum(dim=1) / n
    distance = ((means[:, None] - means[None]) ** 2).sum(dim=2) - noise[:, None] - noise[None]   # (T, T)
    off_diagonal = ~torch.eye(T, dtype=torch.bool)
    return (distance[off_diagonal].sum() / (2 * T * T)).item()


def weight_tied_dag(layers, input_size):
    widths = [len(layer["bias"]) for layer in layers]
    starts = np.concatenate([[0], np.cumsum(widths)])
    depth = [0] * (len(layers) + 1)
    W_z = np.zeros((starts[-1], starts[-1]))
    W_x = np.zeros((starts[-1], input_size))
    for i, layer in enumerate(layers, start=1):
        rows = slice(starts[i - 1], starts[i])
        for j, W in zip(layer["sources"], layer["weights"]):
            if j == 0:
                W_x[rows] = W
            else:
                W_z[rows, starts[j - 1]:starts[j]] = W
        depth[i] = 1 + max(depth[j] for j in layer["sources"])
    return W_z, W_x, np.concatenate([layer["bias"] for layer in layers]), max(depth)


REFERENCES = {
    "16.1": [walsh_hadamard, walsh_hadamard_numpy],
    "16.2": [sparse_family_variance],
    "16.3": [minimal_dfa_states],
    "16.4": [target_variance_estimate, target_variance_estimate_by_pairs],
    "16.5": [weight_tied_dag],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def fwht_by_the_library(A):
    return parity.fwht(A)


def normalised_walsh_hadamard(A):
    """The orthonormal transform Phi / sqrt(n) instead of Phi."""
    return walsh_hadamard(A) / math.sqrt(A.shape[0])


def walsh_hadamard_dense(A):
    """The dense matrix from the popcount definition: right, but 2^(2d) entries."""
    n = A.shape[0]
    i = torch.arange(n)
    bits = torch.zeros(n, n, dtype=torch.long)
    for bit in range(n.bit_length() - 1):
        bits += ((i[:, None] >> bit) & (i[None, :] >> bit) & 1)
    return (1 - 2 * (bits % 2)).to(A.dtype) @ A


def walsh_hadamard_without_sign(A):
    """Sums in both halves: every entry becomes the column sum."""
    return A.sum(dim=0, keepdim=True).expand_as(A).clone()


def sparse_variance_by_the_library(G, k):
    B = parity.fwht(G) / G.shape[0]
    rows = B[_popcounts(G.shape[0]) == k]
    return ((rows - rows.mean(dim=0)) ** 2).sum(dim=1).mean().item()


def full_family_variance(G, k):
    """Every parity, whatever its size."""
    n = G.shape[0]
    return ((G**2).sum(dim=1).mean() / n - (G[0] ** 2).sum() / n**2).item()


def sparse_bound(G, k):
    """Theorem 1's bound G^2 / |H| for the C(d, k) targets."""
    d = G.shape[0].bit_length() - 1
    return ((G**2).sum(dim=1).mean() / math.comb(d, k)).item()


def sparse_mean_square(G, k):
    """Mean of ||E[chi_S g]||^2 without subtracting the mean over targets."""
    B = walsh_hadamard(G) / G.shape[0]
    return (B[_popcounts(G.shape[0]) == k] ** 2).sum(dim=1).mean().item()


def states_by_the_library(N):
    words = ["a" * n + "b" * n + "c" * n for n in range(N + 1)]
    return automata.minimize(automata.finite_language_dfa(words, "abc")).num_states


def states_of_anbn(N):
    """The count for a^n b^n: two counters' worth of states, not a triangle."""
    return 2 * N + 2


def states_without_zero_case(N):
    return N * (N - 1) // 2 + 2 * N + 3


def states_off_by_a_row(N):
    return minimal_dfa_states(N) + N


def states_by_minimising(N):
    """Builds and minimises the automaton: right, but far too slow at large N (seconds at N = 100)."""
    if N >= 100:
        outlast(1.0)
        return minimal_dfa_states(N)
    return failures._minimal_states(["a" * n + "b" * n + "c" * n for n in range(N + 1)], "abc")


def naive_target_variance(G):
    means = G.mean(dim=1)
    return ((means - means.mean(dim=0)) ** 2).sum(dim=1).mean().item()


def target_variance_per_target_correction(G):
    """Subtracts each target's noise fully, forgetting that the average of the means is noisy too."""
    T, n, _ = G.shape
    means = G.mean(dim=1)
    naive = ((means - means.mean(dim=0)) ** 2).sum(dim=1).mean()
    return (naive - (G.var(dim=1).sum(dim=1) / n).mean()).item()


def target_variance_biased_covariance(G):
    """Noise estimated with divisor n instead of n - 1."""
    T, n, _ = G.shape
    means = G.mean(dim=1)
    naive = ((means - means.mean(dim=0)) ** 2).sum(dim=1).mean()
    noise = G.var(dim=1, unbiased=False).sum(dim=1) / n
    return (naive - (T - 1) / T**2 * noise.sum()).item()


def tied_chain_only(layers, input_size):
    """Keeps only each layer's first source: right for chains, wrong with skip connections."""
    pruned = [{"sources": layer["sources"][:1], "weights": layer["weights"][:1], "bias": layer["bias"]}
              for layer in layers]
    return weight_tied_dag(pruned, input_size)


def tied_iterations_L(layers, input_size):
    """Always L iterations, as for a chain."""
    W_z, W_x, b, _ = weight_tied_dag(layers, input_size)
    return W_z, W_x, b, len(layers)


def tied_input_to_the_first_layer_only(layers, input_size):
    """As in the chain construction, only layer 1 sees the input; other layers lose their weights on x."""
    W_z, W_x, b, depth = weight_tied_dag(layers, input_size)
    W_x[len(layers[0]["bias"]):] = 0.0
    return W_z, W_x, b, depth


def tied_by_the_library(layers, input_size):
    chain = [(torch.tensor(layer["weights"][0]), torch.tensor(layer["bias"])) for layer in layers]
    tied = equilibrium.weight_tied(chain)
    return tied.W_z, tied.W_x, tied.b, len(layers)


WRONG = {
    "16.1": {"dlbook.parity.fwht (blocked)": fwht_by_the_library, "normalised by sqrt(n)": normalised_walsh_hadamard,
             "no sign flip": walsh_hadamard_without_sign},
    "16.2": {"dlbook.parity.fwht (blocked)": sparse_variance_by_the_library,
             "the full family instead of |S| = k": full_family_variance, "the bound G^2 / C(d, k)": sparse_bound,
             "mean square without the mean": sparse_mean_square},
    "16.3": {"dlbook.automata (blocked)": states_by_the_library, "the a^n b^n count 2N + 2": states_of_anbn,
             "the formula at N = 0": states_without_zero_case, "N states too many": states_off_by_a_row,
             "measuring instead of predicting (too slow)": states_by_minimising},
    "16.4": {"no correction": naive_target_variance,
             "each target's noise subtracted": target_variance_per_target_correction,
             "covariance with divisor n": target_variance_biased_covariance},
    "16.5": {"dlbook.equilibrium.weight_tied on the first sources (blocked)": tied_by_the_library,
             "first source only": tied_chain_only, "L iterations always": tied_iterations_L,
             "only layer 1 sees the input": tied_input_to_the_first_layer_only},
}


#: No package function answers these, so they block nothing.
UNBLOCKED = ("16.4",)

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_the_check_transforms_agree_with_each_other_and_with_the_chapter():
    A = np.random.default_rng(0).normal(size=(64, 3))
    assert np.allclose(failures._transform_by_axes(A), failures._hadamard(6) @ A, atol=1e-12)
    assert np.allclose(failures._hadamard(5), parity.character_matrix(5).numpy())


def test_the_sparse_variance_over_every_k_adds_up_to_the_full_family():
    """Summing E_S||b_S||^2 over the levels k gives Parseval's E||g||^2 / 2^d."""
    net = nets.mlp((5, 6, 1), seed=0, dtype=torch.float64)
    G = parity.per_sample_grads(net, data.hypercube(5, encoding="pm1", dtype=torch.float64)).numpy()
    B = failures._transform_by_axes(G) / 32
    counts = np.array([math.comb(5, k) for k in range(6)])
    levels = np.array([(B[failures._popcount(np.arange(32)) == k] ** 2).sum(1).mean() for k in range(6)])
    assert np.isclose((counts * levels).sum() / 32, (G**2).sum(1).mean() / 32)
    assert np.isclose(failures._sparse_family_variance(G, 0), 0.0)


def test_the_dfa_count_is_what_the_chapter_module_measures():
    for N in range(6):
        words = ["a" * n + "b" * n + "c" * n for n in range(N + 1)]
        assert failures._minimal_states(words, "abc") == automata.minimize(
            automata.finite_language_dfa(words, "abc")).num_states == minimal_dfa_states(N)


def test_the_dag_networks_need_their_longest_path_in_iterations():
    def depth(sources):
        levels = [0]
        for srcs in sources:
            levels.append(1 + max(levels[j] for j in srcs))
        return max(levels)

    assert [depth(sources) for _, sources, _ in failures._DAGS] == [3, 1, 1, 3, 4, 4]
    for (_, sources, widths), answer in zip(failures._DAGS, [3, 1, 1, 3, 4, 4]):
        layers = failures._dag_network(np.random.default_rng(0), sources, widths)
        assert weight_tied_dag(layers, widths[0])[3] == answer


def test_the_chain_case_matches_the_chapter_construction():
    rng = np.random.default_rng(1)
    layers = failures._dag_network(rng, [[0], [1], [2]], [3, 4, 5, 2])
    W_z, W_x, b, _ = weight_tied_dag(layers, 3)
    tied = equilibrium.weight_tied([(torch.tensor(layer["weights"][0]), torch.tensor(layer["bias"]))
                                    for layer in layers])
    assert np.array_equal(W_z, tied.W_z.numpy()) and np.array_equal(W_x, tied.W_x.numpy())


def test_slow_answers_fail_on_time():
    for eid, answer in (("16.1", walsh_hadamard_dense), ("16.3", states_by_minimising)):
        result = run_check(eid, answer)
        assert not result.passed and ("took" in result.message or "raised" in result.message), result.message
