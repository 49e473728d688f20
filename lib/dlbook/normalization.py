"""Batch norm, layer norm and weight normalization from scratch (Chapter 4).

Each matches its PyTorch counterpart (nn.BatchNorm1d, nn.LayerNorm,
nn.utils.parametrizations.weight_norm) to rounding error; the tests check it
in float64. Batch norm follows PyTorch's conventions: the batch is normalized
with its biased variance, while the running variance is updated with the
unbiased one, and ``momentum`` is the weight of the new batch. The modules
create their parameters in ``dtype`` (PyTorch's default, float32, when None),
like the torch.nn layers they mirror.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .validation import as_tensor, check_bool, check_dtype, check_float, check_int, describe


def _features(name: str, x, num_features: int | None = None) -> torch.Tensor:
    """An (N, C) floating batch, with C = num_features when given."""
    x = as_tensor(name, x, ndim=2, floating=True)
    if num_features is not None and x.shape[1] != num_features:
        raise ValueError(f"{name} must have {num_features} features (columns), got {describe(x)}")
    return x


def _vector(name: str, value, length: int) -> torch.Tensor:
    return as_tensor(name, value, shape=(length,), floating=True)


class BatchNormResult(NamedTuple):
    """The output of a batch-norm step and the running statistics after it (Chapter 4)."""

    output: torch.Tensor
    running_mean: torch.Tensor
    running_var: torch.Tensor


def batch_norm(x, weight, bias, running_mean, running_var, *, training: bool, momentum: float = 0.1,
               eps: float = 1e-5) -> BatchNormResult:
    """Batch norm of an (N, C) batch: the output and the new running mean and variance (Chapter 4).

    Training mode standardizes each feature with the batch mean and biased
    variance and blends the batch statistics into the running ones (unbiased
    variance); evaluation mode uses the running statistics and leaves them unchanged.
    """
    x = _features("x", x)
    num_features = x.shape[1]
    weight, bias = _vector("weight", weight, num_features), _vector("bias", bias, num_features)
    running_mean = _vector("running_mean", running_mean, num_features)
    running_var = _vector("running_var", running_var, num_features)
    training = check_bool("training", training)
    momentum = check_float("momentum", momentum, low=0.0, high=1.0)
    eps = check_float("eps", eps, low=0.0, low_open=True)
    if not training:
        x_hat = (x - running_mean) / torch.sqrt(running_var + eps)
        return BatchNormResult(weight * x_hat + bias, running_mean, running_var)
    if len(x) < 2:
        raise ValueError(f"x must hold at least 2 samples in training mode, got {len(x)}")
    mean = x.mean(dim=0)
    var = x.var(dim=0, unbiased=False)
    x_hat = (x - mean) / torch.sqrt(var + eps)
    unbiased = var * len(x) / (len(x) - 1)
    new_mean = (1 - momentum) * running_mean + momentum * mean.detach()
    new_var = (1 - momentum) * running_var + momentum * unbiased.detach()
    return BatchNormResult(weight * x_hat + bias, new_mean, new_var)


class BatchNorm1d(torch.nn.Module):
    """Batch normalization over the batch dimension of (N, C) inputs, with running statistics (Chapter 4)."""

    def __init__(self, num_features: int, *, momentum: float = 0.1, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.num_features = check_int("num_features", num_features, minimum=1)
        self.momentum = check_float("momentum", momentum, low=0.0, high=1.0)
        self.eps = check_float("eps", eps, low=0.0, low_open=True)
        factory = {"device": device, "dtype": None if dtype is None else check_dtype("dtype", dtype)}
        ones, zeros = torch.ones(num_features, **factory), torch.zeros(num_features, **factory)
        if affine:
            self.weight, self.bias = torch.nn.Parameter(ones.clone()), torch.nn.Parameter(zeros.clone())
        else:  # fixed γ = 1, β = 0
            self.register_buffer("weight", ones.clone())
            self.register_buffer("bias", zeros.clone())
        self.register_buffer("running_mean", zeros.clone())
        self.register_buffer("running_var", ones.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _features("x", x, self.num_features)
        out, new_mean, new_var = batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                                            training=self.training, momentum=self.momentum, eps=self.eps)
        if self.training:
            self.running_mean.copy_(new_mean)
            self.running_var.copy_(new_var)
        return out


def layer_norm(x, weight, bias, *, eps: float = 1e-5) -> torch.Tensor:
    """Standardize each row of x over its features (biased variance), then scale and shift (Chapter 4)."""
    x = as_tensor("x", x, floating=True)
    if x.dim() < 1:
        raise ValueError(f"x must have at least one dimension (the features), got {describe(x)}")
    weight = _vector("weight", weight, x.shape[-1])
    bias = _vector("bias", bias, x.shape[-1])
    eps = check_float("eps", eps, low=0.0, low_open=True)
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return weight * (x - mean) / torch.sqrt(var + eps) + bias


class LayerNorm(torch.nn.Module):
    """Layer normalization over the last dimension; the same in training and evaluation (Chapter 4)."""

    def __init__(self, num_features: int, *, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.num_features = check_int("num_features", num_features, minimum=1)
        self.eps = check_float("eps", eps, low=0.0, low_open=True)
        dtype = None if dtype is None else check_dtype("dtype", dtype)
        self.weight = torch.nn.Parameter(torch.ones(num_features, device=device, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.zeros(num_features, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_tensor("x", x, floating=True)
        if x.dim() < 1 or x.shape[-1] != self.num_features:
            raise ValueError(f"x must have {self.num_features} features in its last dimension "
                             f"(LayerNorm({self.num_features})), got {describe(x)}")
        return layer_norm(x, self.weight, self.bias, eps=self.eps)


def weight_norm(v, g) -> torch.Tensor:
    """w = g · v/‖v‖ row by row: each output unit's weight vector gets length g (Chapter 4)."""
    v = as_tensor("v", v, ndim=2, floating=True)
    g = _vector("g", g, v.shape[0])
    return g[:, None] * v / v.norm(dim=1, keepdim=True)


