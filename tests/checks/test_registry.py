"""The exercise registry and ``check`` itself, on a toy exercise; every chapter's solution cells pass.

Each chapter's references, wrong answers and chapter-specific tests live in
tests/checks/test_chNN_slug.py (the contract is tests/checks/test_contract.py).
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import nbformat
import pytest
import torch

import dlbook.exercises as exercises
from dlbook.coursework.notebook import chapter_notebooks, exercise_cells, setup_cells
from dlbook.exercises import EXERCISES, CheckResult, check, run_check
from dlbook.exercises.core import as_int, expect_equal, run_exercise

BOOK = Path(__file__).resolve().parents[2] / "book"
exercises.load_all()


# ---------------------------------------------------------------------------
# A toy exercise, registered only while a test needs it
# ---------------------------------------------------------------------------

def _check_double(double, cases):
    for n in (3, 0, -7, 10**20):
        with cases.case(f"double({n})"):
            expect_equal(as_int(double(n), f"the integer {2 * n}"), 2 * n)


TOY = exercises.Exercise("0.1", "Doubling", "double", _check_double, "add the number to itself")


def double(n):
    return n + n


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(EXERCISES, TOY.id, TOY)
    return TOY


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

def test_registry_entries_are_complete():
    for eid, ex in EXERCISES.items():
        assert ex.id == eid and ex.title and ex.hint and ex.function_name.isidentifier()
        assert ex.points > 0 and callable(ex.check_fn)


def test_a_right_answer_passes_and_a_wrong_one_names_the_case(toy):
    result = run_check("0.1", double)
    assert isinstance(result, CheckResult) and result.passed, result.message
    assert result.line() == "✅ Exercise 0.1 passed (4/4 cases)"
    result = run_check("0.1", lambda n: 2 * n if n else 1)
    assert not result.passed and result.cases_passed == 1
    assert result.line() == "❌ Exercise 0.1 failed: case double(0): expected 0, got 1"


@pytest.mark.parametrize("kind", sorted(BAD_TYPES))
def test_bad_answers_fail_cleanly_on_the_toy(toy, kind):
    answer, fragment = BAD_TYPES[kind]
    result = run_check("0.1", answer)  # must not raise
    assert not result.passed and result.message.startswith("case double(3): "), result.message
    assert fragment in result.message, result.message


@pytest.mark.parametrize("eid", sorted(EXERCISES))
@pytest.mark.parametrize("kind", sorted(BAD_TYPES))
def test_bad_answers_fail_cleanly(eid, kind):
    """Every chapter's checks: an answer that raises or returns junk fails with a reason."""
    answer, _ = BAD_TYPES[kind]
    result = run_check(eid, answer)  # must not raise
    assert not result.passed
    assert result.message.startswith("case "), result.message
    assert "raised" in result.message or ("expected" in result.message and "got" in result.message)


def test_answer_that_is_not_a_function_fails_cleanly(toy):
    result = run_check("0.1", 14)
    assert not result.passed
    assert "expected the function double itself, got 14" in result.message


def test_check_prints_one_line_and_returns_none(monkeypatch, capsys, toy):
    monkeypatch.delenv("DLBOOK_CHECKS", raising=False)
    assert check("0.1", double) is None
    assert check("0.1", lambda n: 3 * n) is None
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["✅ Exercise 0.1 passed (4/4 cases)",
                     "❌ Exercise 0.1 failed: case double(3): expected 6, got 9"]


def test_strict_mode_raises_assertion_error(monkeypatch, toy):
    monkeypatch.setenv("DLBOOK_CHECKS", "strict")
    with contextlib.redirect_stdout(io.StringIO()):
        check("0.1", double)  # passes: no exception
        with pytest.raises(AssertionError, match=r"Exercise 0.1 failed: case double\(3\)"):
            check("0.1", lambda n: n)
        with pytest.raises(AssertionError, match="NotImplementedError"):
            check("0.1", _stub)


def test_unknown_exercise_id_raises_value_error():
    with pytest.raises(ValueError, match=r"exercise_id '9\.9'"):
        run_check("9.9", double)
    with pytest.raises(ValueError, match="exercise_id"):
        check("9.9", double)
    with pytest.raises(ValueError, match="exercise_id"):
        check(1.2, double)


def test_register_rejects_a_second_check_for_the_same_id():
    taken = sorted(EXERCISES)[0]
    with pytest.raises(ValueError, match="already registered"):
        exercises.exercise(taken, title="t", function="f", hint="h")(lambda answer, cases: None)


def test_a_check_that_runs_no_case_fails():
    ex = exercises.Exercise("0.0", "empty", "f", lambda answer, cases: None, "h")
    assert not run_exercise(ex, double).passed


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


def test_time_limits_stretch_with_the_load(monkeypatch):
    from dlbook.exercises import core

    monkeypatch.setattr(core.os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    monkeypatch.setattr(core.os, "cpu_count", lambda: 2)
    assert core.machine_load_factor() == 4.0
    monkeypatch.setattr(core.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert core.machine_load_factor() == 1.0
