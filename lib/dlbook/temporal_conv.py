"""Temporal convolutional networks: dilated causal convolutions over a sequence (Chapter 6).

A causal convolution computes the output at step t from the inputs at steps
t, t - d, ..., t - (k - 1) d only, by padding (k - 1) d zeros on the left.
Stacking layers with dilations 1, 2, 4, ... (WaveNet) makes the receptive
field grow exponentially with depth: with kernel size 2 and L layers it is
exactly 2^L steps. Sequences are (B, C, T), weights (C_out, C_in, k), as in
``torch.nn.functional.conv1d``.
"""
from __future__ import annotations

import torch

from .runtime import generator
from .validation import as_tensor, check_dtype, check_int, check_ints, describe


def causal_conv1d(x, weight, bias=None, *, dilation: int = 1) -> torch.Tensor:
    """y[b, o, t] = bias[o] + Σ_{c, j} weight[o, c, j] x[b, c, t - (k - 1 - j) d], zeros before the start (Chapter 6).

    The last tap (j = k - 1) reads step t itself, so no output ever sees a
    later input. Each output step gathers its k dilated inputs (one shifted
    slice of the padded sequence per tap), and one einsum contracts them with the kernel.
    """
    x = as_tensor("x", x, ndim=3, floating=True)
    weight = as_tensor("weight", weight, ndim=3, floating=True)
    dilation = check_int("dilation", dilation, minimum=1)
    out_channels, in_channels, kernel_size = weight.shape
    if x.shape[1] != in_channels:
        raise ValueError(f"x must have {in_channels} channels (the weight's second dimension), got {describe(x)}")
    padded = torch.nn.functional.pad(x, ((kernel_size - 1) * dilation, 0))  # zeros on the left only
    steps = x.shape[2]
    taps = [padded[:, :, j * dilation:j * dilation + steps] for j in range(kernel_size)]
    windows = torch.stack(taps, dim=-1)  # (B, C_in, T, k): tap j of step t is x[t - (k - 1 - j) d]
    y = torch.einsum("bctj,ocj->bot", windows, weight)
    if bias is not None:
        bias = as_tensor("bias", bias, shape=(out_channels,), floating=True)
        y = y + bias[:, None]
    return y


def receptive_field(kernel_size: int, dilations) -> int:
    """Inputs a stack of causal convolutions sees: 1 + (k - 1) Σ_ℓ d_ℓ (Chapter 6)."""
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    return 1 + (kernel_size - 1) * sum(check_ints("dilations", dilations, minimum=1))


def wavenet_weights(num_layers: int, channels: int, *, kernel_size: int = 2, seed: int = 0,
                    dtype: torch.dtype = torch.float64, device="cpu") -> list[torch.Tensor]:
    """Kernels (channels, channels, k) for layers of dilation 1, 2, ..., 2^(L-1), drawn N(0, 1/(C k)) (Chapter 6)."""
    num_layers = check_int("num_layers", num_layers, minimum=1)
    channels = check_int("channels", channels, minimum=1)
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    dtype, gen = check_dtype("dtype", dtype), generator(seed)
    return [(torch.randn(channels, channels, kernel_size, generator=gen, dtype=torch.float64)
             / (channels * kernel_size) ** 0.5).to(dtype=dtype, device=device) for _ in range(num_layers)]


def wavenet_stack(x, weights) -> torch.Tensor:
    """tanh of causal convolutions with dilations 1, 2, 4, ... (one per kernel in ``weights``) (Chapter 6)."""
    if isinstance(weights, torch.Tensor) or not isinstance(weights, (list, tuple)) or not weights:
        raise TypeError(f"weights must be a non-empty list of kernels, got {describe(weights)}")
    for layer, weight in enumerate(weights):
        x = torch.tanh(causal_conv1d(x, weight, dilation=2**layer))
    return x
