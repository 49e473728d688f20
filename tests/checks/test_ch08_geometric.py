"""Checks of chapter 8's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

import dlbook.exercises.checks.ch08_geometric as geometric
from dlbook import graphs, sets
from dlbook.exercises import run_check

from exercise_contract import bad_types

IDS = ("8.1", "8.2", "8.3", "8.4", "8.5")
MIN_CASES = 5


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def _elementary_symmetric(p):
    """Newton's identities: k e_k = sum_{i=1}^k (-1)^(i-1) e_(k-i) p_i."""
    sums = np.asarray(p, dtype=np.float64)
    e = [1.0]
    for k in range(1, len(sums) + 1):
        e.append(sum((-1) ** (i - 1) * e[k - i] * sums[i - 1] for i in range(1, k + 1)) / k)
    return e


def multiset_from_power_sums(p):
    e = _elementary_symmetric(p)
    return torch.tensor(np.sort(np.roots([(-1) ** k * e[k] for k in range(len(e))]).real))


def multiset_by_companion_matrix(p):
    """The roots as the eigenvalues of the companion matrix of t^M - e_1 t^(M-1) + ..."""
    e = _elementary_symmetric(p)
    M = len(e) - 1
    companion = np.zeros((M, M))
    companion[0] = [(-1) ** k * e[k + 1] for k in range(M)]     # t^M = e_1 t^(M-1) - e_2 t^(M-2) + ...
    companion[1:, :-1] = np.eye(M - 1)
    return np.sort(np.linalg.eigvals(companion).real)


def _coupling(A):
    A_tilde = A + torch.eye(len(A), dtype=A.dtype)
    scale = A_tilde.sum(dim=1).rsqrt()
    return scale[:, None] * A_tilde * scale[None, :]


def smoothing_rate(A):
    """The second largest |eigenvalue| of the symmetric coupling, counted with multiplicity."""
    return torch.linalg.eigvalsh(_coupling(A)).abs().sort(descending=True).values[1].item()


def smoothing_rate_by_singular_values(A):
    """For a symmetric matrix the singular values are the |eigenvalues|."""
    return torch.linalg.svdvals(_coupling(A))[1].item()


def gat_layer(X, A, W, a):
    Z = X @ W
    half = W.shape[1]
    scores = (Z @ a[:half])[:, None] + (Z @ a[half:])[None, :]
    scores = torch.nn.functional.leaky_relu(scores, 0.2)
    allowed = (A > 0) | torch.eye(len(A), dtype=torch.bool)
    alpha = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=1)
    return alpha @ Z, alpha


def gat_layer_on_edges(X, A, W, a):
    """One score per directed edge (self-loops included), a softmax per receiver by scatter operations."""
    n = len(A)
    Z = X @ W
    half = W.shape[1]
    receivers, senders = torch.nonzero(A + torch.eye(n, dtype=A.dtype), as_tuple=True)
    scores = torch.nn.functional.leaky_relu(Z[receivers] @ a[:half] + Z[senders] @ a[half:], 0.2)
    top = torch.full((n,), float("-inf"), dtype=scores.dtype).scatter_reduce(0, receivers, scores, "amax")
    weights = torch.exp(scores - top[receivers])
    totals = torch.zeros(n, dtype=scores.dtype).index_add(0, receivers, weights)
    alpha = torch.zeros(n, n, dtype=scores.dtype)
    alpha[receivers, senders] = weights / totals[receivers]
    return alpha @ Z, alpha


def _recurrence(L, V, K):
    """T_k(L) V for k < K, V of shape (S, n, F)."""
    terms = [V]
    if K > 1:
        terms.append(torch.einsum("mn,snf->smf", L, V))
    while len(terms) < K:
        terms.append(2 * torch.einsum("mn,snf->smf", L, terms[-1]) - terms[-2])
    return terms


def cheb_conv_backward(L_scaled, X, theta, grad_Y):
    """grad_theta_k = sum_s xbar_k^T grad_Y; grad_X = sum_k T_k(L^T) grad_Y theta_k^T."""
    K = theta.shape[0]
    grad_theta = torch.stack([torch.einsum("sni,snj->ij", xbar, grad_Y) for xbar in _recurrence(L_scaled, X, K)])
    back = _recurrence(L_scaled.T, grad_Y, K)
    grad_X = sum(torch.einsum("snj,ij->sni", term, theta[k]) for k, term in enumerate(back))
    return grad_X, grad_theta


