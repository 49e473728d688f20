"""Exercise registry and checks: the code behind ``dlbook.exercises.check``.

A chapter's exercise is a function the student writes. Its check lives here,
in dlbook, not in the notebook: a check function tries the student's function
on several cases (edge cases included), compares with tolerances and stops at
the first case that fails, saying which case, what was expected and what was
got. Nothing the student's function does (raise, return None, a string, a
tensor of the wrong shape, NaN) makes ``check`` raise; it becomes a failed
:class:`CheckResult`.

Writing a check (one per exercise, in the chapter's module, e.g. neurons.py)::

    @exercise("1.2", title="Cover's count", function="cover_count",
              hint="Use the closed form 2 * sum_{i<n} C(s-1, i).")
    def check_cover_count(cover_count, cases):
        for s, n in [(1, 1), (4, 3)]:
            with cases.case(f"cover_count({s}, {n})"):
                expect_equal(as_int(cover_count(s, n)), reference(s, n))

Inside ``with cases.case(label):`` any exception is caught: a
:class:`Mismatch` raised by the ``expect_*``/``as_*`` helpers reads
"case LABEL: expected X, got Y", any other exception "case LABEL: raised
ValueError: ...". The first failing case ends the check.

Checks run in-process, without a time limit: a student's function with an
infinite loop hangs its check cell until the reader interrupts the kernel.
The grader (dlbook.exercises.grader) runs every check under a time limit.
"""
from __future__ import annotations

import math
import numbers
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

