"""Graphs: Laplacians, spectral and polynomial filters, message passing, GCNs, Weisfeiler-Lehman (Chapter 8).

A graph on n nodes is a symmetric adjacency tensor ``A`` (n, n) with a zero
diagonal, and node features are the rows of ``X`` (n, F). Graphs come from
networkx (:func:`adjacency` reads any networkx graph, ignoring edge weights
unless asked), so a permutation of the nodes acts as (X, A) -> (PX, PAPᵀ),
written ``X[perm]`` and ``A[perm][:, perm]``.

Functions whose purpose is a comparison with a closed form (spectra, filter
identities, Chebyshev recurrences) default to float64; the trained networks
(:class:`GCN`, :class:`PooledGCN`) default to float32 like every trained
model of the book. Combinatorial algorithms on small graphs (colour
refinement, heavy-edge matching) are plain Python over the nodes.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, NamedTuple

import networkx as nx
import numpy as np
import scipy.sparse.csgraph as csgraph
import torch
from torch import nn

from . import nets
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    check_square,
    describe,
)

#: How messages from the neighbours are combined (all invariant to their order).
AGGREGATIONS = ("sum", "mean", "max")
#: The message-passing layers of Section 8.5, as instances of one general form.
LAYER_KINDS = ("gcn", "sage", "gin")


# ---------------------------------------------------------------------------
# Graphs as tensors
# ---------------------------------------------------------------------------

def adjacency(G, *, weight: str | None = None, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """The adjacency matrix of a networkx graph, nodes in ``G.nodes`` order (Chapter 8).

    ``weight=None`` gives a 0/1 matrix: the karate-club graph carries integer
    edge weights up to 7, which ``nx.to_numpy_array`` would use by default.
    """
    if not isinstance(G, nx.Graph):
        raise TypeError(f"G must be a networkx graph, got {describe(G)}")
    if G.is_directed():
        raise ValueError("G must be undirected")
    if weight is not None and not isinstance(weight, str):
        raise TypeError(f"weight must be None or an edge-attribute name, got {describe(weight)}")
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    A = nx.to_numpy_array(G, weight=weight, dtype=np.float64)
    np.fill_diagonal(A, 0.0)
    return torch.as_tensor(A, dtype=dtype).to(device)


def check_adjacency(name: str, A) -> torch.Tensor:
    """A symmetric, non-negative floating matrix with a zero diagonal (ValueError otherwise)."""
    A = check_square(name, A, symmetric=True)
    if (A < 0).any():
        raise ValueError(f"{name} must have non-negative entries (edge weights)")
    if A.diagonal().any():
        raise ValueError(f"{name} must have a zero diagonal (no self-loops); the GCN adds them itself")
    return A


class KarateClub(NamedTuple):
    """Zachary's karate club: the networkx graph, its 0/1 adjacency and each member's club."""

    graph: nx.Graph
    A: torch.Tensor         # (34, 34) 0/1
    clubs: torch.Tensor     # (34,) 0 = Mr. Hi, 1 = Officer


def karate_club(*, dtype: torch.dtype = torch.float64, device="cpu") -> KarateClub:
    """Zachary's karate club as bundled with networkx, with the clubs members joined after the split (Chapter 8)."""
    G = nx.karate_club_graph()
    clubs = torch.tensor([G.nodes[v]["club"] == "Officer" for v in G.nodes], dtype=torch.long)
    return KarateClub(G, adjacency(G, dtype=dtype, device=device), clubs.to(device))


def degrees(A) -> torch.Tensor:
    """Weighted degrees d = A 1, the row sums (Chapter 8)."""
    return check_adjacency("A", A).sum(dim=1)


def laplacian(A) -> torch.Tensor:
    """The combinatorial Laplacian L = D - A with D = diag(A 1) (Chapter 8)."""
    A = check_adjacency("A", A)
    return torch.diag(A.sum(dim=1)) - A


def normalized_laplacian(A) -> torch.Tensor:
    """The symmetric normalised Laplacian I - D^{-1/2} A D^{-1/2}; isolated nodes get a zero row (Chapter 8)."""
    A = check_adjacency("A", A)
    d = A.sum(dim=1)
    scale = torch.where(d > 0, d.clamp(min=torch.finfo(A.dtype).tiny).rsqrt(), torch.zeros_like(d))
    identity = torch.diag((d > 0).to(A.dtype))
    return identity - scale[:, None] * A * scale[None, :]