def cheb_conv_backward_by_autograd(L_scaled, X, theta, grad_Y):
    X, theta = X.clone().requires_grad_(), theta.clone().requires_grad_()
    terms = torch.stack(_recurrence(L_scaled, X, theta.shape[0]))
    torch.einsum("ksni,kij->snj", terms, theta).backward(grad_Y)
    return X.grad, theta.grad


def _joint_colours(adjacencies):
    neighbours = [[torch.nonzero(row).flatten().tolist() for row in A] for A in adjacencies]
    colours = [[0] * len(nb) for nb in neighbours]
    count = 1
    while True:
        signatures = [[(colours[g][v], tuple(sorted(colours[g][u] for u in nb[v]))) for v in range(len(nb))]
                      for g, nb in enumerate(neighbours)]
        palette = {s: i for i, s in enumerate(sorted({s for sig in signatures for s in sig}))}
        colours = [[palette[s] for s in sig] for sig in signatures]
        yield colours
        if len(palette) == count:
            return
        count = len(palette)


def wl_equivalent(A1, A2):
    return all(sorted(c[0]) == sorted(c[1]) for c in _joint_colours([A1, A2]))


def wl_equivalent_on_the_union(A1, A2):
    """Refine the disjoint union once; compare the colour histograms of the two parts."""
    n1 = len(A1)
    union = torch.block_diag(A1, A2)
    for (colours,) in _joint_colours([union]):
        if sorted(colours[:n1]) != sorted(colours[n1:]):
            return False
    return True


REFERENCES = {
    "8.1": [multiset_from_power_sums, multiset_by_companion_matrix],
    "8.2": [smoothing_rate, smoothing_rate_by_singular_values],
    "8.3": [gat_layer, gat_layer_on_edges],
    "8.4": [cheb_conv_backward, cheb_conv_backward_by_autograd],
    "8.5": [wl_equivalent, wl_equivalent_on_the_union],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def multiset_by_the_library(p):
    return sets.multiset_from_power_sums(p)


def multiset_unsorted(p):
    e = _elementary_symmetric(p)
    return torch.tensor(np.roots([(-1) ** k * e[k] for k in range(len(e))]).real)


def multiset_without_alternating_signs(p):
    """Newton's identities with every term added."""
    sums = np.asarray(p)
    e = [1.0]
    for k in range(1, len(sums) + 1):
        e.append(sum(e[k - i] * sums[i - 1] for i in range(1, k + 1)) / k)
    return torch.tensor(np.sort(np.roots([(-1) ** k * e[k] for k in range(len(e))]).real))


def multiset_with_plus_signs(p):
    """t^M + e_1 t^(M-1) + ...: the roots come out negated."""
    e = _elementary_symmetric(p)
    return torch.tensor(np.sort(np.roots(e).real))


def rate_by_the_library(A):
    return torch.linalg.eigvalsh(graphs.gcn_propagation(A)).abs().sort(descending=True).values[1].item()


def rate_second_largest_eigenvalue(A):
    """The second largest eigenvalue, ignoring negative ones of larger size."""
    return torch.linalg.eigvalsh(_coupling(A))[-2].item()


def rate_without_self_loops(A):
    d = A.sum(dim=1).clamp(min=1)
    normalized = A / torch.sqrt(d[:, None] * d[None, :])
    return torch.linalg.eigvalsh(normalized).abs().sort(descending=True).values[1].item()


def rate_distinct_eigenvalues(A):
    """The second distinct |eigenvalue|: forgets that 1 repeats on a disconnected graph."""
    values = np.unique(np.round(torch.linalg.eigvalsh(_coupling(A)).abs().numpy(), 10))[::-1]
    return float(values[1])


def rate_squared(A):
    return smoothing_rate(A) ** 2


def gat_with_the_gcn_coupling(X, A, W, a):
    """Fixed GCN weights instead of attention: the shortcut the exercise blocks."""
    alpha = graphs.gcn_propagation(A)
    return alpha @ (X @ W), alpha


def gat_softmax_over_all_nodes(X, A, W, a):
    Z = X @ W
    half = W.shape[1]
    scores = torch.nn.functional.leaky_relu((Z @ a[:half])[:, None] + (Z @ a[half:])[None, :], 0.2)
    alpha = torch.softmax(scores, dim=1)
    return alpha @ Z, alpha


def gat_without_self_loops(X, A, W, a):
    Z = X @ W
    half = W.shape[1]
    scores = torch.nn.functional.leaky_relu((Z @ a[:half])[:, None] + (Z @ a[half:])[None, :], 0.2)
    alpha = torch.softmax(scores.masked_fill(A == 0, float("-inf")), dim=1).nan_to_num(0.0)
    return alpha @ Z, alpha


def gat_without_the_maximum(X, A, W, a):
    """exp of the raw scores: overflows when they are large."""
    Z = X @ W
    half = W.shape[1]
    scores = torch.nn.functional.leaky_relu((Z @ a[:half])[:, None] + (Z @ a[half:])[None, :], 0.2)
    weights = torch.exp(scores) * ((A > 0) | torch.eye(len(A), dtype=torch.bool))
    alpha = weights / weights.sum(dim=1, keepdim=True)
    return alpha @ Z, alpha


def gat_with_the_default_slope(X, A, W, a):
    Z = X @ W
    half = W.shape[1]
    scores = torch.nn.functional.leaky_relu((Z @ a[:half])[:, None] + (Z @ a[half:])[None, :])   # slope 0.01
    allowed = (A > 0) | torch.eye(len(A), dtype=torch.bool)
    alpha = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=1)
    return alpha @ Z, alpha


