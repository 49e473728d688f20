"""Checks for the exercises of chapter 8 (08_geometric): power sums, the rate of over-smoothing,
graph attention, the ChebNet layer's gradients and the Weisfeiler-Leman test.

Every expected value comes from independent code here: the multisets the check drew itself,
a simulation of repeated propagation measured by singular values, a NumPy attention layer,
torch.autograd through a Chebyshev recurrence written in this file, and a colour refinement
written here (cross-checked on trees against networkx's isomorphism test). Nothing calls
dlbook.sets or dlbook.graphs, so a bug there cannot make a wrong answer pass. The student's
functions receive and return plain values only (tensors, numbers, tuples).
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import torch

from ..core import Mismatch, as_array, as_bool, as_float, describe, exercise, expect, seconds_taken

# ---------------------------------------------------------------------------
# Exercise 8.1: a multiset from its power sums
# ---------------------------------------------------------------------------


def _power_sums(values) -> torch.Tensor:
    x = np.asarray(values, dtype=np.float64)
    return torch.tensor([(x**k).sum() for k in range(1, len(x) + 1)], dtype=torch.float64)


_MULTISETS = [
    ("one element", [0.7], 1e-12),
    ("three distinct elements", [0.2, -1.5, 0.9], 1e-9),
    ("a repeated element, 1, 1 and -2", [1.0, 1.0, -2.0], 1e-6),
    ("zeros among the elements", [0.0, 0.0, 3.0, -1.0], 1e-6),
    ("five elements out of order, negatives included", [0.5, -0.3, 0.8, -0.9, 0.1], 1e-8),
    ("six integers from -3 to 2", [2.0, -3.0, 1.0, -1.0, 0.0, -2.0], 1e-8),
    ("six random numbers in [-1, 1]", list(np.random.default_rng(8).uniform(-1, 1, 6)), 1e-6),
]


@exercise("8.1", title="A multiset from its power sums", function="multiset_from_power_sums",
          kind="transcribe", difficulty=1, minutes=20, blocked=("dlbook.sets.multiset_from_power_sums",),
          hint="Newton's identities give e_1, ..., e_M one after the other from p_1, ..., p_M; the "
               "elements are the roots of t^M - e_1 t^(M-1) + e_2 t^(M-2) - ...; numpy.roots finds them, "
               "and a real multiset has real roots, so keep the real parts and sort them.")
def check_multiset_from_power_sums(multiset_from_power_sums, cases):
    """p is a float64 tensor (M,) of power sums of M reals, M <= 6; the answer is the sorted multiset."""
    for label, values, tolerance in _MULTISETS:
        expected = np.sort(np.asarray(values, dtype=np.float64))
        with cases.case(f"multiset_from_power_sums(p) for {label}"):
            got = as_array(multiset_from_power_sums(_power_sums(values)), (len(values),),
                           f"the {len(values)} elements as a vector")
            error = np.abs(got - expected).max()
            expect(error <= tolerance, f"the sorted elements {np.array2string(expected, precision=6)} "
                   f"(to {tolerance:g})", f"{np.array2string(got, precision=6)}")


# ---------------------------------------------------------------------------
# Exercise 8.2: predict the rate of over-smoothing
# ---------------------------------------------------------------------------


def _propagation_matrix(A: np.ndarray) -> np.ndarray:
    """D~^(-1/2) (A + I) D~^(-1/2), the GCN's coupling, in NumPy."""
    A_tilde = A + np.eye(len(A))
    scale = 1 / np.sqrt(A_tilde.sum(axis=1))
    return scale[:, None] * A_tilde * scale[None, :]


def _measured_rate(A: np.ndarray, seed: int = 0) -> float:
    """The per-step decay of s2/s1 of A_bar^k X for a random X, measured by running the propagation.

    The iterate is rescaled every step (s2/s1 does not care), and the rate is the slope of
    log(s2/s1) over the steps where the ratio is between 1e-9 and 1e-2, or over the first steps
    when it drops below 1e-9 at once, or over the last 400 steps when it never falls below 1e-2.
    """
    A_bar = _propagation_matrix(A)
    Y = np.random.default_rng(seed).normal(size=(len(A), 4))
    ratios = []
    for _ in range(1200):
        s = np.linalg.svd(Y, compute_uv=False)
        ratios.append(s[1] / s[0])
        if ratios[-1] < 1e-9:
            break
        Y = A_bar @ Y
        Y /= np.abs(Y).max()
    logs = np.log(np.maximum(ratios, 1e-300))
    steps = np.arange(len(ratios))
    window = (np.array(ratios) < 1e-2) & (np.array(ratios) > 1e-9)
    if ratios[-1] < 1e-9 and window.sum() < 5:
        return float(np.exp((logs[-1] - logs[0]) / max(len(ratios) - 1, 1)))
    if window.sum() < 5:
        window = steps >= len(ratios) - 400
    slope = np.polyfit(steps[window], logs[window], 1)[0]
    return float(np.exp(slope))


