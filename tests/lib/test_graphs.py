"""Tests of dlbook.graphs: Laplacian identities, filters against closed forms, GCN paths equal, WL, coarsening."""
import math

import networkx as nx
import numpy as np
import pytest
import scipy.linalg
import torch

from dlbook import equivariance, graphs


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _random_graph(n=30, p=0.15, seed=0):
    return graphs.adjacency(nx.gnp_random_graph(n, p, seed=seed))


def _weighted_graph(n=20, seed=0):
    W = torch.rand(n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    W = torch.triu(W * (W > 0.6), diagonal=1)
    return W + W.T


def test_adjacency_ignores_edge_weights_unless_asked():
    G = nx.karate_club_graph()
    A = graphs.adjacency(G)
    assert set(A.unique().tolist()) == {0.0, 1.0} and A.sum() == 2 * G.number_of_edges()
    assert graphs.adjacency(G, weight="weight").max() == 7


def test_karate_club():
    club = graphs.karate_club()
    assert club.A.shape == (34, 34) and club.clubs.bincount().tolist() == [17, 17]
    assert club.clubs[0] == 0 and club.clubs[33] == 1


def test_laplacian_quadratic_form_is_the_dirichlet_energy():
    W = _weighted_graph()
    x = _randn(20, seed=1)
    L = graphs.laplacian(W)
    i, j = torch.triu_indices(20, 20, offset=1)
    edges = (W[i, j] * (x[i] - x[j]) ** 2).sum()
    assert abs(x @ L @ x - edges) < 1e-12
    assert abs((W * (x[:, None] - x[None, :]) ** 2).sum() - 2 * x @ L @ x) < 1e-12
    assert torch.allclose(L.sum(dim=1), torch.zeros(20, dtype=torch.float64), atol=1e-14)


def test_zero_eigenvalues_count_components_and_normalized_spectrum_in_0_2():
    G = nx.disjoint_union_all([nx.path_graph(4), nx.cycle_graph(5), nx.complete_graph(3), nx.empty_graph(1)])
    A = graphs.adjacency(G)
    eigenvalues = torch.linalg.eigvalsh(graphs.laplacian(A))
    assert (eigenvalues.abs() < 1e-10).sum() == graphs.num_components(A) == 4
    normalized = torch.linalg.eigvalsh(graphs.normalized_laplacian(_random_graph()))
    assert normalized.min() > -1e-12 and normalized.max() < 2 + 1e-12
    bipartite = torch.linalg.eigvalsh(graphs.normalized_laplacian(graphs.adjacency(nx.cycle_graph(8))))
    assert abs(bipartite.max() - 2) < 1e-12


def test_cycle_and_path_spectra():
    for n in (5, 12):
        cycle = torch.linalg.eigvalsh(graphs.laplacian(graphs.adjacency(nx.cycle_graph(n)))).numpy()
        path = torch.linalg.eigvalsh(graphs.laplacian(graphs.adjacency(nx.path_graph(n)))).numpy()
        k = np.arange(n)
        assert np.abs(cycle - np.sort(2 - 2 * np.cos(2 * np.pi * k / n))).max() < 1e-14
        assert np.abs(path - np.sort(2 - 2 * np.cos(np.pi * k / n))).max() < 1e-14


def test_gcn_propagation_dense_sparse_and_spectrum():
    A = graphs.karate_club().A
    dense = graphs.gcn_propagation(A)
    sparse = graphs.gcn_propagation(A, sparse=True)
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), dense)
    eigenvalues, vectors = torch.linalg.eigh(dense)
    assert abs(eigenvalues[-1] - 1) < 1e-12 and eigenvalues[0] > -1
    d = A.sum(dim=1) + 1
    assert torch.allclose(vectors[:, -1].abs(), d.sqrt() / d.sqrt().norm(), atol=1e-12)
    H = _randn(34, 3)
    assert (graphs.propagate(sparse, H) - dense @ H).abs().max() < 1e-14


