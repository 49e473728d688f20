"""Symmetries of fully connected networks that leave the function unchanged (Chapter 17).

Networks are lists of layers ``[(W_1, b_1), ..., (W_L, b_L)]`` with ``W_l`` of shape
(n_l, n_{l-1}) as in ``torch.nn.Linear`` and an activation between layers (none after
the last); :mod:`dlbook.nets` builds, checks and runs them. Hidden layers are
1, ..., L-1. Three kinds of re-parametrisation keep the function: permuting hidden
units, flipping the sign of a unit of an odd activation (tanh), and rescaling a unit
of a positively homogeneous one (ReLU). The module also counts the equivalent
settings (for dense layers and for sparse connection tables such as LeNet-5's),
brute-forces orbits of tiny nets, computes the source's normalised Frobenius
"metric" Φ, and builds the binary masks of the proposed pre-pruning remedy.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Sequence

import torch

from .nets import Layer, check_layers, linear_layers
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    describe,
)

#: Which of the 6 maps of LeNet-5's layer S2 feed each of the 16 maps of layer C3
#: (LeCun et al. 1998, Table I): six maps read 3 neighbouring S2 maps, six read 4
#: neighbours, three read 4 non-neighbours, and the last reads all six.
LENET5_C3_INPUTS = ((0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 5), (0, 4, 5), (0, 1, 5),
                    (0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (0, 3, 4, 5), (0, 1, 4, 5), (0, 1, 2, 5),
                    (0, 1, 3, 4), (1, 2, 4, 5), (0, 2, 3, 5), (0, 1, 2, 3, 4, 5))


def flatten(params) -> torch.Tensor:
    """All weights and biases of the network as one vector (Chapter 17)."""
    return torch.cat([t.reshape(-1) for layer in check_layers("params", params) for t in layer])


# ---------------------------------------------------------------------------
# The three symmetries
# ---------------------------------------------------------------------------

def permute_hidden(params, perms) -> list[Layer]:
    """Reorder the hidden units: unit i of hidden layer l becomes unit perms[l-1][i] of the old net.

    Rows of W_l and entries of b_l are permuted, and the matching columns of W_{l+1}, so
    the function is unchanged: W_l -> P_l W_l P_{l-1}^T, b_l -> P_l b_l (Chapter 17).
    """
    layers = check_layers("params", params)
    if not isinstance(perms, (list, tuple)) or len(perms) != len(layers) - 1:
        raise ValueError(f"perms must be a list of {len(layers) - 1} permutations (one per hidden layer), "
                         f"got {describe(perms)}")
    perms = [_check_perm(f"perms[{i}]", p, layers[i].W.shape[0], layers[i].W.device)
             for i, p in enumerate(perms)]
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W[:, perms[index - 1]]
        if index < len(layers) - 1:
            W, b = W[perms[index]], b[perms[index]]
        out.append(Layer(W.clone(), b.clone()))
    return out


def flip_signs(params, layer: int, signs) -> list[Layer]:
    """Multiply the in-weights, bias and out-weights of hidden ``layer``'s units by ``signs`` (±1).

    Keeps the function for odd activations such as tanh, since tanh(-z) = -tanh(z) (Chapter 17).
    """
    layers = check_layers("params", params)
    layer = check_int("layer", layer, minimum=1, maximum=len(layers) - 1)
    signs = _unit_factors("signs", signs, layers, layer)
    if not torch.all(signs.abs() == 1):
        raise ValueError(f"signs must hold only +1 and -1, got {signs.tolist()[:8]}")
    return _scale_unit(layers, layer, signs, signs)


def rescale_relu(params, layer: int, scales) -> list[Layer]:
    """Multiply hidden ``layer``'s in-weights and bias by scales > 0 and divide its out-weights by them.

    Keeps the function for ReLU, since relu(a z) = a relu(z) for a > 0 (Chapter 17).
    """
    layers = check_layers("params", params)
    layer = check_int("layer", layer, minimum=1, maximum=len(layers) - 1)
    scales = _unit_factors("scales", scales, layers, layer)
    if not torch.all(scales > 0):
        raise ValueError(f"scales must all be positive, got {scales.tolist()[:8]}")
    return _scale_unit(layers, layer, scales, 1.0 / scales)


def _unit_factors(name: str, values, layers: list[Layer], layer: int) -> torch.Tensor:
    """One floating factor per unit of hidden ``layer``, on the network's device and dtype."""
    W = layers[layer - 1].W
    values = as_tensor(name, values, ndim=1, floating=True)
    if values.shape[0] != W.shape[0]:
        raise ValueError(f"{name} must hold one entry per unit of hidden layer {layer} ({W.shape[0]}), "
                         f"got {values.shape[0]}")
    return values.to(device=W.device, dtype=W.dtype)


