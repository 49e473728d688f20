"""What a trained network responds to: inputs found by gradient ascent on one output (Chapter 5).

Activation maximisation starts from a faint random image and follows the
gradient of one class score with respect to the *input*, the network's
weights staying fixed. An L2 penalty keeps the image from growing without
bound, a random shift of a pixel or two before every step (jitter) discourages
patterns that exploit one exact alignment, and the pixels are kept in the
range of the training images.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .runtime import generator
from .validation import as_tensor, check_float, check_int, check_ints, describe


class Maximised(NamedTuple):
    """The images (one per target), the target scores along the way, and every class score at the end."""

    images: torch.Tensor
    target_scores: list
    final_logits: torch.Tensor


def maximize_activation(model: nn.Module, targets, shape, *, steps: int = 300, lr: float = 0.05,
                        l2: float = 0.01, jitter: int = 1, low: float = 0.0, high: float = 1.0,
                        seed: int = 0) -> Maximised:
    """For each class in ``targets``, an input of ``shape`` (C, H, W) that makes its score large (Chapter 5).

    Maximises model(x)[target] - l2 ||x||² by Adam on x, shifting the batch by
    up to ``jitter`` pixels (torch.roll, a fresh random shift each step) and
    clamping to [low, high] after each step. The model is put in evaluation mode
    and its weights are not changed.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    targets = as_tensor("targets", check_ints("targets", targets, minimum=0)).long()
    shape = tuple(check_ints("shape", shape, minimum=1, min_length=3))
    if len(shape) != 3:
        raise ValueError(f"shape must be (C, H, W), got {shape}")
    steps = check_int("steps", steps, minimum=1)
    lr, l2 = check_float("lr", lr, low=0.0, low_open=True), check_float("l2", l2, low=0.0)
    jitter = check_int("jitter", jitter, minimum=0)
    rng = generator(check_int("seed", seed, minimum=0))
    parameter = next(model.parameters())
    dtype, device = parameter.dtype, parameter.device
    model.eval()
    x = (low + 0.1 * (high - low) * torch.rand(len(targets), *shape, generator=rng, dtype=torch.float64))
    x = x.to(dtype=dtype, device=device).requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    rows = torch.arange(len(targets), device=device)
    history = []
    for _ in range(steps):
        shift = torch.randint(-jitter, jitter + 1, (2,), generator=rng).tolist()
        scores = model(torch.roll(x, shifts=shift, dims=(-2, -1)))[rows, targets.to(device)]
        objective = scores.sum() - l2 * (x**2).sum()
        optimizer.zero_grad()
        (-objective).backward()
        optimizer.step()
        with torch.no_grad():
            x.clamp_(low, high)
        history.append(scores.detach().mean().item())
    with torch.no_grad():
        final = model(x)
    return Maximised(x.detach(), history, final)