def test_hop_distances_match_networkx():
    G = nx.gnp_random_graph(15, 0.2, seed=3)
    D = graphs.hop_distances(graphs.adjacency(G))
    lengths = dict(nx.all_pairs_shortest_path_length(G))
    for i in range(15):
        for j in range(15):
            assert D[i, j] == lengths[i].get(j, math.inf)


def test_polynomial_filter_spectral_and_matrix_forms_agree_and_are_localized():
    A = _random_graph()
    L = graphs.laplacian(A)
    alphas = torch.tensor([0.5, -1.0, 0.3, 0.05], dtype=torch.float64)
    x = _randn(30, 2, seed=4)
    spectral = graphs.spectral_filter(L, lambda lam: sum(a * lam**k for k, a in enumerate(alphas)), x)
    assert (spectral - graphs.polynomial_filter(L, alphas, x)).abs().max() < 1e-11 * x.abs().max() * 100
    distances = graphs.hop_distances(A)
    for degree in (1, 2, 3):
        P = graphs.polynomial_matrix(L, torch.ones(degree + 1, dtype=torch.float64))
        assert torch.all(P[distances > degree] == 0)
        assert torch.all(P[distances == degree] != 0)


def test_chebyshev_recurrence_equals_chebval_in_the_eigenbasis():
    L = graphs.laplacian(_random_graph(seed=2))
    theta = _randn(6, seed=5)
    x = _randn(30, seed=6)
    eigenvalues, U = torch.linalg.eigh(L)
    lambda_max = eigenvalues[-1].item()
    gains = np.polynomial.chebyshev.chebval(2 * eigenvalues.numpy() / lambda_max - 1, theta.numpy())
    expected = U @ (torch.as_tensor(gains) * (U.T @ x))
    assert (graphs.chebyshev_filter(L, theta, x) - expected).abs().max() < 1e-12


def test_chebyshev_interpolation_of_the_heat_kernel():
    L = graphs.laplacian(graphs.adjacency(nx.grid_2d_graph(6, 6)))
    lambda_max = torch.linalg.eigvalsh(L)[-1].item()
    x = _randn(36, seed=7)
    exact = graphs.heat_kernel(L, 0.7) @ x
    assert (exact - torch.as_tensor(scipy.linalg.expm(-0.7 * L.numpy())) @ x).abs().max() < 1e-12
    errors = []
    for order in (2, 4, 8, 16):
        theta = graphs.chebyshev_coefficients(lambda lam: torch.exp(-0.7 * lam), order, lambda_max)
        errors.append((graphs.chebyshev_filter(L, theta, x, lambda_max) - exact).abs().max().item())
    assert errors[-1] < 1e-10 and all(a > b for a, b in zip(errors, errors[1:]))


def test_chebyshev_conv_gradient_by_hand_equals_autograd():
    L = graphs.normalized_laplacian(_random_graph(20, seed=8))
    L_scaled = graphs.rescaled_laplacian(L, 2.0)
    X = _randn(4, 20, 3, seed=9)
    theta = _randn(5, 3, 2, seed=10).requires_grad_()
    target = _randn(4, 20, 2, seed=11)
    Y = graphs.chebyshev_conv(L_scaled, X, theta)
    loss = ((Y - target) ** 2).sum()
    loss.backward()
    by_hand = graphs.chebyshev_conv_grad_theta(L_scaled, X, 2 * (Y - target).detach(), 5)
    assert (by_hand - theta.grad).abs().max() < 1e-10


def test_gcn_dense_and_sparse_paths_and_equivariance():
    club = graphs.karate_club()
    model = graphs.GCN((34, 16, 2), seed=0, dtype=torch.float64)
    X = torch.eye(34, dtype=torch.float64)
    dense = model(X, graphs.gcn_propagation(club.A))
    sparse = model(X, graphs.gcn_propagation(club.A, sparse=True))
    assert (dense - sparse).abs().max() < 1e-12
    perm = torch.randperm(34, generator=torch.Generator().manual_seed(0))
    Z = graphs.graph_tensor(_randn(34, 5, seed=1), club.A)
    model5 = graphs.GCN((5, 8, 3), seed=1, dtype=torch.float64)

    def f(Z):
        X, A = graphs.split_graph(Z)
        return model5(X, graphs.gcn_propagation(A))

    error = equivariance.equivariance_error(f, lambda Z: graphs.permute_graph(Z, perm), lambda Y: Y[perm], Z)
    assert error < 1e-14