def _cycle_union(*sizes) -> np.ndarray:
    return nx.to_numpy_array(nx.disjoint_union_all([nx.cycle_graph(n) for n in sizes]), weight=None)


def _graph(G) -> np.ndarray:
    return nx.to_numpy_array(G, weight=None)


_SMOOTHING_GRAPHS = [
    ("the karate club", lambda: _graph(nx.karate_club_graph())),
    ("a path on 10 nodes", lambda: _graph(nx.path_graph(10))),
    ("the complete bipartite graph K_{5,5} (its most negative eigenvalue dominates)",
     lambda: _graph(nx.complete_bipartite_graph(5, 5))),
    ("a star with 8 leaves", lambda: _graph(nx.star_graph(8))),
    ("the complete graph K_6", lambda: _graph(nx.complete_graph(6))),
    ("two disjoint cycles, C_5 and C_7", lambda: _cycle_union(5, 7)),
    ("a random graph on 40 nodes", lambda: _graph(nx.gnp_random_graph(40, 0.15, seed=2))),
    ("the Petersen graph", lambda: _graph(nx.petersen_graph())),
]


@exercise("8.2", title="How fast does a GCN smooth?", function="smoothing_rate",
          kind="predict", difficulty=2, minutes=25, blocked=("dlbook.graphs.gcn_propagation",),
          hint="expand A_bar^k X in the eigenvectors of the symmetric A_bar: each component shrinks by "
               "its eigenvalue's absolute value per step, and s2/s1 compares the second strongest "
               "surviving component with the strongest. Count eigenvalues with their multiplicity.")
def check_smoothing_rate(smoothing_rate, cases):
    """A is a 0/1 symmetric float64 tensor (n, n); the answer is the predicted decay factor per step."""
    for label, make in _SMOOTHING_GRAPHS:
        A = make()
        measured = _measured_rate(A)
        with cases.case(f"smoothing_rate(A) for {label}"):
            got = as_float(smoothing_rate(torch.tensor(A)), "a decay factor (a number)")
            expect(abs(got - measured) <= 0.01, f"{measured:.4f} (measured by propagating a random X; "
                   f"within 0.01)", f"{got:.4f}")


# ---------------------------------------------------------------------------
# Exercise 8.3: a graph attention layer
# ---------------------------------------------------------------------------


def _gat_reference(X, A, W, a, slope=0.2):
    """NumPy graph attention: softmax over N(i) and i of LeakyReLU(a^T [z_i, z_j]), z = X W."""
    Z = X @ W
    half = W.shape[1]
    scores = (Z @ a[:half])[:, None] + (Z @ a[half:])[None, :]
    scores = np.where(scores > 0, scores, slope * scores)
    allowed = (A > 0) | np.eye(len(A), dtype=bool)
    scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    alpha = weights / weights.sum(axis=1, keepdims=True)
    return alpha @ Z, alpha


def _gat_case(n, p, F_in, F_out, seed, scale=1.0, isolated=()):
    rng = np.random.default_rng(seed)
    A = _graph(nx.fast_gnp_random_graph(n, p, seed=seed))
    for node in isolated:
        A[node] = 0
        A[:, node] = 0
    X = rng.normal(size=(n, F_in))
    W = scale * rng.normal(size=(F_in, F_out)) / math.sqrt(F_in)
    a = rng.normal(size=2 * F_out)
    return X, A, W, a


def _gat_answer(answer, n, F_out):
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mismatch("a pair (H, alpha)", describe(answer))
    return (as_array(answer[0], (n, F_out), f"H of shape ({n}, {F_out})"),
            as_array(answer[1], (n, n), f"alpha of shape ({n}, {n})"))


def _expect_gat(got, expected, what="", tolerance=1e-9):
    (H, alpha), (H_ref, alpha_ref) = got, expected
    off_graph = (alpha_ref == 0) & (alpha != 0)
    expect(not off_graph.any(), "alpha = 0 between nodes that are not linked",
           f"{int(off_graph.sum())} nonzero weights between unlinked nodes{what}")
    gap = np.abs(alpha - alpha_ref).max()
    expect(gap <= tolerance, f"the attention weights to {tolerance:g}", f"weights off by up to {gap:.3g}{what}")
    gap = np.abs(H - H_ref).max() / max(np.abs(H_ref).max(), 1e-300)
    expect(gap <= tolerance, f"the outputs H to {tolerance:g} (relative)", f"outputs off by up to {gap:.3g}{what}")


