"""Assertions every chapter's exercise tests share.

For each exercise: the reference solution passes, a plausible wrong answer
fails with a reason that names the case, and an answer of the wrong kind
(raising, None, a string, NaN, ...) fails cleanly instead of crashing.
"""
from __future__ import annotations

import time

import torch

from dlbook.coursework.channel import through_channel
from dlbook.exercises import run_check
from dlbook.exercises.core import machine_load_factor


def _raises(*args, **kwargs):
    raise ValueError("boom")


def _stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write me")


#: Badly typed answers and a fragment the failure message must contain.
BAD_TYPES = {
    "raises ValueError": (_raises, "raised ValueError: boom"),
    "stub": (_stub, "raised NotImplementedError"),
    "returns None": (lambda *a, **k: None, "got None"),
    "returns a string": (lambda *a, **k: "fourteen", "'fourteen' (str)"),
    "returns a 3x3 tensor": (lambda *a, **k: torch.zeros(3, 3), "a tensor of shape (3, 3)"),
    "returns NaN": (lambda *a, **k: float("nan"), "nan"),
    "returns a list": (lambda *a, **k: [1, 2], "[1, 2] (list)"),
}


def outlast(time_limit: float) -> None:
    """Sleep well past a case's ``time_limit`` as the check stretches it on this machine: the stand-in
    of a right answer that is too slow (a loop that would take minutes), fast or busy machine alike."""
    time.sleep(2 * time_limit * machine_load_factor() + 0.5)


def bad_types(*kinds: str) -> dict:
    """The entries of BAD_TYPES a chapter's exercises are tested with."""
    return {kind: BAD_TYPES[kind] for kind in kinds}


def assert_passes(eid: str, answer, *, min_cases: int = 4) -> None:
    """The reference passes, called directly and through the grader's channel (which carries
    plain values only: a check that passes a callable or reads more than the result fails here)."""
    for how, function in (("directly", answer), ("through the grader's channel", through_channel(answer))):
        result = run_check(eid, function)
        assert result.passed, f"{how}: {result.message}"
        assert result.cases_total >= min_cases and result.cases_passed == result.cases_total


def assert_fails_naming_the_case(eid: str, answer, name: str) -> None:
    """A plausible wrong answer fails, saying which case and what was expected (or that it took
    a blocked shortcut, or took longer than the case allows)."""
    result = run_check(eid, answer)
    assert not result.passed, f"{name!r} passed the check of exercise {eid}"
    assert result.message.startswith("case "), result.message
    if "is not available inside it" in result.message:
        assert "asks you to write this yourself; dlbook." in result.message, result.message
        return
    if " allowed" in result.message and "took" in result.message:
        return
    assert "expected" in result.message and "got" in result.message, result.message


def assert_fails_cleanly(eid: str, answer, fragment: str) -> None:
    result = run_check(eid, answer)
    assert not result.passed
    assert result.message.startswith("case "), result.message
    assert fragment in result.message, result.message