def test_receptive_field_is_the_k_hop_ball():
    A = _random_graph(25, 0.12, seed=4)
    distances = graphs.hop_distances(A)
    for depth in (1, 2, 3):
        model = graphs.GCN((3,) + (6,) * (depth - 1) + (2,), seed=depth, dtype=torch.float64)
        X = 1 + _randn(25, 3, seed=depth).abs()       # positive inputs keep every ReLU of this model alive
        field = graphs.receptive_field(model, X, A)
        assert torch.equal(field, distances <= depth)


def test_message_passing_layers_against_dense_formulas():
    A = _random_graph(18, 0.25, seed=5)
    A[3] = 0
    A[:, 3] = 0                                              # an isolated node receives no messages
    edges = graphs.edge_index(A)
    H = _randn(18, 4, seed=6)
    gcn = graphs.MessagePassingLayer("gcn", 4, 3, seed=1, dtype=torch.float64)
    linear = gcn.net[0]
    expected = graphs.gcn_propagation(A) @ (H @ linear.weight.T) + linear.bias
    assert (gcn(H, edges) - expected).abs().max() < 1e-12
    sage = graphs.MessagePassingLayer("sage", 4, 3, seed=2, dtype=torch.float64)
    degree = A.sum(dim=1, keepdim=True).clamp(min=1)
    assert (sage(H, edges) - sage.net(torch.cat([H, A @ H / degree], dim=1))).abs().max() < 1e-12
    gin = graphs.MessagePassingLayer("gin", 4, 3, eps=0.25, seed=3, dtype=torch.float64)
    assert (gin(H, edges) - gin.net(1.25 * H + A @ H)).abs().max() < 1e-12


def test_aggregate_max_against_a_loop():
    A = _random_graph(12, 0.3, seed=7)
    senders, receivers = graphs.edge_index(A)
    messages = _randn(len(senders), 2, seed=8)
    out = graphs.aggregate(messages, receivers, 12, "max")
    for node in range(12):
        arriving = messages[receivers == node]
        expected = arriving.max(dim=0).values if len(arriving) else torch.zeros(2, dtype=torch.float64)
        assert torch.equal(out[node], expected)


def test_colour_refinement_cannot_tell_c6_from_two_triangles():
    C6 = graphs.adjacency(nx.cycle_graph(6))
    triangles = graphs.adjacency(nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3)))
    assert not graphs.wl_distinguishes(C6, triangles)
    refinement = graphs.colour_refinement([C6, triangles], rounds=3)
    assert refinement.rounds == 3 and all(h[0] == h[1] for h in refinement.histograms)
    assert graphs.wl_distinguishes(graphs.adjacency(nx.path_graph(4)), graphs.adjacency(nx.star_graph(3)))


@pytest.mark.filterwarnings("ignore:The hashes produced")
def test_colour_refinement_agrees_with_networkx_hashes_on_trees():
    # On trees 1-WL decides isomorphism, so the refinement and networkx's hash must agree.
    for seed in range(6):
        T1, T2 = nx.random_labeled_tree(9, seed=seed), nx.random_labeled_tree(9, seed=seed + 50)
        hashes = [nx.weisfeiler_lehman_graph_hash(T, iterations=9) for T in (T1, T2)]
        same_hash = hashes[0] == hashes[1]
        assert graphs.wl_distinguishes(graphs.adjacency(T1), graphs.adjacency(T2)) == (not same_hash)
        assert same_hash == nx.is_isomorphic(T1, T2)