#: Set this environment variable to "strict" (the test suite and the book build
#: do) and a failing ``check`` raises AssertionError instead of printing.
CHECKS_ENV = "DLBOOK_CHECKS"


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ("1.2"), the function the student writes and its check.

    ``check_fn(answer, cases)`` runs the student's function ``answer`` on its
    cases (see the module docstring). ``hint`` is the text of the stub's
    NotImplementedError in the student edition.
    """

    id: str
    title: str
    function_name: str
    check_fn: Callable
    hint: str
    points: float = 1


#: Every registered exercise, by id. Filled when the chapter modules listed in
#: ``dlbook.exercises.CHAPTER_MODULES`` are imported.
EXERCISES: dict[str, Exercise] = {}


def register(ex: Exercise) -> Exercise:
    """Add an exercise to :data:`EXERCISES` (re-registering on a module reload is fine)."""
    if not isinstance(ex, Exercise):
        raise TypeError(f"register expects an Exercise, got {describe(ex)}")
    if not isinstance(ex.id, str) or not ex.id:
        raise ValueError(f"exercise id must be a non-empty string like '1.2', got {ex.id!r}")
    old = EXERCISES.get(ex.id)
    if old is not None and _qualified(old.check_fn) != _qualified(ex.check_fn):
        raise ValueError(f"exercise {ex.id!r} is already registered "
                         f"(by {_qualified(old.check_fn)})")
    EXERCISES[ex.id] = ex
    return ex


def _qualified(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def exercise(exercise_id: str, *, title: str, function: str, hint: str, points: float = 1):
    """Decorator that registers a check function for an exercise."""
    def decorate(check_fn):
        register(Exercise(id=exercise_id, title=title, function_name=function,
                          check_fn=check_fn, hint=hint, points=points))
        return check_fn
    return decorate


def get_exercise(exercise_id) -> Exercise:
    """The registered exercise with this id; ValueError naming the id if there is none."""
    if not isinstance(exercise_id, str):
        raise ValueError(f"exercise_id must be a string like '1.2', got {describe(exercise_id)}")
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        known = ", ".join(sorted(EXERCISES, key=_id_key)) or "none"
        raise ValueError(f"unknown exercise_id {exercise_id!r}; registered exercises: {known}") from None


def _id_key(exercise_id: str):
    return tuple(int(p) if p.isdigit() else p for p in exercise_id.split("."))


# ---------------------------------------------------------------------------
# Results and running a check
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    """Outcome of checking one answer: passed or not, and why."""

    exercise: str
    passed: bool
    message: str
    cases_passed: int
    cases_total: int

    def line(self) -> str:
        """The one line ``check`` prints."""
        if self.passed:
            return f"✅ Exercise {self.exercise} passed ({self.cases_passed}/{self.cases_total} cases)"
        return f"❌ Exercise {self.exercise} failed: {self.message}"

    def __str__(self) -> str:
        return self.line()


class Mismatch(Exception):
    """Raised by the comparison helpers: the answer differs from what was expected."""

    def __init__(self, expected: str, got: str):
        super().__init__(f"expected {expected}, got {got}")
        self.expected = expected
        self.got = got


class _StopChecking(Exception):
    """Internal: a case failed, so the check stops."""


class Cases:
    """Runs the cases of one check and remembers the first failure."""

    def __init__(self):
        self.total = 0
        self.passed = 0
        self.failure: str | None = None

    @contextmanager
    def case(self, label: str):
        """Run the body as one case named ``label``; any exception fails the case."""
        self.total += 1
        try:
            yield
        except _StopChecking:
            raise
        except Mismatch as err:
            self.failure = f"case {label}: {err}"
        except (Exception, SystemExit) as err:  # the student's code raised
            self.failure = f"case {label}: raised {_exception_text(err)}"
        else:
            self.passed += 1
            return
        raise _StopChecking


def _exception_text(err: BaseException) -> str:
    text = _safe_str(err)
    name = type(err).__name__
    return f"{name}: {text}" if text else name


def _safe_str(value, limit: int = 300) -> str:
    try:
        text = str(value)
    except Exception:  # a broken __str__ must not break the check
        text = f"<{type(value).__name__} that cannot be printed>"
    return text if len(text) <= limit else text[:limit] + "..."


def run_exercise(ex: Exercise, answer) -> CheckResult:
    """Run ``ex``'s check on ``answer``; never raises because of the answer."""
    if not callable(answer):
        return CheckResult(ex.id, False,
                           f"expected the function {ex.function_name} itself, got {describe(answer)}",
                           0, 0)
    cases = Cases()
    try:
        ex.check_fn(answer, cases)
    except _StopChecking:
        pass
    except (Exception, SystemExit) as err:  # outside every case: a defect of the check
        cases.failure = (f"the check itself failed, which is a bug in dlbook "
                         f"(please report it): {_exception_text(err)}")
    if cases.failure is not None:
        return CheckResult(ex.id, False, cases.failure, cases.passed, cases.total)
    if cases.total == 0:  # a check that cannot fail is a defect
        return CheckResult(ex.id, False, "the check ran no cases", 0, 0)
    return CheckResult(ex.id, True, f"all {cases.total} cases passed", cases.passed, cases.total)


def run_check(exercise_id: str, answer) -> CheckResult:
    """Check ``answer`` (the student's function) for an exercise and return the result.

    Pure: prints nothing. Raises ValueError only for an unknown exercise id.
    """
    return run_exercise(get_exercise(exercise_id), answer)


def strict_checks() -> bool:
    """True when DLBOOK_CHECKS=strict: a failing check raises AssertionError."""
    return os.environ.get(CHECKS_ENV, "").strip().lower() == "strict"


def check(exercise_id: str, answer) -> None:
    """Check the student's function and print one line saying passed or why not.

    This is what a chapter's check cell calls::

        dlbook.exercises.check("1.2", cover_count)

    Returns None so that the notebook shows only the printed line. With
    DLBOOK_CHECKS=strict (tests, book build) a failed check raises
    AssertionError with the same line.
    """
    result = run_check(exercise_id, answer)
    print(result.line(), flush=True)
    if strict_checks() and not result.passed:
        raise AssertionError(result.line())


# ---------------------------------------------------------------------------
# Helpers for writing checks: describe values, convert answers, compare
# ---------------------------------------------------------------------------

