"""Linear regions of ReLU networks: exact counts on the line and the plane, and their bounds (Chapter 2).

A ReLU network is affine on each set of inputs that share one *activation
pattern* (which hidden units are on). This module counts those sets exactly:

* on an interval, by following every breakpoint through the layers;
* on the plane, by cutting convex polygons with the zero lines of the units,
  layer by layer. Each polygon carries the affine map from the input to the
  current hidden layer, so the next layer's zero sets are straight lines inside
  it. Polygons live in homogeneous coordinates (x, y, w), w >= 0, so that the
  unbounded regions are handled exactly too: the plane is the open hemisphere
  w > 0, and its boundary w = 0 is the line at infinity.

The combinatorics run in float64 NumPy on the CPU (tiny polygons, many of
them); tensors from any device are accepted. Grid sampling, for comparison,
runs on the model's device.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .validation import as_tensor, check_int, check_interval, check_ints, describe

#: Relative size below which a value at a polygon vertex counts as zero.
ZERO_TOL = 1e-12
#: Relative (spherical) area below which a polygon piece counts as empty.
AREA_TOL = 1e-13


class Region(NamedTuple):
    """One convex cell of an activation pattern: its pattern and its corners (Chapter 2).

    ``rays`` are homogeneous corners (x, y, w), w >= 0, in counter-clockwise
    order; a corner with w = 0 is a direction to infinity. ``pattern`` is one
    0/1 entry per hidden unit, layer after layer.
    """

    pattern: tuple
    rays: np.ndarray

    @property
    def vertices(self) -> np.ndarray:
        """Corners as points (k, 2); only meaningful for regions inside a box (all w > 0)."""
        return self.rays[:, :2] / self.rays[:, 2:]


class Pieces(NamedTuple):
    """A piecewise-linear function on [low, high]: breakpoints and the affine map on each piece (Chapter 2)."""

    breakpoints: np.ndarray  # (P + 1,) from low to high
    slopes: np.ndarray       # (P,)
    intercepts: np.ndarray   # (P,)


# ---------------------------------------------------------------------------
# Networks as lists of layers
# ---------------------------------------------------------------------------

def hidden_layers(model) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (W, b) of every hidden ReLU layer, as float64 arrays (Chapter 2).

    ``model`` is an ``nn.Sequential`` of ``Linear`` layers each followed by a
    ``ReLU``, optionally ending in one ``Linear`` output layer, or a list of
    (W, b) pairs meaning hidden ReLU layers.
    """
    return _parse_model(model)[0]


def _as_pair(name: str, W, b) -> tuple[np.ndarray, np.ndarray]:
    W = as_tensor(f"{name} weight", W, ndim=2).detach().to("cpu", torch.float64).numpy()
    b = as_tensor(f"{name} bias", b, ndim=1).detach().to("cpu", torch.float64).numpy()
    if b.shape[0] != W.shape[0]:
        raise ValueError(f"model: {name} has a weight with {W.shape[0]} rows but a bias of "
                         f"length {b.shape[0]}")
    if not (np.isfinite(W).all() and np.isfinite(b).all()):
        raise ValueError(f"model: {name} holds NaN or infinity")
    return W, b


def _parse_model(model):
    """Split a model into hidden ReLU layers and an optional output layer (W, b) or None."""
    if isinstance(model, nn.Sequential):
        modules = list(model)
        hidden, output, i = [], None, 0
        while i < len(modules):
            module = modules[i]
            if not isinstance(module, nn.Linear):
                raise ValueError(f"model must alternate nn.Linear and nn.ReLU, found "
                                 f"{type(module).__name__} at position {i}")
            bias = module.bias if module.bias is not None else torch.zeros(module.out_features)
            pair = _as_pair(f"layer {i}", module.weight, bias)
            if i + 1 < len(modules) and isinstance(modules[i + 1], nn.ReLU):
                hidden.append(pair)
                i += 2
            elif i == len(modules) - 1:
                output = pair
                i += 1
            else:
                raise ValueError(f"model: the Linear layer at position {i} must be followed by "
                                 f"nn.ReLU unless it is the last layer")
    elif isinstance(model, (list, tuple)):
        hidden, output = [], None
        for k, pair in enumerate(model):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise TypeError(f"model must be an nn.Sequential or a list of (W, b) pairs; "
                                f"entry {k} is {type(pair).__name__}")
            hidden.append(_as_pair(f"layer {k}", *pair))
    else:
        raise TypeError(f"model must be an nn.Sequential of Linear and ReLU layers or a list of "
                        f"(W, b) pairs, got {type(model).__name__}")
    if not hidden:
        raise ValueError("model must have at least one hidden ReLU layer")
    for k in range(1, len(hidden)):
        if hidden[k][0].shape[1] != hidden[k - 1][0].shape[0]:
            raise ValueError(f"model: layer {k} expects {hidden[k][0].shape[1]} inputs but layer "
                             f"{k - 1} has {hidden[k - 1][0].shape[0]} units")
    if output is not None and output[0].shape[1] != hidden[-1][0].shape[0]:
        raise ValueError("model: the output layer does not fit the last hidden layer")
    return hidden, output


