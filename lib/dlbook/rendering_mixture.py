"""The rendering mixture model: MAP inference that looks like a ReLU layer (Chapter 18).

An image is rendered from a class c and a nuisance g (both uniform), a switch
a ~ Bernoulli(q) and Gaussian pixel noise: I ~ N(a μ_cg, Id). Maximising the
joint posterior over (c, g, a) gives

    ĉ = argmax_c max_g ReLU(μ_cgᵀ I + b_cg),   b_cg = -½ ‖μ_cg‖² + logit(q),

one ReLU layer followed by max-pooling over nuisances (Patel, Nguyen and
Baraniuk). The ½ matters: the source's version without it decides differently.
:func:`joint_map_class` computes the same decision from the Gaussian log densities.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .runtime import generator
from .validation import as_tensor, check_float, check_int


class Renders(NamedTuple):
    """Sampled images (num, D) with their class, nuisance and switch."""
    images: torch.Tensor
    classes: torch.Tensor
    nuisances: torch.Tensor
    switches: torch.Tensor


def _means(means) -> torch.Tensor:
    return as_tensor("means", means, ndim=3, floating=True, dtype=torch.float64)      # (C, G, D)


def _switch_prob(switch_prob) -> float:
    return check_float("switch_prob", switch_prob, low=0.0, high=1.0, low_open=True, high_open=True)


def render(means, switch_prob: float, num: int, *, seed: int = 0) -> Renders:
    """Draw ``num`` images from the model with templates ``means`` of shape (C, G, D) (Chapter 18)."""
    means, q = _means(means), _switch_prob(switch_prob)
    num = check_int("num", num, minimum=1)
    C, G, D = means.shape
    gen = generator(seed)
    classes = torch.randint(0, C, (num,), generator=gen)
    nuisances = torch.randint(0, G, (num,), generator=gen)
    switches = (torch.rand(num, generator=gen, dtype=torch.float64) < q).to(torch.float64)
    noise = torch.randn(num, D, generator=gen, dtype=torch.float64)
    return Renders(switches[:, None] * means[classes, nuisances] + noise, classes, nuisances, switches)


def relu_scores(images, means, switch_prob: float, *, half: bool = True) -> torch.Tensor:
    """max_g ReLU(μ_cgᵀ I + b_cg) for each image and class, shape (num, C) (Chapter 18).

    ``half=False`` uses the source's bias -‖μ‖² + logit(q), for comparison.
    """
    means, q = _means(means), _switch_prob(switch_prob)
    images = as_tensor("images", images, shape=(None, means.shape[2]), floating=True, dtype=torch.float64)
    bias = -(0.5 if half else 1.0) * (means ** 2).sum(-1) + math.log(q / (1 - q))        # (C, G)
    pre = torch.einsum("nd,cgd->ncg", images, means) + bias
    return torch.relu(pre).amax(-1)


def relu_classifier(images, means, switch_prob: float, *, half: bool = True) -> torch.Tensor:
    """The class with the largest ReLU score (Chapter 18)."""
    return relu_scores(images, means, switch_prob, half=half).argmax(-1)


def joint_map_class(images, means, switch_prob: float) -> torch.Tensor:
    """The class of the most probable (c, g, a) given each image, from the Gaussian log densities (Chapter 18)."""
    means, q = _means(means), _switch_prob(switch_prob)
    images = as_tensor("images", images, shape=(None, means.shape[2]), floating=True, dtype=torch.float64)
    on = -0.5 * ((images[:, None, None, :] - means[None]) ** 2).sum(-1) + math.log(q)          # (num, C, G)
    off = (-0.5 * (images ** 2).sum(-1) + math.log(1 - q))[:, None, None].expand_as(on)
    return torch.maximum(on, off).amax(-1).argmax(-1)
