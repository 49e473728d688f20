"""Plain and residual multilayer perceptrons, and their gradients at initialisation (Chapter 2).

A residual layer computes x + s * (phi(W x + b) - phi(0)): with zero weights it
is exactly the identity, and its branch scale s controls how much each layer
may change the signal.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .validation import as_tensor, check_float, check_int


class ResidualBlock(nn.Module):
    """x -> x + branch_scale * (relu(W x + b) - relu(0)) on vectors of size ``width`` (Chapter 2)."""

    def __init__(self, width: int, branch_scale: float = 1.0, *, dtype: torch.dtype = torch.float32):
        super().__init__()
        width = check_int("width", width, minimum=1)
        self.branch_scale = check_float("branch_scale", branch_scale)
        self.linear = nn.Linear(width, width, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # relu(0) = 0, so the "- phi(0)" of the general form vanishes for ReLU.
        return x + self.branch_scale * torch.relu(self.linear(x))


def mlp(in_dim: int, width: int, depth: int, out_dim: int, *, residual: bool = False,
        branch_scale: float = 1.0, seed: int = 0, device="cpu",
        dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """A ReLU MLP with ``depth`` hidden layers of ``width`` units, PyTorch's default init (Chapter 2).

    With ``residual=True`` every hidden layer after the first is a ResidualBlock.
    The initial weights depend only on ``seed`` (drawn on the CPU, then moved).
    """
    in_dim = check_int("in_dim", in_dim, minimum=1)
    width = check_int("width", width, minimum=1)
    depth = check_int("depth", depth, minimum=1)
    out_dim = check_int("out_dim", out_dim, minimum=1)
    if not isinstance(residual, bool):
        raise TypeError(f"residual must be True or False, got {residual!r}")
    seed = check_int("seed", seed, minimum=0)
    # nn.Linear draws from the global generator; fork it so the caller's stream is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [nn.Linear(in_dim, width, dtype=dtype), nn.ReLU()]
        for _ in range(depth - 1):
            if residual:
                layers.append(ResidualBlock(width, branch_scale, dtype=dtype))
            else:
                layers += [nn.Linear(width, width, dtype=dtype), nn.ReLU()]
        layers.append(nn.Linear(width, out_dim, dtype=dtype))
    return nn.Sequential(*layers).to(device)


def first_layer_gradient_norm(model: nn.Sequential, X, y) -> float:
    """Norm of the cross-entropy gradient with respect to the first layer's weight (Chapter 2)."""
    if not isinstance(model, nn.Sequential) or not isinstance(model[0], nn.Linear):
        raise TypeError("model must be an nn.Sequential whose first module is nn.Linear")
    X = as_tensor("X", X, ndim=2)
    y = as_tensor("y", y, ndim=1)
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same number of rows, got {len(X)} and {len(y)}")
    model.zero_grad()
    F.cross_entropy(model(X), y.long()).backward()
    norm = model[0].weight.grad.norm().item()
    model.zero_grad()
    return norm