@exercise("8.3", title="A graph attention layer", function="gat_layer",
          kind="extend", difficulty=3, minutes=40, blocked=("dlbook.graphs.gcn_propagation",),
          hint="score every pair with a^T [z_i, z_j] = a_1^T z_i + a_2^T z_j (an outer sum, no loop), apply "
               "the LeakyReLU, set the scores of unlinked pairs to -inf while keeping i itself, subtract "
               "each row's maximum, and normalise the exponentials row by row.")
def check_gat_layer(gat_layer, cases):
    """X (n, F_in), A (n, n) 0/1, W (F_in, F_out), a (2 F_out,) float64 tensors; answer (H, alpha)."""
    settings = [
        ("a random graph of 12 nodes", dict(n=12, p=0.3, F_in=3, F_out=4, seed=0)),
        ("a graph with an isolated node, which attends only to itself",
         dict(n=10, p=0.4, F_in=2, F_out=3, seed=1, isolated=(4,))),
        ("large scores, up to several hundred (exp would overflow without care)",
         dict(n=15, p=0.3, F_in=4, F_out=4, seed=2, scale=200.0)),
        ("a sparse graph of 60 nodes", dict(n=60, p=0.05, F_in=5, F_out=2, seed=3)),
    ]
    for label, setting in settings:
        X, A, W, a = _gat_case(**setting)
        expected = _gat_reference(X, A, W, a)
        with cases.case(f"gat_layer(X, A, W, a) on {label}"):
            answer = gat_layer(*(torch.tensor(v) for v in (X, A, W, a)))
            _expect_gat(_gat_answer(answer, len(A), W.shape[1]), expected)

    X, A, W, a = _gat_case(n=20, p=0.25, F_in=3, F_out=3, seed=4)
    perm = np.random.default_rng(5).permutation(20)
    with cases.case("gat_layer on the same graph with its nodes renumbered (equivariance)"):
        H, alpha = _gat_answer(gat_layer(*(torch.tensor(v) for v in (X[perm], A[perm][:, perm], W, a))), 20, 3)
        H_ref, alpha_ref = _gat_reference(X, A, W, a)
        _expect_gat((H, alpha), (H_ref[perm], alpha_ref[perm][:, perm]), " after renumbering")

    X, A, W, a = _gat_case(n=1000, p=0.01, F_in=16, F_out=8, seed=6)
    expected = _gat_reference(X, A, W, a)
    reference_seconds = seconds_taken(_gat_reference, X, A, W, a)
    with cases.case("gat_layer on 1000 nodes", time_limit=0.5 + 20 * reference_seconds,
                    why=f"the task asks for tensor operations, not a loop over nodes or edges (the NumPy "
                        f"reference took {reference_seconds:.3f} s here; the limit is 0.5 s plus 20 times that)"):
        answer = gat_layer(*(torch.tensor(v) for v in (X, A, W, a)))
    with cases.case("the result of that 1000-node case"):
        _expect_gat(_gat_answer(answer, 1000, 8), expected)


# ---------------------------------------------------------------------------
# Exercise 8.4: the gradients of a ChebNet layer
# ---------------------------------------------------------------------------


def _cheb_forward(L_scaled, X, theta):
    """y_{s,j} = sum_i sum_k theta_{k,i,j} T_k(L) x_{s,i}, with the recurrence written here."""
    terms = [X]
    if theta.shape[0] > 1:
        terms.append(torch.einsum("mn,snf->smf", L_scaled, X))
    while len(terms) < theta.shape[0]:
        terms.append(2 * torch.einsum("mn,snf->smf", L_scaled, terms[-1]) - terms[-2])
    return torch.einsum("ksni,kij->snj", torch.stack(terms), theta)


def _cheb_case(n, S, K, F_in, F_out, seed, operator="normalized"):
    rng = np.random.default_rng(seed)
    A = _graph(nx.gnp_random_graph(n, 0.3, seed=seed))
    A[0, 1] = A[1, 0] = 1.0                                     # no isolated pair at the start
    degrees = A.sum(axis=1)
    safe = np.where(degrees > 0, degrees, 1.0)
    if operator == "normalized":
        scale = np.where(degrees > 0, 1 / np.sqrt(safe), 0.0)
        L = np.eye(n) - scale[:, None] * A * scale[None, :]
    else:                                                       # random walk: I - D^-1 A, not symmetric
        L = np.eye(n) - A / safe[:, None]
    L_scaled = L - np.eye(n)                                    # 2 L / lambda_max - I with lambda_max = 2
    X = rng.normal(size=(S, n, F_in))
    theta = rng.normal(size=(K, F_in, F_out))
    grad_Y = rng.normal(size=(S, n, F_out))
    return L_scaled, X, theta, grad_Y


