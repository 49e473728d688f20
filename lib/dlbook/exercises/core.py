"""Exercise registry and checks: the code behind ``dlbook.exercises.check``.

A chapter's exercise is a function the student writes. Its check lives in
``dlbook.exercises.checks.chNN_slug``, not in the notebook: a check function
tries the student's function on several cases (edge cases included),
compares with expectations it computes itself, and stops at the first case
that fails, saying which case, what was expected and what was got. Nothing
the student's function does (raise, return None, a string, a tensor of the
wrong shape, NaN) makes ``check`` raise; it becomes a failed
:class:`CheckResult`.

Writing a check (one per exercise)::

    @exercise("1.2", title="Cover's count", function="cover_count", kind="derive",
              difficulty=2, minutes=20, blocked=("dlbook.cover.cover_count",),
              hint="Count how the dichotomies of s - 1 points extend to s points.")
    def check_cover_count(cover_count, cases):
        for s, n in [(1, 1), (4, 3)]:
            with cases.case(f"cover_count({s}, {n})"):
                expect_equal(as_int(cover_count(s, n)), reference(s, n))

Inside ``with cases.case(label):`` any exception is caught: a
:class:`Mismatch` raised by the ``expect_*``/``as_*`` helpers reads
"case LABEL: expected X, got Y", any other exception "case LABEL: raised
ValueError: ...". The first failing case ends the check.

Two rules make the same check usable by the grader, which calls the
student's function in a sandbox through a channel that carries plain values
only: a check passes the student's function numbers, strings, lists,
tuples, dicts, NumPy arrays and tensors (never a callable or a module), and
looks only at what it returns (never at its source or its attributes).

``blocked`` names the dlbook functions that would answer the exercise in one
call: while the check runs they raise :class:`ShortcutError`, and the
exercise fails with that reason.

Checks run in-process, without a time limit: a student's function with an
infinite loop hangs its check cell until the reader interrupts the kernel.
A case can state a ``time_limit`` (a task that asks for vectorised code):
it fails when the answer takes longer. The grader enforces every limit.
"""
from __future__ import annotations

import importlib
import math
import numbers
import os
import pkgutil
import time
import types
from contextlib import contextmanager, nullcontext
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

#: What an exercise asks of the student (CONTRIBUTING.md, "Exercises").
KINDS = ("extend", "predict", "derive", "transcribe")


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ("1.2"), the function the student writes and its check.

    ``check_fn(answer, cases)`` runs the student's function ``answer`` on its
    cases (see the module docstring). ``hint`` is the text of the stub's
    NotImplementedError in the student edition. ``kind`` says what the
    exercise asks (one of :data:`KINDS`), ``difficulty`` is 1 to 3 stars and
    ``minutes`` the estimated time for a student. ``blocked`` lists the
    dotted names of the dlbook functions that solve it in one call.
    """

    id: str
    title: str
    function_name: str
    check_fn: Callable
    hint: str
    points: float = 1
    kind: str = "derive"
    difficulty: int = 1
    minutes: int = 15
    blocked: tuple[str, ...] = ()

    @property
    def chapter(self) -> int:
        return int(self.id.split(".")[0])

    @property
    def stars(self) -> str:
        return "★" * self.difficulty


#: Every registered exercise, by id. A chapter's checks register themselves
#: when ``get_exercise`` first asks for one of its ids (or on ``load_all``).
EXERCISES: dict[str, Exercise] = {}

#: Where the chapters' check modules live.
CHECKS_PACKAGE = "dlbook.exercises.checks"


def chapter_check_modules() -> dict[int, str]:
    """Chapter number -> dotted name of its check module, from the files ``chNN_slug.py``."""
    package = importlib.import_module(CHECKS_PACKAGE)
    modules = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("ch") and info.name[2:4].isdigit() and info.name[4:5] == "_":
            modules[int(info.name[2:4])] = f"{CHECKS_PACKAGE}.{info.name}"
    return modules


def load_chapter(chapter: int) -> None:
    """Import the check module of ``chapter`` (registering its exercises), if it has one."""
    module = chapter_check_modules().get(chapter)
    if module is not None:
        importlib.import_module(module)


def load_all() -> dict[str, Exercise]:
    """Import every chapter's checks; returns :data:`EXERCISES`."""
    for module in chapter_check_modules().values():
        importlib.import_module(module)
    return EXERCISES


