"""Magnitude pruning, layer-wise and global, and lottery tickets by iterative pruning (Chapter 15).

A mask is a 0/1 tensor shaped like its weight matrix. Magnitude pruning at sparsity s
zeroes the round(s·n) weights of smallest |w|: per layer (each layer loses the fraction
s) or globally (one threshold over all layers, so layers lose different fractions). The
masks equal those of ``torch.nn.utils.prune.l1_unstructured`` and ``global_unstructured``.
Masked weights are kept at zero during retraining by ``symmetry.apply_prepruning``, the
package's one home for fixed masks. Iterative magnitude pruning (Frankle and Carbin's
lottery tickets) trains, prunes a fraction of the surviving weights, rewinds the rest to
their initial values and repeats.
"""
from __future__ import annotations

import copy
from typing import Callable, NamedTuple

import torch
from torch import nn

from .nets import linear_layers
from .runtime import generator
from .symmetry import apply_prepruning
from .validation import as_tensor, check_choice, check_float, check_int, describe


def _tensors(name: str, tensors) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise TypeError(f"{name} must be a non-empty list of tensors, got {describe(tensors)}")
    return [as_tensor(f"{name}[{i}]", t, floating=True).detach() for i, t in enumerate(tensors)]


def _check_sparsity(sparsity) -> float:
    return check_float("sparsity", sparsity, low=0.0, high=1.0)


def _bottom_k_mask(scores: torch.Tensor, num_pruned: int, dtype: torch.dtype) -> torch.Tensor:
    mask = torch.ones(scores.shape, dtype=dtype, device=scores.device)
    if num_pruned:
        # The same call as torch.nn.utils.prune, so that ties (if any) break alike.
        mask.view(-1)[torch.topk(scores.reshape(-1), k=num_pruned, largest=False).indices] = 0
    return mask


def magnitude_masks(weights, sparsity: float, *, scope: str = "layer", masks=None) -> list[torch.Tensor]:
    """0/1 masks zeroing the round(sparsity·n) smallest |w|, per layer or over all layers (Chapter 15).

    With ``masks`` (from an earlier round) the entries they already prune are pruned first,
    so the result extends them: the iterative pruning of the lottery-ticket experiments.
    """
    weights = _tensors("weights", weights)
    sparsity = _check_sparsity(sparsity)
    scope = check_choice("scope", scope, ("layer", "global"))
    if masks is None:
        scores = [w.abs() for w in weights]
    else:
        masks = _tensors("masks", masks)
        if len(masks) != len(weights) or any(m.shape != w.shape for m, w in zip(masks, weights)):
            raise ValueError("masks must hold one mask shaped like each weight tensor")
        scores = [torch.where(m.to(w.device) == 0, -1.0, w.abs()).to(w.dtype) for m, w in zip(masks, weights)]
    if scope == "layer":
        return [_bottom_k_mask(s, round(sparsity * s.numel()), w.dtype) for s, w in zip(scores, weights)]
    flat = torch.cat([s.reshape(-1) for s in scores])
    mask = _bottom_k_mask(flat, round(sparsity * flat.numel()), weights[0].dtype)
    return [part.view_as(w).to(w.dtype) for part, w in zip(mask.split([w.numel() for w in weights]), weights)]


def model_weights(model: nn.Module) -> list[torch.Tensor]:
    """The weight matrices of the nn.Linear layers of a model, in order (Chapter 15)."""
    return [linear.weight for linear in linear_layers(model)]


def sparsity_of(tensors) -> float:
    """The fraction of exactly zero entries over a list of tensors (Chapter 15)."""
    tensors = _tensors("tensors", tensors)
    return sum(int((t == 0).sum()) for t in tensors) / sum(t.numel() for t in tensors)


def prune_model(model: nn.Module, sparsity: float, *, scope: str = "layer") -> list[torch.Tensor]:
    """Magnitude-prune the Linear weights of ``model`` in place and keep them pruned in training (Chapter 15).

    Returns the masks. Gradient hooks zero the pruned entries' gradients, so SGD (with
    momentum or weight decay) and Adam leave them at zero.
    """
    masks = magnitude_masks(model_weights(model), sparsity, scope=scope)
    apply_prepruning(model, masks)
    return masks


def random_masks_like(masks, *, seed: int = 0) -> list[torch.Tensor]:
    """Masks with the same number of zeros per layer as ``masks``, at random places (Chapter 15)."""
    masks = _tensors("masks", masks)
    rng = generator(check_int("seed", seed, minimum=0))
    shuffled = []
    for mask in masks:
        order = torch.randperm(mask.numel(), generator=rng).to(mask.device)
        shuffled.append(mask.reshape(-1)[order].view_as(mask).clone())
    return shuffled


class LotteryTicket(NamedTuple):
    """The result of iterative magnitude pruning (Chapter 15)."""
    masks: list[torch.Tensor]       # the final masks
    sparsities: list[float]         # the measured sparsity after each round
    initial_state: dict             # the rewound (initial) parameters, to retrain the ticket
    round_masks: list               # the masks after each round (the last entry is ``masks``)


def round_sparsities(sparsity: float, rounds: int) -> list[float]:
    """Sparsity after each of ``rounds`` rounds that prune the same fraction of the survivors (Chapter 15).

    Round k reaches 1 - (1 - sparsity)^(k / rounds).
    """
    sparsity = _check_sparsity(sparsity)
    rounds = check_int("rounds", rounds, minimum=1)
    return [1 - (1 - sparsity) ** (k / rounds) for k in range(1, rounds + 1)]


def iterative_magnitude_pruning(model: nn.Module, train: Callable[[nn.Module], object], sparsity: float,
                                rounds: int, *, scope: str = "global") -> LotteryTicket:
    """Lottery tickets: train, prune, rewind to the initial weights, repeat ``rounds`` times (Chapter 15).

    ``model`` holds the initial weights W₀ and is not changed; ``train(net)`` trains a copy
    of it in place, with the current masks kept fixed. The winning ticket is W₀ under the
    returned masks.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    if not callable(train):
        raise TypeError(f"train must be a callable train(model), got {describe(train)}")
    scope = check_choice("scope", scope, ("layer", "global"))
    targets = round_sparsities(sparsity, rounds)
    initial_state = copy.deepcopy(model.state_dict())
    masks, measured, history = None, [], []
    for target in targets:
        net = copy.deepcopy(model)
        if masks is not None:
            apply_prepruning(net, masks)
        train(net)
        masks = magnitude_masks(model_weights(net), target, scope=scope, masks=masks)
        measured.append(sparsity_of(masks))
        history.append(masks)
    return LotteryTicket(masks, measured, initial_state, history)
