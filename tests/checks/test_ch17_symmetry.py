"""Checks of chapter 17's exercises: references pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import nbformat
import numpy as np
import torch

from dlbook import nets, sgd_noise, symmetry
from dlbook.exercises import EXERCISES, run_check

from exercise_contract import bad_types, outlast

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("17.1", "17.2", "17.3", "17.4", "17.5")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def permute_hidden_units(layers, perms):
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W[:, perms[index - 1]]
        if index < len(layers) - 1:
            W, b = W[perms[index]], b[perms[index]]
        out.append((W, b))
    return out


def permute_with_matrices(layers, perms):
    """The same, with explicit permutation matrices P (P x)_i = x_perm[i]."""
    P = [torch.eye(len(p), dtype=torch.float64)[p] for p in perms]
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W @ P[index - 1].T
        if index < len(layers) - 1:
            W, b = P[index] @ W, P[index] @ b
        out.append((W, b))
    return out


def log10_orbit_size(W1, b1, W2):
    """n! / prod m_k! over groups of identical units (row of W1, bias, column of W2)."""
    signatures = torch.cat([W1, b1[:, None], W2.T], dim=1)
    _, counts = torch.unique(signatures, dim=0, return_counts=True)
    return (math.lgamma(len(b1) + 1) - sum(math.lgamma(m + 1) for m in counts.tolist())) / math.log(10)


def log10_orbit_size_by_sorting(W1, b1, W2):
    """Sort the signatures and count runs of equal rows, in exact integer arithmetic."""
    rows = sorted(map(tuple, torch.cat([W1, b1[:, None], W2.T], dim=1).tolist()))
    runs = [len(list(group)) for _, group in itertools.groupby(rows)]
    return math.log10(math.factorial(len(rows)) // math.prod(math.factorial(m) for m in runs))


def normalise_relu_units(layers):
    out = [(W.clone(), b.clone()) for W, b in layers]
    for index in range(len(out) - 1):
        W, b = out[index]
        norms = torch.sqrt((W ** 2).sum(dim=1) + b ** 2)
        norms = torch.where(norms > 0, norms, torch.ones_like(norms))
        out[index] = (W / norms[:, None], b / norms)
        out[index + 1] = (out[index + 1][0] * norms, out[index + 1][1])
    return out


def momentum_stationary_variance(curvature, noise_variance, lr, momentum):
    """AR(2) variance of δ_{t+1} = (1 + β - ηλ) δ_t - β δ_{t-1} - η ξ_t."""
    if abs(momentum) >= 1 or not 0 < lr * curvature < 2 * (1 + momentum):
        return math.inf
    return lr * noise_variance * (1 + momentum) / (
        curvature * (1 - momentum) * (2 * (1 + momentum) - lr * curvature))


def momentum_by_lyapunov(curvature, noise_variance, lr, momentum):
    """The 2 x 2 Lyapunov equation of the state (δ, v), solved by fixed-point iteration."""
    A = np.array([[1 - lr * curvature, momentum], [-lr * curvature, momentum]])
    if np.abs(np.linalg.eigvals(A)).max() >= 1:
        return float("inf")
    S, noise = np.zeros((2, 2)), lr ** 2 * noise_variance * np.ones((2, 2))
    for _ in range(20000):
        S_next = A @ S @ A.T + noise
        if np.abs(S_next - S).max() < 1e-16 * np.abs(S_next).max():
            break
        S = S_next
    return float(S_next[0, 0])


def averaged_iterate_variance(curvature, noise_variance, lr, num_averaged):
    rho, T = 1 - lr * curvature, num_averaged
    variance = lr * noise_variance / (curvature * (2 - lr * curvature))
    pairs = rho * (T * (1 - rho) - (1 - rho ** T)) / (1 - rho) ** 2  # sum over s of (T - s) rho^s
    return variance * (T + 2 * pairs) / T ** 2


REFERENCES = {"17.1": [permute_hidden_units, permute_with_matrices],
              "17.2": [log10_orbit_size, log10_orbit_size_by_sorting],
              "17.3": normalise_relu_units,
              "17.4": [momentum_stationary_variance, momentum_by_lyapunov],
              "17.5": averaged_iterate_variance}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def permute_by_the_library(layers, perms):
    """dlbook.symmetry.permute_hidden: the shortcut the exercise blocks."""
    return symmetry.permute_hidden(layers, perms)


def permute_rows_only(layers, perms):
    """Forgets to permute the next layer's columns: the function changes."""
    return [(W[perms[i]], b[perms[i]]) if i < len(layers) - 1 else (W, b) for i, (W, b) in enumerate(layers)]


def permute_with_inverse(layers, perms):
    """Uses the inverse permutations: keeps the function but not the given permutation."""
    return permute_hidden_units(layers, [torch.argsort(p) for p in perms])


def permute_without_biases(layers, perms):
    out = permute_hidden_units(layers, perms)
    return [(W, b) for (W, _), (_, b) in zip(out, layers)]


