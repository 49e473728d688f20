"""Checks of chapter 2's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import torch

import dlbook.exercises.checks.ch02_feedforward as feedforward
from dlbook import approximation, linear_regions, nets
from dlbook.exercises import run_check

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("2.1", "2.2", "2.3", "2.4", "2.5")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def lebesgue_form(knots, values):
    slopes = torch.diff(values) / torch.diff(knots)
    changes = torch.diff(slopes)
    bends = changes != 0
    return slopes[0].item(), (values[0] - slopes[0] * knots[0]).item(), changes[bends], knots[1:-1][bends]


def lebesgue_form_numpy(knots, values):
    k, v = np.asarray(knots), np.asarray(values)
    slopes = np.diff(v) / np.diff(k)
    changes = np.diff(slopes)
    keep = np.flatnonzero(changes)
    return float(slopes[0]), float(v[0] - slopes[0] * k[0]), list(changes[keep]), k[1:-1][keep].tolist()


def count_line_regions(W, b):
    """Euler's formula: 1 + (distinct lines) + sum over points of (lines through it - 1)."""
    lines = set()
    for (a1, a2), c in zip(W.tolist(), b.tolist()):
        a1, a2, c = Fraction(a1), Fraction(a2), Fraction(c)
        lead = a1 if a1 != 0 else a2
        lines.add((a1 / lead, a2 / lead, c / lead))
    lines = list(lines)
    through = {}
    for (a1, a2, c), (p1, p2, q) in itertools.combinations(lines, 2):
        det = a1 * p2 - a2 * p1
        if det:
            point = ((a2 * q - p2 * c) / det, (p1 * c - a1 * q) / det)
            through.setdefault(point, set()).update({(a1, a2, c), (p1, p2, q)})
    return 1 + len(lines) + sum(len(s) - 1 for s in through.values())


def count_line_regions_incremental(W, b):
    """Add the lines one at a time: each new distinct line gains (distinct crossings + 1) regions."""
    lines = []
    for (a1, a2), c in zip(W.tolist(), b.tolist()):
        a1, a2, c = Fraction(a1), Fraction(a2), Fraction(c)
        lead = a1 if a1 != 0 else a2
        if (a1 / lead, a2 / lead, c / lead) not in lines:
            lines.append((a1 / lead, a2 / lead, c / lead))
    regions = 1
    for k, (a1, a2, c) in enumerate(lines):
        crossings = {((a2 * q - p2 * c) / (a1 * p2 - a2 * p1), (p1 * c - a1 * q) / (a1 * p2 - a2 * p1))
                     for p1, p2, q in lines[:k] if a1 * p2 - a2 * p1 != 0}
        regions += len(crossings) + 1
    return regions


def symmetric_layers(values):
    """Units relu(s - j), j = 0..n-1; output weights: the first slope, then the slope changes."""
    f = torch.tensor(values, dtype=torch.float64)
    n = len(values) - 1
    slopes = torch.diff(f)
    out = torch.cat([slopes[:1], torch.diff(slopes)])
    W1 = torch.ones(n, n, dtype=torch.float64)
    b1 = -torch.arange(n, dtype=torch.float64)
    return [(W1, b1), (out[None, :], f[:1])]


def symmetric_layers_numpy(values):
    """The same units in reverse order, as NumPy arrays."""
    f = np.asarray(values, dtype=float)
    n = len(f) - 1
    slopes = np.diff(f)
    out = np.concatenate([slopes[:1], np.diff(slopes)])[::-1]
    return [(np.ones((n, n)), -np.arange(n)[::-1].astype(float)), (out[None, :].copy(), f[:1])]


def zigzag_layers(k, depth):
    """Units relu(u - j/k), j < k; output weights k, then slope changes -2k, +2k, ..."""
    c = torch.tensor([float(k)] + [2.0 * k * (-1) ** j for j in range(1, k)], dtype=torch.float64)
    b = -torch.arange(k, dtype=torch.float64) / k
    layers = [(torch.ones(k, 1, dtype=torch.float64), b)]
    layers += [(c[None, :].repeat(k, 1), b)] * (depth - 1)
    return layers + [(c[None, :], torch.zeros(1, dtype=torch.float64))]


