"""Weight-tied networks and deep equilibrium models (Chapter 16).

* Universality of weight tying (Bai, Kolter and Koltun 2019, Theorem 3): an
  L-layer network z_{i+1} = act_i(W_i z_i + b_i) is the same computation as
  the weight-tied, input-injected iteration z <- act(W_z z + W_x x + b) on the
  stacked state z = (z_1, ..., z_L). W_z holds W_1, ..., W_{L-1} below its
  block diagonal, so W_z^L = 0: from z = 0, L iterations reach the exact
  fixed point, which is the stack of the original activations.
* A deep equilibrium model defines its output as a fixed point
  z* = act(W z* + U x + b). The plain iteration may converge to it, oscillate
  (periodically or chaotically) or diverge; :func:`fixed_point_iteration`
  runs it and :func:`lyapunov_exponent` measures sensitivity to the start.

Exact constructions compare to many digits: the functions here keep the dtype
of the weights they are given (float64 in the chapter's checks).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from . import nets
from .validation import as_tensor, check_choice, check_int, check_sequence, describe

__all__ = ["WeightTied", "weight_tied", "apply_activations", "layer_outputs", "tied_iterates",
           "fixed_point_iteration", "lyapunov_exponent"]

#: Elementwise activations by name.
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "identity": lambda u: u}


class WeightTied(NamedTuple):
    """The weight-tied, input-injected form of a layered network (Chapter 16)."""

    W_z: torch.Tensor       # (D, D), D = n_1 + ... + n_L, layer weights below the block diagonal
    W_x: torch.Tensor       # (D, n_0), the first layer's weights on top, zeros below
    b: torch.Tensor         # (D,), the biases of all layers, stacked
    sizes: tuple            # (n_1, ..., n_L): the block sizes of the state


def _check_activations(activations, num_layers: int) -> list[str]:
    names = check_sequence("activations", activations, check_choice, choices=ACTIVATIONS)
    if len(names) != num_layers:
        raise ValueError(f"activations must name one activation per layer ({num_layers}), got {len(names)}")
    return names


def weight_tied(layers) -> WeightTied:
    """Rewrite layers [(W_0, b_0), ..., (W_{L-1}, b_{L-1})] as one weight-tied layer (Chapter 16).

    Block i of the state is the output of layer i; W_z[block i + 1, block i] = W_i for
    i >= 1, W_x carries W_0 into block 0, and b stacks the biases.
    """
    layers = nets.check_layers("layers", layers)
    sizes = tuple(W.shape[0] for W, _ in layers)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    starts = [0] + ends[:-1]
    W0 = layers[0].W
    W_z = torch.zeros(ends[-1], ends[-1], dtype=W0.dtype, device=W0.device)
    for i in range(1, len(layers)):
        # (n_{i+1}, n_i) block: the input of layer i is the state block of layer i - 1.
        W_z[starts[i]:ends[i], starts[i - 1]:ends[i - 1]] = layers[i].W
    W_x = torch.zeros(ends[-1], W0.shape[1], dtype=W0.dtype, device=W0.device)
    W_x[:sizes[0]] = W0
    return WeightTied(W_z, W_x, torch.cat([b for _, b in layers]), sizes)


def apply_activations(pre: torch.Tensor, activations, sizes) -> torch.Tensor:
    """Apply activations[i] to block i (of size sizes[i]) of the last dimension of ``pre`` (Chapter 16)."""
    pre = as_tensor("pre", pre, floating=True)
    sizes = [check_int(f"sizes[{i}]", s, minimum=1) for i, s in enumerate(sizes)]
    names = _check_activations(activations, len(sizes))
    if pre.shape[-1] != sum(sizes):
        raise ValueError(f"pre must end in a dimension of size {sum(sizes)}, got {describe(pre)}")
    blocks = torch.split(pre, sizes, dim=-1)
    return torch.cat([ACTIVATIONS[name](block) for name, block in zip(names, blocks)], dim=-1)


def layer_outputs(layers, activations, X) -> torch.Tensor:
    """The activations of every layer of the original network, concatenated: (N, n_1 + ... + n_L) (Chapter 16)."""
    layers = nets.check_layers("layers", layers)
    names = _check_activations(activations, len(layers))
    X = as_tensor("X", X, ndim=2, floating=True)
    if X.shape[1] != layers[0].W.shape[1]:
        raise ValueError(f"X must have {layers[0].W.shape[1]} columns, got {describe(X)}")
    outputs, h = [], X
    for (W, b), name in zip(layers, names):
        h = ACTIVATIONS[name](h @ W.T + b)
        outputs.append(h)
    return torch.cat(outputs, dim=1)


def tied_iterates(tied: WeightTied, activations, X, steps: int) -> torch.Tensor:
    """States z_0 = 0, z_{t+1} = act(W_z z_t + W_x x + b) for every row x of X: (steps + 1, N, D) (Chapter 16)."""
    if not isinstance(tied, WeightTied):
        raise TypeError(f"tied must be an equilibrium.WeightTied, got {describe(tied)}")
    names = _check_activations(activations, len(tied.sizes))
    X = as_tensor("X", X, ndim=2, floating=True)
    if X.shape[1] != tied.W_x.shape[1]:
        raise ValueError(f"X must have {tied.W_x.shape[1]} columns, got {describe(X)}")
    steps = check_int("steps", steps, minimum=0)
    injected = X @ tied.W_x.T + tied.b                        # (N, D): the same at every step
    z = torch.zeros_like(injected)
    states = [z]
    for _ in range(steps):
        z = apply_activations(z @ tied.W_z.T + injected, names, tied.sizes)
        states.append(z)
    return torch.stack(states)


def _check_deq(W, c):
    W = as_tensor("W", W, ndim=2, floating=True)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square matrix, got {describe(W)}")
    c = as_tensor("c", c, ndim=1, floating=True).to(W)
    if len(c) != len(W):
        raise ValueError(f"c must have {len(W)} entries like W, got {describe(c)}")
    return W, c


def fixed_point_iteration(W, c, activation: str = "tanh", steps: int = 200, *, z0=None) -> torch.Tensor:
    """States z_0, ..., z_steps of the equilibrium iteration z <- act(W z + c), c = U x + b (Chapter 16).

    Returns a (steps + 1, D) tensor; z_0 = 0 unless ``z0`` is given.
    """
    W, c = _check_deq(W, c)
    check_choice("activation", activation, ACTIVATIONS)
    steps = check_int("steps", steps, minimum=0)
    z = torch.zeros_like(c) if z0 is None else as_tensor("z0", z0, shape=(len(c),), floating=True).to(c)
    states = [z]
    for _ in range(steps):
        z = ACTIVATIONS[activation](W @ z + c)
        states.append(z)
    return torch.stack(states)


def lyapunov_exponent(W, c, activation: str = "tanh", steps: int = 1000, *, burn_in: int = 200) -> float:
    """Largest Lyapunov exponent of z <- act(W z + c) along its trajectory from 0 (Chapter 16).

    The average over ``steps`` steps (after ``burn_in``) of log ||J_t v_t||, where J_t is
    the Jacobian diag(act'(W z_t + c)) W and v_t a unit tangent vector carried along.
    Positive: nearby starts separate exponentially (chaos); negative: they merge.
    """
    W, c = _check_deq(W, c)
    if activation not in ("tanh", "sigmoid"):
        raise ValueError(f"activation must be 'tanh' or 'sigmoid' (smooth), got {activation!r}")
    steps = check_int("steps", steps, minimum=1)
    burn_in = check_int("burn_in", burn_in, minimum=0)
    z = fixed_point_iteration(W, c, activation, burn_in)[-1]
    v = torch.ones_like(c) / len(c) ** 0.5
    total = 0.0
    for _ in range(steps):
        pre = W @ z + c
        z = ACTIVATIONS[activation](pre)
        slope = 1 - z**2 if activation == "tanh" else z * (1 - z)
        v = slope * (W @ v)
        norm = v.norm()
        total += torch.log(norm).item()
        v = v / norm
    return total / steps