def describe(value) -> str:
    """Short description of any value for a message: the value and its type."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 1:
            return f"tensor({_num(value.detach().cpu().reshape(()).item())}) (a tensor of shape {tuple(value.shape)})"
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return f"array({_num(value.reshape(()).item())}) (an array of shape {value.shape})"
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if value is None:
        return "None"
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (int, np.integer)):
        text = _num(float(value))
        return text if type(value) is float else f"{text} ({type(value).__name__})"
    if type(value) is int:
        return repr(value)
    try:
        text = repr(value)
    except Exception:
        text = "<unprintable>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _num(x) -> str:
    """A number with enough digits to see a small difference."""
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        return f"{x:.10g}"
    return repr(x)


def _scalar(value, what: str):
    """Unwrap a one-element tensor or array into a Python number, else Mismatch."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise Mismatch(what, describe(value))
        return value.detach().cpu().reshape(()).item()
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise Mismatch(what, describe(value))
        return value.reshape(()).item()
    if isinstance(value, np.generic):
        return value.item()
    return value


def as_int(value, what: str = "an integer") -> int:
    """The answer as an int; Mismatch for None, strings, bools, non-integral floats...

    Accepts Python and NumPy integers, integral floats and one-element tensors/arrays.
    """
    raw = _scalar(value, what)
    if isinstance(raw, bool):
        raise Mismatch(what, describe(value))
    if isinstance(raw, numbers.Integral):
        return int(raw)
    if isinstance(raw, numbers.Real):
        x = float(raw)
        if math.isfinite(x) and x == int(x):
            return int(x)
    raise Mismatch(what, describe(value))


def as_float(value, what: str = "a finite real number") -> float:
    """The answer as a finite float; Mismatch for NaN, infinity, None, strings..."""
    raw = _scalar(value, what)
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
        raise Mismatch(what, describe(value))
    x = float(raw)
    if not math.isfinite(x):
        raise Mismatch(what, describe(value))
    return x


def as_bool(value, what: str = "True or False") -> bool:
    """The answer as a bool: Python, NumPy or one-element tensor booleans only."""
    raw = _scalar(value, what)
    if isinstance(raw, (bool, np.bool_)):
        return bool(raw)
    raise Mismatch(what, describe(value))


def as_array(value, shape: tuple[int, ...], what: str | None = None) -> np.ndarray:
    """The answer as a finite float64 array of the given shape.

    Accepts tensors (any device, with or without grad), arrays, lists and tuples.
    A vector may also come as a (1, d) or (d, 1) matrix: only the number of
    elements must match for one-dimensional shapes.
    """
    what = what or f"an array of shape {shape}"
    if isinstance(value, torch.Tensor):
        arr = value.detach().cpu().to(torch.float64).numpy()
    elif isinstance(value, (np.ndarray, list, tuple)):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise Mismatch(what, describe(value)) from None
    else:
        raise Mismatch(what, describe(value))
    if len(shape) == 1 and arr.size == shape[0] and arr.ndim <= 2:
        arr = arr.reshape(shape)
    if arr.shape != tuple(shape):
        got = describe(value)
        if not isinstance(value, (torch.Tensor, np.ndarray)):
            got += f" of shape {arr.shape}"
        raise Mismatch(what, got)
    if not np.all(np.isfinite(arr)):
        raise Mismatch(f"{what} of finite numbers", "values that include NaN or infinity")
    return arr


def expect_equal(got, expected) -> None:
    """Exact equality (ints, bools, strings)."""
    if got != expected:
        raise Mismatch(describe(expected), describe(got))


def expect_close(got: float, expected: float, *, rtol: float = 1e-9, atol: float = 0.0) -> None:
    """|got - expected| <= atol + rtol * |expected|; the message shows both."""
    if not abs(got - expected) <= atol + rtol * abs(expected):
        tol = f"relative tolerance {rtol:g}" if atol == 0 else f"tolerance {atol:g} + {rtol:g}·|expected|"
        raise Mismatch(f"{_num(float(expected))} (within {tol})", _num(float(got)))


def expect(condition: bool, expected: str, got: str) -> None:
    """Fail the case with "expected EXPECTED, got GOT" unless ``condition``."""
    if not condition:
        raise Mismatch(expected, got)
