"""Certified bounds on what an adversary can do to a ReLU network (Chapter 13).

For a network made of Linear and ReLU layers and the l-infinity box
[x - eps, x + eps], three lower bounds on the worst-case logit margin
z_y - z_j, from loose and cheap to exact and expensive:

* interval bound propagation (IBP): push the box through each layer,
  l <= z <= u  =>  W+ l - W- u + b <= W z + b <= W+ u - W- l + b;
* the linear-programming relaxation of the exact problem (each unstable ReLU
  replaced by its convex hull), solved by ``scipy.optimize.linprog``;
* the exact mixed-integer program with one binary variable per unstable ReLU
  (big-M constraints from the interval bounds), solved by ``scipy.optimize.milp``.

Any attack finds a margin at or above the exact one, so
IBP <= LP <= MILP <= attack. Bounds run in float64 on the CPU.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize, sparse
from torch import nn

from .validation import as_tensor, check_float, check_int, describe


class Layer(NamedTuple):
    """One affine layer W z + b and whether a ReLU follows it."""

    W: np.ndarray
    b: np.ndarray
    relu: bool


def affine_layers(model: nn.Module) -> list[Layer]:
    """The Linear layers of an ``nn.Sequential`` of Linear and ReLU modules, as float64 arrays."""
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be an nn.Sequential of Linear and ReLU layers, got {describe(model)}")
    layers: list[Layer] = []
    for module in model:
        if isinstance(module, nn.Linear):
            W = module.weight.detach().double().cpu().numpy()
            b = np.zeros(W.shape[0]) if module.bias is None else module.bias.detach().double().cpu().numpy()
            layers.append(Layer(W, b, False))
        elif isinstance(module, nn.ReLU) and layers and not layers[-1].relu:
            layers[-1] = layers[-1]._replace(relu=True)
        else:
            raise TypeError(f"model must hold only Linear layers, each followed by at most one ReLU, "
                            f"got {describe(module)}")
    if not layers or layers[-1].relu:
        raise ValueError("model must end with a Linear layer (the logits)")
    return layers


def _box(x, eps, num_inputs):
    x = as_tensor("x", x, shape=(num_inputs,), floating=True).double().cpu().numpy()
    eps = check_float("eps", eps, low=0.0)
    return x - eps, x + eps


def interval_step(W: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """Bounds on W z + b over the box lower <= z <= upper: W+ l - W- u + b and W+ u - W- l + b.

    ``lower`` and ``upper`` have shape (..., fan_in): one box per row.
    """
    positive, negative = np.maximum(W, 0), np.maximum(-W, 0)
    return lower @ positive.T - upper @ negative.T + b, upper @ positive.T - lower @ negative.T + b


def _last_layer_box(layers, lower, upper):
    """The box that reaches the last layer's input, from the input box."""
    for layer in layers[:-1]:
        lower, upper = interval_step(layer.W, layer.b, lower, upper)
        if layer.relu:
            lower, upper = np.maximum(lower, 0), np.maximum(upper, 0)
    return lower, upper


class IntervalBounds(NamedTuple):
    """Pre-activation bounds of every layer (the last one: the logits)."""

    lower: list[np.ndarray]
    upper: list[np.ndarray]


def interval_bounds(model: nn.Module, x, eps: float) -> IntervalBounds:
    """Interval bound propagation of the box [x - eps, x + eps] through ``model`` (Chapter 13)."""
    layers = affine_layers(model)
    lower, upper = _box(x, eps, layers[0].W.shape[1])
    lowers, uppers = [], []
    for layer in layers:
        lower, upper = interval_step(layer.W, layer.b, lower, upper)
        lowers.append(lower)
        uppers.append(upper)
        if layer.relu:
            lower, upper = np.maximum(lower, 0), np.maximum(upper, 0)
    return IntervalBounds(lowers, uppers)


def _margin_row(layers, label, other):
    last = layers[-1]
    return last.W[label] - last.W[other], last.b[label] - last.b[other]


def interval_margin(model: nn.Module, x, eps: float, label: int, other: int) -> float:
    """IBP lower bound on min (z_label - z_other) over the box, with the difference folded into the last layer."""
    layers = affine_layers(model)
    label, other = _check_classes(label, other, layers[-1].W.shape[0])
    lower, upper = _last_layer_box(layers, *_box(x, eps, layers[0].W.shape[1]))
    w, c = _margin_row(layers, label, other)
    return float(interval_step(w[None], np.array([c]), lower, upper)[0][0])


def _check_classes(label, other, num_classes):
    label = check_int("label", label, minimum=0, maximum=num_classes - 1)
    other = check_int("other", other, minimum=0, maximum=num_classes - 1)
    if label == other:
        raise ValueError(f"other must differ from label, got {other} for both")
    return label, other


