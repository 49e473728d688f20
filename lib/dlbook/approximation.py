"""What networks can express: explicit constructions, checked exactly (Chapter 2).

* Universal approximation with sigmoids: a staircase of steep sigmoids that
  averages samples of the target, and random ridge features fitted by least
  squares (which fail for a polynomial activation).
* ReLU interpolation: the Lebesgue form of a piecewise-linear function.
* Depth separation: the tent map with two ReLUs per layer, whose L-fold
  composition (the sawtooth) has 2^L pieces, and the best one-hidden-layer fits.
* Boolean functions: XOR and n-bit parity with one hidden layer of n ReLUs,
  and a recurrent cell of one ReLU that computes parity of any length.

Networks are ``torch.nn`` modules with hand-set weights, built by
``nets.from_layers``. They default to float64, because the constructions are
exact and the chapter compares them with closed forms.
"""
from __future__ import annotations

import itertools
from typing import Callable, NamedTuple

import torch
from torch import nn

from . import nets
from .data import hypercube
from .runtime import generator
from .validation import (
    as_tensor,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_interval,
    check_same_shape,
    check_values_in,
)

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _network(layers, activation: str, *, device, dtype) -> nn.Sequential:
    """nets.from_layers on (W, b) pairs given in float64, cast to ``dtype`` on ``device``."""
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    return nets.from_layers([(torch.as_tensor(W, dtype=torch.float64).to(device, dtype),
                              torch.as_tensor(b, dtype=torch.float64).to(device, dtype))
                             for W, b in layers], activation)


def _points(name: str, x) -> torch.Tensor:
    """A 1-D floating tensor of evaluation points."""
    return as_tensor(name, x, ndim=1, floating=True)


def curve(model: nn.Module, x) -> torch.Tensor:
    """The values of a scalar-input, scalar-output network at the points x, as a 1-D tensor (Chapter 2)."""
    linears = nets.linear_layers(model)
    if linears[0].in_features != 1 or linears[-1].out_features != 1:
        raise ValueError(f"model must map one input to one output, got {linears[0].in_features} inputs "
                         f"and {linears[-1].out_features} outputs")
    x = _points("x", x)
    parameter = linears[0].weight
    with torch.no_grad():
        return model(x.to(parameter.device, parameter.dtype)[:, None])[:, 0]  # (N, 1) -> (N,)


# ---------------------------------------------------------------------------
# Sigmoid networks: the staircase construction and random features
# ---------------------------------------------------------------------------

class StaircaseKnots(NamedTuple):
    """Where the staircase samples its target (c_0..c_m) and where its soft steps sit (t_1..t_m) (Chapter 2)."""

    samples: torch.Tensor
    steps: torch.Tensor


def staircase_knots(num_units: int, low: float, high: float) -> StaircaseKnots:
    """Sample points c_0..c_m (uniform) and step positions t_i = (c_{i-1} + c_i)/2 (Chapter 2)."""
    num_units = check_int("num_units", num_units, minimum=1)
    low, high = check_interval(low, high)
    samples = torch.linspace(low, high, num_units + 1, dtype=torch.float64)
    return StaircaseKnots(samples, 0.5 * (samples[:-1] + samples[1:]))


