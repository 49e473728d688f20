"""Aligning the hidden units of two networks, and the loss along the straight line between them (Chapter 17).

Two networks trained from different initialisations compute similar functions with
their hidden units in unrelated orders. Before their weights can be compared or
averaged, the units of one must be permuted to match the other. Three ways to find
the permutations: the sort-based canonical ordering proposed in the source (no
matching at all), weight matching and activation matching, both solved exactly per
layer as linear assignment problems (the Hungarian algorithm,
scipy.optimize.linear_sum_assignment). Networks are lists of (W, b) as in
:mod:`dlbook.nets`; the small digit classifiers of the chapter are trained once
per configuration and cached (:func:`dlbook.train.cached`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from . import data, nets, symmetry, train
from .runtime import generator
from .validation import (
    as_tensor,
    check_choice,
    check_device,
    check_float,
    check_int,
    check_same_length,
    describe,
)

SORT_KEYS = ("lex", "maximin")
METHODS = ("none",) + SORT_KEYS + ("weights", "activations")


# ---------------------------------------------------------------------------
# Recovering one permutation
# ---------------------------------------------------------------------------

def sort_permutation(W, key: str = "lex") -> torch.Tensor:
    """Order of the units (rows of W) under the source's canonical sort (Chapter 17).

    "lex" sorts the in-weight vectors lexicographically (first weight, then second, ...);
    "maximin" picks the input whose weights spread most across units and sorts by it.
    """
    W = as_tensor("W", W, ndim=2, floating=True)
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
    """Permutation p maximising sum_i S[i, p[i]] (Hungarian algorithm): unit i of A ↔ unit p[i] of B (Chapter 17)."""
    S = as_tensor("similarity", similarity, ndim=2, floating=True)
    if S.shape[0] != S.shape[1]:
        raise ValueError(f"similarity must be square, got shape {tuple(S.shape)}")
    rows, cols = linear_sum_assignment(S.detach().cpu().double().numpy(), maximize=True)
    perm = np.empty_like(cols)
    perm[rows] = cols
    return torch.as_tensor(perm, dtype=torch.long, device=S.device)


def fraction_matched(perm, true_perm) -> float:
    """Fraction of positions where a recovered permutation agrees with the true one (Chapter 17)."""
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
    that two networks sorted this way can be compared directly (no matching involved)
    (Chapter 17).
    """
    layers = nets.check_layers("params", params)
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
    of a linear assignment given its neighbours', sweeping until nothing changes (Chapter 17).
    """
    a, b = _check_pair(params_a, params_b)
    max_sweeps = check_int("max_sweeps", max_sweeps, minimum=1)
    num_hidden = len(a) - 1
    perms = [torch.arange(W.shape[0], device=W.device) for W, _ in b[:-1]]
    for _ in range(max_sweeps):
        changed = False
        for k in range(num_hidden):  # hidden layer k + 1, whose (W, b) is a[k] and b[k]
            W_b_in = b[k].W if k == 0 else b[k].W[:, perms[k - 1]]  # inputs of B's layer in A's order
            similarity = a[k].W @ W_b_in.T + torch.outer(a[k].b, b[k].b)
            W_b_out = b[k + 1].W if k + 1 == num_hidden else b[k + 1].W[perms[k + 1]]
            similarity = similarity + a[k + 1].W.T @ W_b_out  # (n_k, n_k): out-weights agree too
            new = match_units(similarity)
            changed |= not torch.equal(new, perms[k])
            perms[k] = new
        if not changed:
            break
    return perms


def activation_matching(params_a, params_b, X, activation: str = "relu") -> list[torch.Tensor]:
    """Permutations of B's hidden units that maximise the correlation of their activations with A's on X.

    A unit's activation does not depend on how the earlier layers are ordered, so each
    layer is matched on its own (Chapter 17).
    """
    a, b = _check_pair(params_a, params_b)
    _, hidden_a = nets.forward(a, X, activation, return_hidden=True)
    _, hidden_b = nets.forward(b, X, activation, return_hidden=True)
    return [match_units(_standardise(h_a).T @ _standardise(h_b) / len(h_a))
            for h_a, h_b in zip(hidden_a, hidden_b)]


def align(params_a, params_b, method: str, *, X=None, activation: str = "relu") -> list:
    """B with its hidden units permuted to match A: method "none", "lex", "maximin", "weights" or "activations".

    The sort methods put *both* networks into canonical order and return the sorted B;
    compare it with ``align(A, A, same method)``, i.e. the sorted A (Chapter 17).
    """
    check_choice("method", method, METHODS)
    a, b = _check_pair(params_a, params_b)
    if method == "none":
        return [nets.Layer(W.clone(), c.clone()) for W, c in b]
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
    a, b = nets.check_layers("params_a", params_a), nets.check_layers("params_b", params_b)
    if nets.layer_widths(a) != nets.layer_widths(b):
        raise ValueError(f"params_a and params_b must have the same widths, got "
                         f"{nets.layer_widths(a)} and {nets.layer_widths(b)}")
    return a, b


# ---------------------------------------------------------------------------
# The straight line between two networks
# ---------------------------------------------------------------------------

class InterpolationPath(NamedTuple):
    """Loss and accuracy of (1 - t) θ_A + t θ_B at each t (Chapter 17)."""

    ts: torch.Tensor
    losses: torch.Tensor
    accuracies: torch.Tensor

    @property
    def barrier(self) -> float:
        """Largest excess of the loss over the straight line between the end-point losses."""
        return loss_barrier(self.ts, self.losses)

    @property
    def min_accuracy(self) -> float:
        """Lowest accuracy along the path."""
        return float(self.accuracies.min())


def interpolate(params_a, params_b, t: float) -> list:
    """The network (1 - t) θ_A + t θ_B, layer by layer (Chapter 17)."""
    a, b = _check_pair(params_a, params_b)
    t = check_float("t", t)
    return [nets.Layer((1 - t) * Wa + t * Wb, (1 - t) * ba + t * bb) for (Wa, ba), (Wb, bb) in zip(a, b)]


@torch.no_grad()
def interpolation_path(params_a, params_b, X, y, *, num_points: int = 11,
                       activation: str = "relu") -> InterpolationPath:
    """Cross-entropy loss and accuracy on (X, y) along the straight line from A (t=0) to B (t=1) (Chapter 17)."""
    num_points = check_int("num_points", num_points, minimum=2)
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, ndim=1)
    if y.is_floating_point() or y.dtype == torch.bool:
        raise TypeError(f"y must hold integer class labels, got {describe(y)}")
    check_same_length("X", X, "y", y)
    _check_pair(params_a, params_b)
    ts = torch.linspace(0, 1, num_points, dtype=torch.float64)
    losses, accuracies = [], []
    for t in ts.tolist():
        logits = nets.forward(interpolate(params_a, params_b, t), X, activation)
        losses.append(float(torch.nn.functional.cross_entropy(logits, y)))
        accuracies.append(float((logits.argmax(dim=1) == y).double().mean()))
    return InterpolationPath(ts, torch.tensor(losses, dtype=torch.float64),
                             torch.tensor(accuracies, dtype=torch.float64))


def loss_barrier(ts, losses) -> float:
    """max_t [L(t) - ((1 - t) L(0) + t L(1))]: zero when the path is no worse than its end points (Chapter 17)."""
    ts = as_tensor("ts", ts, ndim=1, floating=True).to(torch.float64)
    losses = as_tensor("losses", losses, ndim=1, floating=True).to(torch.float64)
    check_same_length("ts", ts, "losses", losses)
    if len(ts) < 2:
        raise ValueError("ts must hold at least two points")
    baseline = (1 - ts) * losses[0] + ts * losses[-1]
    return float((losses - baseline).max())


# ---------------------------------------------------------------------------
# Small digit classifiers to align
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class DigitsRun:
    """One training run of an MLP 64-width-...-10 (ReLU, ``depth`` hidden layers) on the digits (Chapter 17).

    ``init_seed`` fixes the initial weights, ``order_seed`` the mini-batch order. With
    zero_rate > 0 every weight matrix is pre-pruned by a fixed random mask (seed
    ``mask_seed``; :func:`digits_masks` rebuilds it).
    """

    width: int
    depth: int = 2
    init_seed: int = 1
    order_seed: int = 11
    epochs: int = 20
    lr: float = 0.05
    batch_size: int = 64
    zero_rate: float = 0.0
    mask_seed: int = 0
    device: str | torch.device = "cpu"

    def __post_init__(self):
        for name in ("width", "depth", "epochs", "batch_size"):
            check_int(name, getattr(self, name), minimum=1)
        for name in ("init_seed", "order_seed", "mask_seed"):
            check_int(name, getattr(self, name), minimum=0)
        check_float("lr", self.lr, low=0.0, low_open=True)
        check_float("zero_rate", self.zero_rate, low=0.0, high=1.0, high_open=True)
        # Stored as a string, so that "cpu" and torch.device("cpu") are one cache key.
        object.__setattr__(self, "device", str(check_device("device", self.device)))

    @property
    def widths(self) -> tuple[int, ...]:
        """Every layer's width, (64, width, ..., 10)."""
        return (64,) + (self.width,) * self.depth + (10,)