def _margin_program(model, x, eps, label, other):
    """The exact problem as a mixed-integer linear program: variables, in order, the input, then for
    each hidden layer its pre-activations h, activations a and indicators d; minimise the margin."""
    layers = affine_layers(model)
    label, other = _check_classes(label, other, layers[-1].W.shape[0])
    bounds = interval_bounds(model, x, eps)
    lower_x, upper_x = _box(x, eps, layers[0].W.shape[1])
    lows, highs, integer = list(lower_x), list(upper_x), [0] * len(lower_x)
    rows, row_low, row_high = [], [], []       # constraints as (sparse row dict, low, high)
    previous = list(range(len(lower_x)))       # indices of the current layer's input variables

    def new_variables(low, high, is_integer):
        start = len(lows)
        lows.extend(low)
        highs.extend(high)
        integer.extend([is_integer] * len(low))
        return list(range(start, start + len(low)))

    for layer, lower, upper in zip(layers[:-1], bounds.lower, bounds.upper):
        h = new_variables(lower, upper, 0)
        a = new_variables(np.maximum(lower, 0), np.maximum(upper, 0), 0)
        d = new_variables((lower >= 0).astype(float), (upper > 0).astype(float), 1)
        for unit in range(len(h)):
            # h = W a_prev + b
            rows.append({h[unit]: 1.0, **{j: -layer.W[unit, k] for k, j in enumerate(previous)}})
            row_low.append(layer.b[unit])
            row_high.append(layer.b[unit])
            l_unit, u_unit = lower[unit], upper[unit]
            if l_unit >= 0:                                  # always on: a = h
                rows.append({a[unit]: 1.0, h[unit]: -1.0})
                row_low.append(0.0)
                row_high.append(0.0)
            elif u_unit > 0:                                 # unstable: big-M with the interval bounds
                rows.append({a[unit]: 1.0, h[unit]: -1.0})   # a >= h
                row_low.append(0.0)
                row_high.append(np.inf)
                rows.append({a[unit]: 1.0, h[unit]: -1.0, d[unit]: -l_unit})   # a <= h - l (1 - d)
                row_low.append(-np.inf)
                row_high.append(-l_unit)
                rows.append({a[unit]: 1.0, d[unit]: -u_unit})                  # a <= u d
                row_low.append(-np.inf)
                row_high.append(0.0)
            # else always off: a is fixed to [0, 0] by its bounds
        previous = a
    w, c = _margin_row(layers, label, other)
    objective = np.zeros(len(lows))
    objective[previous] = w
    matrix = sparse.lil_matrix((len(rows), len(lows)))
    for index, row in enumerate(rows):
        for column, value in row.items():
            matrix[index, column] = value
    return objective, c, matrix.tocsr(), np.array(row_low), np.array(row_high), \
        np.array(lows), np.array(highs), np.array(integer)


def lp_margin(model: nn.Module, x, eps: float, label: int, other: int) -> float:
    """Lower bound on min (z_label - z_other) from the LP relaxation (indicators in [0, 1]), by linprog."""
    objective, constant, matrix, row_low, row_high, lows, highs, _ = _margin_program(model, x, eps, label, other)
    finite_high, finite_low = np.isfinite(row_high), np.isfinite(row_low)
    equal = finite_high & finite_low & (row_low == row_high)
    upper_rows = finite_high & ~equal
    lower_rows = finite_low & ~equal
    result = optimize.linprog(
        objective,
        A_ub=sparse.vstack([matrix[upper_rows], -matrix[lower_rows]]),
        b_ub=np.concatenate([row_high[upper_rows], -row_low[lower_rows]]),
        A_eq=matrix[equal], b_eq=row_high[equal], bounds=list(zip(lows, highs)), method="highs")
    if result.status != 0:
        raise RuntimeError(f"linprog failed: {result.message}")
    return float(result.fun + constant)


def milp_margin(model: nn.Module, x, eps: float, label: int, other: int) -> float:
    """The exact min (z_label - z_other) over the box, from the big-M mixed-integer program, by milp."""
    objective, constant, matrix, row_low, row_high, lows, highs, integer = _margin_program(
        model, x, eps, label, other)
    result = optimize.milp(objective, constraints=optimize.LinearConstraint(matrix, row_low, row_high),
                           integrality=integer, bounds=optimize.Bounds(lows, highs),
                           options={"mip_rel_gap": 0.0})
    if result.status != 0:
        raise RuntimeError(f"milp failed: {result.message}")
    return float(result.fun + constant)


def certified(model: nn.Module, X, y, eps: float) -> torch.Tensor:
    """Which rows IBP certifies: every margin z_y - z_j has a positive interval lower bound (Chapter 13).

    Batched over the rows of X, with the margins folded into the last layer.
    """
    layers = affine_layers(model)
    X = as_tensor("X", X, shape=(None, layers[0].W.shape[1]), floating=True).double().cpu().numpy()
    y = as_tensor("y", y, shape=(len(X),)).long().cpu().numpy()
    eps = check_float("eps", eps, low=0.0)
    lower, upper = _last_layer_box(layers, X - eps, X + eps)                  # (N, width)
    W, b = layers[-1].W, layers[-1].b
    rows = W[y][:, None, :] - W[None, :, :]                                 # (N, classes, width): w_y - w_j
    worst = (np.maximum(rows, 0) * lower[:, None, :] - np.maximum(-rows, 0) * upper[:, None, :]).sum(-1)
    worst += b[y][:, None] - b[None, :]                                     # (N, classes)
    worst[np.arange(len(X)), y] = np.inf
    return torch.from_numpy(worst.min(axis=1) > 0)
