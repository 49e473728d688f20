"""The book's one multilayer-perceptron builder, and networks as lists of (W, b).

Every chapter that needs an MLP calls :func:`mlp` with its layer widths
stated in full, ``(inputs, hidden..., outputs)``::

    model = nets.mlp((64, 128, 128, 10), seed=0)                  # digits classifier
    model = nets.mlp((2, 20, 20, 1), init="he", bias_std=1.0)     # chapter 2's random ReLU nets

Weights are drawn on the CPU from a seeded generator in float64, then cast
and moved, so the same seed gives the same network on every device and the
reader's global random stream is never touched. Chapter 17 works with the
same networks as plain lists of ``(W, b)`` pairs (:func:`to_layers`,
:func:`from_layers`, :func:`forward`).
"""
from __future__ import annotations

import copy
import math
from typing import NamedTuple

import torch
from torch import nn

from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    describe,
)

#: Hidden-layer nonlinearities by name.
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity}
#: Weight initialisations: PyTorch's default U(±1/sqrt(fan_in)) for weights and
#: biases, He (Kaiming) normal N(0, 2/fan_in), Xavier (Glorot) normal N(0, 2/(fan_in+fan_out)).
INITS = ("torch", "he", "xavier")
#: Normalization layers placed between a hidden linear layer and its activation (Chapter 4).
NORMS = (None, "batch", "layer")


class Layer(NamedTuple):
    """One affine layer as plain tensors: ``h -> h @ W.T + b``."""

    W: torch.Tensor
    b: torch.Tensor


class ResidualBlock(nn.Module):
    """x -> x + branch_scale * act(W x + b) on vectors of size ``width`` (Chapter 2)."""

    def __init__(self, linear: nn.Linear, activation: str = "relu", branch_scale: float = 1.0):
        super().__init__()
        self.linear = linear
        self.act = ACTIVATIONS[activation]()
        self.branch_scale = branch_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch_scale * self.act(self.linear(x))


