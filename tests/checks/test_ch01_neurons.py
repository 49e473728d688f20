"""Checks of chapter 1's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import dlbook.exercises.checks.ch01_neurons as neurons
from dlbook import cover, hopfield, perceptron
from dlbook.exercises import get_exercise, run_check

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("1.1", "1.2", "1.3", "1.4", "1.5")
CHAPTER = Path(__file__).resolve().parents[2] / "book" / "01_neurons.ipynb"


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules and of the notebook)
# ---------------------------------------------------------------------------

def kernel_perceptron(K, y, max_epochs):
    alpha = torch.zeros(len(y), dtype=torch.int64)
    for _ in range(max_epochs):
        mistakes = 0
        for i in range(len(y)):
            if y[i] * ((alpha * y) @ K[:, i]) <= 0:
                alpha[i] += 1
                mistakes += 1
        if mistakes == 0:
            return alpha, True
    return alpha, False


def kernel_perceptron_numpy(K, y, max_epochs):
    """The same rule on NumPy arrays, returning a list and a NumPy bool."""
    K, y = np.asarray(K), np.asarray(y)
    alpha = np.zeros(len(y), dtype=np.int64)
    for _ in range(max_epochs):
        before = alpha.sum()
        for i in range(len(y)):
            alpha[i] += y[i] * np.dot(alpha * y, K[:, i]) <= 0
        if alpha.sum() == before:
            return alpha.tolist(), np.bool_(True)
    return alpha.tolist(), np.bool_(False)


def is_separable(X, y):
    from scipy.optimize import linprog

    Z = (y[:, None] * X).double().numpy()
    res = linprog(np.zeros(Z.shape[1]), A_ub=-Z, b_ub=-np.ones(len(Z)),
                  bounds=[(None, None)] * Z.shape[1], method="highs")
    return res.status == 0


def is_separable_max_margin(X, y):
    """Another formulation: maximise t subject to y_i w·x_i >= t, |w_j| <= 1."""
    from scipy.optimize import linprog

    Z = (y[:, None] * X).double().numpy()
    num, dim = Z.shape
    c = np.zeros(dim + 1)
    c[-1] = -1.0
    A = np.hstack([-Z, np.ones((num, 1))])
    res = linprog(c, A_ub=A, b_ub=np.zeros(num), bounds=[(-1, 1)] * dim + [(None, 1)], method="highs")
    return bool(-res.fun > 1e-9)


def _primitive(v):
    divisor = math.gcd(*v)
    v = tuple(a // divisor for a in v)
    return v if next(a for a in v if a) > 0 else tuple(-a for a in v)


def count_dichotomies(X):
    """Deletion and restriction on the distinct lines through 0, in Python integers."""
    points = [tuple(int(a) for a in row) for row in X.tolist()]
    if any(not any(p) for p in points):
        return 0

    def count(lines):
        if not lines:
            return 1
        p, rest = lines[-1], lines[:-1]
        pp = sum(a * a for a in p)
        projected = {_primitive(tuple(pp * a - sum(u * v for u, v in zip(x, p)) * b for a, b in zip(x, p)))
                     for x in rest}
        return count(rest) + count(sorted(projected))

    return count(sorted({_primitive(p) for p in points}))


def count_dichotomies_fractions(X):
    """The same recursion written differently: exact fractions, lines normalised by their leading
    entry, the first vector deleted instead of the last, zero projections dropped afterwards."""
    from fractions import Fraction

    rows = [[Fraction(int(a)) for a in row] for row in X.tolist()]
    if any(all(a == 0 for a in row) for row in rows):
        return 0

    def normalise(row):
        lead = next(a for a in row if a != 0)
        return tuple(a / lead for a in row)

    def regions(vectors):
        vectors = sorted(set(normalise(v) for v in vectors))
        if not vectors:
            return 1
        p, rest = vectors[0], vectors[1:]
        pp = sum(a * a for a in p)
        projected = [tuple(a - sum(u * w for u, w in zip(v, p)) / pp * b for a, b in zip(v, p)) for v in rest]
        return regions(rest) + regions([v for v in projected if any(a != 0 for a in v)])

    return regions(rows)


def load_for_flip_rate(flip_rate):
    from scipy.special import erfcinv

    return 1.0 / (2.0 * erfcinv(2.0 * flip_rate) ** 2)


def load_for_flip_rate_bisection(flip_rate):
    low, high = 1e-3, 100.0
    for _ in range(100):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if 0.5 * math.erfc(1 / math.sqrt(2 * mid)) < flip_rate else (low, mid)
    return math.sqrt(low * high)


def projection_weights(patterns):
    W = torch.linalg.pinv(patterns) @ patterns
    W = (W + W.T) / 2
    return W.fill_diagonal_(0.0)


def projection_weights_by_qr(patterns):
    """An orthonormal basis of the span from the SVD of the patterns, as NumPy."""
    P = np.asarray(patterns)
    _, singular, Vt = np.linalg.svd(P, full_matrices=False)
    basis = Vt[singular > 1e-9 * singular.max()]
    W = basis.T @ basis
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0.0)
    return W


def _recursion_on_points(*, drop_parallel: bool):
    """The recursion on the points themselves, without merging lines first. A point parallel to p
    projects to zero: keeping it makes that branch count 0 (right: p's hyperplane is already
    there), dropping it counts p's hyperplane twice (wrong)."""
    def count(points):
        if not points:
            return 1
        if any(not any(x) for x in points):
            return 0
        p, rest = points[-1], points[:-1]
        pp = sum(a * a for a in p)
        projected = [tuple(pp * a - sum(u * v for u, v in zip(x, p)) * b for a, b in zip(x, p)) for x in rest]
        if drop_parallel:
            projected = [x for x in projected if any(x)]
        return count(rest) + count(projected)
    return lambda X: count([tuple(int(a) for a in row) for row in X.tolist()])


