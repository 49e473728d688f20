"""Checks of the exercises: reference solutions pass, plausible wrong answers fail.

Every registered exercise needs a reference solution and at least one
plausible wrong answer here (a check that cannot fail is a defect). When the
chapter notebooks exist, their own solution cells must pass too.
"""
from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import dlbook.exercises as exercises
from dlbook.coursework.notebook import chapter_notebooks, exercise_cells, setup_cells
from dlbook.exercises import EXERCISES, CheckResult, check, run_check

BOOK = Path(__file__).resolve().parents[2] / "book"
exercises.load_all()
CHAPTER_1 = sorted(e for e, ex in EXERCISES.items()
                   if ex.check_fn.__module__ == "dlbook.exercises.checks.ch01_neurons")


# ---------------------------------------------------------------------------
# Reference solutions (written independently of the chapters)
# ---------------------------------------------------------------------------

def perceptron(X, y, max_epochs):
    w = torch.zeros(X.shape[1])
    b = torch.zeros(())
    num_updates = 0
    for _ in range(max_epochs):
        mistakes = 0
        for x_i, y_i in zip(X, y):
            if y_i * (x_i @ w + b) <= 0:
                w, b = w + y_i * x_i, b + y_i
                num_updates += 1
                mistakes += 1
        if mistakes == 0:
            return w, b, num_updates, True
    return w, b, num_updates, False


def cover_count(num_points, dim):
    memo = {}

    def count(s, n):
        if s == 1 or n == 1:
            return 2
        if (s, n) not in memo:
            memo[s, n] = count(s - 1, n) + count(s - 1, n - 1)
        return memo[s, n]

    return count(num_points, dim)


def flip_probability(alpha):
    return 0.5 * math.erfc(1.0 / math.sqrt(2.0 * alpha))


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
    res = linprog(c, A_ub=A, b_ub=np.zeros(num), bounds=[(-1, 1)] * dim + [(None, 1)],
                  method="highs")
    return bool(-res.fun > 1e-9)


def smallest_unlikely(dim, threshold):
    s = 1
    while cover_count(s, dim) / 2 ** s >= threshold:
        s += 1
    return s