def activation_patterns(model, X) -> torch.Tensor:
    """Boolean (N, total hidden units): which units are on at each input row (Chapter 2)."""
    hidden, _ = _parse_model(model)
    X = as_tensor("X", X, ndim=2)
    if X.shape[1] != hidden[0][0].shape[1]:
        raise ValueError(f"X must have {hidden[0][0].shape[1]} columns, got {X.shape[1]}")
    h = X.to(torch.float64)
    patterns = []
    for W, b in hidden:
        z = h @ torch.as_tensor(W, device=X.device).T + torch.as_tensor(b, device=X.device)
        patterns.append(z > 0)
        h = torch.relu(z)
    return torch.cat(patterns, dim=1)


# ---------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------

def zaslavsky_bound(num_hyperplanes: int, dim: int) -> int:
    """R_n(m) = sum_{i<=n} binom(m, i): regions of m hyperplanes in general position in R^n (Chapter 2)."""
    num_hyperplanes = check_int("num_hyperplanes", num_hyperplanes, minimum=0)
    dim = check_int("dim", dim, minimum=1)
    return sum(math.comb(num_hyperplanes, i) for i in range(min(num_hyperplanes, dim) + 1))


def deep_upper_bound(hidden_widths, dim: int) -> int:
    """prod_l R_{d_l}(m_l) with d_l = min(n, m_1, ..., m_{l-1}): an upper bound on the regions (Chapter 2).

    ``hidden_widths`` lists m_1, ..., m_L and ``dim`` is the input dimension n.
    Inside one region of the first l-1 layers the network is affine with rank
    at most d_l, so layer l's m_l units act as m_l hyperplanes in d_l dimensions.
    """
    hidden_widths = check_ints("hidden_widths", hidden_widths, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    bound, effective_dim = 1, dim
    for width in hidden_widths:
        bound *= zaslavsky_bound(width, effective_dim)
        effective_dim = min(effective_dim, width)
    return bound


def montufar_lower_bound(width: int, depth: int, dim: int) -> int:
    """R_n(m) * floor(m/n)^(n(L-1)): regions some depth-L width-m net on R^n reaches, m >= n (Chapter 2)."""
    width = check_int("width", width, minimum=1)
    depth = check_int("depth", depth, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    if width < dim:
        raise ValueError(f"width must be >= dim for Montúfar's construction, got width={width}, dim={dim}")
    return zaslavsky_bound(width, dim) * (width // dim) ** (dim * (depth - 1))


# ---------------------------------------------------------------------------
# Exact counting on an interval
# ---------------------------------------------------------------------------

def _cells_1d(hidden, low: float, high: float):
    """Intervals of constant activation pattern with the affine map x -> a x + c of the last layer."""
    cells = [(low, high, np.ones(1), np.zeros(1), ())]
    for W, b in hidden:
        new_cells = []
        for left, right, a, c, pattern in cells:
            slope, offset = W @ a, W @ c + b  # pre-activations are slope * x + offset here
            with np.errstate(divide="ignore", invalid="ignore"):
                roots = -offset / slope
            inside = roots[(slope != 0) & (roots > left) & (roots < right)]
            cuts = np.unique(np.concatenate([[left], inside, [right]]))
            for x0, x1 in zip(cuts[:-1], cuts[1:]):
                on = slope * (0.5 * (x0 + x1)) + offset > 0
                new_cells.append((x0, x1, slope * on, offset * on, pattern + tuple(on.astype(int))))
        cells = new_cells
    return cells


def activation_regions_1d(model, low: float, high: float) -> int:
    """Exact number of activation patterns (intervals) of a ReLU net on [low, high], 1-D input (Chapter 2)."""
    hidden, _ = _parse_model(model)
    if hidden[0][0].shape[1] != 1:
        raise ValueError("model must take 1-D inputs")
    low, high = check_interval(low, high)
    return len(_cells_1d(hidden, low, high))


def linear_pieces_1d(model, low: float, high: float) -> Pieces:
    """The network's output on [low, high] as maximal affine pieces, exactly (Chapter 2).

    Adjacent activation intervals whose output maps agree are merged, so this
    counts the pieces of the function, not of the activation pattern.
    """
    hidden, output = _parse_model(model)
    if hidden[0][0].shape[1] != 1:
        raise ValueError("model must take 1-D inputs")
    if output is None or output[0].shape[0] != 1:
        raise ValueError("model must end in a Linear layer with one output")
    low, high = check_interval(low, high)
    w_out, b_out = output[0][0], output[1][0]
    edges, slopes, intercepts = [low], [], []
    for x0, x1, a, c, _ in _cells_1d(hidden, low, high):
        slope, intercept = float(w_out @ a), float(w_out @ c + b_out)
        scale = max(1.0, abs(slope), abs(intercept))
        if slopes and abs(slope - slopes[-1]) <= 1e-12 * scale \
                and abs(intercept - intercepts[-1]) <= 1e-12 * scale:
            edges[-1] = x1  # same affine map: the function does not bend here
            continue
        edges.append(x1)
        slopes.append(slope)
        intercepts.append(intercept)
    return Pieces(np.array(edges), np.array(slopes), np.array(intercepts))


# ---------------------------------------------------------------------------
# Exact counting on the plane
# ---------------------------------------------------------------------------

def _split(rays: np.ndarray, values: np.ndarray):
    """Cut a convex spherical polygon by the sign of a linear function (values at its corners).

    Sutherland-Hodgman clipping in homogeneous coordinates: the crossing point
    of an edge is a linear combination of its two end rays. Returns the parts
    where the function is >= 0 and <= 0 (either may be None).
    """
    positive, negative = [], []
    k = len(rays)
    for i in range(k):
        r0, v0 = rays[i], values[i]
        r1, v1 = rays[(i + 1) % k], values[(i + 1) % k]
        if v0 >= 0:
            positive.append(r0)
        if v0 <= 0:
            negative.append(r0)
        if (v0 > 0 and v1 < 0) or (v0 < 0 and v1 > 0):
            crossing = r0 * (v1 / (v1 - v0)) - r1 * (v0 / (v1 - v0))
            crossing = crossing / np.linalg.norm(crossing)
            positive.append(crossing)
            negative.append(crossing)
    return (np.array(positive) if len(positive) >= 3 else None,
            np.array(negative) if len(negative) >= 3 else None)


def _area(rays: np.ndarray) -> float:
    """Sum of det(r_0, r_i, r_{i+1}) over a fan: positive for a proper counter-clockwise piece."""
    return float(np.linalg.det(np.stack([np.broadcast_to(rays[0], rays[1:-1].shape),
                                         rays[1:-1], rays[2:]], axis=1)).sum())


def _check_box(box) -> tuple[float, float, float, float]:
    """(x_min, x_max, y_min, y_max) as floats, with x_min < x_max and y_min < y_max."""
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise TypeError(f"box must be (x_min, x_max, y_min, y_max), got {describe(box)}")
    x0, x1 = check_interval(box[0], box[1], names=("box x_min", "box x_max"))
    y0, y1 = check_interval(box[2], box[3], names=("box y_min", "box y_max"))
    return x0, x1, y0, y1


def _start_polygons(box):
    """The plane as four quadrant cones (w >= 0), or a box as one polygon, counter-clockwise."""
    if box is None:
        e1, e2, e3 = np.eye(3)
        return [np.array([e3, s1 * e1, s2 * e2]) if s1 * s2 > 0 else np.array([e3, s2 * e2, s1 * e1])
                for s1, s2 in [(1, 1), (-1, 1), (-1, -1), (1, -1)]]
    x0, x1, y0, y1 = _check_box(box)
    corners = np.array([[x0, y0, 1.0], [x1, y0, 1.0], [x1, y1, 1.0], [x0, y1, 1.0]])
    return [corners / np.linalg.norm(corners, axis=1, keepdims=True)]


def activation_regions_2d(model, box=None) -> list[Region]:
    """Every convex cell of constant activation pattern of a ReLU net on the plane, exactly (Chapter 2).

    ``box=None`` covers the whole plane (unbounded cells included); a box
    (x_min, x_max, y_min, y_max) returns the cells clipped to it. A cell that
    the plane's quadrants cut into several pieces appears once per piece;
    ``count_regions_2d`` counts distinct patterns.
    """
    hidden, _ = _parse_model(model)
    if hidden[0][0].shape[1] != 2:
        raise ValueError(f"model must take 2-D inputs, got {hidden[0][0].shape[1]}")
    # Each cell: (rays, A) with the current hidden vector h = A @ (x, y, w) on the cell.
    lift = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    cells = [(rays, lift, ()) for rays in _start_polygons(box)]
    for W, b in hidden:
        new_cells = []
        for rays, A, pattern in cells:
            G = W @ A + np.outer(b, [0.0, 0.0, 1.0])  # pre-activations z = G @ (x, y, w)
            values = rays @ G.T                        # (corners, units)
            scale = np.abs(values).max(axis=0, keepdims=True) + 1e-300
            values = np.where(np.abs(values) <= ZERO_TOL * scale, 0.0, values)
            # Only units whose zero line crosses the cell split it.
            crossing = np.flatnonzero((values > 0).any(axis=0) & (values < 0).any(axis=0))
            pieces = [(rays, values)]
            for unit in crossing:
                next_pieces = []
                for piece_rays, piece_values in pieces:
                    unit_values = piece_values[:, unit]
                    if (unit_values >= 0).all() or (unit_values <= 0).all():
                        next_pieces.append((piece_rays, piece_values))
                        continue
                    for part in _split(piece_rays, unit_values):
                        if part is not None and _area(part) > AREA_TOL:
                            part_values = part @ G.T
                            part_scale = np.abs(part_values).max(axis=0, keepdims=True) + 1e-300
                            part_values = np.where(np.abs(part_values) <= ZERO_TOL * part_scale,
                                                   0.0, part_values)
                            next_pieces.append((part, part_values))
                pieces = next_pieces
            for piece_rays, _ in pieces:
                # The pattern is read at an interior point, the normalised mean of the corners.
                inside = piece_rays.mean(axis=0)
                on = (G @ inside) > 0
                new_cells.append((piece_rays, G * on[:, None], pattern + tuple(on.astype(int))))
        cells = new_cells
    return [Region(pattern, rays) for rays, _, pattern in cells]


def count_regions_2d(model, box=None) -> int:
    """Exact number of activation regions of a ReLU net on the plane (or inside a box) (Chapter 2)."""
    return len({region.pattern for region in activation_regions_2d(model, box)})


def count_regions_on_grid(model, box, resolution: int) -> int:
    """Distinct activation patterns seen on a resolution x resolution grid over a box (Chapter 2).

    A lower bound on the true count: cells smaller than the grid spacing, or
    outside the box, are missed.
    """
    x0, x1, y0, y1 = _check_box(box)
    resolution = check_int("resolution", resolution, minimum=2)
    device = _model_device(model)
    xs = torch.linspace(x0, x1, resolution, dtype=torch.float64, device=device)
    ys = torch.linspace(y0, y1, resolution, dtype=torch.float64, device=device)
    grid = torch.cartesian_prod(xs, ys)  # (resolution², 2)
    return count_distinct_patterns(activation_patterns(model, grid))


def pattern_codes(patterns: torch.Tensor) -> torch.Tensor:
    """Pack boolean activation patterns (N, U) into integer codes (N, ceil(U / 52)), one bit per unit (Chapter 2).

    Equal rows get equal codes, and unique() on a few integer columns is much
    faster than on U boolean columns. Each word holds 52 bits, so the packing
    can be a float64 matrix product, exact below 2^53.
    """
    patterns = as_tensor("patterns", patterns, ndim=2)
    if patterns.dtype != torch.bool:
        raise TypeError(f"patterns must be a boolean tensor, got dtype {patterns.dtype}")
    num_units = patterns.shape[1]
    num_words = max(1, -(-num_units // 52))
    powers = torch.zeros(num_words * 52, num_words, dtype=torch.float64, device=patterns.device)
    unit = torch.arange(num_words * 52, device=patterns.device)
    powers[unit, unit // 52] = 2.0 ** (unit % 52).to(torch.float64)
    return (patterns.to(torch.float64) @ powers[:num_units]).to(torch.int64)  # (N, words)


def count_distinct_patterns(patterns: torch.Tensor) -> int:
    """Number of distinct rows of a boolean pattern matrix (Chapter 2)."""
    codes = pattern_codes(patterns)
    if codes.shape[1] == 1:
        return int(torch.unique(codes[:, 0]).shape[0])
    return int(torch.unique(codes, dim=0).shape[0])


def _model_device(model) -> torch.device:
    if isinstance(model, nn.Module):
        for parameter in model.parameters():
            return parameter.device
    return torch.device("cpu")