def zigzag_layers_numpy(k, depth):
    """Lists of lists: the zigzag as relu(k u) plus relus of k u - j with changes 2(-1)^j."""
    c = [1.0] + [2.0 * (-1) ** j for j in range(1, k)]
    first = ([[float(k)] for _ in range(k)], [-float(j) for j in range(k)])
    later = ([[float(k) * cj for cj in c] for _ in range(k)], [-float(j) for j in range(k)])
    return [first] + [later] * (depth - 1) + [([c], [0.0])]


def expected_regions_1d(num_units, weight_std, bias_std, low, high):
    scale = bias_std / weight_std
    return 1 + num_units * (math.atan(high / scale) - math.atan(low / scale)) / math.pi


def expected_regions_1d_torch(num_units, weight_std, bias_std, low, high):
    """The Cauchy CDF 1/2 + atan(x / s) / pi, in torch."""
    s = torch.tensor(bias_std / weight_std, dtype=torch.float64)
    cdf = [0.5 + torch.atan(torch.tensor(x, dtype=torch.float64) / s) / math.pi for x in (low, high)]
    return 1 + num_units * (cdf[1] - cdf[0])


REFERENCES = {
    "2.1": [lebesgue_form, lebesgue_form_numpy],
    "2.2": [count_line_regions, count_line_regions_incremental],
    "2.3": [symmetric_layers, symmetric_layers_numpy],
    "2.4": [zigzag_layers, zigzag_layers_numpy],
    "2.5": [expected_regions_1d, expected_regions_1d_torch],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _slopes_not_changes(knots, values):
    slopes = torch.diff(values) / torch.diff(knots)
    return slopes[0].item(), (values[0] - slopes[0] * knots[0]).item(), slopes[1:], knots[1:-1]


def _intercept_is_first_value(knots, values):
    slope, _, coefficients, breakpoints = lebesgue_form(knots, values)
    return slope, values[0].item(), coefficients, breakpoints


def _every_interior_knot(knots, values):
    """The displayed formula as it stands: m - 1 terms, zero coefficients included."""
    slopes = torch.diff(values) / torch.diff(knots)
    return slopes[0].item(), (values[0] - slopes[0] * knots[0]).item(), torch.diff(slopes), knots[1:-1]


def _every_knot_gets_a_relu(knots, values):
    slope, intercept, coefficients, breakpoints = lebesgue_form(knots, values)
    zero = torch.zeros(1, dtype=knots.dtype)
    return slope, intercept, torch.cat([zero, coefficients, zero]), torch.cat([knots[:1], breakpoints, knots[-1:]])


def _zaslavsky(W, b):
    m = len(W)
    return 1 + m + m * (m - 1) // 2


def _no_deduplication(W, b):
    lines = [tuple(map(Fraction, (w0, w1, c))) for (w0, w1), c in zip(W.tolist(), b.tolist())]
    regions = 1
    for k, (a1, a2, c) in enumerate(lines):
        crossings = set()
        for p1, p2, q in lines[:k]:
            det = a1 * p2 - a2 * p1
            if det:
                crossings.add(((a2 * q - p2 * c) / det, (p1 * c - a1 * q) / det))
        regions += len(crossings) + 1
    return regions


def _points_without_multiplicity(W, b):
    """1 + lines + distinct intersection points: wrong when three lines meet in one point."""
    lines = {tuple(x / (w0 if w0 else w1) for x in map(Fraction, (w0, w1, c)))
             for (w0, w1), c in zip(W.tolist(), b.tolist())}
    points = set()
    for (a1, a2, c), (p1, p2, q) in itertools.combinations(lines, 2):
        det = a1 * p2 - a2 * p1
        if det:
            points.add(((a2 * q - p2 * c) / det, (p1 * c - a1 * q) / det))
    return 1 + len(lines) + len(points)


def _grid_count(W, b):
    side = torch.linspace(-20, 20, 400, dtype=torch.float64)
    grid = torch.cartesian_prod(side, side)
    patterns = (grid @ W.T + b) > 0
    return torch.unique(patterns, dim=0).shape[0]


def _parity_whatever_the_values(values):
    n = len(values) - 1
    return symmetric_layers([float(j % 2) for j in range(n + 1)])


def _symmetric_slopes_not_changes(values):
    f = torch.tensor(values, dtype=torch.float64)
    n = len(values) - 1
    return [(torch.ones(n, n, dtype=torch.float64), -torch.arange(n, dtype=torch.float64)),
            (torch.diff(f)[None, :], f[:1])]


def _symmetric_without_the_first_slope(values):
    """Units only at the interior integers 1..n-1 (the affine part left out)."""
    f = torch.tensor(values, dtype=torch.float64)
    n = len(values) - 1
    changes = torch.diff(torch.diff(f))
    W1 = torch.ones(max(n - 1, 1), n, dtype=torch.float64)
    b1 = -torch.arange(1, max(n, 2), dtype=torch.float64)
    out = changes[None, :] if n > 1 else torch.zeros(1, 1, dtype=torch.float64)
    return [(W1, b1), (out, f[:1])]


def _symmetric_one_unit_too_many(values):
    """A unit at every integer 0..n: correct values, but n + 1 hidden units."""
    (W1, b1), (W2, b2) = symmetric_layers(list(values) + [2 * values[-1] - values[-2]])
    n = len(values) - 1
    return [(W1[:, :n], b1), (W2, b2)]


def _symmetric_shortcut(values):
    net = approximation.relu_interpolant(torch.arange(len(values), dtype=torch.float64),
                                         torch.tensor(values, dtype=torch.float64))
    (W1, b1), (W2, b2) = nets.to_layers(net)
    return [(W1.repeat(1, len(values) - 1), b1), (W2, b2)]


def _zigzag_variant(*, change=2.0, bias_scale=None, skip_last=False):
    def build(k, depth):
        c = torch.tensor([float(k)] + [change * k * (-1) ** j for j in range(1, k)], dtype=torch.float64)
        b = -torch.arange(k, dtype=torch.float64) / (k if bias_scale is None else bias_scale)
        layers = [(torch.ones(k, 1, dtype=torch.float64), b)]
        layers += [(c[None, :].repeat(k, 1), b)] * (depth - 1)
        if skip_last:  # read the last hidden layer's units with equal weights
            return layers + [(torch.ones(1, k, dtype=torch.float64) / k, torch.zeros(1, dtype=torch.float64))]
        return layers + [(c[None, :], torch.zeros(1, dtype=torch.float64))]
    return build


def _zigzag_shallow(k, depth):
    """One hidden layer with a unit at every breakpoint: the right function, but k^L units."""
    pieces = k**depth
    knots = np.arange(pieces + 1) / pieces
    values = (np.arange(pieces + 1) % 2).astype(float)
    slopes = np.diff(values) / np.diff(knots)
    out = np.concatenate([slopes[:1], np.diff(slopes)])
    return [(np.ones((pieces, 1)), -knots[:-1]), (out[None, :], np.zeros(1))]


def _zigzag_shortcut(k, depth):
    if k == 2:
        return nets.to_layers(approximation.sawtooth_network(depth))
    return zigzag_layers(k, depth)


def _regions_without_the_one(num_units, weight_std, bias_std, low, high):
    return expected_regions_1d(num_units, weight_std, bias_std, low, high) - 1


def _regions_variance_ratio(num_units, weight_std, bias_std, low, high):
    """The Cauchy scale taken as bias_std² / weight_std²."""
    return expected_regions_1d(num_units, weight_std**2, bias_std**2, low, high)


def _regions_gaussian_kinks(num_units, weight_std, bias_std, low, high):
    """Kinks treated as Gaussian with standard deviation bias_std / weight_std."""
    s = bias_std / weight_std
    mass = 0.5 * (math.erf(high / (s * math.sqrt(2))) - math.erf(low / (s * math.sqrt(2))))
    return 1 + num_units * mass


def _regions_simulated(num_units, weight_std, bias_std, low, high):
    rng = np.random.default_rng(0)
    kinks = -rng.normal(0, bias_std, (2000, num_units)) / rng.normal(0, weight_std, (2000, num_units))
    return 1 + ((kinks > low) & (kinks < high)).sum(axis=1).mean()


def _regions_with_the_chapter(num_units, weight_std, bias_std, low, high):
    counts = [linear_regions.activation_regions_1d(
        [(torch.randn(num_units, 1, generator=torch.Generator().manual_seed(s), dtype=torch.float64) * weight_std,
          torch.randn(num_units, generator=torch.Generator().manual_seed(s + 1000), dtype=torch.float64)
          * bias_std)], low, high) for s in range(200)]
    return float(np.mean(counts))


WRONG = {
    "2.1": {
        "slopes instead of slope changes": _slopes_not_changes,
        "intercept = first value": _intercept_is_first_value,
        "zero coefficients kept": _every_interior_knot,
        "a ReLU at every knot": _every_knot_gets_a_relu,
        "the package's lebesgue_form": lambda k, v: tuple(approximation.lebesgue_form(k, v)),
    },
    "2.2": {
        "Zaslavsky's general-position count": _zaslavsky,
        "repeated lines counted twice": _no_deduplication,
        "points counted without multiplicity": _points_without_multiplicity,
        "grid sampling": _grid_count,
        "the package's exact counter": lambda W, b: linear_regions.count_regions_2d([(W, b)]),
    },
    "2.3": {
        "parity whatever the values": _parity_whatever_the_values,
        "slopes instead of slope changes": _symmetric_slopes_not_changes,
        "the first slope left out": _symmetric_without_the_first_slope,
        "n + 1 hidden units": _symmetric_one_unit_too_many,
        "the package's relu_interpolant": _symmetric_shortcut,
    },
    "2.4": {
        "the package's sawtooth network": _zigzag_shortcut,
        "slope changes k instead of 2k": _zigzag_variant(change=1.0),
        "kinks at j instead of j/k": _zigzag_variant(bias_scale=1.0),
        "last layer reads the units with equal weights": _zigzag_variant(skip_last=True),
        "one hidden layer with k^L units": _zigzag_shallow,
    },
    "2.5": {
        "the 1 left out": _regions_without_the_one,
        "variances instead of standard deviations": _regions_variance_ratio,
        "Gaussian kinks": _regions_gaussian_kinks,
        "a simulation of 2000 layers": _regions_simulated,
        "the package's region counter": _regions_with_the_chapter,
    },
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns a 3x3 tensor",
                      "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_expected_values_are_right():
    counts = {label: feedforward._arrangement_regions([(int(a), int(c_), int(d)) for (a, c_), d in zip(W, b)])
              for label, W, b in feedforward._line_cases()}
    assert counts["a single line"] == 2
    assert counts["4 parallel lines"] == 5
    assert counts["3 lines through the origin"] == 6
    assert counts["a 3 x 3 grid of horizontal and vertical lines"] == 16
    assert counts["the same line three times, once with flipped sign"] == 4
    assert counts["4 lines through (1, 1) and one more"] == 1 + 5 + 3 + 4   # one 4-fold point, 4 simple ones
    assert counts["3 random lines"] == 7
    # Term counts of exercise 2.1: only the knots where the slope changes.
    terms = {label: sum(c != 0 for c in feedforward._slope_changes(k, v))
             for label, k, v in feedforward._interpolation_cases()}
    assert terms["a trapezoid: slopes 1, 0, 0, -1"] == 2
    assert terms["collinear values (no bend anywhere)"] == 0
    assert terms["uneven knots, slopes 2, 2, -2, -2"] == 1
    assert terms["the 5-fold tent composition, knots j/32"] == 31
    # The composed zigzag alternates 0, 1, 0, ... on the grid j / k^L and has slope ±k^L.
    for k, depth in [(2, 5), (3, 3), (5, 2)]:
        grid = np.arange(k**depth + 1) / k**depth
        assert np.allclose(feedforward._zigzag(grid, k, depth), np.arange(k**depth + 1) % 2, atol=1e-12)
    assert np.allclose(feedforward._zigzag(np.linspace(0, 1, 101), 2, 1),
                       approximation.tent_map(torch.linspace(0, 1, 101, dtype=torch.float64)).numpy())
    # The chapter's setting (32 He-initialised units, bias sd 0.1, [-3, 3]) and the measurement agree.
    exact = feedforward._exact_regions(32, math.sqrt(2), 0.1, -3.0, 3.0)
    mean, error = feedforward._measured_regions(32, math.sqrt(2), 0.1, -3.0, 3.0, np.random.default_rng(0))
    assert abs(exact - 32.52) < 0.01 and abs(mean - exact) < 5 * error


def test_wrong_symmetric_width_message_names_the_widths():
    result = run_check("2.3", WRONG["2.3"]["n + 1 hidden units"])
    assert "at most 2 units" in result.message and "[3, 1]" in result.message


def test_simulation_fails_on_the_exact_value_not_the_measurement():
    result = run_check("2.5", WRONG["2.5"]["a simulation of 2000 layers"])
    assert "within relative tolerance 1e-06" in result.message or "mean over 40,000" in result.message
