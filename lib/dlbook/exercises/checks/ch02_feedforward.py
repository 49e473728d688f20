"""Checks for the exercises of chapter 2 (02_feedforward): ReLU networks written down by hand, line
arrangements, and the expected number of linear regions.

Expected values are computed here by independent code (NumPy interpolation and forward passes,
exact rational arithmetic for line arrangements, integer parity, a Monte Carlo measurement over
random networks), never by the chapter's modules linear_regions and approximation.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_close, expect_equal

# ---------------------------------------------------------------------------
# Networks returned as lists of (W, b) pairs, evaluated here with NumPy
# ---------------------------------------------------------------------------


def _rows(value) -> int | None:
    """The number of rows of a matrix-like answer, or None if it is not one."""
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.dim() == 2 else None
    try:
        shape = np.shape(value)
    except (TypeError, ValueError):
        return None
    return int(shape[0]) if len(shape) == 2 else None


def _layers(out, num_inputs: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The answer as float64 (W, b) pairs whose shapes chain from ``num_inputs`` inputs to one output."""
    wanted = f"a list of (W, b) pairs, W of shape (fan_out, fan_in), for a net with {num_inputs} input(s)"
    if not isinstance(out, (list, tuple)) or not out or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in out):
        raise Mismatch(wanted, describe(out))
    layers, fan_in = [], num_inputs
    for index, (W, b) in enumerate(out):
        fan_out = _rows(W)
        if fan_out is None:
            raise Mismatch(f"W of layer {index} as a matrix with {fan_in} columns", describe(W))
        W = as_array(W, (fan_out, fan_in), f"W of layer {index} with shape ({fan_out}, {fan_in})")
        b = as_array(b, (fan_out,), f"b of layer {index} with {fan_out} entries")
        layers.append((W, b))
        fan_in = fan_out
    expect(fan_in == 1, "a last layer with one output", f"{fan_in} outputs")
    return layers


def _forward(layers, X: np.ndarray) -> np.ndarray:
    """ReLU after every layer but the last; X is (N, n), the result (N,)."""
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h[:, 0]