class WeightNormGradients(NamedTuple):
    """Gradients of the loss with respect to the direction v and the length g of w = g v/‖v‖ (Chapter 4)."""

    v: torch.Tensor
    g: torch.Tensor


def weight_norm_gradients(v, g, grad_w) -> WeightNormGradients:
    """Closed-form (∇_v ℓ, ∂ℓ/∂g) from ∇_w ℓ for w = g v/‖v‖, row by row (Chapter 4).

    ∂ℓ/∂g = ∇_w ℓ · v/‖v‖ and ∇_v ℓ = (g/‖v‖)(I − w wᵀ/‖w‖²) ∇_w ℓ, so ∇_v ℓ ⟂ v.
    """
    v = as_tensor("v", v, ndim=2, floating=True)
    g = _vector("g", g, v.shape[0])
    grad_w = as_tensor("grad_w", grad_w, shape=tuple(v.shape), floating=True)
    norm = v.norm(dim=1, keepdim=True)                     # (out, 1)
    direction = v / norm                                   # unit rows, parallel to w
    grad_g = (grad_w * direction).sum(dim=1)
    grad_v = (g[:, None] / norm) * (grad_w - grad_g[:, None] * direction)
    return WeightNormGradients(grad_v, grad_g)


class WeightNormLinear(torch.nn.Module):
    """A linear layer whose weight is g · v/‖v‖ per output unit (Chapter 4).

    Built from an existing weight (and bias) so that it starts as the same map.
    """

    def __init__(self, weight, bias=None):
        super().__init__()
        weight = as_tensor("weight", weight, ndim=2, floating=True).detach()
        self.v = torch.nn.Parameter(weight.clone())
        self.g = torch.nn.Parameter(weight.norm(dim=1))
        self.bias = None if bias is None else torch.nn.Parameter(
            _vector("bias", bias, weight.shape[0]).detach().clone())

    @property
    def weight(self) -> torch.Tensor:
        return weight_norm(self.v, self.g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias)