REFERENCES = {
    "1.1": [perceptron],
    "1.2": [cover_count],
    "1.3": [flip_probability,
            lambda alpha: 0.5 * torch.special.erfc(1 / torch.sqrt(2 * torch.tensor(alpha)))],
    "1.4": [is_separable, is_separable_max_margin],
    "1.5": [smallest_unlikely],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers: every one must fail
# ---------------------------------------------------------------------------

def _perceptron_variant(*, bias=True, epochs=None, every_point=False, strict=False,
                        reverse=False):
    def wrong(X, y, max_epochs):
        w = torch.zeros(X.shape[1])
        b = torch.zeros(())
        num_updates = 0
        for _ in range(max_epochs if epochs is None else epochs):
            mistakes = 0
            for x_i, y_i in (zip(X.flip(0), y.flip(0)) if reverse else zip(X, y)):
                score = y_i * (x_i @ w + b)
                mistake = bool(score < 0) if strict else bool(score <= 0)
                mistakes += mistake
                if mistake or every_point:
                    w = w + y_i * x_i
                    b = b + y_i if bias else b
                    num_updates += 1
            if mistakes == 0:
                return w, b, num_updates, True
        return w, b, num_updates, epochs is not None
    return wrong


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


WRONG = {
    "1.1": {
        "no bias": _perceptron_variant(bias=False),
        "stops after one epoch": _perceptron_variant(epochs=1),
        "updates on every point": _perceptron_variant(every_point=True),
        "y·(w·x+b) < 0 as the mistake test": _perceptron_variant(strict=True),
        "sweeps the points in reverse order": _perceptron_variant(reverse=True),
    },
    "1.2": {
        "binom(s, i) instead of binom(s-1, i)":
            lambda s, n: 2 * sum(math.comb(s, i) for i in range(n)),
        "the fraction instead of the count": lambda s, n: cover_count(s, n) / 2 ** s,
        "forgot the factor 2": lambda s, n: cover_count(s, n) // 2,
        "2^s always": lambda s, n: 2 ** s,
    },
    "1.3": {
        "erfc without the 1/2": lambda a: math.erfc(1 / math.sqrt(2 * a)),
        "the source's unnormalised integral":
            lambda a: math.sqrt(math.pi * a / 2) * math.erfc(1 / math.sqrt(2 * a)),
        "erfc(1/sqrt(alpha))/2": lambda a: math.erfc(1 / math.sqrt(a)) / 2,
        "1 - erf loses the tiny tail": lambda a: 0.5 * (1 - math.erf(1 / math.sqrt(2 * a))),
    },
    "1.4": {
        "a perceptron with a fixed epoch budget": _perceptron_heuristic,
        "always True": lambda X, y: True,
        "a tensor instead of a bool": lambda X, y: torch.tensor([1.0, 0.0]),
    },
    "1.5": {
        "<= instead of <": lambda d, t: next(s for s in range(1, 1000)
                                             if cover_count(s, d) / 2 ** s <= t),
        "2 * dim": lambda d, t: 2 * d,
    },
}


def _raises(*args):
    raise ValueError("boom")


def _stub(*args):
    raise NotImplementedError("Exercise: write me")


def _loops_forever_guard(*args):
    raise RecursionError("maximum recursion depth exceeded")


BAD_TYPES = {
    "raises ValueError": (_raises, "raised ValueError: boom"),
    "stub": (_stub, "raised NotImplementedError: Exercise: write me"),
    "recursion error": (_loops_forever_guard, "raised RecursionError"),
    "returns None": (lambda *a: None, "got None"),
    "returns a string": (lambda *a: "fourteen", "got 'fourteen' (str)"),
    "returns a 3x3 tensor": (lambda *a: torch.zeros(3, 3), "a tensor of shape (3, 3)"),
    "returns NaN": (lambda *a: float("nan"), "nan"),
    "returns a list": (lambda *a: [1, 2], "[1, 2] (list)"),
}


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_every_chapter_1_exercise_has_references_and_wrong_answers():
    """(Later chapters keep theirs in tests/test_exercises_<topic>.py.)"""
    assert CHAPTER_1 == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    missing_ref = sorted(set(CHAPTER_1) - set(REFERENCES))
    missing_wrong = sorted(e for e in CHAPTER_1 if not WRONG.get(e))
    assert not missing_ref, f"no reference solution in tests/test_exercises.py for {missing_ref}"
    assert not missing_wrong, f"no plausible wrong answer in tests/test_exercises.py for {missing_wrong}"


def test_registry_entries_are_complete():
    for eid, ex in EXERCISES.items():
        assert ex.id == eid and ex.title and ex.hint and ex.function_name.isidentifier()
        assert ex.points > 0 and callable(ex.check_fn)


@pytest.mark.parametrize("eid,index", [(e, i) for e in REFERENCES for i in range(len(REFERENCES[e]))])
def test_reference_solution_passes(eid, index):
    result = run_check(eid, REFERENCES[eid][index])
    assert isinstance(result, CheckResult)
    assert result.passed, result.message
    assert result.cases_total >= 5 and result.cases_passed == result.cases_total
    assert result.line() == f"✅ Exercise {eid} passed ({result.cases_total}/{result.cases_total} cases)"


@pytest.mark.parametrize("eid,name", [(e, n) for e in WRONG for n in WRONG[e]])
def test_plausible_wrong_answer_fails(eid, name):
    result = run_check(eid, WRONG[eid][name])
    assert not result.passed, f"{name!r} passed the check of exercise {eid}"
    assert result.message.startswith("case "), result.message
    function = EXERCISES[eid].function_name
    assert f"{function}(" in result.message          # names the case
    assert "expected" in result.message and "got" in result.message, result.message
    assert result.line().startswith(f"❌ Exercise {eid} failed: case ")


@pytest.mark.parametrize("eid", sorted(EXERCISES))
@pytest.mark.parametrize("kind", sorted(BAD_TYPES))
def test_bad_answers_fail_cleanly(eid, kind):
    """Every chapter's checks: an answer that raises or returns junk fails with a reason."""
    answer, fragment = BAD_TYPES[kind]
    result = run_check(eid, answer)  # must not raise
    assert not result.passed
    assert result.message.startswith("case "), result.message
    assert "raised" in result.message or ("expected" in result.message and "got" in result.message)
    if eid in CHAPTER_1:
        if eid == "1.4" and kind == "returns a list":
            fragment = "(list)"
        assert fragment in result.message, result.message


def test_perceptron_output_with_nan_or_wrong_shape_fails_cleanly():
    nan_w = lambda X, y, E: (torch.full((X.shape[1],), float("nan")), 0.0, 3, True)
    result = run_check("1.1", nan_w)
    assert not result.passed and "NaN" in result.message
    short_w = lambda X, y, E: (torch.zeros(X.shape[1] + 1), 0.0, 3, True)
    result = run_check("1.1", short_w)
    assert not result.passed and "w as a vector of length" in result.message
    three = lambda X, y, E: (torch.zeros(X.shape[1]), 0.0, 3)
    result = run_check("1.1", three)
    assert not result.passed and "a tuple (w, b, num_updates, converged)" in result.message


def test_perceptron_accepts_numpy_lists_and_tensors():
    def numpy_version(X, y, max_epochs):
        w, b, n, c = perceptron(X, y, max_epochs)
        return w.numpy().tolist(), float(b), np.int64(n), np.bool_(c)
    assert run_check("1.1", numpy_version).passed
    on_gpu_style = lambda X, y, E: tuple(torch.as_tensor(v) for v in perceptron(X, y, E))
    assert run_check("1.1", on_gpu_style).passed


def test_cases_are_consistent_with_the_theory():
    from dlbook.exercises.checks import ch01_neurons as neurons

    for label, X, y, max_epochs, separator in neurons._perceptron_cases():
        w, b, updates, converged = neurons._reference_perceptron(X, y, max_epochs)
        assert converged == (separator is not None), label
        if separator is not None:
            assert updates <= neurons._novikoff_bound(X, y, *separator), label
            # float32 and float64 give the same count: the data are on a 0.25 grid
            out = perceptron(torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32),
                             max_epochs)
            assert out[2] == updates, label
    assert neurons._smallest_unlikely(10, 0.01) == 34
    assert [neurons._cover(4, 3), neurons._cover(5, 3), neurons._cover(2 * 7, 7)] == [14, 22, 2 ** 13]


