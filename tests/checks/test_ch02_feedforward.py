"""Checks of chapter 2's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import torch
from exercise_contract import bad_types
from torch import nn

import dlbook.exercises.checks.ch02_feedforward as feedforward
from dlbook.exercises import EXERCISES, run_check

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("2.1", "2.2", "2.3")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def lebesgue_form(knots, values):
    slopes = torch.diff(values) / torch.diff(knots)
    return (slopes[0].item(), (values[0] - slopes[0] * knots[0]).item(), torch.diff(slopes), knots[1:-1])


def lebesgue_form_numpy(knots, values):
    k, v = np.asarray(knots), np.asarray(values)
    slopes = np.diff(v) / np.diff(k)
    return float(slopes[0]), float(v[0] - slopes[0] * k[0]), list(np.diff(slopes)), k[1:-1].tolist()


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


def parity_network(n):
    model = nn.Sequential(nn.Linear(n, n), nn.ReLU(), nn.Linear(n, 1))
    with torch.no_grad():
        model[0].weight.fill_(1.0)
        model[0].bias.copy_(-torch.arange(n, dtype=torch.float32))
        model[2].weight.copy_(torch.tensor([[1.0] + [2.0 * (-1) ** j for j in range(1, n)]]))
        model[2].bias.zero_()
    return model


def parity_network_float64(n):
    return parity_network(n).double()


REFERENCES = {
    "2.1": [lebesgue_form, lebesgue_form_numpy],
    "2.2": [count_line_regions],
    "2.3": [parity_network, parity_network_float64],
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


def _every_knot_gets_a_relu(knots, values):
    slope, intercept, coefficients, _ = lebesgue_form(knots, values)
    return slope, intercept, torch.cat([torch.zeros(1, dtype=knots.dtype), coefficients, torch.zeros(1, dtype=knots.dtype)]), knots


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


def _parity_variant(*, flip_signs=False, first_weight=1.0, thresholds_from_one=False, extra_unit=False):
    def build(n):
        width = n + 1 if extra_unit else n
        model = nn.Sequential(nn.Linear(n, width), nn.ReLU(), nn.Linear(width, 1))
        with torch.no_grad():
            model[0].weight.fill_(1.0)
            offset = 1 if thresholds_from_one else 0
            model[0].bias.copy_(-(torch.arange(width, dtype=torch.float32) + offset))
            sign = -1 if flip_signs else 1
            weights = [first_weight] + [sign * 2.0 * (-1) ** j for j in range(1, width)]
            model[2].weight.copy_(torch.tensor([weights]))
            model[2].bias.zero_()
        return model
    return build


WRONG = {
    "2.1": {
        "slopes instead of slope changes": _slopes_not_changes,
        "intercept = first value": _intercept_is_first_value,
        "a ReLU at every knot": _every_knot_gets_a_relu,
    },
    "2.2": {
        "Zaslavsky's general-position count": _zaslavsky,
        "repeated lines counted twice": _no_deduplication,
        "points counted without multiplicity": _points_without_multiplicity,
        "grid sampling": _grid_count,
    },
    "2.3": {
        "output weights with the wrong sign": _parity_variant(flip_signs=True),
        "first output weight 2": _parity_variant(first_weight=2.0),
        "kinks at 1..n": _parity_variant(thresholds_from_one=True),
        "n + 1 hidden units": _parity_variant(extra_unit=True),
        "a trained-looking constant 0.5": lambda n: nn.Sequential(nn.Linear(n, 1), nn.ReLU(), nn.Linear(1, 1)),
    },
}


BAD_TYPES = bad_types("raises ValueError", "returns None", "returns a string", "returns a 3x3 tensor",
                      "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_every_chapter_2_exercise_is_registered_and_covered():
    assert set(IDS) <= set(EXERCISES)
    assert set(IDS) == set(REFERENCES) == set(WRONG)
    for eid in IDS:
        ex = EXERCISES[eid]
        assert ex.title and ex.hint and ex.function_name.isidentifier()


def test_expected_values_are_right():
    counts = {label: feedforward._arrangement_regions([(int(a), int(c_), int(d)) for (a, c_), d in zip(W, b)])
              for label, W, b in feedforward._line_cases()}
    assert counts["a single line"] == 2
    assert counts["4 parallel lines"] == 5
    assert counts["3 lines through the origin"] == 6
    assert counts["a 3 x 3 grid of horizontal and vertical lines"] == 16
    assert counts["the same line three times, once with flipped sign"] == 4
    assert counts["4 lines through (1, 1) and one more"] == 1 + 5 + 3 + 4   # one 4-fold point, 4 simple ones
    # The general-position cases really are in general position for the 3-line case.
    assert counts["3 random lines"] == 7


def test_wrong_parity_width_message_names_the_shapes():
    result = run_check("2.3", WRONG["2.3"]["n + 1 hidden units"])
    assert "at most 2 hidden units" in result.message and "(2, 3)" in result.message