def orbit_by_the_library(W1, b1, W2):
    """dlbook.symmetry.log10_group_order: the group order, the shortcut the exercise blocks."""
    return symmetry.log10_group_order([len(b1)])


def orbit_ignoring_twins(W1, b1, W2):
    return math.lgamma(len(b1) + 1) / math.log(10)


def orbit_twins_by_in_weights(W1, b1, W2):
    """Groups units by their incoming weights and bias only, ignoring the out-weights."""
    return log10_orbit_size(W1, b1, torch.zeros_like(W2))


def orbit_halved_per_pair(W1, b1, W2):
    """Divides by 2 for every pair of identical units instead of by m! per group."""
    _, counts = torch.unique(torch.cat([W1, b1[:, None], W2.T], dim=1), dim=0, return_counts=True)
    pairs = sum(m * (m - 1) // 2 for m in counts.tolist())
    return (math.lgamma(len(b1) + 1) - pairs * math.log(2)) / math.log(10)


def orbit_silent_units_interchangeable(W1, b1, W2):
    """Treats all units with zero out-weights as twins of each other."""
    silent = (W2 == 0).all(dim=0)
    W1, b1 = W1.clone(), b1.clone()
    W1[silent], b1[silent] = 0.0, 0.0
    return log10_orbit_size(W1, b1, W2)


def normalise_by_the_library(layers):
    """dlbook.symmetry.rescale_relu layer by layer: the shortcut the exercise blocks."""
    out = [tuple(layer) for layer in layers]
    for layer in range(1, len(out)):
        W, b = out[layer - 1]
        norms = torch.sqrt((W ** 2).sum(dim=1) + b ** 2)
        out = symmetry.rescale_relu(out, layer, 1 / torch.where(norms > 0, norms, torch.ones_like(norms)))
    return out


def normalise_weights_without_bias(layers):
    out = [(W.clone(), b.clone()) for W, b in layers]
    for index in range(len(out) - 1):
        W, b = out[index]
        norms = W.norm(dim=1)
        out[index] = (W / norms[:, None], b / norms)
        out[index + 1] = (out[index + 1][0] * norms, out[index + 1][1])
    return out


def normalise_all_layers_at_once(layers):
    """Computes every layer's norms from the original weights, before the earlier layers moved."""
    norms = [torch.sqrt((W ** 2).sum(dim=1) + b ** 2) for W, b in layers[:-1]]
    norms = [torch.where(n > 0, n, torch.ones_like(n)) for n in norms]
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W * norms[index - 1]
        if index < len(layers) - 1:
            W, b = W / norms[index][:, None], b / norms[index]
        out.append((W, b))
    return out


def normalise_without_compensating(layers):
    out = [(W.clone(), b.clone()) for W, b in layers]
    for index in range(len(out) - 1):
        W, b = out[index]
        norms = torch.sqrt((W ** 2).sum(dim=1) + b ** 2)
        out[index] = (W / norms[:, None], b / norms)
    return out


def momentum_by_the_library(curvature, noise_variance, lr, momentum):
    """The plain-SGD Lyapunov solution at the effective step lr / (1 - momentum), from dlbook (blocked)."""
    return sgd_noise.stationary_covariance(torch.tensor([[curvature]], dtype=torch.float64),
                                           torch.tensor([[noise_variance]], dtype=torch.float64),
                                           lr / (1 - momentum)).item()


def momentum_ignored(curvature, noise_variance, lr, momentum):
    return lr * noise_variance / (curvature * (2 - lr * curvature))


def momentum_effective_step(curvature, noise_variance, lr, momentum):
    """Plain SGD at the step lr / (1 - momentum): right only for small steps."""
    step = lr / (1 - momentum)
    if step * curvature >= 2:
        return math.inf
    return step * noise_variance / (curvature * (2 - step * curvature))


def momentum_small_step(curvature, noise_variance, lr, momentum):
    return lr * noise_variance / (2 * curvature * (1 - momentum))


def averaged_by_the_library(curvature, noise_variance, lr, num_averaged):
    """Independent iterates with the variance from dlbook.sgd_noise (blocked)."""
    variance = sgd_noise.diagonal_stationary_variance([curvature], [noise_variance], lr).item()
    return variance / num_averaged


def averaged_as_if_independent(curvature, noise_variance, lr, num_averaged):
    return lr * noise_variance / (curvature * (2 - lr * curvature)) / num_averaged


def averaged_long_run_only(curvature, noise_variance, lr, num_averaged):
    """The large-T limit Σ (1 + ρ) / ((1 - ρ) T), wrong for short averages."""
    rho = 1 - lr * curvature
    return lr * noise_variance / (curvature * (2 - lr * curvature)) * (1 + rho) / ((1 - rho) * num_averaged)


def averaged_small_step_variance(curvature, noise_variance, lr, num_averaged):
    """The right sum with the small-step variance lr c / (2 λ)."""
    return averaged_iterate_variance(curvature, noise_variance, lr, num_averaged) * (2 - lr * curvature) / 2


def averaged_right_but_slow(curvature, noise_variance, lr, num_averaged):
    """Stands for a loop over the lags, which takes minutes at 10^9 iterates."""
    if num_averaged > 10 ** 6:
        outlast(1.0)
    return averaged_iterate_variance(curvature, noise_variance, lr, num_averaged)


def averaged_by_a_loop(curvature, noise_variance, lr, num_averaged):
    rho = 1 - lr * curvature
    variance = lr * noise_variance / (curvature * (2 - lr * curvature))
    pairs = sum((num_averaged - s) * rho ** s for s in range(1, num_averaged))
    return variance * (num_averaged + 2 * pairs) / num_averaged ** 2


WRONG = {
    "17.1": {"dlbook.symmetry.permute_hidden (blocked)": permute_by_the_library,
             "rows permuted, next layer's columns not": permute_rows_only,
             "the inverse permutations": permute_with_inverse, "biases left in place": permute_without_biases},
    "17.2": {"dlbook.symmetry.log10_group_order (blocked)": orbit_by_the_library,
             "twins ignored": orbit_ignoring_twins, "twins judged by in-weights only": orbit_twins_by_in_weights,
             "a factor 2 per identical pair": orbit_halved_per_pair,
             "silent units counted as twins": orbit_silent_units_interchangeable},
    "17.3": {"dlbook.symmetry.rescale_relu (blocked)": normalise_by_the_library,
             "bias left out of the norm": normalise_weights_without_bias,
             "all layers normalised at once": normalise_all_layers_at_once,
             "next layer not compensated": normalise_without_compensating},
    "17.4": {"plain SGD from dlbook.sgd_noise (blocked)": momentum_by_the_library,
             "momentum ignored": momentum_ignored, "plain SGD at the effective step": momentum_effective_step,
             "the small-step limit": momentum_small_step},
    "17.5": {"independent iterates from dlbook.sgd_noise (blocked)": averaged_by_the_library,
             "iterates treated as independent": averaged_as_if_independent,
             "the long-average limit": averaged_long_run_only,
             "the small-step variance": averaged_small_step_variance,
             "right but slow (a loop over the lags)": averaged_right_but_slow},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN",
                      "returns a list")


# ---------------------------------------------------------------------------
# Tests beyond the contract
# ---------------------------------------------------------------------------



def test_the_blocked_shortcuts_would_otherwise_pass_their_cases():
    """Outside the check the library functions do solve the task, so blocking them matters."""
    layers = nets.random_layers([3, 4, 2], seed=0)
    perms = [torch.tensor([2, 0, 3, 1])]
    assert all(torch.equal(W, V) for (W, _), (V, _) in zip(permute_by_the_library(layers, perms),
                                                            permute_hidden_units(layers, perms)))
    assert all(torch.allclose(W, V) for (W, _), (V, _) in zip(normalise_by_the_library(layers),
                                                               normalise_relu_units(layers)))


def test_blocked_answers_fail_with_the_shortcut_reason():
    for eid, name in [("17.1", "dlbook.symmetry.permute_hidden (blocked)"),
                      ("17.2", "dlbook.symmetry.log10_group_order (blocked)"),
                      ("17.3", "dlbook.symmetry.rescale_relu (blocked)"),
                      ("17.4", "plain SGD from dlbook.sgd_noise (blocked)"),
                      ("17.5", "independent iterates from dlbook.sgd_noise (blocked)")]:
        result = run_check(eid, WRONG[eid][name])
        assert not result.passed and "is not available inside it" in result.message, (eid, result.message)


def test_the_momentum_references_agree_with_the_ar2_form():
    for setting in [(1.0, 1.0, 0.1, 0.0), (2.0, 0.5, 0.05, 0.9), (4.0, 1.0, 0.5, 0.3), (3.0, 0.2, 0.3, -0.3)]:
        assert math.isclose(momentum_stationary_variance(*setting), momentum_by_lyapunov(*setting), rel_tol=1e-9)


def test_the_averaging_closed_form_equals_the_loop():
    for setting in [(1.0, 1.0, 0.1, 1), (2.0, 1.0, 0.025, 5), (4.0, 2.0, 0.375, 10), (1.0, 1.0, 1.5, 9)]:
        assert math.isclose(averaged_iterate_variance(*setting), averaged_by_a_loop(*setting), rel_tol=1e-9)


def test_the_task_cells_show_the_registry_metadata():
    book = Path(__file__).resolve().parents[2] / "book" / "17_symmetry.ipynb"
    text = "\n".join(c.source for c in nbformat.read(book, as_version=4).cells if c.cell_type == "markdown")
    for eid in IDS:
        ex = EXERCISES[eid]
        assert f"**Exercise {eid}** ({ex.stars}, about {ex.minutes} min, {ex.kind})" in text, eid