def _cheb_expected(L_scaled, X, theta, grad_Y):
    L_t, X_t, theta_t = (torch.tensor(v) for v in (L_scaled, X, theta))
    X_t.requires_grad_()
    theta_t.requires_grad_()
    _cheb_forward(L_t, X_t, theta_t).backward(torch.tensor(grad_Y))
    return X_t.grad.numpy(), theta_t.grad.numpy()


@exercise("8.4", title="The gradients of a ChebNet layer", function="cheb_conv_backward",
          kind="derive", difficulty=2, minutes=35,
          blocked=("dlbook.graphs.chebyshev_basis", "dlbook.graphs.chebyshev_conv",
                   "dlbook.graphs.chebyshev_conv_grad_theta", "dlbook.graphs.chebyshev_filter"),
          hint="y is linear in theta with the recurrence terms T_k(L) x as coefficients, and linear in x "
               "through the matrices T_k(L): the gradient for x applies their transposes, T_k(L^T), to "
               "the incoming gradient, which the same recurrence computes.")
def check_cheb_conv_backward(cheb_conv_backward, cases):
    """L_scaled (n, n), X (S, n, F_in), theta (K, F_in, F_out), grad_Y (S, n, F_out); answer (grad_X, grad_theta)."""
    settings = [
        ("K = 1, where the layer is only a channel mixing", dict(n=8, S=2, K=1, F_in=3, F_out=2, seed=0)),
        ("K = 2, one signal", dict(n=10, S=1, K=2, F_in=2, F_out=3, seed=1)),
        ("K = 5, a batch of 3 signals", dict(n=12, S=3, K=5, F_in=3, F_out=2, seed=2)),
        ("K = 4 with the random-walk Laplacian I - D^-1 A, which is not symmetric",
         dict(n=12, S=2, K=4, F_in=2, F_out=2, seed=3, operator="random walk")),
        ("K = 7, one input and one output channel", dict(n=15, S=2, K=7, F_in=1, F_out=1, seed=4)),
    ]
    for label, setting in settings:
        L_scaled, X, theta, grad_Y = _cheb_case(**setting)
        expected_X, expected_theta = _cheb_expected(L_scaled, X, theta, grad_Y)
        with cases.case(f"cheb_conv_backward with {label}"):
            answer = cheb_conv_backward(*(torch.tensor(v) for v in (L_scaled, X, theta, grad_Y)))
            if not isinstance(answer, (tuple, list)) or len(answer) != 2:
                raise Mismatch("a pair (grad_X, grad_theta)", describe(answer))
            got_X = as_array(answer[0], X.shape, f"grad_X of X's shape {X.shape}")
            got_theta = as_array(answer[1], theta.shape, f"grad_theta of theta's shape {theta.shape}")
            for name, got, expected in (("grad_theta", got_theta, expected_theta), ("grad_X", got_X, expected_X)):
                gap = np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-300)
                expect(gap <= 1e-10, f"{name} equal to torch.autograd's to 1e-10 (relative)",
                       f"{name} off by up to {gap:.3g} of its size")


# ---------------------------------------------------------------------------
# Exercise 8.5: the Weisfeiler-Leman test
# ---------------------------------------------------------------------------


def _refine_together(graphs) -> bool:
    """True when 1-WL finds no difference: joint refinement with one palette until stable."""
    neighbours = [[list(np.flatnonzero(row)) for row in G] for G in graphs]
    colours = [[0] * len(nb) for nb in neighbours]
    classes = 1
    while True:
        signatures = [[(colours[g][v], tuple(sorted(colours[g][u] for u in nb[v]))) for v in range(len(nb))]
                      for g, nb in enumerate(neighbours)]
        palette = {sig: i for i, sig in enumerate(sorted({s for sigs in signatures for s in sigs}))}
        colours = [[palette[s] for s in sigs] for sigs in signatures]
        histograms = [sorted(c) for c in colours]
        if histograms[0] != histograms[1]:
            return False
        if len(palette) == classes:
            return True
        classes = len(palette)


def _shrikhande() -> nx.Graph:
    """The Shrikhande graph: Z4 x Z4 with steps ±(1, 0), ±(0, 1), ±(1, 1)."""
    G = nx.Graph()
    for x in range(4):
        for y in range(4):
            for dx, dy in ((1, 0), (0, 1), (1, 1)):
                G.add_edge((x, y), ((x + dx) % 4, (y + dy) % 4))
    return G


