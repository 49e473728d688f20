"""Parities over {-1, +1}^d and why gradient descent struggles to learn them (Chapter 16).

Three pieces:

* parities: the character chi_S(x) = prod_{i in S} x_i of a subset S, the
  character matrix Phi[S, x] = chi_S(x) of all 2^d subsets, and the fast
  Walsh-Hadamard transform that multiplies by Phi in O(d 2^d) per column;
* the gradient-variance argument of Shalev-Shwartz, Shamir and Shammah (2017):
  per-sample and per-target gradients with ``torch.func`` (vmap over grad),
  the variance of the population gradient across the whole parity family,
  its exact closed form E||g||^2 / 2^d - ||g(1)||^2 / 4^d, and the noise of
  real mini-batch gradients it competes with;
* experiments: many one-hidden-layer ReLU networks trained side by side
  (one batched tensor program, each net an independent run) on fresh samples
  of parities of different sizes (d, k), with SGD or Adam.

Inputs are the rows of ``data.hypercube(d, encoding="pm1")``: row i holds the
bits of i, most significant first, and bit b becomes x = 1 - 2b, so
(-1)^<b, v> = prod_{i: v_i = 1} x_i and row 0 is the all-ones input. The exact
identities are computed in float64 (the default of the functions that build
tables); training runs in float32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from . import data, nets
from .runtime import generator
from .validation import as_tensor, check_choice, check_device, check_float, check_int, describe

__all__ = ["parity", "subset_mask", "random_subset", "character_matrix", "fwht", "per_sample_grads",
           "per_target_grads", "family_gradients", "family_variance", "VarianceIdentity",
           "variance_identity", "GradientNoise", "minibatch_gradient_noise", "ensemble_forward",
           "ParityRuns", "train_parities"]

LOSSES = ("square", "hinge")
OPTIMIZERS = ("sgd", "adam")
#: Default learning rates: the paper's SGD rate and Adam's usual default.
DEFAULT_LR = {"sgd": 0.01, "adam": 1e-3}


# ---------------------------------------------------------------------------
# Parities and the Walsh-Hadamard transform
# ---------------------------------------------------------------------------

def subset_mask(d: int, subset, *, device="cpu") -> torch.Tensor:
    """Boolean mask of length d that is True on the coordinates listed in ``subset`` (Chapter 16)."""
    d = check_int("d", d, minimum=1)
    device = check_device("device", device)
    indices = as_tensor("subset", list(subset) if not isinstance(subset, torch.Tensor) else subset)
    if indices.numel() and (indices.dtype.is_floating_point or indices.min() < 0 or indices.max() >= d):
        raise ValueError(f"subset must hold distinct integer coordinates in [0, {d}), got {indices.tolist()}")
    mask = torch.zeros(d, dtype=torch.bool, device=device)
    mask[indices.long().reshape(-1).to(device)] = True
    if int(mask.sum()) != indices.numel():
        raise ValueError(f"subset must hold distinct coordinates, got {indices.tolist()}")
    return mask


def random_subset(d: int, k: int, *, seed: int = 0, device="cpu") -> torch.Tensor:
    """Mask of a uniformly random subset of k of the d coordinates (Chapter 16)."""
    d = check_int("d", d, minimum=1)
    k = check_int("k", k, minimum=0, maximum=d)
    return _random_mask(d, k, generator(seed)).to(check_device("device", device))


def _random_mask(d: int, k: int, gen: torch.Generator) -> torch.Tensor:
    mask = torch.zeros(d, dtype=torch.bool)
    mask[torch.randperm(d, generator=gen)[:k]] = True
    return mask


def parity(X: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """chi_S(x) = prod_{i in S} x_i for every row x of X (entries ±1); S given as a boolean mask (Chapter 16).

    ``mask`` may be one mask (d,) or a stack (T, d), giving (T, N) targets.
    """
    X = as_tensor("X", X, ndim=2)
    mask = as_tensor("mask", mask)
    if mask.dtype != torch.bool or mask.dim() not in (1, 2) or mask.shape[-1] != X.shape[1]:
        raise ValueError(f"mask must be a boolean tensor of shape (d,) or (T, d) with d = {X.shape[1]}, "
                         f"got shape {tuple(mask.shape)} and dtype {mask.dtype}")
    if not torch.all(X.abs() == 1):
        raise ValueError("X must hold only -1 and +1")
    if mask.dim() == 1:
        return torch.where(mask.to(X.device), X, torch.ones_like(X)).prod(dim=1)
    # (T, 1, d) against (1, N, d): the product over the chosen coordinates.
    return torch.where(mask[:, None, :].to(X.device), X[None], torch.ones_like(X[None])).prod(dim=2)


def character_matrix(d: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """Phi with Phi[S, x] = chi_S(x) for all 2^d subsets S and inputs x, both in hypercube order (Chapter 16).

    Subset S is the set bits of its row index. Phi is the Sylvester-Hadamard
    matrix; Phi Phi^T = 2^d I says the parities are orthonormal. This is the
    dense reference for :func:`fwht`.
    """
    d = check_int("d", d, minimum=1, maximum=14)
    X = data.hypercube(d, encoding="pm1", dtype=dtype, device=device)
    return parity(X, X < 0)


def fwht(A: torch.Tensor) -> torch.Tensor:
    """Fast Walsh-Hadamard transform along dim 0: Phi @ A in O(n log n) per column (Chapter 16).

    The length n of dim 0 must be a power of two; the result equals
    ``character_matrix(log2 n) @ A`` (the unnormalised transform).
    """
    A = as_tensor("A", A, floating=True)
    n = A.shape[0] if A.dim() else 0
    if A.dim() == 0 or n < 1 or n & (n - 1):
        raise ValueError(f"A must have a power-of-two length along dim 0, got shape {tuple(A.shape)}")
    rest = A.shape[1:]
    out = A.reshape(n, -1)
    h = 1
    while h < n:
        # (n / 2h, 2, h, cols): pair block j with block j + h, butterfly (a + b, a - b).
        blocks = out.reshape(n // (2 * h), 2, h, -1)
        out = torch.stack((blocks[:, 0] + blocks[:, 1], blocks[:, 0] - blocks[:, 1]), dim=1)
        h *= 2
    return out.reshape(n, *rest)


# ---------------------------------------------------------------------------
# Networks and their gradients, with torch.func
# ---------------------------------------------------------------------------

def _model_inputs(model, X=None, name: str = "X"):
    """Check the model, and X against its input width; returns (model, X cast to the model's dtype)."""
    first = nets.linear_layers(model)[0]
    if X is None:
        return model, None
    X = as_tensor(name, X, ndim=2, floating=True)
    if X.shape[1] != first.in_features:
        raise ValueError(f"{name} must have {first.in_features} columns (the model's input width), "
                         f"got {describe(X)}")
    return model, X.to(dtype=first.weight.dtype, device=first.weight.device)


def _check_width(model, d: int) -> tuple[int, torch.Tensor]:
    """d checked against the model's input width; returns d and the model's cube (2^d, d)."""
    d = check_int("d", d, minimum=1, maximum=20)
    first = nets.linear_layers(model)[0]
    if first.in_features != d:
        raise ValueError(f"d must equal the model's input width {first.in_features}, got {d}")
    return d, data.hypercube(d, encoding="pm1", dtype=first.weight.dtype, device=first.weight.device)


def _params(model: nn.Module) -> dict:
    return {name: p.detach() for name, p in model.named_parameters()}


def _flatten(grads: dict, leading: int) -> torch.Tensor:
    """Concatenate a dict of per-row gradients into one (leading, P) matrix."""
    return torch.cat([g.reshape(leading, -1) for g in grads.values()], dim=1)


def per_sample_grads(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """g(x) = d p_w(x) / dw for every row x of X, as an (N, P) matrix (vmap over grad) (Chapter 16)."""
    model, X = _model_inputs(model, X)
    params = _params(model)

    def output(p, x):
        return functional_call(model, p, (x[None],)).reshape(())

    return _flatten(vmap(grad(output), in_dims=(None, 0))(params, X), X.shape[0])


def _loss(p_hat: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    if loss == "square":
        return 0.5 * ((p_hat - y) ** 2).mean()
    return torch.relu(1 - y * p_hat).mean()


def per_target_grads(model: nn.Module, X: torch.Tensor, Y: torch.Tensor,
                     loss: str = "square") -> torch.Tensor:
    """Gradient of F_h(w) = mean_x loss(p_w(x), h(x)) for every target row h of Y: (T, P) (Chapter 16).

    ``Y`` is (T, N): target values on the rows of X. One vmap over targets of
    grad; the brute-force reference for :func:`family_gradients`.
    """
    model, X = _model_inputs(model, X)
    Y = as_tensor("Y", Y, ndim=2, floating=True).to(X)
    loss = check_choice("loss", loss, LOSSES)
    if Y.shape[1] != X.shape[0]:
        raise ValueError(f"Y must have one column per row of X ({X.shape[0]}), got shape {tuple(Y.shape)}")
    params = _params(model)

    def objective(p, y):
        return _loss(functional_call(model, p, (X,)).reshape(-1), y, loss)

    return _flatten(vmap(grad(objective), in_dims=(None, 0))(params, Y), Y.shape[0])


def family_gradients(model: nn.Module, d: int) -> torch.Tensor:
    """Square-loss population gradient nabla F_S(w) for all 2^d parity targets S, shape (2^d, P) (Chapter 16).

    nabla F_S = E_x[p g] - E_x[chi_S g], and the second term for all S at once is a
    Walsh-Hadamard transform of the per-sample gradients: O(P d 2^d) instead of O(P 4^d).
    """
    d, X = _check_width(model, d)
    G = per_sample_grads(model, X)                              # (2^d, P)
    with torch.no_grad():
        p_hat = model(X).reshape(-1)
    common = (p_hat[:, None] * G).mean(dim=0)                   # E_x[p g], the same for every target
    return common[None] - fwht(G) / 2**d


def family_variance(model: nn.Module, d: int) -> float:
    """Var(H, F, w) = E_S ||nabla F_S - E_S' nabla F_S'||^2 over all 2^d parities, square loss (Chapter 16)."""
    grads = family_gradients(model, d)
    return ((grads - grads.mean(dim=0)) ** 2).sum(dim=1).mean().item()


class VarianceIdentity(NamedTuple):
    """The closed form of the variance across all parities, the bound of Theorem 1 and E||g||^2 (Chapter 16)."""

    identity: float     # E_x ||g||^2 / 2^d - ||g(1)||^2 / 4^d
    bound: float        # G^2 / 2^d with G^2 = E_x ||g||^2
    G2: float           # E_x ||g(x)||^2


def variance_identity(model: nn.Module, d: int) -> VarianceIdentity:
    """The closed form E_x||g||^2 / 2^d - ||g(1)||^2 / 4^d and the bound G^2 / 2^d (Chapter 16).

    Parseval for the complete parity basis turns Theorem 1's Bessel inequality into
    this equality; 1 = (1, ..., 1) is the input where every parity equals +1.
    One pass of per-sample gradients.
    """
    d, X = _check_width(model, d)
    G = per_sample_grads(model, X)
    G2 = (G**2).sum(dim=1).mean().item()
    at_ones = (G[0] ** 2).sum().item()                          # row 0 of the cube is (1, ..., 1)
    return VarianceIdentity(G2 / 2**d - at_ones / 4**d, G2 / 2**d, G2)


class GradientNoise(NamedTuple):
    """Mini-batch gradients against the population gradient, for one target (Chapter 16)."""

    noise: float            # mean over batches of ||g_batch - nabla F||^2
    standard_error: float   # of that mean, across batches
    population_norm2: float  # ||nabla F||^2, the exact gradient over the whole cube


def minibatch_gradient_noise(model: nn.Module, mask: torch.Tensor, batch_size: int, *,
                             num_batches: int = 500, seed: int = 0) -> GradientNoise:
    """Measure the noise of SGD's square-loss gradient for the parity target chi_S (Chapter 16).

    Draws ``num_batches`` mini-batches of ``batch_size`` uniform inputs (all index draws at
    once, from ``seed``) and compares each mini-batch gradient with the exact population
    gradient over all 2^d inputs. A mini-batch gradient is the mean of its samples' loss
    gradients (p(x) - chi_S(x)) g(x); the unit tests check it against autograd on each batch.
    """
    mask = as_tensor("mask", mask, ndim=1)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor, got {describe(mask)}")
    d, X = _check_width(model, len(mask))
    batch_size = check_int("batch_size", batch_size, minimum=1)
    num_batches = check_int("num_batches", num_batches, minimum=2)
    with torch.no_grad():
        residual = model(X).reshape(-1) - parity(X, mask.to(X.device))
    per_sample = residual[:, None] * per_sample_grads(model, X)              # (2^d, P) loss gradients
    population = per_sample.mean(dim=0)
    gen = generator(check_int("seed", seed, minimum=0))
    batches = torch.randint(2**d, (num_batches, batch_size), generator=gen)   # indices into the cube
    # (num_batches, 2^d): how often each input was drawn into each batch (with replacement).
    counts = torch.zeros(num_batches, 2**d, dtype=X.dtype)
    counts.scatter_add_(1, batches, torch.ones_like(batches, dtype=X.dtype))
    batch_grads = counts.to(X.device) @ per_sample / batch_size           # (num_batches, P)
    deviations = ((batch_grads - population) ** 2).sum(dim=1)
    return GradientNoise(deviations.mean().item(), (deviations.std() / num_batches**0.5).item(),
                         (population**2).sum().item())


# ---------------------------------------------------------------------------
# Learning parities: many independent networks trained as one tensor program
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ParityRuns:
    """Test accuracy of one network per (d, k) configuration, recorded during training (Chapter 16)."""

    configs: tuple          # ((d, k), ...)
    optimizer: str
    steps: torch.Tensor     # (E,) training steps at which accuracy was measured
    accuracy: torch.Tensor  # (M, E) test accuracy of each network at those steps

    def curve(self, d: int, k: int) -> torch.Tensor:
        """Test accuracy of configuration (d, k) at every recorded step."""
        if (d, k) not in self.configs:
            raise ValueError(f"(d, k) must be one of the trained configurations {list(self.configs)}, "
                             f"got {(d, k)}")
        return self.accuracy[self.configs.index((d, k))]

    def at(self, d: int, k: int, step: int | None = None) -> float:
        """Test accuracy of configuration (d, k) at the last recorded step <= ``step`` (default: the end)."""
        curve = self.curve(d, k)
        if step is None:
            return curve[-1].item()
        index = int((self.steps <= check_int("step", step, minimum=0)).sum()) - 1
        return curve[index].item()

    def steps_to(self, d: int, k: int, level: float = 0.9) -> int | None:
        """First recorded step with accuracy >= level, or None if never reached."""
        hits = torch.nonzero(self.curve(d, k) >= level)
        return int(self.steps[hits[0, 0]]) if len(hits) else None


def _check_configs(configs) -> list:
    if not isinstance(configs, (list, tuple)) or not configs:
        raise TypeError(f"configs must be a non-empty list of (d, k) pairs, got {describe(configs)}")
    checked = []
    for pair in configs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"configs must hold (d, k) pairs, got {pair!r}")
        d = check_int("d in configs", pair[0], minimum=1)
        checked.append((d, check_int("k in configs", pair[1], minimum=1, maximum=d)))
    if len(set(checked)) != len(checked):
        raise ValueError(f"configs must not repeat a (d, k) pair, got {checked}")
    return checked


def _stacked_nets(d: int, width: int, seeds: list[int], dtype, device) -> list[torch.Tensor]:
    """[W1 (M, width, d), b1 (M, width), w2 (M, width), b2 (M,)] of M nets from nets.mlp, one seed each."""
    layers = [nets.random_layers((d, width, 1), seed=s, dtype=dtype, device=device) for s in seeds]
    W1 = torch.stack([first.W for first, _ in layers])
    b1 = torch.stack([first.b for first, _ in layers])
    w2 = torch.stack([last.W[0] for _, last in layers])
    b2 = torch.stack([last.b[0] for _, last in layers])
    return [t.requires_grad_() for t in (W1, b1, w2, b2)]


def ensemble_forward(params, X: torch.Tensor) -> torch.Tensor:
    """Outputs (M, B) of M stacked one-hidden-layer nets [W1, b1, w2, b2] on inputs X (M, B, d) (Chapter 16)."""
    W1, b1, w2, b2 = params
    hidden = torch.relu(torch.baddbmm(b1[:, None, :], X, W1.transpose(1, 2)))   # (M, B, H)
    return torch.bmm(hidden, w2[:, :, None])[..., 0] + b2[:, None]              # (M, B)


def train_parities(configs, *, optimizer: str = "adam", steps: int = 4000, lr: float | None = None,
                   batch_size: int = 128, width_factor: int = 10, eval_every: int = 250,
                   test_size: int = 2000, seed: int = 0, device="cpu") -> ParityRuns:
    """Train one ReLU net d -> width_factor*d -> 1 (hinge loss) per (d, k) on fresh parity samples (Chapter 16).

    The setting of Shalev-Shwartz et al. (2017), Section 2: x uniform on {-1, +1}^d,
    a hidden random subset of size k, a new mini-batch every step. All nets train at
    once as one batched program; each has its own data, subset, weights (nets.mlp's
    initialisation, seed ``seed + 1 + its index``) and optimizer state.
    """
    configs = _check_configs(configs)
    optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
    steps = check_int("steps", steps, minimum=1)
    lr = DEFAULT_LR[optimizer] if lr is None else check_float("lr", lr, low=0, low_open=True)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    width_factor = check_int("width_factor", width_factor, minimum=1)
    eval_every = check_int("eval_every", eval_every, minimum=1)
    test_size = check_int("test_size", test_size, minimum=1)
    device = check_device("device", device)
    gen = generator(check_int("seed", seed, minimum=0))
    dtype = torch.float32
    # Nets with the same d share one stacked tensor program (a "group"); no padding needed.
    groups = []
    for d in sorted({d for d, _ in configs}):
        members = [i for i, (d_i, _) in enumerate(configs) if d_i == d]
        subsets = torch.stack([_random_mask(d, configs[i][1], gen) for i in members]).to(device)
        params = _stacked_nets(d, width_factor * d, [seed + 1 + i for i in members], dtype, device)
        groups.append((d, members, subsets, params))

    def sample(d, subsets, count):
        bits = torch.randint(0, 2, (len(subsets), count, d), generator=gen)
        X = (1 - 2 * bits).to(dtype=dtype, device=device)                          # (m, count, d)
        y = torch.where(subsets[:, None, :], X, torch.ones_like(X)).prod(dim=2)   # (m, count)
        return X, y

    tests = [sample(d, subsets, test_size) for d, _, subsets, _ in groups]
    opt_class = torch.optim.Adam if optimizer == "adam" else torch.optim.SGD
    opt = opt_class([p for *_, params in groups for p in params], lr=lr)
    record_steps, record_acc = [], []

    def record(step):
        correct = torch.empty(len(configs))
        with torch.no_grad():
            for (_, members, _, params), (X_test, y_test) in zip(groups, tests):
                correct[members] = (ensemble_forward(params, X_test) * y_test > 0).float().mean(dim=1).cpu()
        record_steps.append(step)
        record_acc.append(correct)

    record(0)
    for step in range(1, steps + 1):
        # Sum over nets of each net's mean hinge loss: the nets' gradients do not mix.
        loss = 0.0
        for d, _, subsets, params in groups:
            X, y = sample(d, subsets, batch_size)
            loss = loss + torch.relu(1 - y * ensemble_forward(params, X)).mean(dim=1).sum()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        if step % eval_every == 0 or step == steps:
            record(step)
    return ParityRuns(tuple(configs), optimizer, torch.tensor(record_steps), torch.stack(record_acc, dim=1))
