"""Aligning the hidden units of two networks, and the loss along the straight line between them (Chapter 17).

Two networks trained from different initialisations compute similar functions with
their hidden units in unrelated orders. Before their weights can be compared or
averaged, the units of one must be permuted to match the other. Three ways to find
the permutations: the sort-based canonical ordering proposed in the source (no
matching at all), weight matching and activation matching, both solved exactly per
layer as linear assignment problems (the Hungarian algorithm,
scipy.optimize.linear_sum_assignment). Networks are lists of (W, b) as in
dlbook.symmetry.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from . import data, symmetry
from .runtime import generator
from .train import fit
from .validation import as_tensor, check_choice, check_float, check_int, check_same_length

SORT_KEYS = ("lex", "maximin")
METHODS = ("none",) + SORT_KEYS + ("weights", "activations")


# ---------------------------------------------------------------------------
# Recovering one permutation
# ---------------------------------------------------------------------------

def sort_permutation(W, key: str = "lex") -> torch.Tensor:
    """Order of the units (rows of W) under the source's canonical sort.

    "lex" sorts the in-weight vectors lexicographically (first weight, then second, ...);
    "maximin" picks the input whose weights spread most across units and sorts by it.
    """
    W = as_tensor("W", W, ndim=2)
    check_choice("key", key, SORT_KEYS)
    rows = W.detach().cpu().double().numpy()
    if key == "lex":
        # np.lexsort sorts by the last key first, so feed the columns in reverse order.
        order = np.lexsort(rows.T[::-1])
    else:
        spread = rows.max(axis=0) - rows.min(axis=0)
        order = np.argsort(rows[:, int(np.argmax(spread))], kind="stable")
    return torch.as_tensor(order, dtype=torch.long, device=W.device)


def match_units(similarity) -> torch.Tensor:
    """Permutation p maximising sum_i S[i, p[i]] (Hungarian algorithm): row unit i of A ↔ unit p[i] of B."""
    S = as_tensor("similarity", similarity, ndim=2)
    if S.shape[0] != S.shape[1]:
        raise ValueError(f"similarity must be square, got shape {tuple(S.shape)}")
    rows, cols = linear_sum_assignment(S.detach().cpu().double().numpy(), maximize=True)
    perm = np.empty_like(cols)
    perm[rows] = cols
    return torch.as_tensor(perm, dtype=torch.long, device=S.device)


def fraction_matched(perm, true_perm) -> float:
    """Fraction of positions where a recovered permutation agrees with the true one."""
    perm, true_perm = as_tensor("perm", perm, ndim=1), as_tensor("true_perm", true_perm, ndim=1)
    check_same_length("perm", perm, "true_perm", true_perm)
    return float((perm.cpu() == true_perm.cpu()).double().mean())


def recovery_experiment(num_units: int, fan_in: int, noise: float, method: str, *,
                        trials: int = 20, seed: int = 0) -> float:
    """Mean fraction of units matched when a layer is compared with a noisy, shuffled copy of itself.

    The copy is W[π] + noise · std(W) · Z. "lex"/"maximin" sort both matrices and pair
    units by rank; "hungarian" matches on the inner products W_A W_B^T (Chapter 17).
    """
    num_units = check_int("num_units", num_units, minimum=1)
    fan_in = check_int("fan_in", fan_in, minimum=1)
    noise = check_float("noise", noise, low=0.0)
    check_choice("method", method, SORT_KEYS + ("hungarian",))
    trials = check_int("trials", trials, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    scores = []
    for _ in range(trials):
        W = torch.randn(num_units, fan_in, generator=rng, dtype=torch.float64)
        shuffle = torch.randperm(num_units, generator=rng)
        W_copy = W[shuffle] + noise * W.std() * torch.randn(num_units, fan_in, generator=rng, dtype=torch.float64)
        # Unit i of A is unit inverse[i] of the copy.
        inverse = torch.argsort(shuffle)
        if method == "hungarian":
            perm = match_units(W @ W_copy.T)
        else:
            order_a, order_b = sort_permutation(W, method), sort_permutation(W_copy, method)
            perm = torch.empty_like(order_a)
            perm[order_a] = order_b  # the k-th smallest of A is paired with the k-th smallest of B
        scores.append(fraction_matched(perm, inverse))
    return float(np.mean(scores))


# ---------------------------------------------------------------------------
# Aligning whole networks
# ---------------------------------------------------------------------------

def canonical_permutations(params, key: str = "lex") -> list[torch.Tensor]:
    """Per hidden layer, the permutation that puts the units in the source's canonical sorted order.

    Layers are sorted from the first on, each after its inputs have been reordered, so
    that two networks sorted this way can be compared directly (no matching involved).
    """
    layers = symmetry.check_params("params", params)
    check_choice("key", key, SORT_KEYS)
    perms = []
    for index in range(len(layers) - 1):
        W = layers[index][0]
        if index > 0:
            W = W[:, perms[-1]]
        perms.append(sort_permutation(W, key))
    return perms


def weight_matching(params_a, params_b, *, max_sweeps: int = 20) -> list[torch.Tensor]:
    """Permutations of B's hidden units that maximise Σ_l <W_l^A, P_l W_l^B P_{l-1}^T> + <b^A, P b^B>.

    Coordinate ascent as in Git Re-Basin: each layer's permutation is the exact solution
    of a linear assignment given its neighbours', sweeping until nothing changes.
    """
    a, b = _check_pair(params_a, params_b)
    max_sweeps = check_int("max_sweeps", max_sweeps, minimum=1)
    num_hidden = len(a) - 1
    perms = [torch.arange(W.shape[0], device=W.device) for W, _ in b[:-1]]
    for _ in range(max_sweeps):
        changed = False
        for l in range(num_hidden):
            W_b_in = b[l][0] if l == 0 else b[l][0][:, perms[l - 1]]  # inputs of B's layer in A's order
            similarity = a[l][0] @ W_b_in.T + torch.outer(a[l][1], b[l][1])
            W_b_out = b[l + 1][0] if l + 1 == num_hidden else b[l + 1][0][perms[l + 1]]
            similarity = similarity + a[l + 1][0].T @ W_b_out  # (n_l, n_l): out-weights agree too
            new = match_units(similarity)
            changed |= not torch.equal(new, perms[l])
            perms[l] = new
        if not changed:
            break
    return perms


def activation_matching(params_a, params_b, X, activation: str = "relu") -> list[torch.Tensor]:
    """Permutations of B's hidden units that maximise the correlation of their activations with A's on X.

    A unit's activation does not depend on how the earlier layers are ordered, so each
    layer is matched on its own.
    """
    a, b = _check_pair(params_a, params_b)
    _, hidden_a = symmetry.forward(a, X, activation, return_hidden=True)
    _, hidden_b = symmetry.forward(b, X, activation, return_hidden=True)
    return [match_units(_standardise(h_a).T @ _standardise(h_b) / len(h_a))
            for h_a, h_b in zip(hidden_a, hidden_b)]


def align(params_a, params_b, method: str, *, X=None, activation: str = "relu") -> list:
    """B with its hidden units permuted to match A: method "none", "lex", "maximin", "weights" or "activations".

    The sort methods put *both* networks into canonical order and return the sorted B;
    compare it with ``align(A, A, same method)``, i.e. the sorted A.
    """
    check_choice("method", method, METHODS)
    a, b = _check_pair(params_a, params_b)
    if method == "none":
        return [(W.clone(), c.clone()) for W, c in b]
    if method in SORT_KEYS:
        return symmetry.permute_hidden(b, canonical_permutations(b, method))
    if method == "weights":
        return symmetry.permute_hidden(b, weight_matching(a, b))
    if X is None:
        raise ValueError("activation matching needs inputs X")
    return symmetry.permute_hidden(b, activation_matching(a, b, X, activation))



def _standardise(h: torch.Tensor) -> torch.Tensor:
    # Dead units have zero variance; the small constant keeps their correlation at 0, not NaN.
    return (h - h.mean(dim=0)) / (h.std(dim=0) + 1e-8)


def _check_pair(params_a, params_b):
    a, b = symmetry.check_params("params_a", params_a), symmetry.check_params("params_b", params_b)
    if symmetry.widths(a) != symmetry.widths(b):
        raise ValueError(f"params_a and params_b must have the same widths, got "
                         f"{symmetry.widths(a)} and {symmetry.widths(b)}")
    return a, b


# ---------------------------------------------------------------------------
# The straight line between two networks
# ---------------------------------------------------------------------------

class InterpolationPath(NamedTuple):
    """Loss and accuracy of (1 - t) θ_A + t θ_B at each t."""

    ts: torch.Tensor
    losses: torch.Tensor
    accuracies: torch.Tensor

    @property
    def barrier(self) -> float:
        """Largest excess of the loss over the straight line between the end-point losses."""
        return loss_barrier(self.ts, self.losses)

    @property
    def min_accuracy(self) -> float:
        return float(self.accuracies.min())


def interpolate(params_a, params_b, t: float) -> list:
    """The network (1 - t) θ_A + t θ_B, layer by layer."""
    a, b = _check_pair(params_a, params_b)
    t = check_float("t", t)
    return [((1 - t) * Wa + t * Wb, (1 - t) * ba + t * bb) for (Wa, ba), (Wb, bb) in zip(a, b)]


@torch.no_grad()
def interpolation_path(params_a, params_b, X, y, *, num_points: int = 11,
                       activation: str = "relu") -> InterpolationPath:
    """Cross-entropy loss and accuracy on (X, y) along the straight line from A (t=0) to B (t=1)."""
    num_points = check_int("num_points", num_points, minimum=2)
    X = as_tensor("X", X, ndim=2)
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    ts = torch.linspace(0, 1, num_points, dtype=torch.float64)
    losses, accuracies = [], []
    for t in ts.tolist():
        logits = symmetry.forward(interpolate(params_a, params_b, t), X, activation)
        losses.append(float(torch.nn.functional.cross_entropy(logits, y)))
        accuracies.append(float((logits.argmax(dim=1) == y).double().mean()))
    return InterpolationPath(ts, torch.tensor(losses, dtype=torch.float64),
                             torch.tensor(accuracies, dtype=torch.float64))


def loss_barrier(ts, losses) -> float:
    """max_t [L(t) - ((1 - t) L(0) + t L(1))]: zero when the path is no worse than its end points."""
    ts = as_tensor("ts", ts, ndim=1, dtype=torch.float64)
    losses = as_tensor("losses", losses, ndim=1, dtype=torch.float64)
    check_same_length("ts", ts, "losses", losses)
    if len(ts) < 2:
        raise ValueError("ts must hold at least two points")
    baseline = (1 - ts) * losses[0] + ts * losses[-1]
    return float((losses - baseline).max())


# ---------------------------------------------------------------------------
# Small digit classifiers to align
# ---------------------------------------------------------------------------

_TRAINED: dict = {}


def train_digits_mlp(width: int, *, depth: int = 2, init_seed: int = 1, order_seed: int = 11,
                     epochs: int = 20, lr: float = 0.05, batch_size: int = 64, zero_rate: float = 0.0,
                     mask_seed: int = 0, device="cpu") -> list:
    """An MLP 64-width-...-10 (ReLU, ``depth`` hidden layers) trained on the digits with SGD + momentum 0.9.

    ``init_seed`` fixes the initial weights, ``order_seed`` the mini-batch order. With
    zero_rate > 0 the weights are pre-pruned by fixed random masks (seed ``mask_seed``).
    Results are cached in memory, so an interactive figure does not retrain.
    """
    width = check_int("width", width, minimum=1)
    depth = check_int("depth", depth, minimum=1)
    epochs = check_int("epochs", epochs, minimum=1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    zero_rate = check_float("zero_rate", zero_rate, low=0.0, high=1.0, high_open=True)
    key = (width, depth, init_seed, order_seed, epochs, lr, batch_size, zero_rate, mask_seed, str(device))
    if key not in _TRAINED:
        split = data.load_digits(seed=0, device=device)
        layer_widths = [64] + [width] * depth + [10]
        model = symmetry.to_sequential(symmetry.random_mlp(layer_widths, seed=init_seed, dtype=torch.float32,
                                                           device=device))
        if zero_rate > 0:
            symmetry.apply_prepruning(model, symmetry.prepruning_masks(layer_widths, zero_rate, seed=mask_seed,
                                                                       device=device))
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        fit(model, torch.nn.functional.cross_entropy, optimizer, (split.X_train, split.y_train),
            epochs=epochs, batch_size=batch_size, seed=order_seed, progress=False)
        _TRAINED[key] = symmetry.from_sequential(model)
    return [(W.clone(), b.clone()) for W, b in _TRAINED[key]]