def _draw_layer(fan_in: int, fan_out: int, init: str, bias_std: float | None,
                rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Initial (W, b) in float64 on the CPU."""
    if init == "torch":
        bound = 1.0 / math.sqrt(fan_in)
        W = (2 * torch.rand(fan_out, fan_in, generator=rng, dtype=torch.float64) - 1) * bound
        b = (2 * torch.rand(fan_out, generator=rng, dtype=torch.float64) - 1) * bound
    else:
        variance = 2.0 / fan_in if init == "he" else 2.0 / (fan_in + fan_out)
        W = torch.randn(fan_out, fan_in, generator=rng, dtype=torch.float64) * math.sqrt(variance)
        b = torch.zeros(fan_out, dtype=torch.float64)
    if bias_std is not None:
        b = torch.randn(fan_out, generator=rng, dtype=torch.float64) * bias_std
    return W, b


def mlp(widths, *, activation: str = "relu", init: str = "torch", bias_std: float | None = None,
        residual: bool = False, branch_scale: float = 1.0, norm: str | None = None,
        dropout: float = 0.0, seed: int = 0, dtype: torch.dtype = torch.float32,
        device="cpu") -> nn.Sequential:
    """A fully connected network with layer widths ``(inputs, hidden..., outputs)`` (Chapter 2).

    Each hidden layer is Linear, then optional normalization ("batch" or
    "layer", Chapter 4's from-scratch modules), then ``activation``, then
    optional dropout with drop probability ``dropout`` (regularization.Dropout,
    whose masks come from ``seed``, not the global stream). The output layer is
    linear. ``residual=True`` turns every hidden layer whose width equals its
    input's into a :class:`ResidualBlock` (the first layer changes width and
    stays plain). ``bias_std`` replaces the initialisation's biases by
    N(0, bias_std²) draws.
    """
    widths = check_ints("widths", widths, minimum=1, min_length=2)
    check_choice("activation", activation, ACTIVATIONS)
    check_choice("init", init, INITS)
    if bias_std is not None:
        bias_std = check_float("bias_std", bias_std, low=0.0)
    residual = check_bool("residual", residual)
    branch_scale = check_float("branch_scale", branch_scale)
    check_choice("norm", norm, NORMS)
    dropout = check_float("dropout", dropout, low=0.0, high=1.0, high_open=True)
    if residual and (norm is not None or dropout > 0):
        raise ValueError("residual blocks take no norm or dropout: pass residual=False to use them")
    rng = generator(check_int("seed", seed, minimum=0))
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)

    modules: list[nn.Module] = []
    num_layers = len(widths) - 1
    for index, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        W, b = _draw_layer(fan_in, fan_out, init, bias_std, rng)
        linear = _linear(W, b, dtype, device)
        if index == num_layers - 1:
            modules.append(linear)
        elif residual and fan_in == fan_out:
            modules.append(ResidualBlock(linear, activation, branch_scale))
        else:
            modules.append(linear)
            if norm is not None:
                modules.append(_norm_layer(norm, fan_out, dtype, device))
            modules.append(ACTIVATIONS[activation]())
            if dropout > 0:  # seeded masks: nn.Dropout would draw from the global stream
                from .regularization import Dropout

                modules.append(Dropout(dropout, seed=seed * 1000 + len(modules)))
    return nn.Sequential(*modules)


def _linear(W: torch.Tensor, b: torch.Tensor, dtype, device) -> nn.Linear:
    """An nn.Linear holding copies of W and b (skip_init: torch's own init would draw from the global stream)."""
    linear = nn.utils.skip_init(nn.Linear, W.shape[1], W.shape[0], dtype=dtype, device=device)
    with torch.no_grad():
        linear.weight.copy_(W)
        linear.bias.copy_(b)
    return linear


def _norm_layer(norm: str, width: int, dtype, device) -> nn.Module:
    from .normalization import BatchNorm1d, LayerNorm

    layer = BatchNorm1d(width) if norm == "batch" else LayerNorm(width)
    return layer.to(dtype=dtype, device=device)


def linear_layers(model) -> list[nn.Linear]:
    """The nn.Linear layers of a model, in order (ValueError if there are none)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not layers:
        raise ValueError("model must contain at least one torch.nn.Linear layer")
    return layers


def num_parameters(model) -> int:
    """Number of scalar parameters of a model."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------
# Networks as lists of (W, b) (Chapter 17 permutes and interpolates them)
# ---------------------------------------------------------------------------

def check_layers(name: str, params) -> list[Layer]:
    """A non-empty list of (W, b) pairs whose shapes chain, as :class:`Layer` tuples."""
    if not isinstance(params, (list, tuple)) or len(params) == 0:
        raise TypeError(f"{name} must be a non-empty list of (W, b) pairs, got {describe(params)}")
    layers: list[Layer] = []
    for index, layer in enumerate(params):
        if not isinstance(layer, (list, tuple)) or len(layer) != 2:
            raise TypeError(f"{name}[{index}] must be a pair (W, b), got {describe(layer)}")
        W = as_tensor(f"{name}[{index}][0]", layer[0], ndim=2, floating=True)
        b = as_tensor(f"{name}[{index}][1]", layer[1], ndim=1, floating=True)
        if b.shape[0] != W.shape[0]:
            raise ValueError(f"{name}[{index}]: b has {b.shape[0]} entries but W has {W.shape[0]} rows")
        if layers and W.shape[1] != layers[-1].W.shape[0]:
            raise ValueError(f"{name}[{index}]: W has {W.shape[1]} columns but layer {index - 1} "
                             f"has {layers[-1].W.shape[0]} units")
        layers.append(Layer(W, b))
    return layers


def layer_widths(params) -> list[int]:
    """Widths (n_0, n_1, ..., n_L) of a network given as (W, b) pairs."""
    layers = check_layers("params", params)
    return [layers[0].W.shape[1]] + [W.shape[0] for W, _ in layers]


def to_layers(model) -> list[Layer]:
    """Detached copies of the (weight, bias) of every nn.Linear in ``model``, in order."""
    return check_layers("model", [(m.weight.detach().clone(), m.bias.detach().clone())
                                  for m in linear_layers(model)])


def from_layers(params, activation: str = "relu") -> nn.Sequential:
    """An nn.Sequential of Linear layers and activations holding copies of ``params``."""
    layers = check_layers("params", params)
    check_choice("activation", activation, ACTIVATIONS)
    modules: list[nn.Module] = []
    for index, (W, b) in enumerate(layers):
        modules.append(_linear(W, b, W.dtype, W.device))
        if index < len(layers) - 1:
            modules.append(ACTIVATIONS[activation]())
    return nn.Sequential(*modules)


def random_layers(widths, *, init: str = "torch", seed: int = 0, dtype: torch.dtype = torch.float64,
                  device="cpu") -> list[Layer]:
    """The weights :func:`mlp` would draw for ``widths``, as (W, b) pairs (float64 by default)."""
    return to_layers(mlp(widths, init=init, seed=seed, dtype=dtype, device=device))


def forward(params, X, activation: str = "relu", *, return_hidden: bool = False):
    """Output of the network on inputs X (N, n_0); with ``return_hidden`` also each hidden layer."""
    layers = check_layers("params", params)
    check_choice("activation", activation, ACTIVATIONS)
    X = as_tensor("X", X, ndim=2, floating=True)
    if X.shape[1] != layers[0].W.shape[1]:
        raise ValueError(f"X must have {layers[0].W.shape[1]} columns, got {X.shape[1]}")
    act = ACTIVATIONS[activation]()
    hidden = []
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = act(h)
            hidden.append(h)
    return (h, hidden) if return_hidden else h


def model_with_parameters(model: nn.Module, params: dict) -> nn.Module:
    """A deep copy of ``model`` holding ``params`` ({name: tensor}, as from named_parameters) (Chapter 15)."""
    trained = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in trained.named_parameters():
            p.copy_(params[name])
    return trained