def _scale_unit(layers: list[Layer], layer: int, incoming, outgoing) -> list[Layer]:
    out = [Layer(W.clone(), b.clone()) for W, b in layers]
    W_in, b_in = out[layer - 1]
    out[layer - 1] = Layer(W_in * incoming[:, None], b_in * incoming)
    W_out, b_out = out[layer]
    out[layer] = Layer(W_out * outgoing[None, :], b_out)
    return out


def _check_perm(name: str, perm, size: int, device) -> torch.Tensor:
    perm = as_tensor(name, perm, ndim=1)
    if perm.is_floating_point() or perm.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got {describe(perm)}")
    perm = perm.to(device=device, dtype=torch.long)
    if perm.shape[0] != size or not torch.equal(perm.sort().values, torch.arange(size, device=device)):
        raise ValueError(f"{name} must be a permutation of 0..{size - 1}, got {perm.tolist()[:8]}...")
    return perm


def random_permutations(params, *, seed: int = 0) -> list[torch.Tensor]:
    """One random permutation per hidden layer, drawn on the CPU from a seeded generator (Chapter 17)."""
    layers = check_layers("params", params)
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
    hidden_widths = check_ints("hidden_widths", hidden_widths, minimum=1, min_length=0)
    sign_flips = check_bool("sign_flips", sign_flips)
    log_order = sum(math.lgamma(n + 1) + (n * math.log(2) if sign_flips else 0.0) for n in hidden_widths)
    return log_order / math.log(10)


def orbit_size_bruteforce(params, *, sign_flips: bool = False, decimals: int = 9) -> int:
    """Number of distinct parameter vectors reached by all hidden permutations (and sign flips).

    Enumerates the whole group, so only for tiny nets (at most 10^6 group elements).
    Vectors are compared after rounding to ``decimals`` digits. Equals the group order
    divided by the size of the stabiliser of ``params`` (orbit-stabiliser theorem) (Chapter 17).
    """
    layers = check_layers("params", params)
    sign_flips = check_bool("sign_flips", sign_flips)
    decimals = check_int("decimals", decimals, minimum=0)
    hidden = [W.shape[0] for W, _ in layers[:-1]]
    if log10_group_order(hidden, sign_flips=sign_flips) > 6:
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


def connection_table_symmetries(inputs_of: Sequence[Sequence[int]], num_inputs: int) -> int:
    """Pairs (σ, τ) of permutations of the input and output maps that keep a connection table (Chapter 17).

    Output map j reads the input maps ``inputs_of[j]``. Permuting the input maps by σ
    and the output maps by τ keeps a network with this table (fully connected before
    and after it) a member of the same architecture exactly when τ maps the reading
    sets onto σ's image of them. For each σ of the ``num_inputs`` input maps, the
    output maps can follow in ∏ m! ways, m running over the multiplicities of equal
    reading sets. Enumerates σ, so ``num_inputs`` is at most 9.
    """
    num_inputs = check_int("num_inputs", num_inputs, minimum=1, maximum=9)
    if isinstance(inputs_of, (str, bytes)) or not isinstance(inputs_of, (list, tuple)) or not inputs_of:
        raise TypeError(f"inputs_of must be a non-empty list of lists of input maps, got {describe(inputs_of)}")
    reading_sets = [frozenset(check_ints(f"inputs_of[{j}]", maps, minimum=0, min_length=0))
                    for j, maps in enumerate(inputs_of)]
    for j, maps in enumerate(reading_sets):
        if maps and max(maps) >= num_inputs:
            raise ValueError(f"inputs_of[{j}] names input map {max(maps)}, but there are only {num_inputs}")
    table = Counter(reading_sets)
    ways_to_follow = math.prod(math.factorial(m) for m in table.values())
    count = 0
    for sigma in itertools.permutations(range(num_inputs)):
        if Counter(frozenset(sigma[i] for i in maps) for maps in reading_sets) == table:
            count += ways_to_follow
    return count