def cheb_by_the_library(L_scaled, X, theta, grad_Y):
    grad_theta = graphs.chebyshev_conv_grad_theta(L_scaled, X, grad_Y, theta.shape[0])
    return cheb_conv_backward(L_scaled, X, theta, grad_Y)[0], grad_theta


def cheb_without_the_transpose(L_scaled, X, theta, grad_Y):
    """T_k(L) instead of T_k(L^T) for the input gradient: right only for symmetric L."""
    K = theta.shape[0]
    grad_theta = cheb_conv_backward(L_scaled, X, theta, grad_Y)[1]
    back = _recurrence(L_scaled, grad_Y, K)
    return sum(torch.einsum("snj,ij->sni", term, theta[k]) for k, term in enumerate(back)), grad_theta


def cheb_first_signal_only(L_scaled, X, theta, grad_Y):
    grad_X, _ = cheb_conv_backward(L_scaled, X, theta, grad_Y)
    terms = _recurrence(L_scaled, X, theta.shape[0])
    return grad_X, torch.stack([term[0].T @ grad_Y[0] for term in terms])


def cheb_without_the_two(L_scaled, X, theta, grad_Y):
    """The recurrence x_k = L x_(k-1) - x_(k-2), missing its factor 2."""
    def recurrence(L, V, K):
        terms = [V]
        if K > 1:
            terms.append(torch.einsum("mn,snf->smf", L, V))
        while len(terms) < K:
            terms.append(torch.einsum("mn,snf->smf", L, terms[-1]) - terms[-2])
        return terms

    K = theta.shape[0]
    grad_theta = torch.stack([torch.einsum("sni,snj->ij", x, grad_Y) for x in recurrence(L_scaled, X, K)])
    back = recurrence(L_scaled.T, grad_Y, K)
    return sum(torch.einsum("snj,ij->sni", term, theta[k]) for k, term in enumerate(back)), grad_theta


def wl_by_the_library(A1, A2):
    return not graphs.wl_distinguishes(A1, A2)


def wl_separate_palettes(A1, A2):
    """Each graph refined alone: colour numbers of the two graphs mean different things."""
    return all(sorted(a[0]) == sorted(b[0]) for a, b in zip(_joint_colours([A1]), _joint_colours([A2])))


def wl_degrees_only(A1, A2):
    return sorted(A1.sum(dim=1).tolist()) == sorted(A2.sum(dim=1).tolist())


def wl_three_rounds(A1, A2):
    for round_, colours in enumerate(_joint_colours([A1, A2])):
        if sorted(colours[0]) != sorted(colours[1]):
            return False
        if round_ == 2:
            return True
    return True


def wl_isomorphism(A1, A2):
    """Answers the isomorphism question instead: wrong on C6 and two triangles."""
    return nx.is_isomorphic(nx.from_numpy_array(A1.numpy()), nx.from_numpy_array(A2.numpy()))


