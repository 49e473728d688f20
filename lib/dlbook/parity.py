"""Parities over {-1, +1}^d and why gradient descent struggles to learn them (chapter 16).

Three pieces:

* data: all inputs of the hypercube, random inputs, the parity (character)
  chi_S(x) = prod_{i in S} x_i of a subset S, and the fast Walsh-Hadamard
  transform that evaluates all 2^d characters against a table at once;
* the gradient-variance argument of Shalev-Shwartz, Shamir and Shammah (2017):
  per-sample and per-target gradients with ``torch.func`` (vmap over grad),
  the variance of the population gradient across the whole parity family,
  and its exact closed form E||g||^2 / 2^d - ||g(1)||^2 / 4^d;
* experiments: many one-hidden-layer ReLU networks trained side by side
  (one batched tensor program, each net an independent run) on fresh samples
  of parities of different sizes (d, k), with SGD or Adam.

Inputs use the {-1, +1} encoding; bit b in {0, 1} of the paper's encoding
becomes x = 1 - 2b, so (-1)^<b, v> = prod_{i: v_i = 1} x_i.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from .runtime import generator
from .validation import as_tensor, check_choice, check_dtype, check_float, check_int

__all__ = ["all_inputs", "random_inputs", "parity", "subset_mask", "random_subset",
           "character_matrix", "fwht", "make_mlp", "num_parameters", "per_sample_grads",
           "per_target_grads", "family_gradients", "family_variance", "variance_identity",
           "ensemble_forward", "ParityRuns", "train_parities"]

LOSSES = ("square", "hinge")
OPTIMIZERS = ("sgd", "adam")
#: Default learning rates: the paper's SGD rate and Adam's usual default.
DEFAULT_LR = {"sgd": 0.01, "adam": 1e-3}


def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


# ---------------------------------------------------------------------------
# Data: the hypercube, parities and the Walsh-Hadamard transform
# ---------------------------------------------------------------------------

def all_inputs(d: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """All 2^d points of {-1, +1}^d, one per row; row i holds the bits of i, most significant first."""
    d = check_int("d", d, minimum=1, maximum=24)
    index = torch.arange(2**d, device=device)
    shifts = torch.arange(d - 1, -1, -1, device=device)
    bits = (index[:, None] >> shifts) & 1                      # (2^d, d), MSB first
    return (1 - 2 * bits).to(check_dtype("dtype", dtype))


def random_inputs(num: int, d: int, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                  device="cpu") -> torch.Tensor:
    """``num`` points drawn uniformly from {-1, +1}^d (drawn on the CPU, then moved)."""
    num = check_int("num", num, minimum=1)
    d = check_int("d", d, minimum=1)
    bits = torch.randint(0, 2, (num, d), generator=generator(seed))
    return (1 - 2 * bits).to(dtype=check_dtype("dtype", dtype), device=device)


def subset_mask(d: int, subset, *, device="cpu") -> torch.Tensor:
    """Boolean mask of length d that is True on the coordinates listed in ``subset``."""
    d = check_int("d", d, minimum=1)
    indices = as_tensor("subset", list(subset) if not isinstance(subset, torch.Tensor) else subset)
    if indices.numel() and (indices.dtype.is_floating_point or indices.min() < 0 or indices.max() >= d):
        raise ValueError(f"subset must hold distinct integer coordinates in [0, {d}), got {indices.tolist()}")
    mask = torch.zeros(d, dtype=torch.bool, device=device)
    mask[indices.long().reshape(-1).to(device)] = True
    if int(mask.sum()) != indices.numel():
        raise ValueError(f"subset must hold distinct coordinates, got {indices.tolist()}")
    return mask


def random_subset(d: int, k: int, *, seed: int = 0, device="cpu") -> torch.Tensor:
    """Mask of a uniformly random subset of k of the d coordinates."""
    d = check_int("d", d, minimum=1)
    k = check_int("k", k, minimum=0, maximum=d)
    chosen = torch.randperm(d, generator=generator(seed))[:k]
    return subset_mask(d, chosen.tolist(), device=device)


def parity(X: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """chi_S(x) = prod_{i in S} x_i for every row x of X (entries ±1); S given as a boolean mask.

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
        return torch.where(mask, X, torch.ones_like(X)).prod(dim=1)
    # (T, 1, d) against (1, N, d): the product over the chosen coordinates.
    return torch.where(mask[:, None, :].to(X.device), X[None], torch.ones_like(X[None])).prod(dim=2)