class TrainedNet(NamedTuple):
    """The trained weights as (W, b) layers, and the per-epoch training history (Chapter 17)."""

    layers: list
    history: train.History


def digits_masks(config: DigitsRun) -> list[torch.Tensor]:
    """The pre-pruning masks of a run (all ones when ``config.zero_rate`` is 0) (Chapter 17)."""
    if not isinstance(config, DigitsRun):
        raise TypeError(f"config must be an alignment.DigitsRun, got {describe(config)}")
    return symmetry.prepruning_masks(config.widths, config.zero_rate, seed=config.mask_seed, device=config.device)


@train.cached
def train_digits_mlp(config: DigitsRun) -> TrainedNet:
    """Train the MLP of ``config`` on the digits with SGD and momentum 0.9 (Chapter 17).

    Cached: a second call with an equal config returns a copy of the first result,
    so an interactive figure or a later cell does not retrain.
    """
    if not isinstance(config, DigitsRun):
        raise TypeError(f"config must be an alignment.DigitsRun, got {describe(config)}")
    split = data.load_digits(seed=0, device=config.device)
    model = nets.mlp(config.widths, seed=config.init_seed, dtype=torch.float32, device=config.device)
    if config.zero_rate > 0:
        symmetry.apply_prepruning(model, digits_masks(config))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9)
    history = train.fit(model, torch.nn.functional.cross_entropy, optimizer, (split.X_train, split.y_train),
                        epochs=config.epochs, batch_size=config.batch_size, seed=config.order_seed, progress=False)
    return TrainedNet(nets.to_layers(model), history)