WRONG = {
    "8.1": {"dlbook.sets.multiset_from_power_sums (blocked)": multiset_by_the_library,
            "roots not sorted": multiset_unsorted,
            "Newton's identities without the signs": multiset_without_alternating_signs,
            "polynomial with + signs (roots negated)": multiset_with_plus_signs},
    "8.2": {"Ā from dlbook.graphs.gcn_propagation (blocked)": rate_by_the_library,
            "second largest eigenvalue, not |eigenvalue|": rate_second_largest_eigenvalue,
            "D^-1/2 A D^-1/2 without self-loops": rate_without_self_loops,
            "distinct eigenvalues only": rate_distinct_eigenvalues, "the rate squared": rate_squared},
    "8.3": {"the GCN coupling from dlbook.graphs (blocked)": gat_with_the_gcn_coupling,
            "softmax over all nodes": gat_softmax_over_all_nodes, "no self-loops": gat_without_self_loops,
            "no maximum subtracted (overflow)": gat_without_the_maximum,
            "LeakyReLU slope 0.01": gat_with_the_default_slope},
    "8.4": {"dlbook.graphs.chebyshev_conv_grad_theta (blocked)": cheb_by_the_library,
            "T_k(L) instead of T_k(L^T)": cheb_without_the_transpose,
            "only the first signal of the batch": cheb_first_signal_only,
            "recurrence without the factor 2": cheb_without_the_two},
    "8.5": {"dlbook.graphs.wl_distinguishes (blocked)": wl_by_the_library,
            "separate palettes per graph": wl_separate_palettes, "degree sequences only": wl_degrees_only,
            "three rounds only": wl_three_rounds, "graph isomorphism instead": wl_isomorphism},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_measured_rates_agree_with_the_spectrum():
    # The check measures the rate by propagation; it must agree with |mu_2| from the eigenvalues.
    for label, make in geometric._SMOOTHING_GRAPHS:
        A = make()
        measured = geometric._measured_rate(A)
        assert abs(measured - smoothing_rate(torch.tensor(A))) < 0.003, label


def test_reference_attention_matches_torch():
    X, A, W, a = geometric._gat_case(n=25, p=0.2, F_in=3, F_out=2, seed=11)
    H, alpha = geometric._gat_reference(X, A, W, a)
    H_t, alpha_t = gat_layer(*(torch.tensor(v) for v in (X, A, W, a)))
    assert np.abs(alpha - alpha_t.numpy()).max() < 1e-12 and np.abs(H - H_t.numpy()).max() < 1e-12
    assert np.allclose(alpha.sum(axis=1), 1.0)


def test_check_refinement_agrees_with_the_library_and_with_isomorphism_on_trees():
    for label, G1, G2 in geometric._wl_pairs():
        A1, A2 = (torch.tensor(geometric._graph(G)) for G in (G1, G2))
        assert geometric._refine_together([A1.numpy(), A2.numpy()]) == (not graphs.wl_distinguishes(A1, A2)), label
    near, far = geometric._broom(300, 100), geometric._broom(300, 120)
    assert geometric._refine_together([geometric._graph(near), geometric._graph(far)]) is False


def test_wl_pairs_include_both_answers():
    answers = [geometric._refine_together([geometric._graph(G1), geometric._graph(G2)])
               for _, G1, G2 in geometric._wl_pairs()]
    assert any(answers) and not all(answers)


@pytest.mark.slow
def test_slow_attention_fails_on_time():
    def gat_by_a_loop(X, A, W, a):
        Z = X @ W
        half = W.shape[1]
        alpha = torch.zeros(len(A), len(A), dtype=Z.dtype)
        for i in range(len(A)):
            for j in range(len(A)):
                if i == j or A[i, j] > 0:
                    alpha[i, j] = torch.nn.functional.leaky_relu(Z[i] @ a[:half] + Z[j] @ a[half:], 0.2)
            row = alpha[i].clone()
            mask = (A[i] > 0) | (torch.arange(len(A)) == i)
            alpha[i] = torch.where(mask, torch.softmax(row.masked_fill(~mask, float("-inf")), 0), 0.0)
        return alpha @ Z, alpha

    result = run_check("8.3", gat_by_a_loop)
    assert not result.passed and ("took" in result.message or "case" in result.message), result.message