# ---------------------------------------------------------------------------
# The source's normalised Frobenius comparison
# ---------------------------------------------------------------------------

def phi_distance(W, W_other) -> float:
    """Φ(W, W') = Σ(W - W')² / Σ(W + W')²: 0 for equal matrices, about 1 for unrelated ones (Chapter 17).

    Not a metric: undefined at W' = -W (raises ValueError), no triangle inequality,
    and not invariant under the function-preserving symmetries.
    """
    W = as_tensor("W", W, floating=True)
    W_other = as_tensor("W_other", W_other, floating=True)
    if W.shape != W_other.shape:
        raise ValueError(f"W and W_other must have the same shape, got {tuple(W.shape)} and {tuple(W_other.shape)}")
    denominator = (W + W_other).pow(2).sum()
    if denominator <= 0:
        raise ValueError("Φ is undefined when W_other = -W (the denominator is zero)")
    return float((W - W_other).pow(2).sum() / denominator)


def phi_per_layer(params_a, params_b) -> list[float]:
    """Φ between the weight matrices of two networks of equal shape, one value per layer (Chapter 17)."""
    a, b = check_layers("params_a", params_a), check_layers("params_b", params_b)
    if len(a) != len(b):
        raise ValueError(f"params_a and params_b must have the same number of layers, got {len(a)} and {len(b)}")
    return [phi_distance(Wa, Wb) for (Wa, _), (Wb, _) in zip(a, b)]


# ---------------------------------------------------------------------------
# Pre-pruning: fixed binary masks that make units distinguishable
# ---------------------------------------------------------------------------

def prepruning_masks(widths: Sequence[int], zero_rate: float, *, seed: int = 0,
                     dtype: torch.dtype = torch.float32, device="cpu") -> list[torch.Tensor]:
    """Random 0/1 masks, one per layer shaped like its W, each entry 0 with probability zero_rate (Chapter 17).

    ``widths`` lists every layer, ``(inputs, hidden..., outputs)``.
    """
    widths = check_ints("widths", widths, minimum=1, min_length=2)
    zero_rate = check_float("zero_rate", zero_rate, low=0.0, high=1.0, high_open=True)
    rng = generator(check_int("seed", seed, minimum=0))
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    return [(torch.rand(fan_out, fan_in, generator=rng) >= zero_rate).to(device=device, dtype=dtype)
            for fan_in, fan_out in zip(widths[:-1], widths[1:])]


def expected_identical_mask_pairs(num_units: int, fan_in: int, zero_rate: float) -> float:
    """Expected number of pairs of units with identical random in-masks: C(n, 2) (ρ² + (1-ρ)²)^m (Chapter 17)."""
    num_units = check_int("num_units", num_units, minimum=1)
    fan_in = check_int("fan_in", fan_in, minimum=0)
    zero_rate = check_float("zero_rate", zero_rate, low=0.0, high=1.0)
    return math.comb(num_units, 2) * (zero_rate ** 2 + (1 - zero_rate) ** 2) ** fan_in


def identical_mask_pairs(mask) -> torch.Tensor:
    """Number of pairs of identical rows (units) in a mask, or in a batch of masks (..., n, m) (Chapter 17)."""
    mask = as_tensor("mask", mask)
    if mask.dim() < 2:
        raise ValueError(f"mask must have at least 2 dimensions (units, fan_in), got {describe(mask)}")
    # Fingerprint each row by its inner product with fixed random weights: identical rows give
    # bitwise identical codes, and distinct 0/1 rows collide with probability zero.
    weights = torch.randn(mask.shape[-1], generator=generator(12345), dtype=torch.float64).to(mask.device)
    codes = mask.to(torch.float64) @ weights  # (..., n)
    same = codes.unsqueeze(-1) == codes.unsqueeze(-2)  # (..., n, n)
    return same.triu(diagonal=1).sum(dim=(-2, -1))