def register(ex: Exercise) -> Exercise:
    """Add an exercise to :data:`EXERCISES` (re-registering on a module reload is fine)."""
    if not isinstance(ex, Exercise):
        raise TypeError(f"register expects an Exercise, got {describe(ex)}")
    if not isinstance(ex.id, str) or not _valid_id(ex.id):
        raise ValueError(f"exercise id must be a string like '1.2', got {ex.id!r}")
    if ex.kind not in KINDS:
        raise ValueError(f"exercise {ex.id}: kind must be one of {list(KINDS)}, got {ex.kind!r}")
    if ex.difficulty not in (1, 2, 3):
        raise ValueError(f"exercise {ex.id}: difficulty must be 1, 2 or 3 stars, got {ex.difficulty!r}")
    if isinstance(ex.blocked, str) or not all(isinstance(n, str) and n.startswith("dlbook.")
                                               for n in ex.blocked):
        raise ValueError(f"exercise {ex.id}: blocked must be a tuple of names such as "
                         f"'dlbook.parity.fwht', got {ex.blocked!r}")
    old = EXERCISES.get(ex.id)
    if old is not None and _qualified(old.check_fn) != _qualified(ex.check_fn):
        raise ValueError(f"exercise {ex.id!r} is already registered "
                         f"(by {_qualified(old.check_fn)})")
    EXERCISES[ex.id] = ex
    return ex


def _valid_id(exercise_id: str) -> bool:
    parts = exercise_id.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


def _qualified(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def exercise(exercise_id: str, *, title: str, function: str, hint: str, points: float | None = None,
             kind: str = "derive", difficulty: int = 1, minutes: int = 15,
             blocked: tuple[str, ...] = ()):
    """Decorator that registers a check function for an exercise (fields: :class:`Exercise`).

    ``points`` defaults to the difficulty in stars, the grading scheme the
    instructors' page suggests.
    """
    def decorate(check_fn):
        register(Exercise(id=exercise_id, title=title, function_name=function,
                          check_fn=check_fn, hint=hint,
                          points=difficulty if points is None else points, kind=kind,
                          difficulty=difficulty, minutes=minutes, blocked=tuple(blocked)))
        return check_fn
    return decorate


def get_exercise(exercise_id) -> Exercise:
    """The registered exercise with this id; ValueError naming the id if there is none."""
    if not isinstance(exercise_id, str):
        raise ValueError(f"exercise_id must be a string like '1.2', got {describe(exercise_id)}")
    if exercise_id not in EXERCISES and _valid_id(exercise_id):
        load_chapter(int(exercise_id.split(".")[0]))
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


class ShortcutError(RuntimeError):
    """Raised by a dlbook function that an exercise asks the student to write themselves."""


class CaseFailure(Exception):
    """Fails the current case with this message as it stands.

    The grader's channel raises it when it cannot get an answer from the
    student's function: a time limit, a worker that died, a value it cannot carry.
    """


class _StopChecking(Exception):
    """Internal: a case failed, so the check stops."""


class Cases:
    """Runs the cases of one check and remembers the first failure."""

    def __init__(self):
        self.total = 0
        self.passed = 0
        self.failure: str | None = None

    @contextmanager
    def case(self, label: str, *, time_limit: float | None = None, why: str = ""):
        """Run the body as one case named ``label``; any exception fails the case.

        With ``time_limit`` (seconds) the case also fails when the body takes
        longer; ``why`` completes the message (e.g. "the task asks for no loop
        over the steps"). The limit stretches with ``machine_load_factor()``,
        also a limit measured on the spot (``seconds_taken``): that reference
        is the best of two runs, while the body runs once and, on a busy
        machine, may wait its turn for a core for part of it.
        """
        self.total += 1
        start = time.perf_counter()
        try:
            yield
        except _StopChecking:
            raise
        except Mismatch as err:
            self.failure = f"case {label}: {err}"
        except (ShortcutError, CaseFailure) as err:
            self.failure = f"case {label}: {err}"
        except (Exception, SystemExit) as err:  # the student's code raised
            self.failure = f"case {label}: raised {_exception_text(err)}"
        else:
            seconds = time.perf_counter() - start
            load = machine_load_factor()
            if time_limit is None or seconds <= time_limit * load:
                self.passed += 1
                return
            stretched = f" ({time_limit:g} s stretched by the machine's load)" if load > 1 else ""
            self.failure = (f"case {label}: took {seconds:.2f} s, more than the {time_limit * load:.3g} s "
                            f"allowed{stretched}{'; ' + why if why else ''}")
        raise _StopChecking


def seconds_taken(fn, *args, repeat: int = 2) -> float:
    """The shortest of ``repeat`` wall-clock times of ``fn(*args)``: a reference time measured on the
    spot, so that a time limit set as a multiple of it holds on fast and slow machines alike."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def machine_load_factor() -> float:
    """How many processes compete for each core (at least 1): time limits stretch by it.

    A time limit states what a vectorised answer needs on an idle machine; on
    a machine busy with other work every answer runs slower by about the
    number of runnable processes per core, so the limit grows with it.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not available on this platform
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


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


def _resolve(dotted: str):
    """The object a dotted name such as 'dlbook.parity.fwht' refers to."""
    module_name, _, attribute = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"blocked name {dotted!r} does not exist in dlbook") from err