REFERENCES = {
    "1.1": [kernel_perceptron, kernel_perceptron_numpy],
    "1.2": [is_separable, is_separable_max_margin],
    "1.3": [count_dichotomies, count_dichotomies_fractions, _recursion_on_points(drop_parallel=False)],
    "1.4": [load_for_flip_rate, load_for_flip_rate_bisection],
    "1.5": [projection_weights, projection_weights_by_qr],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _kernel_variant(*, drop_labels=False, strict=False, batch=False, signed=False):
    def wrong(K, y, max_epochs):
        alpha = torch.zeros(len(y), dtype=torch.int64)
        for _ in range(max_epochs):
            coefficients = alpha.double() if drop_labels else alpha * y
            scores = y * (coefficients @ K)
            if batch:   # all the mistakes of a sweep at once
                wrong_points = scores <= 0
                alpha += wrong_points.long()
                mistakes = int(wrong_points.sum())
            else:
                mistakes = 0
                for i in range(len(y)):
                    coefficients = alpha.double() if drop_labels else alpha * y
                    score = y[i] * (coefficients @ K[:, i])
                    if score < 0 if strict else score <= 0:
                        alpha[i] += 1
                        mistakes += 1
            if mistakes == 0:
                return (alpha * y if signed else alpha), True
        return (alpha * y if signed else alpha), False
    return wrong


def _kernel_by_the_package(K, y, max_epochs):
    """Factor K = F F^T and run the package's perceptron on the features F."""
    values, vectors = torch.linalg.eigh(K)
    features = vectors * values.clamp(min=0).sqrt()
    run = perceptron.train_perceptron(features, y, bias=False, max_epochs=max_epochs)
    return run.mistake_counts, run.converged


def _perceptron_heuristic(X, y):
    """Separability by a perceptron with a fixed budget of epochs."""
    Z = y[:, None] * X
    w = torch.zeros(X.shape[1])
    for _ in range(200):
        wrong = (Z @ w) <= 0
        if not wrong.any():
            return True
        w = w + Z[wrong].sum(0)
    return False


def _closed_form_on_the_rank(X):
    """Cover's formula with d replaced by the rank of X, after dropping repeated points."""
    distinct = torch.unique(X, dim=0).double()
    return neurons._cover(len(distinct), int(torch.linalg.matrix_rank(distinct)))


def _invert_the_package(flip_rate):
    from scipy.optimize import brentq

    return brentq(lambda alpha: hopfield.flip_probability(alpha) - flip_rate, 1e-3, 100.0)


WRONG = {
    "1.1": {
        "the package's perceptron on a factor of K": _kernel_by_the_package,
        "forgets the labels y_j in the score": _kernel_variant(drop_labels=True),
        "y·score < 0 as the mistake test": _kernel_variant(strict=True),
        "updates all mistakes of a sweep at once": _kernel_variant(batch=True),
        "returns the signed coefficients alpha_i y_i": _kernel_variant(signed=True),
    },
    "1.2": {
        "the package's LP": lambda X, y: perceptron.is_linearly_separable(X, y),
        "a perceptron with a fixed epoch budget": _perceptron_heuristic,
        "always True": lambda X, y: True,
        "a tensor instead of a bool": lambda X, y: torch.tensor([1.0, 0.0]),
    },
    "1.3": {
        "the package's brute force": lambda X: cover.count_separable_dichotomies(X),
        "Cover's closed form": lambda X: neurons._cover(*X.shape),
        "the closed form on the rank of the distinct points": _closed_form_on_the_rank,
        "the recursion dropping points parallel to p": _recursion_on_points(drop_parallel=True),
    },
    "1.4": {
        "inverts the package's flip probability": _invert_the_package,
        "forgets the 1/2 (both tails)": lambda p: load_for_flip_rate(p / 2),
        "the standard deviation taken for the variance":
            lambda p: math.sqrt(load_for_flip_rate(p)) / math.sqrt(2),
        "the flip rate itself": lambda p: p,
    },
    "1.5": {
        "Hebb's rule": lambda P: hopfield.hebbian_weights(P),
        "the projection with its diagonal kept": lambda P: torch.linalg.pinv(P) @ P,
        "the projection onto the orthogonal complement":
            lambda P: (torch.eye(P.shape[1], dtype=P.dtype) - torch.linalg.pinv(P) @ P).fill_diagonal_(0.0),
    },
}

#: No package function answers these, so they block nothing.
UNBLOCKED = ("1.5",)

#: A list fits exercise 1.1's (alpha, converged) shape; its own test covers malformed pairs.
BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string",
                      "returns a 3x3 tensor", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_task_cells_state_the_registered_difficulty_time_and_kind():
    nb = nbformat.read(CHAPTER, as_version=4)
    cells = {cell.get("id"): cell.source for cell in nb.cells}
    metadata = {cell.get("id"): cell.metadata for cell in nb.cells}
    for eid in IDS:
        ex = get_exercise(eid)
        assert metadata[f"exercise-1-{eid.split('.')[1]}"]["dlbook"] == {"exercise": eid}
        text = cells[f"exercise-1-{eid.split('.')[1]}-text"]
        header = f"**Exercise {eid}** ({ex.stars}, about {ex.minutes} min, {ex.kind})"
        assert header in text, (eid, text[:200])
        assert f"`{ex.function_name}(" in text
        for blocked in ex.blocked:
            assert f"`{blocked.removeprefix('dlbook.')}`" in text, (eid, blocked)


def test_the_imports_cell_imports_nothing_only_a_solution_needs():
    nb = nbformat.read(CHAPTER, as_version=4)
    imports = next(cell.source for cell in nb.cells if cell.get("id") == "imports")
    assert "scipy" not in imports and "linprog" not in imports and "erfcinv" not in imports


def test_kernel_perceptron_answers_in_other_forms_pass():
    as_floats = lambda K, y, E: (kernel_perceptron(K, y, E)[0].double(), kernel_perceptron(K, y, E)[1])
    assert run_check("1.1", as_floats).passed
    as_list = lambda K, y, E: list(kernel_perceptron(K, y, E))
    assert run_check("1.1", as_list).passed


@pytest.mark.parametrize("answer, fragment", [
    (lambda K, y, E: (torch.full((len(y),), float("nan")), True), "NaN"),
    (lambda K, y, E: (torch.zeros(len(y) + 1), True), "one mistake count per point"),
    (lambda K, y, E: (torch.full((len(y),), 0.5), True), "counts of mistakes"),
    (lambda K, y, E: (torch.zeros(len(y)), True, 0), "a tuple (alpha, converged)"),
    (lambda K, y, E: [1, 2], "alpha with one mistake count per point"),
    (lambda K, y, E: (torch.zeros(len(y)), 1), "converged as True or False"),
])
def test_kernel_perceptron_malformed_answers_fail_cleanly(answer, fragment):
    result = run_check("1.1", answer)
    assert not result.passed and result.message.startswith("case ") and fragment in result.message, result.message


def test_wrong_answers_fail_for_the_reason_the_task_names():
    message = run_check("1.3", WRONG["1.3"]["Cover's closed form"]).message
    assert "two pairs of points on two lines" in message and "expected 4, got 8" in message
    message = run_check("1.4", WRONG["1.4"]["forgets the 1/2 (both tails)"]).message
    assert "flipped in the simulation" in message, message
    message = run_check("1.5", WRONG["1.5"]["the projection with its diagonal kept"]).message
    assert "a zero diagonal" in message, message


@pytest.mark.parametrize("eid, answer, phrase", [
    ("1.3", count_dichotomies, "a search over the 2^"),
    ("1.4", load_for_flip_rate, "not a simulation"),
])
def test_time_limits_are_enforced(monkeypatch, eid, answer, phrase):
    """A clock that jumps 31 s between readings makes every timed case too slow."""
    from dlbook.exercises import core

    ticks = itertools.count()
    monkeypatch.setattr(core.time, "perf_counter", lambda: 31.0 * next(ticks))
    monkeypatch.setattr(core, "machine_load_factor", lambda: 1.0)  # as on an idle machine
    result = run_check(eid, answer)
    assert not result.passed and "took 31.00 s, more than the" in result.message and phrase in result.message


def test_primal_and_dual_perceptrons_agree_on_the_linear_kernel():
    for label, K, y, max_epochs, compare, X in neurons._kernel_cases():
        alpha, converged = neurons._dual_mistakes(K, y, max_epochs)
        if compare == "primal":
            primal, primal_converged = neurons._primal_mistakes(X, y, max_epochs)
            assert np.array_equal(primal, alpha) and primal_converged == converged, label
        # The package's perceptron (augmented inputs, float64) makes the same mistakes.
        if X is not None:
            run = perceptron.train_perceptron(torch.tensor(X), torch.tensor(y), max_epochs=max_epochs)
            assert run.mistake_counts.tolist() == alpha.tolist() and run.converged == converged, label


def test_brute_force_count_equals_cover_in_general_position_and_the_recursion_elsewhere():
    for ts, dim in [([-2, -1, 1, 3, 4], 2), ([-3, -1, 1, 2, 4, 5], 3), ([-2, 1, 2, 3, 5], 4)]:
        X = neurons._moment_curve(ts, dim)
        assert neurons._brute_force_count(X) == neurons._cover(len(ts), dim) == count_dichotomies(torch.tensor(X))
    for label, X in neurons._small_counting_cases():
        expected = neurons._brute_force_count(X)
        assert count_dichotomies(torch.tensor(X)) == count_dichotomies_fractions(torch.tensor(X)) == expected, label
    # The small cases are not a closed-form exercise: most of them differ from C(N, d).
    counts = [(neurons._brute_force_count(X), neurons._cover(*X.shape)) for _, X in neurons._small_counting_cases()]
    assert sum(count != closed_form for count, closed_form in counts) >= 6


def test_large_counting_cases_follow_from_the_theorem():
    """The structural counts of the 60-point cases agree with the recursion, and not with the closed form."""
    for label, X, expected in neurons._large_counting_cases():
        assert count_dichotomies(torch.tensor(X)) == expected, label
    first, second, _ = neurons._large_counting_cases()
    assert neurons._cover(*first[1].shape) != first[2] and neurons._cover(*second[1].shape) != second[2]


def test_moment_curve_rejects_repeated_or_zero_parameters():
    with pytest.raises(ValueError, match="distinct and non-zero"):
        neurons._moment_curve([1, 2, 2], 3)
    with pytest.raises(ValueError, match="distinct and non-zero"):
        neurons._moment_curve([0, 1, 2], 3)


def test_load_inversion_and_measurement_agree_with_the_theory():
    for p in (1e-6, 0.003, 0.02, 0.1, 0.3):
        assert neurons._load_for(p) == pytest.approx(load_for_flip_rate(p), rel=1e-9)
    # The measured flip rate at the predicted load is within 15% of the target here.
    for p in (0.003, 0.02, 0.1):
        assert neurons._measured_flip_rate(load_for_flip_rate(p)) == pytest.approx(p, rel=0.15)


def test_projection_reference_stores_what_hebb_cannot():
    for label, patterns in neurons._projection_cases():
        W = neurons._projection(patterns)
        assert np.all(np.where(patterns @ W >= 0, 1.0, -1.0) == patterns), label
    _, half = neurons._projection_cases()[1]
    hebb = half.T @ half / half.shape[1]
    np.fill_diagonal(hebb, 0.0)
    assert np.mean(np.where(half @ hebb >= 0, 1.0, -1.0) != half) > 0.05     # Hebb's rule fails at load 0.5


def test_the_check_module_imports_nothing_from_the_chapter_modules():
    source = Path(neurons.__file__).read_text()
    assert not re.search(r"from \.\.\.(perceptron|cover|hopfield|threshold)|import dlbook\.(perceptron|cover|hopfield)",
                         source)
