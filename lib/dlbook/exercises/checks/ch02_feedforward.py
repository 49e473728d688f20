"""Checks for the exercises of chapter 2 (02_feedforward): ReLU interpolation, line arrangements, parity.

Expected values are computed here by independent code (NumPy interpolation,
exact rational arithmetic for line arrangements, integer parity), not by the
chapter's modules linear_regions and approximation.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import torch
from torch import nn

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_equal

# ---------------------------------------------------------------------------
# Exercise 2.1: the Lebesgue form of a piecewise-linear interpolant
# ---------------------------------------------------------------------------


def _interpolation_cases():
    """(label, knots, values) for exercise 2.1."""
    rng = np.random.default_rng(21)
    cases = []
    knots = np.sort(rng.uniform(-3, 3, size=9))
    cases.append(("9 random knots in [-3, 3]", knots, rng.normal(size=9)))
    cases.append(("two knots (a single affine piece)", np.array([1.0, 4.0]), np.array([2.0, -1.0])))
    grid = np.arange(33) / 32
    tooth = np.where(np.arange(33) % 2 == 1, 1.0, 0.0)
    cases.append(("the 5-fold tent composition, knots j/32", grid, tooth))
    cases.append(("collinear values (no bend anywhere)", np.array([-2.0, 0.5, 1.0, 3.0]),
                  np.array([-3.0, 2.0, 3.0, 7.0])))
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
    coefficients = as_array(out[2], (num_terms,), f"coefficients as a vector of length {num_terms}")
    breakpoints = as_array(out[3], (num_terms,), f"breakpoints as a vector of length {num_terms}")
    return slope, intercept, coefficients, breakpoints


@exercise("2.1", title="A piecewise-linear function as a one-hidden-layer ReLU net",
          function="lebesgue_form",
          hint="a ReLU with its kink at a knot changes the slope there and nowhere else: read "
               "the slope changes off the data, and fix the affine part with the first piece.")
def check_lebesgue_form(lebesgue_form, cases):
    """Evaluate the returned form at 1000 points and compare with np.interp; m - 1 ReLU terms."""
    for label, knots, values in _interpolation_cases():
        num_terms = len(knots) - 2
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
    for m in (3, 6, 10):
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
          function="count_line_regions",
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
# Exercise 2.3: parity with one hidden layer of n ReLUs
# ---------------------------------------------------------------------------


def _linear_layers(model) -> list:
    if not isinstance(model, nn.Module):
        raise Mismatch("an nn.Module (nn.Sequential(nn.Linear, nn.ReLU, nn.Linear))", describe(model))
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@exercise("2.3", title="Parity with one hidden layer of n ReLUs", function="parity_network",
          hint="all hidden units can look at the same sum of the inputs; put their kinks at "
               "consecutive integers and choose output weights that zig-zag between 0 and 1.")
def check_parity_network(parity_network, cases):
    """All 2^n inputs for n = 1..10, and at most n hidden units in one hidden layer."""
    for num_bits in (2, 3, 1, 4, 5, 7, 10):
        with cases.case(f"parity_network({num_bits})"):
            model = parity_network(num_bits)
            linears = _linear_layers(model)
            shapes = [(layer.in_features, layer.out_features) for layer in linears]
            expect(len(linears) == 2 and shapes[0][0] == num_bits and shapes[0][1] <= num_bits
                   and shapes[1] == (shapes[0][1], 1),
                   f"two Linear layers, {num_bits} inputs -> at most {num_bits} hidden units -> 1 output",
                   f"Linear layers with (in, out) = {shapes}")
            parameter = next(model.parameters())
            codes = torch.arange(2**num_bits)
            bits = (codes[:, None] >> torch.arange(num_bits)[None, :]) & 1  # (2^n, n)
            with torch.no_grad():
                out = model(bits.to(parameter.device, parameter.dtype))
            out = as_array(out, (2**num_bits,), f"an output of shape ({2**num_bits}, 1)")
            expected = (bits.sum(dim=1) % 2).numpy()
            wrong = np.flatnonzero(np.abs(out - expected) > 1e-4)
            if len(wrong):
                x = bits[wrong[0]].tolist()
                raise Mismatch(f"parity {expected[wrong[0]]} on input {x} (and on all 2^{num_bits} inputs)",
                               f"{out[wrong[0]]:.6g} ({len(wrong)} of {2**num_bits} inputs wrong)")