def _raising_code(message: str, like: types.CodeType) -> types.CodeType:
    """A code object that raises ShortcutError(message), with the free variables of ``like``."""
    free = like.co_freevars
    body = "".join(f"    {name}\n" for name in free)  # reference each cell so the names stay free
    source = ("def _outer():\n" + "".join(f"    {name} = None\n" for name in free)
              + f"    def _blocked(*args, **kwargs):\n{body.replace('    ', '        ')}"
              f"        raise __import__({__name__!r}, fromlist=['_']).ShortcutError({message!r})\n"
              f"    return _blocked\n")
    # The swapped code runs with the blocked function's globals, so it reaches
    # ShortcutError through the import system rather than a global name.
    namespace: dict = {}
    exec(source, namespace)
    code = namespace["_outer"]().__code__
    return code.replace(co_name=like.co_name, co_qualname=getattr(like, "co_qualname", like.co_name))


def _function_of(obj):
    """The Python function whose code to swap: the function itself, or a class's __init__."""
    if isinstance(obj, type):
        obj = obj.__init__
    obj = getattr(obj, "__func__", obj)
    if not isinstance(obj, types.FunctionType):
        raise TypeError(f"cannot block {obj!r}: only Python functions and classes can be blocked")
    return obj


@contextmanager
def shortcuts_blocked(ex: Exercise):
    """While the block runs, every function in ``ex.blocked`` raises ShortcutError.

    The function's code object is swapped, so the block also catches a
    reference the student took earlier (``from dlbook.parity import fwht``).
    """
    swapped = []
    try:
        for dotted in ex.blocked:
            function = _function_of(_resolve(dotted))
            message = (f"Exercise {ex.id} asks you to write this yourself; {dotted} is not "
                       f"available inside it")
            swapped.append((function, function.__code__))
            function.__code__ = _raising_code(message, function.__code__)
        yield
    finally:
        for function, code in reversed(swapped):
            function.__code__ = code


def run_exercise(ex: Exercise, answer, *, block_shortcuts: bool = True) -> CheckResult:
    """Run ``ex``'s check on ``answer``; never raises because of the answer.

    The grader passes ``block_shortcuts=False``: its ``answer`` forwards each
    call to a sandboxed worker, which blocks the shortcuts itself.
    """
    if not callable(answer):
        return CheckResult(ex.id, False,
                           f"expected the function {ex.function_name} itself, got {describe(answer)}",
                           0, 0)
    cases = Cases()
    try:
        with shortcuts_blocked(ex) if block_shortcuts else nullcontext():
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