def _cube(n: int) -> np.ndarray:
    """All 2^n points of {0, 1}^n, as float64 rows."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n)))


# ---------------------------------------------------------------------------
# Exercise 2.1: the Lebesgue form of a piecewise-linear interpolant
# ---------------------------------------------------------------------------


def _slope_changes(knots: np.ndarray, values: np.ndarray) -> list[Fraction]:
    """Exact slope changes at the interior knots, from the floats as given."""
    k = [Fraction(float(v)) for v in knots]
    y = [Fraction(float(v)) for v in values]
    slopes = [(y[i + 1] - y[i]) / (k[i + 1] - k[i]) for i in range(len(k) - 1)]
    return [b - a for a, b in zip(slopes[:-1], slopes[1:])]


def _interpolation_cases():
    """(label, knots, values) for exercise 2.1."""
    rng = np.random.default_rng(21)
    knots = np.sort(rng.uniform(-3, 3, size=9))
    cases = [("9 random knots in [-3, 3]", knots, rng.normal(size=9)),
             ("two knots (a single affine piece)", np.array([1.0, 4.0]), np.array([2.0, -1.0])),
             ("a trapezoid: slopes 1, 0, 0, -1", np.arange(5.0), np.array([0.0, 1.0, 1.0, 1.0, 0.0])),
             ("the 5-fold tent composition, knots j/32", np.arange(33) / 32,
              np.where(np.arange(33) % 2 == 1, 1.0, 0.0)),
             ("collinear values (no bend anywhere)", np.array([-2.0, 0.5, 1.0, 3.0]),
              np.array([-3.0, 2.0, 3.0, 7.0])),
             ("uneven knots, slopes 2, 2, -2, -2", np.array([0.0, 0.5, 2.0, 2.25, 3.0]),
              np.array([0.0, 1.0, 4.0, 3.5, 2.0]))]
    knots = np.array([2.0, 2.1, 2.5, 4.0, 7.0, 7.05])
    cases.append(("uneven knots starting at x = 2", knots, np.sin(3 * knots)))
    knots = np.sort(rng.uniform(-10, -1, size=20))
    cases.append(("20 random knots in [-10, -1]", knots, rng.uniform(-5, 5, size=20)))
    return cases


def _unpack_form(out, num_terms: int):
    if not isinstance(out, (tuple, list)) or len(out) != 4:
        raise Mismatch("a tuple (slope, intercept, coefficients, breakpoints)", describe(out))
    slope = as_float(out[0], "slope as a single number")
    intercept = as_float(out[1], "intercept as a single number")
    what = f"{num_terms} ReLU term(s), one per knot where the slope changes"
    coefficients = as_array(out[2], (num_terms,), f"coefficients for {what}")
    breakpoints = as_array(out[3], (num_terms,), f"breakpoints for {what}")
    return slope, intercept, coefficients, breakpoints


@exercise("2.1", title="A piecewise-linear function as a one-hidden-layer ReLU net",
          function="lebesgue_form", kind="transcribe", difficulty=1, minutes=15,
          blocked=("dlbook.approximation.lebesgue_form", "dlbook.approximation.relu_interpolant"),
          hint="a ReLU with its kink at a knot changes the slope there and nowhere else: read "
               "the slope changes off the data, keep the non-zero ones, and fix the affine part "
               "with the first piece.")
def check_lebesgue_form(lebesgue_form, cases):
    """Evaluate the returned form at 1000 points against np.interp; one term per actual bend."""
    for label, knots, values in _interpolation_cases():
        num_terms = sum(change != 0 for change in _slope_changes(knots, values))
        with cases.case(f"lebesgue_form(knots, values) on {label}"):
            out = lebesgue_form(torch.tensor(knots), torch.tensor(values))
            slope, intercept, coefficients, breakpoints = _unpack_form(out, num_terms)
            x = np.linspace(knots[0], knots[-1], 1000)
            got = slope * x + intercept + (coefficients[None, :]
                                           * np.maximum(x[:, None] - breakpoints[None, :], 0)).sum(1)
            expected = np.interp(x, knots, values)
            worst = int(np.argmax(np.abs(got - expected)))
            scale = 1.0 + np.abs(values).max()
            expect(abs(got[worst] - expected[worst]) <= 1e-9 * scale,
                   f"g(x) equal to the interpolant, e.g. g({x[worst]:.6g}) = {expected[worst]:.10g}",
                   f"g({x[worst]:.6g}) = {got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 2.2: regions of a line arrangement (one hidden ReLU layer on the plane)
# ---------------------------------------------------------------------------


def _canonical_line(a: Fraction, b: Fraction, c: Fraction):
    """Scale (a, b, c) so that its first non-zero entry among a, b is 1: equal lines compare equal."""
    lead = a if a != 0 else b
    return (a / lead, b / lead, c / lead)


def _arrangement_regions(rows) -> int:
    """Regions of the plane cut by lines a x + b y + c = 0: 1 + L + sum_p (k_p - 1), exactly."""
    lines = sorted({_canonical_line(*map(Fraction, row)) for row in rows})
    points: dict[tuple, set] = {}
    for i, j in itertools.combinations(range(len(lines)), 2):
        (a1, b1, c1), (a2, b2, c2) = lines[i], lines[j]
        det = a1 * b2 - a2 * b1
        if det == 0:
            continue  # parallel: they never meet
        point = ((b1 * c2 - b2 * c1) / det, (a2 * c1 - a1 * c2) / det)
        points.setdefault(point, set()).update((i, j))
    return 1 + len(lines) + sum(len(through) - 1 for through in points.values())


def _line_cases():
    """(label, W, b) with integer entries, general and degenerate arrangements."""
    rng = np.random.default_rng(22)
    cases = []
    for m in (3, 6, 10, 25):
        W = rng.integers(-9, 10, size=(m, 2))
        W[np.all(W == 0, axis=1)] = [1, 1]
        cases.append((f"{m} random lines", W, rng.integers(-9, 10, size=m)))
    cases.append(("a single line", np.array([[1, -2]]), np.array([3])))
    cases.append(("4 parallel lines", np.array([[1, 2]] * 4), np.array([0, 1, 2, -5])))
    cases.append(("3 lines through the origin", np.array([[1, 0], [0, 1], [1, 1]]), np.zeros(3, dtype=int)))
    cases.append(("a 3 x 3 grid of horizontal and vertical lines",
                  np.array([[1, 0]] * 3 + [[0, 1]] * 3), np.array([-1, 0, 1, -1, 0, 1])))
    cases.append(("the same line three times, once with flipped sign",
                  np.array([[1, 1], [2, 2], [-1, -1], [1, -1]]), np.array([-1, -2, 1, 0])))
    cases.append(("4 lines through (1, 1) and one more",
                  np.array([[1, 0], [0, 1], [1, -1], [1, 1], [1, 3]]), np.array([-1, -1, 0, -2, 7])))
    return cases


@exercise("2.2", title="Counting the regions of one hidden ReLU layer on the plane",
          function="count_line_regions", kind="derive", difficulty=2, minutes=30,
          blocked=("dlbook.linear_regions.count_regions_2d", "dlbook.linear_regions.activation_regions_2d"),
          hint="add the lines one at a time: a new line is cut into pieces by the points where "
               "it meets earlier lines, and each piece splits one region in two. Watch out for "
               "parallel and repeated lines.")
def check_count_line_regions(count_line_regions, cases):
    """Exact region counts; the cases include parallel, concurrent and repeated lines."""
    for label, W, b in _line_cases():
        rows = [(int(w0), int(w1), int(c)) for (w0, w1), c in zip(W, b)]
        expected = _arrangement_regions(rows)
        with cases.case(f"count_line_regions(W, b) on {label}"):
            got = count_line_regions(torch.tensor(W, dtype=torch.float64),
                                     torch.tensor(b, dtype=torch.float64))
            expect_equal(as_int(got, f"the integer {expected}"), expected)


# ---------------------------------------------------------------------------
# Exercise 2.3: any symmetric Boolean function with one hidden layer of n ReLUs
# ---------------------------------------------------------------------------


def _symmetric_cases():
    """(label, values f(0..n)) for exercise 2.3."""
    rng = np.random.default_rng(23)
    return [("parity of 2 bits (XOR)", [0.0, 1.0, 0.0]),
            ("parity of 7 bits", [float(j % 2) for j in range(8)]),
            ("majority of 5 bits", [float(j >= 3) for j in range(6)]),
            ("exactly two ones among 6 bits", [float(j == 2) for j in range(7)]),
            ("the count mod 3 of 9 bits", [float(j % 3) for j in range(10)]),
            ("one bit, f(0) = 2, f(1) = -1", [2.0, -1.0]),
            ("a constant function of 4 bits", [0.5] * 5),
            ("random values on 10 bits", rng.normal(size=11).tolist())]


@exercise("2.3", title="Any symmetric Boolean function with n ReLUs", function="symmetric_layers",
          kind="derive", difficulty=2, minutes=25,
          blocked=("dlbook.approximation.relu_interpolant", "dlbook.approximation.lebesgue_form",
                   "dlbook.approximation.parity_network"),
          hint="the function depends on s = x_1 + ... + x_n only, so every hidden unit can read s; "
               "interpolate j -> F(j) between the integers with the Lebesgue form. There is no "
               "affine skip, but s >= 0 on the cube.")
def check_symmetric_layers(symmetric_layers, cases):
    """All 2^n inputs against f(number of ones); one hidden layer of at most n units."""
    for label, values in _symmetric_cases():
        n = len(values) - 1
        with cases.case(f"symmetric_layers(values) for {label}"):
            layers = _layers(symmetric_layers(list(values)), n)
            widths = [W.shape[0] for W, _ in layers]
            expect(len(layers) == 2 and widths[0] <= n,
                   f"one hidden layer of at most {n} units: two (W, b) pairs",
                   f"{len(layers)} pairs with output widths {widths}")
            X = _cube(n)
            got = _forward(layers, X)
            expected = np.asarray(values)[X.sum(axis=1).astype(int)]
            wrong = np.flatnonzero(np.abs(got - expected) > 1e-9 * (1 + np.abs(expected)))
            if len(wrong):
                x = X[wrong[0]].astype(int).tolist()
                raise Mismatch(f"f({sum(x)}) = {expected[wrong[0]]:.6g} on input {x} (and on all 2^{n} inputs)",
                               f"{got[wrong[0]]:.6g} ({len(wrong)} of {2**n} inputs wrong)")


# ---------------------------------------------------------------------------
# Exercise 2.4: k-fold zigzags, composed: k^L pieces from width k and depth L
# ---------------------------------------------------------------------------


def _zigzag(x: np.ndarray, k: int, depth: int) -> np.ndarray:
    """z_k composed ``depth`` times on [0, 1]; z_k rises on even pieces [j/k, (j+1)/k], falls on odd ones."""
    for _ in range(depth):
        y = k * x
        floor = np.minimum(np.floor(y), k - 1)     # x = 1 lies on the last piece
        frac = y - floor
        x = np.where(floor % 2 == 0, frac, 1.0 - frac)
    return x


@exercise("2.4", title="Composed zigzags: k^L pieces from width k and depth L", function="zigzag_layers",
          kind="extend", difficulty=2, minutes=30,
          blocked=("dlbook.approximation.sawtooth_network", "dlbook.approximation.montufar_network"),
          hint="write one zigzag in the Lebesgue form, with k ReLUs of the same input and kinks at "
               "j/k; then let every unit of the next layer read the zigzag of the layer before.")
def check_zigzag_layers(zigzag_layers, cases):
    """Values at every breakpoint j / k^L and at random points; hidden width <= k, depth L."""
    rng = np.random.default_rng(24)
    for k, depth in [(2, 3), (3, 1), (3, 4), (4, 3), (5, 2), (2, 10), (7, 3)]:
        with cases.case(f"zigzag_layers({k}, {depth})"):
            layers = _layers(zigzag_layers(k, depth), 1)
            widths = [W.shape[0] for W, _ in layers[:-1]]
            expect(len(layers) == depth + 1 and max(widths, default=0) <= k,
                   f"{depth} hidden layer(s) of at most {k} units, then one output layer",
                   f"{len(layers) - 1} hidden layer(s) of widths {widths}")
            grid = np.arange(k**depth + 1) / k**depth
            x = np.concatenate([grid, rng.uniform(0, 1, 2000)])
            got = _forward(layers, x[:, None])
            expected = _zigzag(x, k, depth)
            worst = int(np.argmax(np.abs(got - expected)))
            expect(abs(got[worst] - expected[worst]) <= 1e-9,
                   f"the {k}-fold zigzag composed {depth} time(s), e.g. {expected[worst]:.10g} at "
                   f"x = {x[worst]:.10g}", f"{got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 2.5: predicting the expected number of regions of a random layer on an interval
# ---------------------------------------------------------------------------


def _measured_regions(num_units: int, weight_std: float, bias_std: float, low: float, high: float,
                      rng: np.random.Generator, num_nets: int = 40_000) -> tuple[float, float]:
    """Mean and standard error of the region count over random layers: 1 + kinks -b/w inside (low, high)."""
    counts = np.empty(num_nets)
    for start in range(0, num_nets, 10_000):               # 10,000 networks at a time
        w = rng.normal(0.0, weight_std, size=(10_000, num_units))
        b = rng.normal(0.0, bias_std, size=(10_000, num_units))
        kinks = -b / w
        counts[start:start + 10_000] = 1 + ((kinks > low) & (kinks < high)).sum(axis=1)
    return float(counts.mean()), float(counts.std() / math.sqrt(num_nets))


def _exact_regions(num_units: int, weight_std: float, bias_std: float, low: float, high: float) -> float:
    """1 + m P(low < -b/w < high); -b/w is Cauchy with scale bias_std / weight_std."""
    scale = bias_std / weight_std
    return 1 + num_units * (math.atan(high / scale) - math.atan(low / scale)) / math.pi


@exercise("2.5", title="Predicting the number of regions of a random layer", function="expected_regions_1d",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.linear_regions.activation_regions_1d", "dlbook.linear_regions.linear_pieces_1d"),
          hint="unit j bends where w_j x + b_j = 0, at x = -b_j / w_j; the regions are one more than "
               "the bends inside the interval. What is the distribution of a ratio of two centred "
               "Gaussians?")
def check_expected_regions_1d(expected_regions_1d, cases):
    """The prediction against a measurement over 40,000 random layers, and to 1e-6 against the exact value."""
    rng = np.random.default_rng(25)
    settings = [(32, math.sqrt(2.0), 0.1, -3.0, 3.0), (10, 1.0, 1.0, -1.0, 1.0), (5, 2.0, 0.5, 0.0, 10.0),
                (50, 1.0, 3.0, -2.0, -1.0), (1, 1.0, 1.0, -100.0, 100.0), (20, 0.5, 2.0, 1.0, 1.5),
                (8, 3.0, 3.0, -0.25, 4.0)]
    for num_units, weight_std, bias_std, low, high in settings:
        label = f"expected_regions_1d({num_units}, {weight_std:.4g}, {bias_std:.4g}, {low:g}, {high:g})"
        mean, error = _measured_regions(num_units, weight_std, bias_std, low, high, rng)
        with cases.case(label, time_limit=2.0, why="the task asks for a prediction, not a simulation"):
            got = as_float(expected_regions_1d(num_units, weight_std, bias_std, low, high),
                           "the expected number of regions as one number")
            expect(abs(got - mean) <= 5 * error + 1e-9,
                   f"about {mean:.4f}, the mean over 40,000 random layers (± {5 * error:.4f})", f"{got:.6g}")
            expect_close(got, _exact_regions(num_units, weight_std, bias_std, low, high), rtol=1e-6)