def character_matrix(d: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """H with H[v, x] = chi_v(x) for all 2^d subsets v and inputs x (both in all_inputs order).

    H is the Sylvester-Hadamard matrix; H H^T = 2^d I says the parities are orthonormal.
    """
    d = check_int("d", d, minimum=1, maximum=14)
    X = all_inputs(d, dtype=dtype, device=device)
    masks = X < 0                                               # subset v = bits of its index
    return parity(X, masks)


def fwht(A: torch.Tensor) -> torch.Tensor:
    """Fast Walsh-Hadamard transform along dim 0: returns H @ A in O(n log n) per column.

    The length of dim 0 must be a power of two; equals ``character_matrix(d) @ A``.
    """
    A = as_tensor("A", A)
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

def make_mlp(d: int, width: int = 64, depth: int = 1, *, seed: int = 0,
             dtype: torch.dtype = torch.float64, device="cpu") -> nn.Sequential:
    """A ReLU network d -> width (x depth) -> 1 with PyTorch's default initialisation."""
    d = check_int("d", d, minimum=1)
    width = check_int("width", width, minimum=1)
    depth = check_int("depth", depth, minimum=1, maximum=8)
    torch.manual_seed(check_int("seed", seed, minimum=0))
    layers, fan_in = [], d
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.ReLU()]
        fan_in = width
    layers.append(nn.Linear(fan_in, 1))
    return nn.Sequential(*layers).to(dtype=check_dtype("dtype", dtype), device=device)