def gcn_propagation(A, *, sparse: bool = False) -> torch.Tensor:
    """Ā = D^{-1/2}(A + I)D^{-1/2} with d_m = 1 + Σ_n A_mn, the GCN's fixed coupling (Kipf and Welling; Chapter 8).

    ``sparse=True`` returns it as a torch sparse COO tensor with the same values.
    """
    A = check_adjacency("A", A)
    sparse = check_bool("sparse", sparse)
    A_tilde = A + torch.eye(len(A), dtype=A.dtype, device=A.device)
    scale = A_tilde.sum(dim=1).rsqrt()
    A_hat = scale[:, None] * A_tilde * scale[None, :]
    return A_hat.to_sparse().coalesce() if sparse else A_hat


def propagate(A_hat: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
    """Ā H for a dense or a sparse Ā (Chapter 8)."""
    return torch.sparse.mm(A_hat, H) if A_hat.is_sparse else A_hat @ H


def hop_distances(A) -> torch.Tensor:
    """Shortest-path lengths in hops between all pairs (float64, inf between components) (Chapter 8)."""
    A = check_adjacency("A", A)
    distances = csgraph.shortest_path(A.detach().cpu().numpy() > 0, unweighted=True, directed=False)
    return torch.as_tensor(distances, dtype=torch.float64)


def num_components(A) -> int:
    """The number of connected components, counted by scipy's graph search (Chapter 8)."""
    A = check_adjacency("A", A)
    count, _ = csgraph.connected_components(A.detach().cpu().numpy() > 0, directed=False)
    return int(count)


# ---------------------------------------------------------------------------
# Permutations of a graph, for the equivariance inspector
# ---------------------------------------------------------------------------

def graph_tensor(X, A) -> torch.Tensor:
    """Features and adjacency side by side, (n, F + n): one tensor on which a permutation acts (Chapter 8)."""
    A = check_adjacency("A", A)
    X = as_tensor("X", X, ndim=2, floating=True)
    if len(X) != len(A):
        raise ValueError(f"X must have one row per node ({len(A)}), got {describe(X)}")
    return torch.cat([X, A.to(X.dtype)], dim=1)


def split_graph(Z) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`graph_tensor`: (X, A) from (n, F + n) (Chapter 8)."""
    Z = as_tensor("Z", Z, ndim=2, floating=True)
    if Z.shape[1] < Z.shape[0]:
        raise ValueError(f"Z must have at least as many columns as rows (X beside A), got {describe(Z)}")
    num_features = Z.shape[1] - Z.shape[0]
    return Z[:, :num_features], Z[:, num_features:]


def permute_graph(Z, perm) -> torch.Tensor:
    """The action (X, A) -> (PX, PAPᵀ) on a :func:`graph_tensor`; row i of the result is node perm[i] (Chapter 8)."""
    X, A = split_graph(Z)
    perm = check_permutation("perm", perm, len(A)).to(Z.device)
    return torch.cat([X[perm], A[perm][:, perm]], dim=1)


def check_permutation(name: str, perm, n: int) -> torch.Tensor:
    """A permutation of 0..n-1 as a long tensor."""
    perm = as_tensor(name, perm, ndim=1)
    if perm.is_floating_point() or perm.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer indices, got {describe(perm)}")
    if len(perm) != n or not torch.equal(perm.sort().values.cpu(), torch.arange(n)):
        raise ValueError(f"{name} must be a permutation of 0..{n - 1}, got {describe(perm)}")
    return perm.long()


# ---------------------------------------------------------------------------
# Spectral filters, polynomial filters and the Chebyshev recurrence
# ---------------------------------------------------------------------------

def _check_signal(name: str, x, n: int) -> torch.Tensor:
    x = as_tensor(name, x, floating=True)
    if x.dim() not in (1, 2) or x.shape[0] != n:
        raise ValueError(f"{name} must be a signal (n,) or signals (n, F) on the {n} nodes, got {describe(x)}")
    return x


def spectral_filter(L, response, x) -> torch.Tensor:
    """U g(Λ) Uᵀ x: filter x in the eigenbasis of the symmetric L = U Λ Uᵀ (Chapter 8).

    ``response`` is a callable applied to the eigenvalues (a tensor) or a
    tensor of n gains, one per eigenvalue in ascending order.
    """
    L = check_square("L", L, symmetric=True)
    x = _check_signal("x", x, len(L))
    eigenvalues, U = torch.linalg.eigh(L)
    if callable(response):
        gains = response(eigenvalues)
    else:
        gains = as_tensor("response", response, shape=(len(L),), floating=True)
    gains = gains.to(dtype=L.dtype, device=L.device)
    coefficients = U.T @ x                                       # the graph Fourier transform of x
    scaled = gains[:, None] * coefficients if x.dim() == 2 else gains * coefficients
    return U @ scaled


def polynomial_filter(L, coefficients, x) -> torch.Tensor:
    """Σ_k α_k L^k x by Horner's rule, with no eigendecomposition (Chapter 8)."""
    L = check_square("L", L)
    x = _check_signal("x", x, len(L))
    alphas = as_tensor("coefficients", coefficients, ndim=1, floating=True)
    if len(alphas) == 0:
        raise ValueError("coefficients must not be empty")
    out = alphas[-1] * x
    for alpha in alphas.flip(0)[1:]:
        out = L @ out + alpha * x
    return out


def polynomial_matrix(L, coefficients) -> torch.Tensor:
    """The matrix p(L) = Σ_k α_k L^k (Chapter 8)."""
    L = check_square("L", L)
    return polynomial_filter(L, coefficients, torch.eye(len(L), dtype=L.dtype, device=L.device))


def rescaled_laplacian(L, lambda_max: float | None = None) -> torch.Tensor:
    """L̃ = 2 L / λ_max - I, whose spectrum lies in [-1, 1] where Chebyshev polynomials live (Chapter 8)."""
    L = check_square("L", L, symmetric=True)
    if lambda_max is None:
        lambda_max = torch.linalg.eigvalsh(L)[-1].item()
    lambda_max = check_float("lambda_max", lambda_max, low=0.0, low_open=True)
    return 2.0 * L / lambda_max - torch.eye(len(L), dtype=L.dtype, device=L.device)


def chebyshev_basis(L_scaled, x, order: int) -> torch.Tensor:
    """x̄_k = T_k(L̃) x for k < order by the recurrence x̄_k = 2 L̃ x̄_{k-1} - x̄_{k-2}: shape (order, *x.shape) (Chapter 8).

    ``x`` is (n,), (n, F) or a batch (S, n, F) of signals.
    """
    L_scaled = check_square("L_scaled", L_scaled)
    order = check_int("order", order, minimum=1)
    x = as_tensor("x", x, floating=True)
    if x.dim() not in (1, 2, 3) or x.shape[-2 if x.dim() > 1 else 0] != len(L_scaled):
        raise ValueError(f"x must be (n,), (n, F) or (S, n, F) with n = {len(L_scaled)}, got {describe(x)}")

    def apply(v):
        return L_scaled @ v if v.dim() < 3 else torch.einsum("mn,snf->smf", L_scaled, v)

    terms = [x]
    if order > 1:
        terms.append(apply(x))
    while len(terms) < order:
        terms.append(2 * apply(terms[-1]) - terms[-2])
    return torch.stack(terms)


def chebyshev_filter(L, theta, x, lambda_max: float | None = None) -> torch.Tensor:
    """Σ_k θ_k T_k(L̃) x, the ChebNet filter of Defferrard et al. (Chapter 8)."""
    theta = as_tensor("theta", theta, ndim=1, floating=True)
    basis = chebyshev_basis(rescaled_laplacian(L, lambda_max), x, len(theta))
    return torch.tensordot(theta.to(basis.dtype), basis, dims=1)


def chebyshev_coefficients(response: Callable, order: int, lambda_max: float) -> torch.Tensor:
    """θ_0..θ_{order-1} interpolating g(λ) on [0, λ_max] at Chebyshev points (float64; Chapter 8)."""
    if not callable(response):
        raise TypeError(f"response must be callable, got {describe(response)}")
    order = check_int("order", order, minimum=1)
    lambda_max = check_float("lambda_max", lambda_max, low=0.0, low_open=True)

    def on_interval(u):               # u in [-1, 1] is λ = (u + 1) λ_max / 2
        values = response(torch.as_tensor((u + 1) * lambda_max / 2, dtype=torch.float64))
        return np.asarray(values, dtype=np.float64)

    return torch.as_tensor(np.polynomial.chebyshev.chebinterpolate(on_interval, order - 1), dtype=torch.float64)


def heat_kernel(L, t: float) -> torch.Tensor:
    """e^{-tL} by the eigendecomposition: the low-pass filter g(λ) = e^{-tλ} (Chapter 8)."""
    L = check_square("L", L, symmetric=True)
    t = check_float("t", t, low=0.0)
    eigenvalues, U = torch.linalg.eigh(L)
    return (U * torch.exp(-t * eigenvalues)) @ U.T


def chebyshev_conv(L_scaled, X, theta) -> torch.Tensor:
    """The ChebNet layer y_{s,j} = Σ_i Σ_k θ_{k,i,j} T_k(L̃) x_{s,i}: X (S, n, F_in), θ (K, F_in, F_out) (Chapter 8)."""
    theta = as_tensor("theta", theta, ndim=3, floating=True)
    X = as_tensor("X", X, ndim=3, floating=True)
    if X.shape[2] != theta.shape[1]:
        raise ValueError(f"X has {X.shape[2]} channels but theta expects {theta.shape[1]}")
    basis = chebyshev_basis(L_scaled, X, theta.shape[0])           # (K, S, n, F_in)
    return torch.einsum("ksni,kij->snj", basis, theta)


def chebyshev_conv_grad_theta(L_scaled, X, grad_Y, order: int) -> torch.Tensor:
    """∂E/∂θ_{k,i,j} = Σ_s x̄_{s,i,k}ᵀ ∂E/∂y_{s,j}, by hand (Defferrard et al., corrected; Chapter 8)."""
    X = as_tensor("X", X, ndim=3, floating=True)
    grad_Y = as_tensor("grad_Y", grad_Y, ndim=3, floating=True)
    if grad_Y.shape[:2] != X.shape[:2]:
        raise ValueError(f"grad_Y must have X's first two sizes {tuple(X.shape[:2])}, got {describe(grad_Y)}")
    basis = chebyshev_basis(L_scaled, X, order)                    # (K, S, n, F_in)
    return torch.einsum("ksni,snj->kij", basis, grad_Y)


# ---------------------------------------------------------------------------
# Graph convolutional networks
# ---------------------------------------------------------------------------

class GCN(nn.Module):
    """H <- relu(Ā H W + b) layer after layer, no relu after the last (Kipf and Welling; Chapter 8).

    ``widths`` is (inputs, hidden..., outputs). Weights are Glorot (Xavier)
    normal and biases zero, drawn by :func:`dlbook.nets.random_layers`.
    """

    def __init__(self, widths, *, seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        widths = check_ints("widths", widths, minimum=1, min_length=2)
        layers = nets.random_layers(widths, init="xavier", seed=check_int("seed", seed, minimum=0),
                                    dtype=check_dtype("dtype", dtype), device=check_device("device", device))
        self.weights = nn.ParameterList([nn.Parameter(W.T.contiguous()) for W, _ in layers])  # (fan_in, fan_out)
        self.biases = nn.ParameterList([nn.Parameter(b.clone()) for _, b in layers])
        self.widths = tuple(widths)

    def forward(self, X: torch.Tensor, A_hat: torch.Tensor, *, return_hidden: bool = False):
        H, hidden = X, []
        last = len(self.weights) - 1
        for index, (W, b) in enumerate(zip(self.weights, self.biases)):
            H = propagate(A_hat, H @ W) + b
            if index < last:
                H = torch.relu(H)
                hidden.append(H)
        return (H, hidden) if return_hidden else H


class NodeRun(NamedTuple):
    """A semi-supervised node-classification run: the model, per-epoch curves and snapshots."""

    model: GCN
    losses: np.ndarray          # (epochs,) training loss on the labelled nodes
    accuracies: np.ndarray      # (epochs,) accuracy on all nodes before each update
    snapshot_epochs: tuple      # epochs at which the network was recorded (0 = before training)
    snapshots: tuple            # the last hidden layer, an (n, hidden) array per snapshot epoch
    snapshot_predictions: tuple # the predicted classes, an (n,) array per snapshot epoch
    predictions: torch.Tensor   # (n,) predicted classes after training


def train_node_classifier(A, X, y, labelled, *, widths, epochs: int = 200, lr: float = 0.01,
                          weight_decay: float = 5e-4, snapshot_epochs=(), seed: int = 0,
                          sparse: bool = False) -> NodeRun:
    """Full-batch Adam on the cross-entropy of the labelled nodes; accuracy on all nodes (Chapter 8).

    The GCN of ``widths`` gets the features X (n, F) and Ā of the graph A; ``labelled``
    holds the indices whose labels the loss may see.
    """
    A = check_adjacency("A", A)
    X = as_tensor("X", X, ndim=2, floating=True)
    widths = check_ints("widths", widths, minimum=1, min_length=2)
    if len(X) != len(A) or widths[0] != X.shape[1]:
        raise ValueError(f"X must be ({len(A)}, {widths[0]}) for this graph and widths, got {describe(X)}")
    y = as_tensor("y", y, shape=(len(A),))
    labelled = as_tensor("labelled", labelled, ndim=1).long()
    epochs = check_int("epochs", epochs, minimum=1)
    snapshot_epochs = tuple(check_int("snapshot_epochs[i]", e, minimum=0, maximum=epochs)
                            for e in snapshot_epochs)
    model = GCN(widths, seed=seed, dtype=X.dtype, device=X.device)
    A_hat = gcn_propagation(A.to(X.dtype), sparse=sparse)
    # foreach: one fused update for all layers instead of a Python loop over them (deep GCNs have many).
    optimizer = torch.optim.Adam(model.parameters(), lr=check_float("lr", lr, low=0.0, low_open=True),
                                 weight_decay=check_float("weight_decay", weight_decay, low=0.0), foreach=True)
    losses, accuracies, snapshots = [], [], {}

    def record(epoch, logits, hidden):
        if epoch in snapshot_epochs:
            snapshots[epoch] = ((hidden[-1] if hidden else logits).detach().cpu().numpy(),
                                logits.argmax(dim=1).cpu().numpy())

    for epoch in range(epochs):
        logits, hidden = model(X, A_hat, return_hidden=True)
        record(epoch, logits, hidden)
        loss = nn.functional.cross_entropy(logits[labelled], y[labelled])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accuracies.append((logits.argmax(dim=1) == y).double().mean().item())
    with torch.no_grad():
        logits, hidden = model(X, A_hat, return_hidden=True)
    record(epochs, logits, hidden)
    return NodeRun(model, np.array(losses), np.array(accuracies), snapshot_epochs,
                   tuple(snapshots[e][0] for e in snapshot_epochs), tuple(snapshots[e][1] for e in snapshot_epochs),
                   logits.argmax(dim=1))


def receptive_field(model: GCN, X, A) -> torch.Tensor:
    """Which input rows each output row depends on: the nonzero pattern of ∂GCN(X)_m/∂X_n (Chapter 8).

    Computed with ``torch.func.jacrev``; returns a boolean (n, n) tensor.
    """
    if not isinstance(model, GCN):
        raise TypeError(f"model must be a graphs.GCN, got {describe(model)}")
    A = check_adjacency("A", A)
    X = as_tensor("X", X, ndim=2, floating=True)
    A_hat = gcn_propagation(A.to(X.dtype))
    jacobian = torch.func.jacrev(lambda inputs: model(inputs, A_hat))(X)    # (n, out, n, F)
    return (jacobian != 0).any(dim=3).any(dim=1)


# ---------------------------------------------------------------------------
# Message passing
# ---------------------------------------------------------------------------

def edge_index(A) -> torch.Tensor:
    """The directed edges (sender, receiver) of a graph, both directions of each undirected edge: (2, E) (Chapter 8)."""
    A = check_adjacency("A", A)
    receivers, senders = A.nonzero(as_tuple=True)
    return torch.stack([senders, receivers])


def aggregate(messages: torch.Tensor, receivers: torch.Tensor, num_nodes: int, aggregation: str = "sum"):
    """Combine the messages (E, F) arriving at each of ``num_nodes`` nodes: sum, mean or max (Chapter 8).

    A node that receives nothing gets zeros.
    """
    check_choice("aggregation", aggregation, AGGREGATIONS)
    messages = as_tensor("messages", messages, ndim=2, floating=True)
    receivers = as_tensor("receivers", receivers, shape=(len(messages),)).long()
    out = messages.new_zeros(num_nodes, messages.shape[1])
    if aggregation == "max":
        index = receivers[:, None].expand_as(messages)
        return out.scatter_reduce(0, index, messages, "amax", include_self=False)
    out = out.index_add(0, receivers, messages)
    if aggregation == "mean":
        counts = torch.bincount(receivers, minlength=num_nodes).clamp(min=1).to(messages.dtype)
        out = out / counts[:, None]
    return out


class MessagePassingLayer(nn.Module):
    """h_m' = update(h_m, ⊕_{n ∈ N(m)} message(h_m, h_n, e_mn)) for three classic choices (Chapter 8).

    * ``"gcn"``: messages Ā_mn h_n W over the neighbours and the node itself, summed, plus b (Kipf and Welling);
    * ``"sage"``: W [h_m, mean of the neighbours' h_n] + b (GraphSAGE with mean aggregation);
    * ``"gin"``: an MLP of (1 + ε) h_m + Σ_n h_n (GIN).

    No nonlinearity is applied after the update: stack layers with one in between.
    """

    def __init__(self, kind: str, fan_in: int, fan_out: int, *, eps: float = 0.0, seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        self.kind = check_choice("kind", kind, LAYER_KINDS)
        fan_in, fan_out = check_int("fan_in", fan_in, minimum=1), check_int("fan_out", fan_out, minimum=1)
        widths = {"gcn": (fan_in, fan_out), "sage": (2 * fan_in, fan_out), "gin": (fan_in, fan_out, fan_out)}[kind]
        self.net = nets.mlp(widths, init="xavier", seed=check_int("seed", seed, minimum=0),
                            dtype=check_dtype("dtype", dtype), device=check_device("device", device))
        self.eps = check_float("eps", eps)

    def forward(self, H: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        senders, receivers = edges
        n = len(H)
        if self.kind == "gcn":
            linear = self.net[0]
            loops = torch.arange(n, device=H.device)
            senders, receivers = torch.cat([senders, loops]), torch.cat([receivers, loops])
            degree = torch.bincount(receivers, minlength=n).to(H.dtype)        # 1 + number of neighbours
            coupling = (degree[senders] * degree[receivers]).rsqrt()          # Ā_mn on each edge
            messages = coupling[:, None] * (H[senders] @ linear.weight.T)
            return aggregate(messages, receivers, n, "sum") + linear.bias
        if self.kind == "sage":
            neighbours = aggregate(H[senders], receivers, n, "mean")
            return self.net(torch.cat([H, neighbours], dim=1))
        neighbours = aggregate(H[senders], receivers, n, "sum")
        return self.net((1 + self.eps) * H + neighbours)


# ---------------------------------------------------------------------------
# Weisfeiler-Lehman colour refinement
# ---------------------------------------------------------------------------

class ColourRefinement(NamedTuple):
    """Colours of every node of every graph after each round (round 0: all alike), on one shared palette."""

    colours: list        # colours[r][g]: list of the colours of graph g's nodes after round r
    histograms: list     # histograms[r][g]: Counter of those colours

    @property
    def rounds(self) -> int:
        return len(self.colours) - 1


def _neighbour_lists(A) -> list[list[int]]:
    A = check_adjacency("A", A)
    rows = (A > 0).cpu().numpy()
    return [list(np.flatnonzero(row)) for row in rows]


def colour_refinement(adjacencies, rounds: int | None = None) -> ColourRefinement:
    """1-WL colour refinement of several graphs at once, with one palette for all (Chapter 8).

    Each round a node's new colour names the pair (its colour, the multiset of
    its neighbours' colours). Colours are shared across the graphs, so their
    histograms can be compared. Without ``rounds`` the refinement stops when a
    round splits no colour class (the partition is stable).
    """
    if isinstance(adjacencies, torch.Tensor) or not isinstance(adjacencies, (list, tuple)) or not adjacencies:
        raise TypeError(f"adjacencies must be a non-empty list of adjacency matrices, got {describe(adjacencies)}")
    neighbours = [_neighbour_lists(A) for A in adjacencies]
    limit = sum(len(nb) for nb in neighbours) if rounds is None else check_int("rounds", rounds, minimum=0)
    colours = [[[0] * len(nb) for nb in neighbours]]
    while len(colours) <= limit:
        previous = colours[-1]
        signatures = [[(previous[g][v], tuple(sorted(previous[g][u] for u in nb[v]))) for v in range(len(nb))]
                      for g, nb in enumerate(neighbours)]
        palette = {sig: index for index, sig in enumerate(sorted({s for sigs in signatures for s in sigs}))}
        current = [[palette[s] for s in sigs] for sigs in signatures]
        stable = len(palette) == len({c for cols in previous for c in cols})
        if stable and rounds is None:
            break
        colours.append(current)
    histograms = [[Counter(cols) for cols in per_round] for per_round in colours]
    return ColourRefinement(colours, histograms)


def wl_distinguishes(A1, A2) -> bool:
    """True when 1-WL colour refinement proves the two graphs non-isomorphic (their histograms differ) (Chapter 8)."""
    refinement = colour_refinement([A1, A2])
    return any(h[0] != h[1] for h in refinement.histograms)


# ---------------------------------------------------------------------------
# Coarsening and pooling
# ---------------------------------------------------------------------------

def heavy_edge_matching(A, *, seed: int = 0) -> torch.Tensor:
    """Greedy matching of Graclus: cluster index of each node, clusters of one or two nodes (Chapter 8).

    Nodes are visited in a seeded random order; an unmatched node is paired with
    the unmatched neighbour j that maximises A_ij (1/d_i + 1/d_j), or stays alone.
    """
    A = check_adjacency("A", A)
    order = torch.randperm(len(A), generator=generator(check_int("seed", seed, minimum=0))).tolist()
    W = A.detach().cpu().double().numpy()
    d = W.sum(axis=1)
    inverse = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    cluster = -np.ones(len(W), dtype=np.int64)
    count = 0
    for i in order:
        if cluster[i] >= 0:
            continue
        free = np.flatnonzero((W[i] > 0) & (cluster < 0))
        free = free[free != i]
        cluster[i] = count
        if len(free):
            scores = W[i, free] * (inverse[i] + inverse[free])
            cluster[free[np.argmax(scores)]] = count
        count += 1
    return torch.as_tensor(cluster, device=A.device)


def coarsen(A, clusters) -> torch.Tensor:
    """The coarse graph: W' = Sᵀ W S between clusters, the weight inside a cluster dropped (Chapter 8)."""
    A = check_adjacency("A", A)
    clusters = as_tensor("clusters", clusters, shape=(len(A),)).long().to(A.device)
    S = nn.functional.one_hot(clusters).to(A.dtype)                 # (n, n')
    coarse = S.T @ A @ S
    return coarse - torch.diag(coarse.diagonal())


def coarsening_levels(A, levels: int, *, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``levels`` rounds of heavy-edge matching: [(A_0, clusters_0), (A_1, clusters_1), ...] (Chapter 8)."""
    levels = check_int("levels", levels, minimum=1)
    out = []
    for level in range(levels):
        clusters = heavy_edge_matching(A, seed=seed + level)
        out.append((A, clusters))
        A = coarsen(A, clusters)
    return out + [(A, None)]


def pool(H, clusters, num_clusters: int | None = None, how: str = "max") -> torch.Tensor:
    """Pool node features (n, F) into their clusters by max or mean (Chapter 8)."""
    check_choice("how", how, ("max", "mean"))
    H = as_tensor("H", H, ndim=2, floating=True)
    clusters = as_tensor("clusters", clusters, shape=(len(H),)).long()
    num_clusters = int(clusters.max()) + 1 if num_clusters is None else check_int("num_clusters", num_clusters)
    return aggregate(H, clusters, num_clusters, "max" if how == "max" else "mean")


class GraphBatch(NamedTuple):
    """Many small graphs as one block-diagonal graph per coarsening level, for a pooled GCN."""

    propagations: list      # Ā of each level, sparse, block-diagonal over the graphs
    clusters: list          # node -> cluster of the next level, global indices, one per pooling step
    graph_of_node: torch.Tensor   # which graph each node of the coarsest level belongs to
    num_graphs: int


def batch_graphs(adjacencies, levels: int, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                 device="cpu") -> GraphBatch:
    """Coarsen each graph ``levels`` times and stack all of them level by level (Chapter 8)."""
    if not isinstance(adjacencies, (list, tuple)) or not adjacencies:
        raise TypeError(f"adjacencies must be a non-empty list of adjacency matrices, got {describe(adjacencies)}")
    levels = check_int("levels", levels, minimum=0)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    per_graph = [coarsening_levels(A, levels, seed=seed + 97 * g) if levels else [(check_adjacency("A", A), None)]
                 for g, A in enumerate(adjacencies)]
    propagations, clusters = [], []
    for level in range(levels + 1):
        blocks = [graph_levels[level][0] for graph_levels in per_graph]
        propagations.append(gcn_propagation(torch.block_diag(*blocks).to(dtype), sparse=True).to(device))
        if level < levels:
            offsets = np.cumsum([0] + [len(graph_levels[level + 1][0]) for graph_levels in per_graph])
            clusters.append(torch.cat([graph_levels[level][1].cpu() + int(offsets[g])
                                       for g, graph_levels in enumerate(per_graph)]).to(device))
    sizes = [len(graph_levels[levels][0]) for graph_levels in per_graph]
    graph_of_node = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes)).to(device)
    return GraphBatch(propagations, clusters, graph_of_node, len(sizes))


class PooledGCN(nn.Module):
    """Graph classifier: a GCN layer per coarsening level with max-pooling between, a readout, a linear head.

    ``widths`` is (inputs, hidden per level..., classes); the number of hidden
    widths must be the batch's number of levels + 1. The readout pools the
    coarsest level of each graph by ``readout`` (sum, mean or max) (Chapter 8).
    """

    def __init__(self, widths, *, readout: str = "max", seed: int = 0, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__()
        widths = check_ints("widths", widths, minimum=1, min_length=3)
        self.readout = check_choice("readout", readout, AGGREGATIONS)
        self.convs = GCN(widths[:-1], seed=seed, dtype=dtype, device=device)
        self.head = nets.mlp(widths[-2:], seed=seed + 1, dtype=dtype, device=device)

    def forward(self, X: torch.Tensor, batch: GraphBatch) -> torch.Tensor:
        if len(batch.propagations) != len(self.convs.weights):
            raise ValueError(f"the batch has {len(batch.propagations)} levels but the model "
                             f"{len(self.convs.weights)} graph convolutions")
        H = X
        for level, (W, b) in enumerate(zip(self.convs.weights, self.convs.biases)):
            H = torch.relu(propagate(batch.propagations[level], H @ W) + b)
            if level < len(batch.clusters):
                H = pool(H, batch.clusters[level], len(batch.propagations[level + 1]))
        readout = aggregate(H, batch.graph_of_node, batch.num_graphs, self.readout)
        return self.head(readout)


# ---------------------------------------------------------------------------
# A random graph with communities
# ---------------------------------------------------------------------------

class BlockModel(NamedTuple):
    """A stochastic block model with Gaussian node features."""

    A: torch.Tensor        # (n, n) 0/1
    X: torch.Tensor        # (n, F) features: class mean times snr plus N(0, I) noise
    y: torch.Tensor        # (n,) block of each node


def stochastic_block_model(sizes, p_in: float, p_out: float, *, num_features: int = 16, snr: float = 1.0,
                           seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu") -> BlockModel:
    """Edges with probability p_in inside a block and p_out between blocks; features whose class
    means, of norm ``snr`` times √F, are random directions (Chapter 8)."""
    sizes = check_ints("sizes", sizes, minimum=1)
    p_in = check_float("p_in", p_in, low=0.0, high=1.0)
    p_out = check_float("p_out", p_out, low=0.0, high=1.0)
    num_features = check_int("num_features", num_features, minimum=1)
    snr = check_float("snr", snr, low=0.0)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    rng = generator(check_int("seed", seed, minimum=0))
    y = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    probability = torch.where(y[:, None] == y[None, :], p_in, p_out).double()
    upper = torch.triu(torch.rand(probability.shape, generator=rng, dtype=torch.float64) < probability, diagonal=1)
    A = (upper | upper.T).double()
    means = torch.randn(len(sizes), num_features, generator=rng, dtype=torch.float64)
    means = snr * means / means.norm(dim=1, keepdim=True) * num_features ** 0.5
    X = means[y] + torch.randn(len(y), num_features, generator=rng, dtype=torch.float64)
    return BlockModel(A.to(dtype=dtype, device=device), X.to(dtype=dtype, device=device), y.to(device))


# ---------------------------------------------------------------------------
# Small graph-classification sets from networkx's generators
# ---------------------------------------------------------------------------

#: Graph families by name: each maps a number of nodes n to a networkx graph on n nodes.
GRAPH_FAMILIES = {
    "cycle": nx.cycle_graph,
    "path": nx.path_graph,
    "star": lambda n: nx.star_graph(n - 1),
    "wheel": nx.wheel_graph,
    "two cycles": lambda n: nx.disjoint_union(nx.cycle_graph(n // 2), nx.cycle_graph(n - n // 2)),
}


class GraphSet(NamedTuple):
    """Graphs for classification: adjacency matrices and the family index of each."""

    adjacencies: list
    y: torch.Tensor


def graph_family_set(num_graphs: int, families=("cycle", "path", "star"), *, min_size: int = 8,
                     max_size: int = 24, seed: int = 0, dtype: torch.dtype = torch.float32,
                     device="cpu") -> GraphSet:
    """Graphs of random families (uniform) and random sizes (uniform on min_size..max_size) (Chapter 8)."""
    num_graphs = check_int("num_graphs", num_graphs, minimum=1)
    if isinstance(families, str) or not isinstance(families, (list, tuple)) or not families:
        raise TypeError(f"families must be a non-empty list of names, got {describe(families)}")
    for name in families:
        check_choice("families[i]", name, GRAPH_FAMILIES)
    min_size = check_int("min_size", min_size, minimum=6)
    max_size = check_int("max_size", max_size, minimum=min_size)
    rng = generator(check_int("seed", seed, minimum=0))
    labels = torch.randint(0, len(families), (num_graphs,), generator=rng)
    sizes = torch.randint(min_size, max_size + 1, (num_graphs,), generator=rng)
    adjacencies = [adjacency(GRAPH_FAMILIES[families[label]](int(n)), dtype=dtype, device=device)
                   for label, n in zip(labels.tolist(), sizes.tolist())]
    return GraphSet(adjacencies, labels.to(device))


class GraphRun(NamedTuple):
    """A trained graph classifier, its loss curve and its accuracy on the training and test sets."""

    model: PooledGCN
    losses: np.ndarray
    train_accuracy: float
    test_accuracy: float


def fit_graph_classifier(train_set: GraphSet, test_set: GraphSet, *, levels: int = 2, num_hidden: int = 32,
                         readout: str = "max", epochs: int = 200, lr: float = 0.01, seed: int = 0) -> GraphRun:
    """Full-batch Adam for a :class:`PooledGCN` on graphs whose nodes all carry the feature 1 (Chapter 8)."""
    for name, graph_set in (("train_set", train_set), ("test_set", test_set)):
        if not isinstance(graph_set, GraphSet):
            raise TypeError(f"{name} must be a graphs.GraphSet, got {describe(graph_set)}")
    epochs = check_int("epochs", epochs, minimum=1)
    num_classes = int(max(train_set.y.max(), test_set.y.max())) + 1
    batches = [batch_graphs(s.adjacencies, levels, seed=seed) for s in (train_set, test_set)]
    inputs = [torch.ones(sum(len(A) for A in s.adjacencies), 1) for s in (train_set, test_set)]
    model = PooledGCN((1,) + (check_int("num_hidden", num_hidden, minimum=1),) * (levels + 1) + (num_classes,),
                      readout=readout, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_float("lr", lr, low=0.0, low_open=True))
    losses = []
    for _ in range(epochs):
        loss = nn.functional.cross_entropy(model(inputs[0], batches[0]), train_set.y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        accuracies = [(model(X, b).argmax(dim=1) == s.y).double().mean().item()
                      for X, b, s in zip(inputs, batches, (train_set, test_set))]
    return GraphRun(model, np.array(losses), *accuracies)