def _spider_and_caterpillar():
    """Two trees with the same degree sequence: one hub of degree 3 and three long legs, or a
    caterpillar whose degree-3 node sits elsewhere."""
    spider = nx.Graph([(0, 1), (1, 2), (2, 3), (0, 4), (4, 5), (0, 6), (6, 7), (7, 8)])
    caterpillar = nx.Graph([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (2, 8)])
    return spider, caterpillar


def _broom(length: int, attach: int) -> nx.Graph:
    """A path of ``length`` nodes with one more leaf hanging from node ``attach``."""
    G = nx.path_graph(length)
    G.add_edge(attach, length)
    return G


def _wl_pairs():
    spider, caterpillar = _spider_and_caterpillar()
    rook = nx.cartesian_product(nx.complete_graph(4), nx.complete_graph(4))
    return [
        ("C6 and two triangles", nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))),
        ("a path and a star on four nodes", nx.path_graph(4), nx.star_graph(3)),
        ("the triangular prism and K_{3,3}, both 3-regular on six nodes",
         nx.circular_ladder_graph(3), nx.complete_bipartite_graph(3, 3)),
        ("a 6-cycle and a 7-cycle", nx.cycle_graph(6), nx.cycle_graph(7)),
        ("an 8-cycle and the cube, regular graphs on 8 nodes of degrees 2 and 3",
         nx.cycle_graph(8), nx.hypercube_graph(3)),
        ("two trees with the same degree sequence", spider, caterpillar),
        ("the 4 x 4 rook's graph and the Shrikhande graph", rook, _shrikhande()),
        ("a graph and a renumbering of itself", nx.gnp_random_graph(15, 0.3, seed=3),
         nx.relabel_nodes(nx.gnp_random_graph(15, 0.3, seed=3),
                          dict(enumerate(np.random.default_rng(1).permutation(15).tolist())))),
        ("two random graphs with 15 nodes and the same number of edges",
         nx.gnm_random_graph(15, 30, seed=4), nx.gnm_random_graph(15, 30, seed=5)),
    ]


@exercise("8.5", title="The Weisfeiler-Leman test", function="wl_equivalent",
          kind="derive", difficulty=2, minutes=30,
          blocked=("dlbook.graphs.colour_refinement", "dlbook.graphs.wl_distinguishes"),
          hint="refine both graphs together, so that a colour means the same thing in both: name each "
               "node's new colour by (its colour, the sorted colours of its neighbours) through one "
               "dictionary shared by the two graphs; compare the histograms after every round and stop "
               "when a round creates no new colour class.")
def check_wl_equivalent(wl_equivalent, cases):
    """A1, A2: 0/1 symmetric float64 tensors; answer True when 1-WL cannot tell the graphs apart."""
    for label, G1, G2 in _wl_pairs():
        A1, A2 = _graph(G1), _graph(G2)
        expected = _refine_together([A1, A2])
        with cases.case(f"wl_equivalent(A1, A2) for {label}"):
            got = as_bool(wl_equivalent(torch.tensor(A1), torch.tensor(A2)), "True or False")
            expect(got == expected, f"{expected} ({'1-WL cannot tell them apart' if expected else 'they differ'})",
                   repr(got))
    rng = np.random.default_rng(9)
    for trial in range(4):
        T1 = nx.random_labeled_tree(12, seed=int(rng.integers(1 << 30)))
        T2 = nx.random_labeled_tree(12, seed=int(rng.integers(1 << 30))) if trial % 2 else nx.relabel_nodes(
            T1, dict(enumerate(rng.permutation(12).tolist())))
        expected = nx.is_isomorphic(T1, T2)          # on trees 1-WL decides isomorphism
        with cases.case(f"wl_equivalent on two trees with 12 nodes (trial {trial + 1}; "
                        f"{'isomorphic' if expected else 'not isomorphic'})"):
            got = as_bool(wl_equivalent(torch.tensor(_graph(T1)), torch.tensor(_graph(T2))), "True or False")
            expect(got == expected, repr(expected), repr(got))
    near, far = _broom(300, 100), _broom(300, 120)
    with cases.case("wl_equivalent for two paths of 300 nodes with an extra leaf at node 100 or at node 120 "
                    "(the difference shows only after about 100 rounds)",
                    time_limit=10.0, why="the refinement should take a few seconds at most here"):
        got = as_bool(wl_equivalent(torch.tensor(_graph(near)), torch.tensor(_graph(far))), "True or False")
        expect(got is False, "False", repr(got))