def num_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of a model."""
    return sum(p.numel() for p in _check_model(model).parameters())


def _params(model: nn.Module) -> dict:
    return {name: p.detach() for name, p in model.named_parameters()}


def _flatten(grads: dict, leading: int) -> torch.Tensor:
    """Concatenate a dict of per-row gradients into one (leading, P) matrix."""
    return torch.cat([g.reshape(leading, -1) for g in grads.values()], dim=1)


def per_sample_grads(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """g(x) = d p_w(x) / dw for every row x of X, as an (N, P) matrix (vmap over grad)."""
    model = _check_model(model)
    X = as_tensor("X", X, ndim=2)
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
    """Gradient of F_h(w) = mean_x loss(p_w(x), h(x)) for every target row h of Y: (T, P).

    ``Y`` is (T, N): target values on the rows of X. One vmap over targets of grad.
    """
    model = _check_model(model)
    X = as_tensor("X", X, ndim=2)
    Y = as_tensor("Y", Y, ndim=2, dtype=X.dtype)
    loss = check_choice("loss", loss, LOSSES)
    if Y.shape[1] != X.shape[0]:
        raise ValueError(f"Y must have one column per row of X ({X.shape[0]}), got shape {tuple(Y.shape)}")
    params = _params(model)

    def objective(p, y):
        return _loss(functional_call(model, p, (X,)).reshape(-1), y, loss)

    return _flatten(vmap(grad(objective), in_dims=(None, 0))(params, Y), Y.shape[0])


def family_gradients(model: nn.Module, d: int) -> torch.Tensor:
    """Square-loss population gradient nabla F_v(w) for all 2^d parity targets v, shape (2^d, P).

    nabla F_v = E_x[p g] - E_x[chi_v g], and the second term for all v at once is a
    Walsh-Hadamard transform of the per-sample gradients: O(P d 2^d) instead of O(P 4^d).
    """
    d = check_int("d", d, minimum=1, maximum=20)
    model = _check_model(model)
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    X = all_inputs(d, dtype=dtype, device=device)
    G = per_sample_grads(model, X)                              # (2^d, P)
    with torch.no_grad():
        p_hat = model(X).reshape(-1)
    common = (p_hat[:, None] * G).mean(dim=0)                   # E_x[p g], the same for every target
    return common[None] - fwht(G) / 2**d


def family_variance(model: nn.Module, d: int) -> float:
    """Var(H, F, w) = E_v ||nabla F_v - E_v' nabla F_v'||^2 over all 2^d parities (square loss)."""
    grads = family_gradients(model, d)
    return ((grads - grads.mean(dim=0)) ** 2).sum(dim=1).mean().item()


def variance_identity(model: nn.Module, d: int) -> dict:
    """The closed form E_x||g||^2 / 2^d - ||g(1)||^2 / 4^d and the bound G^2 / 2^d.

    Parseval for the complete parity basis turns Theorem 1's Bessel inequality into
    this equality; 1 = (1, ..., 1) is the input where every parity equals +1.
    Returns {"identity", "bound", "G2"}; one pass of per-sample gradients.
    """
    d = check_int("d", d, minimum=1, maximum=20)
    model = _check_model(model)
    p0 = next(model.parameters())
    G = per_sample_grads(model, all_inputs(d, dtype=p0.dtype, device=p0.device))
    G2 = (G**2).sum(dim=1).mean().item()
    at_ones = (G[0] ** 2).sum().item()                          # row 0 of all_inputs is (1, ..., 1)
    return {"identity": G2 / 2**d - at_ones / 4**d, "bound": G2 / 2**d, "G2": G2}


# ---------------------------------------------------------------------------
# Learning parities: many independent networks trained as one tensor program
# ---------------------------------------------------------------------------

@dataclass
class ParityRuns:
    """Test accuracy of one network per (d, k) configuration, recorded during training."""

    configs: list           # [(d, k), ...]
    optimizer: str
    steps: torch.Tensor     # (E,) training steps at which accuracy was measured
    accuracy: torch.Tensor  # (M, E) test accuracy of each network at those steps

    def final(self, d: int, k: int) -> float:
        """Test accuracy of configuration (d, k) at the end of training."""
        return self.accuracy[self.configs.index((d, k)), -1].item()

    def steps_to(self, d: int, k: int, level: float = 0.9) -> int | None:
        """First recorded step with accuracy >= level, or None if never reached."""
        curve = self.accuracy[self.configs.index((d, k))]
        hits = torch.nonzero(curve >= level)
        return int(self.steps[hits[0, 0]]) if len(hits) else None


def _check_configs(configs) -> list:
    if not isinstance(configs, (list, tuple)) or not configs:
        raise TypeError(f"configs must be a non-empty list of (d, k) pairs, got {configs!r}")
    checked = []
    for pair in configs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"configs must hold (d, k) pairs, got {pair!r}")
        d = check_int("d in configs", pair[0], minimum=1)
        checked.append((d, check_int("k in configs", pair[1], minimum=1, maximum=d)))
    return checked


def _init_group(num: int, d: int, width: int, gen: torch.Generator, dtype, device) -> list:
    """Stacked parameters of ``num`` ReLU nets d -> width -> 1, initialised like torch.nn.Linear.

    Each layer draws from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default.
    """
    def uniform(shape, fan_in):
        return (2 * torch.rand(shape, generator=gen, dtype=dtype) - 1) / math.sqrt(fan_in)

    W1, b1 = uniform((num, width, d), d), uniform((num, width), d)
    w2, b2 = uniform((num, width), width), uniform((num,), width)
    return [t.to(device).requires_grad_() for t in (W1, b1, w2, b2)]


def ensemble_forward(params, X: torch.Tensor) -> torch.Tensor:
    """Outputs (M, B) of M stacked one-hidden-layer nets [W1, b1, w2, b2] on inputs X (M, B, d)."""
    W1, b1, w2, b2 = params
    hidden = torch.relu(torch.einsum("mbd,mhd->mbh", X, W1) + b1[:, None, :])   # (M, B, H)
    return torch.einsum("mbh,mh->mb", hidden, w2) + b2[:, None]


def train_parities(configs, *, optimizer: str = "adam", steps: int = 4000, lr: float | None = None,
                   batch_size: int = 128, width_factor: int = 10, eval_every: int = 250,
                   test_size: int = 2000, seed: int = 0, device="cpu") -> ParityRuns:
    """Train one ReLU net (width width_factor*d, hinge loss) per (d, k) on fresh parity samples.

    The setting of Shalev-Shwartz et al. (2017), Section 2: x uniform on {-1, +1}^d,
    a hidden random subset of size k, a new mini-batch every step. All nets train at
    once as one batched program; each has its own data, subset, weights and optimizer state.
    """
    configs = _check_configs(configs)
    optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
    steps = check_int("steps", steps, minimum=1)
    lr = DEFAULT_LR[optimizer] if lr is None else check_float("lr", lr, low=0, low_open=True)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    width_factor = check_int("width_factor", width_factor, minimum=1)
    eval_every = check_int("eval_every", eval_every, minimum=1)
    test_size = check_int("test_size", test_size, minimum=1)
    gen = generator(seed)
    dtype = torch.float32
    # Nets with the same d share one stacked tensor program (a "group"); no padding needed.
    dims = sorted({d for d, _ in configs})
    groups = []
    for d in dims:
        members = [i for i, (d_i, _) in enumerate(configs) if d_i == d]
        subsets = torch.stack([_random_mask(d, configs[i][1], gen) for i in members]).to(device)
        groups.append((d, members, subsets, _init_group(len(members), d, width_factor * d, gen,
                                                       dtype, device)))

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
    return ParityRuns(configs, optimizer, torch.tensor(record_steps), torch.stack(record_acc, dim=1))


def _random_mask(d: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """A uniformly random k-subset of d coordinates, as a boolean mask."""
    mask = torch.zeros(d, dtype=torch.bool)
    mask[torch.randperm(d, generator=gen)[:k]] = True
    return mask