def mask_preserving_permutations(masks: Sequence[torch.Tensor]) -> int:
    """How many hidden-unit permutations (all layers) map a list of layer masks onto itself (Chapter 17).

    Brute force over every permutation of every hidden layer, so only for tiny nets.
    """
    if isinstance(masks, (str, bytes)) or not isinstance(masks, (list, tuple)) or len(masks) < 2:
        raise TypeError(f"masks must be a list of at least two layer masks, got {describe(masks)}")
    masks = [as_tensor(f"masks[{i}]", m, ndim=2, floating=True) for i, m in enumerate(masks)]
    as_params = check_layers("masks", [(m, torch.zeros(m.shape[0], dtype=m.dtype)) for m in masks])
    hidden = [m.shape[0] for m in masks[:-1]]
    if log10_group_order(hidden) > 6:
        raise ValueError(f"hidden widths {hidden} give too many permutations to enumerate")
    count = 0
    for perms in itertools.product(*[itertools.permutations(range(n)) for n in hidden]):
        permuted = permute_hidden(as_params, [torch.tensor(p) for p in perms])
        count += all(torch.equal(Mp, M) for (Mp, _), M in zip(permuted, masks))
    return count


def _check_masks(params, masks) -> tuple[list[Layer], list[torch.Tensor]]:
    layers = check_layers("params", params)
    if isinstance(masks, (str, bytes)) or not isinstance(masks, (list, tuple)) or len(masks) != len(layers):
        raise ValueError(f"masks must be a list of {len(layers)} masks, one per layer, got {describe(masks)}")
    checked = []
    for index, ((W, _), mask) in enumerate(zip(layers, masks)):
        mask = as_tensor(f"masks[{index}]", mask, shape=tuple(W.shape), floating=True)
        checked.append(mask.to(device=W.device, dtype=W.dtype))
    return layers, checked


def apply_masks(params, masks) -> list[Layer]:
    """The network with each weight matrix multiplied entrywise by its 0/1 mask; biases unchanged (Chapter 17)."""
    layers, masks = _check_masks(params, masks)
    return [Layer(W * mask, b.clone()) for (W, b), mask in zip(layers, masks)]


def fraction_outside_mask(params, masks) -> list[float]:
    """Per layer, the fraction of Σ W² carried by entries that the mask sets to zero (Chapter 17)."""
    layers, masks = _check_masks(params, masks)
    return [float((W * (1 - mask)).pow(2).sum() / W.pow(2).sum().clamp(min=torch.finfo(W.dtype).tiny))
            for (W, _), mask in zip(layers, masks)]


def apply_prepruning(model: torch.nn.Module, masks: Sequence[torch.Tensor]) -> torch.nn.Module:
    """Zero the masked weights of every nn.Linear in ``model`` and keep them zero during training (Chapter 17).

    A gradient hook multiplies each weight gradient by its mask, so plain SGD (with
    momentum, without weight decay) never moves a pruned weight away from zero.
    """
    linears = linear_layers(model)
    if isinstance(masks, (str, bytes)) or not isinstance(masks, (list, tuple)) or len(masks) != len(linears):
        raise ValueError(f"masks must be a list of {len(linears)} masks, one per Linear layer, got {describe(masks)}")
    for index, (linear, mask) in enumerate(zip(linears, masks)):
        mask = as_tensor(f"masks[{index}]", mask, shape=tuple(linear.weight.shape), floating=True)
        mask = mask.to(device=linear.weight.device, dtype=linear.weight.dtype)
        with torch.no_grad():
            linear.weight.mul_(mask)
        linear.weight.register_hook(lambda grad, mask=mask: grad * mask)
    return model
