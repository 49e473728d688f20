"""Symmetries of fully connected networks that leave the function unchanged (Chapter 17).

A multilayer perceptron is stored as a list of layers ``[(W_1, b_1), ..., (W_L, b_L)]``
with ``W_l`` of shape (n_l, n_{l-1}) as in ``torch.nn.Linear`` and an activation
between layers (none after the last). Hidden layers are 1, ..., L-1. Three kinds of
re-parametrisation keep the function: permuting hidden units, flipping the sign of a
unit of an odd activation (tanh), and rescaling a unit of a positively homogeneous
one (ReLU). The module also counts the equivalent settings, brute-forces orbits of
tiny nets, computes the source's normalised Frobenius "metric" Φ, and builds the
binary masks of the proposed pre-pruning remedy.
"""
from __future__ import annotations

import itertools
import math
from typing import Sequence

import torch

from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}

Layer = tuple[torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------
# Networks as lists of (W, b)
# ---------------------------------------------------------------------------

def check_params(name: str, params) -> list[Layer]:
    """Check that ``params`` is a non-empty list of (W, b) pairs whose shapes chain."""
    if not isinstance(params, (list, tuple)) or len(params) == 0:
        raise TypeError(f"{name} must be a non-empty list of (W, b) pairs, got {type(params).__name__}")
    layers = []
    for index, layer in enumerate(params):
        if not isinstance(layer, (list, tuple)) or len(layer) != 2:
            raise TypeError(f"{name}[{index}] must be a pair (W, b), got {type(layer).__name__}")
        W = as_tensor(f"{name}[{index}][0]", layer[0], ndim=2)
        b = as_tensor(f"{name}[{index}][1]", layer[1], ndim=1)
        if b.shape[0] != W.shape[0]:
            raise ValueError(f"{name}[{index}]: b has {b.shape[0]} entries but W has {W.shape[0]} rows")
        if layers and W.shape[1] != layers[-1][0].shape[0]:
            raise ValueError(f"{name}[{index}]: W has {W.shape[1]} columns but layer {index - 1} "
                             f"has {layers[-1][0].shape[0]} units")
        layers.append((W, b))
    return layers


def widths(params) -> list[int]:
    """Layer widths (n_0, n_1, ..., n_L) of a network given as (W, b) pairs."""
    layers = check_params("params", params)
    return [layers[0][0].shape[1]] + [W.shape[0] for W, _ in layers]


def random_mlp(layer_widths: Sequence[int], *, seed: int = 0, dtype=torch.float64,
               device="cpu") -> list[Layer]:
    """A random MLP with PyTorch's default-like scale, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    layer_widths = _check_widths("layer_widths", layer_widths, minimum_length=2)
    seed = check_int("seed", seed, minimum=0)
    rng = generator(seed)
    params = []
    for fan_in, fan_out in zip(layer_widths[:-1], layer_widths[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        W = (2 * torch.rand(fan_out, fan_in, generator=rng, dtype=torch.float64) - 1) * bound
        b = (2 * torch.rand(fan_out, generator=rng, dtype=torch.float64) - 1) * bound
        params.append((W.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)))
    return params


def forward(params, X, activation: str = "relu", *, return_hidden: bool = False):
    """Output of the MLP on inputs X (N, n_0); with return_hidden also each hidden layer's activations."""
    layers = check_params("params", params)
    check_choice("activation", activation, ACTIVATIONS)
    X = as_tensor("X", X, ndim=2)
    if X.shape[1] != layers[0][0].shape[1]:
        raise ValueError(f"X must have {layers[0][0].shape[1]} columns, got {X.shape[1]}")
    act = ACTIVATIONS[activation]
    hidden = []
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = act(h)
            hidden.append(h)
    return (h, hidden) if return_hidden else h


def to_sequential(params, activation: str = "relu") -> torch.nn.Sequential:
    """An nn.Sequential of Linear layers and activations holding copies of ``params``."""
    layers = check_params("params", params)
    check_choice("activation", activation, ACTIVATIONS)
    modules = []
    for index, (W, b) in enumerate(layers):
        linear = torch.nn.Linear(W.shape[1], W.shape[0], device=W.device, dtype=W.dtype)
        with torch.no_grad():
            linear.weight.copy_(W)
            linear.bias.copy_(b)
        modules.append(linear)
        if index < len(layers) - 1:
            modules.append(torch.nn.ReLU() if activation == "relu" else torch.nn.Tanh())
    return torch.nn.Sequential(*modules)


def from_sequential(model: torch.nn.Module) -> list[Layer]:
    """Detached copies of the (weight, bias) of every nn.Linear in ``model``, in order."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    params = [(m.weight.detach().clone(), m.bias.detach().clone())
              for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not params:
        raise ValueError("model must contain at least one torch.nn.Linear layer")
    return check_params("model", params)


def flatten(params) -> torch.Tensor:
    """All weights and biases of the network as one vector."""
    return torch.cat([t.reshape(-1) for layer in check_params("params", params) for t in layer])


# ---------------------------------------------------------------------------
# The three symmetries
# ---------------------------------------------------------------------------

def permute_hidden(params, perms) -> list[Layer]:
    """Reorder the hidden units: unit i of hidden layer l becomes unit perms[l-1][i] of the old net.

    Rows of W_l and entries of b_l are permuted, and the matching columns of W_{l+1}, so
    the function is unchanged: W_l -> P_l W_l P_{l-1}^T, b_l -> P_l b_l (Chapter 17).
    """
    layers = check_params("params", params)
    if not isinstance(perms, (list, tuple)) or len(perms) != len(layers) - 1:
        raise ValueError(f"perms must be a list of {len(layers) - 1} permutations (one per hidden layer), "
                         f"got {perms if not isinstance(perms, (list, tuple)) else len(perms)}")
    perms = [_check_perm(f"perms[{i}]", p, layers[i][0].shape[0], layers[i][0].device)
             for i, p in enumerate(perms)]
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W[:, perms[index - 1]]
        if index < len(layers) - 1:
            W, b = W[perms[index]], b[perms[index]]
        out.append((W.clone(), b.clone()))
    return out


def flip_signs(params, layer: int, signs) -> list[Layer]:
    """Multiply the in-weights, bias and out-weights of hidden ``layer``'s units by ``signs`` (±1).

    Keeps the function for odd activations such as tanh, since tanh(-z) = -tanh(z).
    """
    layers = check_params("params", params)
    layer = check_int("layer", layer, minimum=1, maximum=len(layers) - 1)
    signs = as_tensor("signs", signs, ndim=1, dtype=layers[0][0].dtype, device=layers[0][0].device)
    if signs.shape[0] != layers[layer - 1][0].shape[0] or not torch.all(signs.abs() == 1):
        raise ValueError(f"signs must hold {layers[layer - 1][0].shape[0]} entries equal to +1 or -1")
    return _scale_unit(layers, layer, signs, signs)


def rescale_relu(params, layer: int, scales) -> list[Layer]:
    """Multiply hidden ``layer``'s in-weights and bias by scales > 0 and divide its out-weights by them.

    Keeps the function for ReLU, since relu(a z) = a relu(z) for a > 0.
    """
    layers = check_params("params", params)
    layer = check_int("layer", layer, minimum=1, maximum=len(layers) - 1)
    scales = as_tensor("scales", scales, ndim=1, dtype=layers[0][0].dtype, device=layers[0][0].device)
    if scales.shape[0] != layers[layer - 1][0].shape[0] or not torch.all(scales > 0):
        raise ValueError(f"scales must hold {layers[layer - 1][0].shape[0]} positive entries")
    return _scale_unit(layers, layer, scales, 1.0 / scales)


def _scale_unit(layers: list[Layer], layer: int, incoming, outgoing) -> list[Layer]:
    out = [(W.clone(), b.clone()) for W, b in layers]
    W_in, b_in = out[layer - 1]
    out[layer - 1] = (W_in * incoming[:, None], b_in * incoming)
    W_out, b_out = out[layer]
    out[layer] = (W_out * outgoing[None, :], b_out)
    return out


def _check_perm(name: str, perm, size: int, device) -> torch.Tensor:
    perm = as_tensor(name, perm, ndim=1)
    if perm.is_floating_point() or perm.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {perm.dtype}")
    perm = perm.to(device=device, dtype=torch.long)
    if perm.shape[0] != size or not torch.equal(perm.sort().values, torch.arange(size, device=device)):
        raise ValueError(f"{name} must be a permutation of 0..{size - 1}, got {perm.tolist()[:8]}...")
    return perm


def random_permutations(params, *, seed: int = 0) -> list[torch.Tensor]:
    """One random permutation per hidden layer (seeded, drawn on the CPU)."""
    layers = check_params("params", params)
    rng = generator(check_int("seed", seed, minimum=0))
    return [torch.randperm(W.shape[0], generator=rng).to(W.device) for W, _ in layers[:-1]]


# ---------------------------------------------------------------------------
# Counting equivalent parameter settings
# ---------------------------------------------------------------------------

def log10_group_order(hidden_widths: Sequence[int], *, sign_flips: bool = False) -> float:
    """log10 of prod_l n_l! (times 2^{n_l} with sign flips) over the hidden (or channel) widths.

    This is the order of the discrete symmetry group; a generic parameter vector has
    that many distinct equivalent copies (Chapter 17). Input and output units are not
    permutable, so they must not be listed.
    """
    hidden_widths = _check_widths("hidden_widths", hidden_widths, minimum_length=0)
    if not isinstance(sign_flips, bool):
        raise TypeError(f"sign_flips must be True or False, got {sign_flips!r}")
    ln = sum(math.lgamma(n + 1) + (n * math.log(2) if sign_flips else 0.0) for n in hidden_widths)
    return ln / math.log(10)


def orbit_size_bruteforce(params, *, sign_flips: bool = False, decimals: int = 9) -> int:
    """Number of distinct parameter vectors reached by all hidden permutations (and sign flips).

    Enumerates the whole group, so only for tiny nets (at most 10^6 group elements).
    Vectors are compared after rounding to ``decimals`` digits. Equals the group order
    divided by the size of the stabiliser of ``params`` (orbit-stabiliser theorem).
    """
    layers = check_params("params", params)
    decimals = check_int("decimals", decimals, minimum=0)
    hidden = [W.shape[0] for W, _ in layers[:-1]]
    if 10 ** log10_group_order(hidden, sign_flips=bool(sign_flips)) > 1e6:
        raise ValueError(f"the group of hidden widths {hidden} is too large to enumerate")
    per_layer_perms = [list(itertools.permutations(range(n))) for n in hidden]
    per_layer_signs = [list(itertools.product((1.0, -1.0), repeat=n)) if sign_flips else [None]
                       for n in hidden]
    seen = set()
    for perms in itertools.product(*per_layer_perms):
        permuted = permute_hidden(layers, [torch.tensor(p) for p in perms])
        for signs in itertools.product(*per_layer_signs):
            net = permuted
            for layer, s in enumerate(signs, start=1):
                if s is not None:
                    net = flip_signs(net, layer, torch.tensor(s))
            key = tuple(torch.round(flatten(net).double(), decimals=decimals).add(0.0).tolist())
            seen.add(key)
    return len(seen)


# ---------------------------------------------------------------------------
# The source's normalised Frobenius comparison
# ---------------------------------------------------------------------------

def phi_distance(W, W_other) -> float:
    """Φ(W, W') = Σ(W - W')² / Σ(W + W')²: 0 for equal matrices, about 1 for unrelated ones.

    Not a metric: undefined at W' = -W (raises ValueError), no triangle inequality,
    and not invariant under the function-preserving symmetries.
    """
    W = as_tensor("W", W)
    W_other = as_tensor("W_other", W_other)
    if W.shape != W_other.shape:
        raise ValueError(f"W and W_other must have the same shape, got {tuple(W.shape)} and {tuple(W_other.shape)}")
    denominator = (W + W_other).pow(2).sum()
    if denominator <= 0:
        raise ValueError("Φ is undefined when W_other = -W (the denominator is zero)")
    return float((W - W_other).pow(2).sum() / denominator)


def phi_per_layer(params_a, params_b) -> list[float]:
    """Φ between the weight matrices of two networks of equal shape, one value per layer."""
    a, b = check_params("params_a", params_a), check_params("params_b", params_b)
    if len(a) != len(b):
        raise ValueError(f"params_a and params_b must have the same number of layers, got {len(a)} and {len(b)}")
    return [phi_distance(Wa, Wb) for (Wa, _), (Wb, _) in zip(a, b)]


# ---------------------------------------------------------------------------
# Pre-pruning: fixed binary masks that make units distinguishable
# ---------------------------------------------------------------------------

def prepruning_masks(layer_widths: Sequence[int], zero_rate: float, *, seed: int = 0,
                     device="cpu") -> list[torch.Tensor]:
    """Random binary masks (one per layer, shaped like W) with each entry 0 with probability zero_rate."""
    layer_widths = _check_widths("layer_widths", layer_widths, minimum_length=2)
    zero_rate = check_float("zero_rate", zero_rate, low=0.0, high=1.0, high_open=True)
    rng = generator(check_int("seed", seed, minimum=0))
    return [(torch.rand(fan_out, fan_in, generator=rng) >= zero_rate).float().to(device)
            for fan_in, fan_out in zip(layer_widths[:-1], layer_widths[1:])]


def expected_identical_mask_pairs(num_units: int, fan_in: int, zero_rate: float) -> float:
    """Expected number of pairs of units with identical random in-masks: C(n, 2) (ρ² + (1-ρ)²)^m."""
    num_units = check_int("num_units", num_units, minimum=1)
    fan_in = check_int("fan_in", fan_in, minimum=0)
    zero_rate = check_float("zero_rate", zero_rate, low=0.0, high=1.0)
    return math.comb(num_units, 2) * (zero_rate ** 2 + (1 - zero_rate) ** 2) ** fan_in


def identical_mask_pairs(mask: torch.Tensor) -> torch.Tensor:
    """Number of pairs of identical rows (units) in a mask, or in a batch of masks (..., n, m)."""
    mask = as_tensor("mask", mask)
    if mask.dim() < 2:
        raise ValueError(f"mask must have at least 2 dimensions (units, fan_in), got {mask.dim()}")
    # Fingerprint each row by its inner product with fixed random weights: identical rows give
    # bitwise identical codes, and distinct 0/1 rows collide with probability zero.
    weights = torch.randn(mask.shape[-1], generator=generator(12345), dtype=torch.float64).to(mask.device)
    codes = mask.to(torch.float64) @ weights  # (..., n)
    same = codes.unsqueeze(-1) == codes.unsqueeze(-2)  # (..., n, n)
    return same.triu(diagonal=1).sum(dim=(-2, -1))


def mask_preserving_permutations(masks: Sequence[torch.Tensor]) -> int:
    """How many hidden-unit permutations (all layers) map a list of layer masks onto itself.

    Brute force over every permutation of every hidden layer, so only for tiny nets.
    """
    if not isinstance(masks, (list, tuple)) or len(masks) < 2:
        raise TypeError("masks must be a list of at least two layer masks")
    masks = [as_tensor(f"masks[{i}]", m, ndim=2) for i, m in enumerate(masks)]
    hidden = [m.shape[0] for m in masks[:-1]]
    if sum(math.lgamma(n + 1) for n in hidden) > math.log(1e6):
        raise ValueError(f"hidden widths {hidden} give too many permutations to enumerate")
    zeros = [torch.zeros(m.shape[0], dtype=m.dtype) for m in masks]
    as_params = list(zip(masks, zeros))
    count = 0
    for perms in itertools.product(*[itertools.permutations(range(n)) for n in hidden]):
        permuted = permute_hidden(as_params, [torch.tensor(p) for p in perms])
        count += all(torch.equal(Mp, M) for (Mp, _), M in zip(permuted, masks))
    return count


def apply_prepruning(model: torch.nn.Module, masks: Sequence[torch.Tensor]) -> torch.nn.Module:
    """Zero the masked weights of every nn.Linear in ``model`` and keep them zero during training.

    A gradient hook multiplies each weight gradient by its mask, so plain SGD (with
    momentum, without weight decay) never moves a pruned weight away from zero.
    """
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not isinstance(masks, (list, tuple)) or len(masks) != len(linears):
        raise ValueError(f"masks must be a list of {len(linears)} masks, one per Linear layer")
    for index, (linear, mask) in enumerate(zip(linears, masks)):
        mask = as_tensor(f"masks[{index}]", mask, ndim=2)
        if mask.shape != linear.weight.shape:
            raise ValueError(f"masks[{index}] must have shape {tuple(linear.weight.shape)}, got {tuple(mask.shape)}")
        mask = mask.to(device=linear.weight.device, dtype=linear.weight.dtype)
        with torch.no_grad():
            linear.weight.mul_(mask)
        linear.weight.register_hook(lambda grad, mask=mask: grad * mask)
    return model


def _check_widths(name: str, values, *, minimum_length: int) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, range)):
        raise TypeError(f"{name} must be a list of positive integers, got {type(values).__name__}")
    if len(values) < minimum_length:
        raise ValueError(f"{name} must list at least {minimum_length} widths, got {len(values)}")
    return [check_int(f"{name}[{i}]", v, minimum=1) for i, v in enumerate(values)]
