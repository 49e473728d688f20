"""Normalizing flows in miniature: affine coupling layers (RealNVP) stacked into an invertible map
with a cheap log-determinant, and the exact log-likelihood it gives (Chapter 9).

A coupling layer leaves the coordinates selected by a binary mask m unchanged and
transforms the others by a scale and shift computed from them,

    y = m * x + (1 - m) * (x * exp(s(m * x)) + t(m * x)),

so its Jacobian is triangular (after reordering) with log-determinant sum (1 - m) s.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from . import nets
from .runtime import generator
from .validation import as_tensor, check_dtype, check_int, check_ints


class AffineCoupling(nn.Module):
    """One affine coupling layer with a fixed binary ``mask`` (1 = passed through) (Chapter 9).

    The scale and shift come from one MLP with widths (dim, hidden..., 2 dim); the log-scale
    is squashed by tanh so that a single layer can stretch by at most e.
    """

    def __init__(self, mask, hidden=(32, 32), *, seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        mask = as_tensor("mask", mask, ndim=1)
        if not torch.all((mask == 0) | (mask == 1)) or mask.all() or not mask.any():
            raise ValueError("mask must hold 0s and 1s, with at least one of each")
        dtype = check_dtype("dtype", dtype)
        self.register_buffer("mask", mask.to(dtype))
        dim = len(mask)
        self.net = nets.mlp((dim, *check_ints("hidden", hidden, minimum=1), 2 * dim), activation="tanh",
                            seed=check_int("seed", seed, minimum=0), dtype=dtype)

    def _scale_shift(self, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raw_scale, shift = self.net(kept).chunk(2, dim=-1)
        free = 1 - self.mask
        return free * torch.tanh(raw_scale), free * shift

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """y and log |det dy/dx| for each row of x."""
        kept = self.mask * x
        log_scale, shift = self._scale_shift(kept)
        y = kept + (1 - self.mask) * (x * log_scale.exp() + shift)
        return y, log_scale.sum(-1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """x with forward(x)[0] = y: the kept coordinates are y's own, so s and t can be recomputed."""
        kept = self.mask * y
        log_scale, shift = self._scale_shift(kept)
        return kept + (1 - self.mask) * (y - shift) * (-log_scale).exp()


class CouplingFlow(nn.Module):
    """A stack of affine coupling layers with alternating masks over a standard normal base (Chapter 9).

    Its forward pass returns log p(x) = log N(f(x); 0, I) + the sum of the layers'
    log-determinants, so train.fit can maximise it; ``transform`` gives f(x) itself.
    """

    def __init__(self, dim: int = 2, num_layers: int = 4, hidden=(32, 32), *, seed: int = 0,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        dim = check_int("dim", dim, minimum=2)
        num_layers = check_int("num_layers", num_layers, minimum=1)
        seed = check_int("seed", seed, minimum=0)
        first_half = (torch.arange(dim) < dim // 2).long()
        self.layers = nn.ModuleList(
            AffineCoupling(first_half if i % 2 == 0 else 1 - first_half, hidden, seed=seed + i, dtype=dtype)
            for i in range(num_layers))

    def transform(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z = f(x) and log |det df/dx| for each row."""
        log_det = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        for layer in self.layers:
            x, layer_log_det = layer(x)
            log_det = log_det + layer_log_det
        return x, log_det

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        for layer in reversed(self.layers):
            z = layer.inverse(z)
        return z

    def forward(self, x) -> torch.Tensor:
        """The exact log-density log p(x) of each row of x under the flow."""
        x = as_tensor("x", x, ndim=2, floating=True)
        z, log_det = self.transform(x)
        return -0.5 * (z**2).sum(-1) - 0.5 * z.shape[-1] * math.log(2 * math.pi) + log_det

    @torch.no_grad()
    def sample(self, num_samples: int, *, seed: int = 0) -> torch.Tensor:
        """Rows f^-1(z) with z ~ N(0, I) drawn from ``seed``."""
        num_samples = check_int("num_samples", num_samples, minimum=1)
        reference = self.layers[0].mask
        z = torch.randn(num_samples, len(reference), generator=generator(check_int("seed", seed, minimum=0)),
                        dtype=torch.float64).to(reference)
        return self.inverse(z)

