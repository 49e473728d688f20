"""Exercises with checks, the student edition and the grader (the coursework kit).

In a chapter notebook::

    dlbook.exercises.check("1.2", cover_count)   # prints ✅ or ❌ with the reason

For instructors (see ``python -m dlbook --help``)::

    python -m dlbook student --out student          # student editions of every chapter
    python -m dlbook grade submissions/ --chapter book/01_neurons.ipynb --out grades.csv

The checks of each chapter live in one module named after the chapter's topic;
registering a new chapter's checks is one line in :data:`CHAPTER_MODULES`.
"""
from __future__ import annotations

import importlib

from .core import (CHECKS_ENV, EXERCISES, CheckResult, Exercise, Mismatch, check, exercise,
                   get_exercise, register, run_check, strict_checks)

#: Modules (in this package) whose import registers a chapter's checks.
CHAPTER_MODULES = (
    "neurons",       # chapter 1
    "feedforward",   # chapter 2
    "optimization",  # chapter 3
    "training",      # chapter 4
    "failures",      # chapter 16
    "symmetry",      # chapter 17
)

for _name in CHAPTER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")
del _name

__all__ = ["CHECKS_ENV", "CHAPTER_MODULES", "EXERCISES", "CheckResult", "Exercise", "Mismatch",
           "check", "exercise", "get_exercise", "register", "run_check", "strict_checks",
           "make_student_edition", "write_student_editions", "grade_folder"]

_LAZY = {  # heavier tools load on first use, so chapters pay only for the checks
    "make_student_edition": "student",
    "write_student_editions": "student",
    "grade_folder": "grader",
}


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