def sigmoid_staircase(target: Callable, num_units: int, sharpness: float, low: float, high: float,
                      *, device="cpu", dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """One hidden layer of sigmoids approximating ``target`` on [low, high] (Chapter 2).

    Unit i is a soft step sigma(k (x - t_i)) halfway between samples c_{i-1}
    and c_i, with height target(c_i) - target(c_{i-1}); the output bias is
    target(c_0). The steepness is k = sharpness / h for the sample spacing h.
    """
    if not callable(target):
        raise TypeError(f"target must be a function of a tensor, got {type(target).__name__}")
    sharpness = check_float("sharpness", sharpness, low=0.0, low_open=True)
    samples, steps = staircase_knots(num_units, low, high)
    values = torch.as_tensor(target(samples), dtype=torch.float64)
    if values.shape != samples.shape:
        raise ValueError(f"target must return one value per point, got shape {tuple(values.shape)}")
    steepness = sharpness / (samples[1] - samples[0])
    hidden = (torch.full((num_units, 1), float(steepness), dtype=torch.float64), -steepness * steps)
    return _network([hidden, (values.diff()[None, :], values[:1])], "sigmoid", device=device, dtype=dtype)


def staircase_weights(x, num_units: int, sharpness: float, low: float, high: float) -> torch.Tensor:
    """Weights w_i(x) >= 0, summing to 1, with which the staircase averages target(c_i) (Chapter 2).

    w_0 = 1 - s_1, w_i = s_i - s_{i+1}, w_m = s_m for the soft steps s_i(x).
    Shape (len(x), num_units + 1).
    """
    x = _points("x", x).to(torch.float64)
    sharpness = check_float("sharpness", sharpness, low=0.0, low_open=True)
    samples, steps = staircase_knots(num_units, low, high)
    steepness = sharpness / (samples[1] - samples[0])
    soft_steps = torch.sigmoid(steepness * (x[:, None] - steps.to(x.device)[None, :]))  # (N, m)
    ones = torch.ones_like(x)[:, None]
    padded = torch.cat([ones, soft_steps, torch.zeros_like(ones)], dim=1)               # (N, m + 2)
    return padded[:, :-1] - padded[:, 1:]


def staircase_error_bound(x, lipschitz: float, num_units: int, sharpness: float, low: float,
                          high: float) -> torch.Tensor:
    """Pointwise bound L * sum_i w_i(x) |x - c_i| on |staircase - target| for an L-Lipschitz target (Chapter 2)."""
    lipschitz = check_float("lipschitz", lipschitz, low=0.0)
    x = _points("x", x).to(torch.float64)
    samples, _ = staircase_knots(num_units, low, high)
    weights = staircase_weights(x, num_units, sharpness, low, high)
    return lipschitz * (weights * (x[:, None] - samples.to(x.device)[None, :]).abs()).sum(dim=1)


ACTIVATIONS = {
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu": torch.relu,
    "square": torch.square,
}


def ridge_features(x, num_units: int, activation: str = "sigmoid", *, scale: float = 3.0,
                   seed: int = 0) -> torch.Tensor:
    """Features phi(a_i x + b_i) with random a_i ~ N(0, scale²), b_i ~ N(0, scale²) (Chapter 2).

    Shape (len(x), num_units); the parameters are drawn on the CPU from ``seed``.
    """
    x = _points("x", x).to(torch.float64)
    num_units = check_int("num_units", num_units, minimum=1)
    check_choice("activation", activation, ACTIVATIONS)
    scale = check_float("scale", scale, low=0.0, low_open=True)
    rng = generator(check_int("seed", seed, minimum=0))
    slopes = (torch.randn(num_units, generator=rng, dtype=torch.float64) * scale).to(x.device)
    offsets = (torch.randn(num_units, generator=rng, dtype=torch.float64) * scale).to(x.device)
    return ACTIVATIONS[activation](x[:, None] * slopes[None, :] + offsets[None, :])


def random_feature_fit(x, y, num_units: int, activation: str = "sigmoid", *, scale: float = 3.0,
                       seed: int = 0) -> torch.Tensor:
    """Least-squares fit of y by a bias plus random ridge features; returns the fitted values (Chapter 2)."""
    x = _points("x", x).to(torch.float64)
    y = _points("y", y).to(torch.float64)
    if y.shape != x.shape:
        raise ValueError(f"y must have the same shape as x, got {tuple(y.shape)} and {tuple(x.shape)}")
    features = ridge_features(x, num_units, activation, scale=scale, seed=seed)
    design = torch.cat([torch.ones_like(x)[:, None], features], dim=1)  # (N, m + 1)
    coefficients = torch.linalg.lstsq(design.cpu(), y.cpu()[:, None], driver="gelsd").solution
    return (design @ coefficients.to(x.device))[:, 0]


# ---------------------------------------------------------------------------
# ReLU networks: the Lebesgue form of a piecewise-linear interpolant
# ---------------------------------------------------------------------------

class LebesgueForm(NamedTuple):
    """g(x) = slope * x + intercept + sum_i coefficients[i] * relu(x - breakpoints[i]) (Chapter 2)."""

    slope: float
    intercept: float
    coefficients: torch.Tensor
    breakpoints: torch.Tensor


def lebesgue_form(knots, values) -> LebesgueForm:
    """The piecewise-linear interpolant of (knots, values) as an affine map plus m - 1 ReLUs (Chapter 2).

    The first slope gives the affine part; each interior knot carries one ReLU
    whose coefficient is the change of slope there.
    """
    knots = _points("knots", knots).to(torch.float64)
    values = _points("values", values).to(torch.float64)
    if knots.shape != values.shape or len(knots) < 2:
        raise ValueError(f"knots and values must have the same length >= 2, got "
                         f"{len(knots)} and {len(values)}")
    if not torch.all(knots.diff() > 0):
        raise ValueError("knots must be strictly increasing")
    slopes = values.diff() / knots.diff()
    slope = float(slopes[0])
    return LebesgueForm(slope, float(values[0] - slope * knots[0]), slopes.diff(), knots[1:-1])


def relu_interpolant(knots, values, *, device="cpu", dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """One-hidden-layer ReLU net equal to the interpolant of (knots, values) on [knots[0], inf) (Chapter 2).

    Its m units sit at knots[0..m-1]: the unit at the first knot supplies the
    first slope (relu(x - x_0) = x - x_0 there), so no affine skip is needed.
    """
    form = lebesgue_form(knots, values)
    knots = _points("knots", knots).to(torch.float64)
    positions = knots[:-1]
    jumps = torch.cat([torch.tensor([form.slope], dtype=torch.float64), form.coefficients])
    return _network([(torch.ones(len(positions), 1), -positions),
                     (jumps[None, :], knots[:1] * form.slope + form.intercept)], "relu",
                    device=device, dtype=dtype)


# ---------------------------------------------------------------------------
# Depth separation: tent map and sawtooth
# ---------------------------------------------------------------------------

def tent_map(x) -> torch.Tensor:
    """t(x) = 2x on [0, 1/2] and 2 - 2x on [1/2, 1] (Chapter 2)."""
    x = _points("x", x)
    return torch.minimum(2 * x, 2 - 2 * x)


def sawtooth(x, depth: int) -> torch.Tensor:
    """The depth-fold composition of the tent map: 2^(depth-1) teeth on [0, 1] (Chapter 2)."""
    depth = check_int("depth", depth, minimum=0)
    x = _points("x", x)
    for _ in range(depth):
        x = tent_map(x)
    return x


#: One tent layer on the outputs (h1, h2) = (relu(u), relu(u - 1/2)) of the previous one:
#: t(u) = 2 h1 - 4 h2, fed into the next pair of units.
_TENT_OUT = torch.tensor([[2.0, -4.0]], dtype=torch.float64)
_TENT_BIAS = torch.tensor([0.0, -0.5], dtype=torch.float64)


def _tent_layers(depth: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The ``depth`` hidden layers (W, b) of the width-2 sawtooth, without the output layer."""
    layers = [(torch.ones(2, 1, dtype=torch.float64), _TENT_BIAS)]
    # Both units of each later layer read t = 2 h1 - 4 h2: weight [[2, -4], [2, -4]].
    return layers + [(_TENT_OUT.repeat(2, 1), _TENT_BIAS)] * (depth - 1)


def sawtooth_network(depth: int, *, device="cpu", dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """Width-2 ReLU net with ``depth`` hidden layers computing the sawtooth on [0, 1] exactly (Chapter 2)."""
    depth = check_int("depth", depth, minimum=1)
    output = (_TENT_OUT, torch.zeros(1, dtype=torch.float64))
    return _network(_tent_layers(depth) + [output], "relu", device=device, dtype=dtype)


def montufar_network(depth: int, *, device="cpu", dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """Width-2 net: depth - 1 tent layers, then relu(1/3 - t) + relu(t - 2/3); 3 * 2^(depth-1) pieces (Chapter 2)."""
    depth = check_int("depth", depth, minimum=1)
    v_weight = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)   # u -> (1/3 - u, u - 2/3)
    v_bias = torch.tensor([1 / 3, -2 / 3], dtype=torch.float64)
    if depth == 1:
        hidden = [(v_weight, v_bias)]
    else:
        # The last hidden layer reads t = 2 h1 - 4 h2 of the tent layers before it.
        hidden = _tent_layers(depth - 1) + [(v_weight @ _TENT_OUT, v_bias)]
    output = (torch.ones(1, 2, dtype=torch.float64), torch.zeros(1, dtype=torch.float64))
    return _network(hidden + [output], "relu", device=device, dtype=dtype)


class ShallowFit(NamedTuple):
    """A one-hidden-layer ReLU net fitted to the sawtooth, with its exact errors (Chapter 2)."""

    model: nn.Sequential
    sup_error: float
    mse: float


def shallow_sawtooth_fit(depth: int, num_units: int, *, device="cpu") -> ShallowFit:
    """Least-squares fit of the sawtooth by relu(x - j/m), j < m, plus a bias (Chapter 2).

    Both functions are piecewise linear, so the error is exact: its maximum is
    attained at a breakpoint of one of them, and the squared error is
    integrated piece by piece (Simpson's rule is exact for quadratics).
    """
    depth = check_int("depth", depth, minimum=1)
    num_units = check_int("num_units", num_units, minimum=1)
    positions = torch.arange(num_units, dtype=torch.float64) / num_units
    # All breakpoints of target and model; the error is affine between them.
    nodes = torch.unique(torch.cat([torch.arange(2**depth + 1, dtype=torch.float64) / 2**depth,
                                    positions, torch.ones(1, dtype=torch.float64)]))
    left, right = nodes[:-1], nodes[1:]
    # Least squares in the L2([0, 1]) sense: Gram matrix by exact Simpson quadrature per piece.
    quad_x = torch.stack([left, 0.5 * (left + right), right], dim=1).reshape(-1)          # (3P,)
    quad_w = ((right - left)[:, None] * torch.tensor([1 / 6, 4 / 6, 1 / 6], dtype=torch.float64)).reshape(-1)
    design = torch.cat([torch.ones(len(quad_x), 1, dtype=torch.float64),
                        torch.relu(quad_x[:, None] - positions[None, :])], dim=1)         # (3P, m + 1)
    target = sawtooth(quad_x, depth)
    root_w = quad_w.sqrt()[:, None]
    coefficients = torch.linalg.lstsq(root_w * design, root_w[:, 0] * target, driver="gelsd").solution
    model = _network([(torch.ones(num_units, 1), -positions), (coefficients[None, 1:], coefficients[:1])],
                     "relu", device=device, dtype=torch.float64)
    residual = design @ coefficients - target
    sup_error = float(residual.abs().max())
    mse = float((quad_w * residual**2).sum())
    return ShallowFit(model, sup_error, mse)


def shallow_units_lower_bound(depth: int) -> int:
    """2^(depth-1): with fewer hidden units, every one-hidden-layer net has sup error >= 1/2 on the sawtooth
    (Chapter 2)."""
    return 2 ** (check_int("depth", depth, minimum=1) - 1)


# ---------------------------------------------------------------------------
# Boolean functions: XOR and parity
# ---------------------------------------------------------------------------

def bit_parity(X) -> torch.Tensor:
    """x_1 XOR ... XOR x_n for each row of a 0/1 matrix, as int64 (Chapter 2)."""
    X = check_values_in("X", as_tensor("X", X, ndim=2), (0, 1))
    return X.long().sum(dim=1) % 2


def parity_network(num_bits: int, *, device="cpu", dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """n ReLUs computing n-bit parity: relu(s) + sum_j 2(-1)^j relu(s - j), s = sum x_i (Chapter 2).

    This interpolates j -> j mod 2 linearly between the integers 0..n.
    """
    num_bits = check_int("num_bits", num_bits, minimum=1)
    thresholds = torch.arange(num_bits, dtype=torch.float64)
    signs = torch.where(thresholds % 2 == 0, 1.0, -1.0).to(torch.float64)
    out_weights = torch.where(thresholds == 0, 1.0, 2.0 * signs)
    return _network([(torch.ones(num_bits, num_bits), -thresholds), (out_weights[None, :], torch.zeros(1))],
                    "relu", device=device, dtype=dtype)


class ParityCell(nn.Module):
    """Recurrent cell with one ReLU: a = h + x, h' = a - 2 relu(a - 1) = h XOR x on bits (Chapter 2)."""

    def __init__(self, *, device="cpu", dtype: torch.dtype = torch.float64):
        super().__init__()
        # Input a = h + x; output h' = a - 2 relu(a - 1): a linear read-in and read-out around one ReLU.
        self.read_in = _network([(torch.ones(1, 2), torch.tensor([-1.0]))], "identity",
                                device=device, dtype=dtype)[0]
        self.skip = _network([(torch.ones(1, 2), torch.zeros(1))], "identity", device=device, dtype=dtype)[0]

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The next state h XOR x, for a batch of states h and bits x of the same shape."""
        weight = self.skip.weight
        h = as_tensor("h", h, floating=True).to(weight.device, weight.dtype)
        x = as_tensor("x", x).to(weight.device, weight.dtype)
        check_same_shape("h", h, "x", x)
        hx = torch.stack([h, x], dim=-1)  # (batch, 2)
        return (self.skip(hx) - 2 * torch.relu(self.read_in(hx)))[..., 0]


def recurrent_parity(X, cell: ParityCell | None = None) -> torch.Tensor:
    """Run the parity cell over the columns of a 0/1 matrix (batch, length), from h = 0 (Chapter 2)."""
    X = check_values_in("X", as_tensor("X", X, ndim=2), (0, 1))
    X = X if X.is_floating_point() else X.to(torch.float64)
    if cell is None:
        cell = ParityCell(device=X.device, dtype=X.dtype)
    if not isinstance(cell, ParityCell):
        raise TypeError(f"cell must be a ParityCell, got {type(cell).__name__}")
    X = X.to(cell.skip.weight.device, cell.skip.weight.dtype)   # the bits are exact in any float dtype
    h = torch.zeros(X.shape[0], device=X.device, dtype=X.dtype)
    with torch.no_grad():
        for t in range(X.shape[1]):  # a recurrence: one step per sequence position
            h = cell(h, X[:, t])
    return h


def parity_implicants(num_bits: int) -> list[tuple]:
    """Every AND-term (a partial assignment, None = free) on which parity is always 1 (Chapter 2).

    Brute force over all 3^n terms; the answer is the 2^(n-1) full minterms of
    odd weight, which is why a DNF (OR of ANDs) of parity needs 2^(n-1) terms.
    """
    num_bits = check_int("num_bits", num_bits, minimum=1, maximum=10)
    cube = hypercube(num_bits, encoding="01", dtype=torch.float64)
    odd = bit_parity(cube) == 1
    implicants = []
    for term in itertools.product((None, 0, 1), repeat=num_bits):
        covered = torch.ones(len(cube), dtype=torch.bool)
        for i, value in enumerate(term):
            if value is not None:
                covered &= cube[:, i] == value
        if torch.all(odd[covered]):
            implicants.append(term)
    return implicants
