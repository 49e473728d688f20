"""Checks for the exercises of chapter 17 (17_symmetry): symmetries, counting, matching, SGD noise.

Expected values are computed here with a few lines of independent NumPy/SciPy code
(explicit permutation matrices, a Kronecker-product linear solve), not by calling
dlbook.symmetry, dlbook.alignment or dlbook.sgd_noise.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from ..core import Mismatch, as_array, as_float, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Exercise 17.1: permuting hidden units
# ---------------------------------------------------------------------------


def _random_layers(widths, seed):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(n_out, n_in)) / math.sqrt(n_in), rng.normal(size=n_out) * 0.5)
            for n_in, n_out in zip(widths[:-1], widths[1:])]


def _forward(layers, X):
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = np.tanh(h)
    return h


def _permuted_reference(layers, perms):
    """W_l -> P_l W_l P_{l-1}^T with explicit matrices, (P x)_i = x_{perm[i]}."""
    matrices = [np.eye(len(p))[p] for p in perms]
    out = []
    for index, (W, b) in enumerate(layers):
        left = matrices[index] if index < len(layers) - 1 else np.eye(W.shape[0])
        right = matrices[index - 1].T if index > 0 else np.eye(W.shape[1])
        out.append((left @ W @ right, left @ b))
    return out


def _unpack_layers(out, reference):
    if not isinstance(out, (list, tuple)) or len(out) != len(reference):
        raise Mismatch(f"a list of {len(reference)} (W, b) pairs", describe(out))
    layers = []
    for index, ((W_ref, b_ref), layer) in enumerate(zip(reference, out)):
        if not isinstance(layer, (list, tuple)) or len(layer) != 2:
            raise Mismatch(f"layer {index} as a pair (W, b)", describe(layer))
        layers.append((as_array(layer[0], W_ref.shape, f"W of layer {index} with shape {W_ref.shape}"),
                       as_array(layer[1], b_ref.shape, f"b of layer {index} with shape {b_ref.shape}")))
    return layers


@exercise("17.1", title="Permuting hidden units", function="permute_hidden_units",
          hint="whatever you do to the rows of one layer, undo it in the columns of the next; a "
               "bias moves with its unit, and the output layer stays put.")
def check_permute_hidden_units(permute_hidden_units, cases):
    """Layers are float64 tensors (W of shape (out, in), b of shape (out,)); perms are int64 tensors."""
    for label, widths, seed in [("one hidden layer 3-5-2", [3, 5, 2], 0),
                                ("two hidden layers 4-6-5-3", [4, 6, 5, 3], 1),
                                ("three hidden layers 2-4-4-4-1", [2, 4, 4, 4, 1], 2),
                                ("a hidden layer of one unit 3-1-2", [3, 1, 2], 3),
                                ("a wide hidden layer 6-32-2", [6, 32, 2], 4)]:
        rng = np.random.default_rng(100 + seed)
        layers = _random_layers(widths, seed)
        perms = [rng.permutation(n) for n in widths[1:-1]]
        with cases.case(f"permute_hidden_units(layers, perms) on {label}"):
            out = permute_hidden_units([(torch.tensor(W), torch.tensor(b)) for W, b in layers],
                                       [torch.tensor(p) for p in perms])
            got = _unpack_layers(out, layers)
            X = np.random.default_rng(7).normal(size=(50, widths[0]))
            gap = np.abs(_forward(got, X) - _forward(layers, X)).max()
            expect(gap < 1e-10, "the permuted network to compute the same function (tanh hidden units)",
                   f"outputs that differ by up to {gap:.3g}")
            expected = _permuted_reference(layers, perms)
            for index, ((W, b), (W_ref, b_ref)) in enumerate(zip(got, expected)):
                expect(np.allclose(W, W_ref, atol=1e-12) and np.allclose(b, b_ref, atol=1e-12),
                       f"layer {index} to be P_l W P_(l-1)^T with new unit i = old unit perms[l][i]",
                       "other weights (a function-preserving permutation, but not the one in perms?)")


# ---------------------------------------------------------------------------
# Exercise 17.2: counting equivalent settings
# ---------------------------------------------------------------------------


def _log10_count(hidden_widths, odd):
    total = 0.0
    for n in hidden_widths:
        total += sum(math.log10(k) for k in range(2, n + 1))
        if odd:
            total += n * math.log10(2)
    return total


@exercise("17.2", title="How many equivalent settings?", function="log10_equivalent_settings",
          hint="count the permutations of each hidden layer, add the sign flips when the "
               "activation is odd, and work with logarithms (lgamma) to avoid huge numbers.")
def check_log10_equivalent_settings(log10_equivalent_settings, cases):
    for widths, odd in [([3, 2], False), ([3, 2], True), ([120, 84], False), ([6, 16, 120, 84], False),
                        ([6, 16, 120, 84], True), ([512, 512], False), ([1], False), ([1], True), ([], False),
                        ([1000], False)]:
        with cases.case(f"log10_equivalent_settings({widths}, odd_activation={odd})"):
            got = as_float(log10_equivalent_settings(list(widths), odd), "log10 of the count as a number")
            expect_close(got, _log10_count(widths, odd), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# Exercise 17.3: matching the units of a layer
# ---------------------------------------------------------------------------


def _matching_case(num_units, fan_in, noise, seed):
    rng = np.random.default_rng(seed)
    W_a = rng.normal(size=(num_units, fan_in))
    shuffle = rng.permutation(num_units)
    W_b = W_a[shuffle] + noise * rng.normal(size=(num_units, fan_in))
    truth = np.argsort(shuffle)  # unit i of A is unit truth[i] of B
    rows, cols = linear_sum_assignment(W_a @ W_b.T, maximize=True)
    if not np.array_equal(cols[np.argsort(rows)], truth):
        raise RuntimeError("exercise 17.3: a case whose optimal matching is not the true one")
    return W_a, W_b, truth


@exercise("17.3", title="Matching units with the Hungarian algorithm", function="match_layer",
          hint="score every pair of units by how similar their incoming weights are, then find "
               "the one-to-one pairing with the largest total score.")
def check_match_layer(match_layer, cases):
    """W_a, W_b are float64 tensors (units, fan_in); the answer p has W_b[p] ≈ W_a."""
    for num_units, fan_in, noise, seed in [(1, 4, 0.0, 0), (8, 16, 0.0, 1), (64, 64, 0.3, 2),
                                           (128, 64, 0.5, 3), (200, 32, 0.4, 4)]:
        W_a, W_b, truth = _matching_case(num_units, fan_in, noise, seed)
        with cases.case(f"match_layer(W_a, W_b) for {num_units} units, fan-in {fan_in}, noise {noise}"):
            out = match_layer(torch.tensor(W_a), torch.tensor(W_b))
            perm = as_array(out, (num_units,), f"a permutation of length {num_units}")
            expect(np.array_equal(np.sort(perm), np.arange(num_units)),
                   f"a permutation of 0..{num_units - 1}", f"{perm[:8].tolist()}...")
            wrong = int((perm != truth).sum())
            expect(wrong == 0, "every unit matched (W_b[p] ≈ W_a)", f"{wrong} of {num_units} units mismatched")


# ---------------------------------------------------------------------------
# Exercise 17.4: the stationary spread of SGD
# ---------------------------------------------------------------------------


def _lyapunov_by_kron(H, C, lr):
    """vec(Σ) = (I - A ⊗ A)^{-1} vec(lr² C) with A = I - lr H."""
    n = len(H)
    A = np.eye(n) - lr * H
    vec = np.linalg.solve(np.eye(n * n) - np.kron(A, A), (lr ** 2 * C).reshape(-1))
    return vec.reshape(n, n)


def _spd(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return scale * (Q * rng.uniform(0.2, 1.0, size=n)) @ Q.T


@exercise("17.4", title="The stationary spread of SGD", function="stationary_covariance",
          hint="linearise the update around the minimum; the stationary covariance is the fixed "
               "point of a discrete Lyapunov equation, which SciPy can solve.")
def check_stationary_covariance(stationary_covariance, cases):
    """H, C are float64 tensors (symmetric, H positive definite); lr a float with lr·λ_max(H) < 2."""
    problems = [("1-D, lr·λ = 0.5", np.array([[5.0]]), np.array([[2.0]]), 0.1),
                ("diagonal H with isotropic noise, lr·λ_max = 1.5", np.diag([3.0, 1.0, 0.1]), np.eye(3), 0.5),
                ("diagonal H with noise ∝ H", np.diag([4.0, 0.5]), np.diag([4.0, 0.5]), 0.05),
                ("non-diagonal H and C in 4 dimensions", _spd(4, 1, 3.0), _spd(4, 2), 0.2),
                ("noise in one direction only", np.diag([2.0, 1.0]), np.array([[1.0, 0.0], [0.0, 0.0]]), 0.3)]
    for label, H, C, lr in problems:
        with cases.case(f"stationary_covariance(H, C, lr={lr}) for {label}"):
            out = stationary_covariance(torch.tensor(H), torch.tensor(C), lr)
            got = as_array(out, H.shape, f"a {H.shape[0]}x{H.shape[0]} covariance matrix")
            expected = _lyapunov_by_kron(H, C, lr)
            error = np.abs(got - expected).max() / np.abs(expected).max()
            expect(error < 1e-8, f"Σ = {np.array2string(expected, precision=5)} (relative error < 1e-8)",
                   f"{np.array2string(got, precision=5)}")