def test_heavy_edge_matching_is_a_matching_along_edges():
    for G in (nx.grid_2d_graph(7, 5), nx.karate_club_graph(), nx.star_graph(9)):
        A = graphs.adjacency(G)
        clusters = graphs.heavy_edge_matching(A, seed=1)
        sizes = clusters.bincount()
        assert sizes.max() <= 2 and sizes.min() >= 1
        for c in torch.nonzero(sizes == 2).flatten():
            i, j = torch.nonzero(clusters == c).flatten()
            assert A[i, j] > 0
        coarse = graphs.coarsen(A, clusters)
        inside = sum(A[i, j].item() for i in range(len(A)) for j in range(len(A)) if clusters[i] == clusters[j])
        assert abs(coarse.sum().item() - (A.sum().item() - inside)) < 1e-12
        assert len(coarse) >= math.ceil(len(A) / 2) and graphs.num_components(coarse) == 1


def test_pooled_gcn_on_a_batch_of_graphs():
    graph_set = graphs.graph_family_set(6, seed=0)
    batch = graphs.batch_graphs(graph_set.adjacencies, 2, seed=0, dtype=torch.float64)
    assert len(batch.propagations) == 3 and len(batch.clusters) == 2 and batch.num_graphs == 6
    model = graphs.PooledGCN((1, 8, 8, 8, 3), seed=0, dtype=torch.float64)
    X = torch.ones(sum(len(A) for A in graph_set.adjacencies), 1, dtype=torch.float64)
    out = model(X, batch)
    assert out.shape == (6, 3)
    # Each graph alone gives the same output as in the batch.
    for g, A in enumerate(graph_set.adjacencies):
        single = graphs.batch_graphs([A], 2, seed=97 * g, dtype=torch.float64)
        alone = model(torch.ones(len(A), 1, dtype=torch.float64), single)
        assert (alone[0] - out[g]).abs().max() < 1e-12


def test_stochastic_block_model_densities():
    model = graphs.stochastic_block_model((60, 60), 0.3, 0.05, seed=1)
    same = model.y[:, None] == model.y[None, :]
    off_diagonal = ~torch.eye(120, dtype=torch.bool)
    assert abs(model.A[same & off_diagonal].mean() - 0.3) < 0.03
    assert abs(model.A[~same].mean() - 0.05) < 0.01
    assert torch.equal(model.A, model.A.T) and model.A.diagonal().sum() == 0


def test_train_node_classifier_on_karate():
    club = graphs.karate_club(dtype=torch.float32)
    run = graphs.train_node_classifier(club.A, torch.eye(34), club.clubs, torch.tensor([0, 33]),
                                       widths=(34, 16, 2), epochs=100, snapshot_epochs=(0, 100), seed=0)
    assert run.accuracies[-1] >= 0.9 and run.snapshots[0].shape == (34, 16) and len(run.losses) == 100


def test_bad_arguments():
    with pytest.raises(TypeError, match="G must be a networkx graph"):
        graphs.adjacency(np.eye(3))
    with pytest.raises(ValueError, match="A must be symmetric"):
        graphs.laplacian(torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="zero diagonal"):
        graphs.gcn_propagation(torch.eye(3))
    with pytest.raises(ValueError, match="non-negative"):
        graphs.laplacian(torch.tensor([[0.0, -1.0], [-1.0, 0.0]]))
    with pytest.raises(ValueError, match="perm must be a permutation"):
        graphs.permute_graph(torch.zeros(3, 4), torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match="x must be a signal"):
        graphs.polynomial_filter(torch.eye(3, dtype=torch.float64), [1.0], torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="aggregation must be one of"):
        graphs.aggregate(torch.zeros(2, 1), torch.tensor([0, 1]), 2, "median")
    with pytest.raises(ValueError, match="kind must be one of"):
        graphs.MessagePassingLayer("gat", 2, 2)
    with pytest.raises(TypeError, match="adjacencies must be a non-empty list"):
        graphs.colour_refinement(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="families\\[i\\] must be one of"):
        graphs.graph_family_set(3, ("cycle", "tree"))
    with pytest.raises(TypeError, match="model must be a graphs.GCN"):
        graphs.receptive_field(torch.nn.Linear(2, 2), torch.zeros(3, 2), torch.zeros(3, 3))