def test_answer_that_is_not_a_function_fails_cleanly():
    result = run_check("1.2", 14)
    assert not result.passed
    assert "expected the function cover_count itself, got 14" in result.message


def test_check_prints_one_line_and_returns_none(monkeypatch, capsys):
    monkeypatch.delenv("DLBOOK_CHECKS", raising=False)
    assert check("1.2", cover_count) is None
    assert check("1.2", WRONG["1.2"]["2^s always"]) is None
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("✅ Exercise 1.2 passed (") and lines[0].endswith(" cases)")
    assert lines[1] == "❌ Exercise 1.2 failed: case cover_count(4, 3): expected 14, got 16"
    assert len(lines) == 2


def test_strict_mode_raises_assertion_error(monkeypatch, capsys):
    monkeypatch.setenv("DLBOOK_CHECKS", "strict")
    check("1.3", flip_probability)  # passes: no exception
    with pytest.raises(AssertionError, match=r"Exercise 1.3 failed: case flip_probability"):
        check("1.3", WRONG["1.3"]["erfc without the 1/2"])
    with pytest.raises(AssertionError, match="NotImplementedError"):
        check("1.3", _stub)


def test_unknown_exercise_id_raises_value_error():
    with pytest.raises(ValueError, match=r"exercise_id '9\.9'"):
        run_check("9.9", cover_count)
    with pytest.raises(ValueError, match="exercise_id"):
        check("9.9", cover_count)
    with pytest.raises(ValueError, match="exercise_id"):
        check(1.2, cover_count)


def test_register_rejects_a_second_check_for_the_same_id():
    with pytest.raises(ValueError, match="already registered"):
        exercises.exercise("1.2", title="t", function="f", hint="h")(lambda answer, cases: None)


def test_a_check_that_runs_no_case_fails():
    ex = exercises.Exercise("0.0", "empty", "f", lambda answer, cases: None, "h")
    from dlbook.exercises.core import run_exercise

    assert not run_exercise(ex, cover_count).passed


# ---------------------------------------------------------------------------
# The chapters' own solution cells pass their checks (when the chapters exist)
# ---------------------------------------------------------------------------

def _chapter_solutions():
    params = []
    for path in chapter_notebooks(BOOK):
        nb = nbformat.read(path, as_version=4)
        for cell in exercise_cells(nb, str(path)):
            params.append(pytest.param(path, cell.exercise_id, id=f"{path.stem}-{cell.exercise_id}"))
    return params or [pytest.param(None, None, marks=pytest.mark.skip(reason="no chapter notebooks yet"))]


def test_every_chapter_exercise_is_registered():
    """Each exercise in a chapter notebook has a check in that chapter's check module."""
    modules = exercises.chapter_check_modules()
    for path in chapter_notebooks(BOOK):
        nb = nbformat.read(path, as_version=4)
        chapter = int(path.name[:2])
        for cell in exercise_cells(nb, str(path)):
            ex = exercises.get_exercise(cell.exercise_id)
            assert ex.check_fn.__module__ == modules.get(chapter), (
                f"{path.name}: the check of exercise {cell.exercise_id} must live in "
                f"dlbook/exercises/checks/ch{chapter:02d}_<slug>.py")


@pytest.mark.parametrize("path,eid", _chapter_solutions())
def test_chapter_solution_cells_pass(path, eid):
    nb = nbformat.read(path, as_version=4)
    namespace = {"__name__": "__main__"}
    setup = "\n".join(nb.cells[i].source for i in setup_cells(nb))
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(setup, f"{path.name}:setup", "exec"), namespace)
        except SyntaxError:  # IPython magics: fall back to the usual imports
            exec("import math\nimport numpy as np\nimport torch\nimport dlbook\n", namespace)
    cell = next(c for c in exercise_cells(nb, str(path)) if c.exercise_id == eid)
    exec(compile(cell.source, f"{path.name}:{cell.cell_id}", "exec"), namespace)
    assert eid in EXERCISES, f"{path.name}: exercise {eid} has no registered check"
    function = EXERCISES[eid].function_name
    assert function in namespace, f"{path.name}: the solution cell of {eid} does not define {function}"
    result = run_check(eid, namespace[function])
    assert result.passed, f"{path.name}: {result.line()}"
